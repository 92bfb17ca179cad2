/*
Copyright The multiproject-controller-manager Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package readiness

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/neg/pushed"
	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

// TestAttachedWithoutHealthCheckAndInNoNEG: attached where nothing health checks is ready (its reason), a Pod that
// no NEG Service selects is ready at once (as ingress-gce's), a Pod without the gate and a Pod whose condition is
// True already are never written; every write is one patch of pods/status, with a Normal Event.
func TestAttachedWithoutHealthCheckAndInNoNEG(t *testing.T) {
	lonely := gatedPod("lonely", "10.0.0.9", map[string]string{"app": "other"})
	done := gatedPod("done", "10.0.0.8", map[string]string{"app": "web"})
	done.Status.Conditions = append(done.Status.Conditions, corev1.PodCondition{Type: negapi.ReadinessGate,
		Status: corev1.ConditionTrue, Reason: ReasonReady})
	h := newHarness(t, 10*time.Minute, func(h *harness) {
		h.health.set("neg-web", "10.0.0.1", "")
		h.health.set("neg-web", "10.0.0.8", "UNHEALTHY")
	},
		negService("web"), translation("neg-v1-web-80", "neg-web", true, "10.0.0.1", "10.0.0.8", "10.0.0.7"),
		gatedPod("web-1", "10.0.0.1", map[string]string{"app": "web"}), lonely, done,
		plainPod("plain", "10.0.0.7", map[string]string{"app": "web"}))

	c := h.waitCondition("web-1", corev1.ConditionTrue, ReasonWithoutHealthCheck)
	if c.Message != "Attached to NEG zone-a/neg-web, which no backend service health checks" {
		t.Errorf("message = %q", c.Message)
	}
	h.waitCondition("lonely", corev1.ConditionTrue, ReasonReady)
	h.waitFor("the Events", func() bool {
		return h.events.Count(corev1.EventTypeNormal, ReasonWithoutHealthCheck) == 1 && h.events.Count(corev1.EventTypeNormal, ReasonReady) == 1
	})
	h.waitFor("the queue to be idle", h.r.workers.Idle)
	for name, want := range map[string][]string{"web-1": {"patch/status"}, "lonely": {"patch/status"}, "done": nil, "plain": nil} {
		if got := h.podWrites(name); !slices.Equal(got, want) {
			t.Errorf("writes of Pod %s = %v, want %v", name, got, want)
		}
	}
	if v, _ := metrics.NEGReadinessPodsWaiting.Value(testTenant); v != 0 {
		t.Errorf("Pods waiting = %v, want 0", v)
	}
}

// TestUnhealthyWaitsHealthyIsReady: UNHEALTHY keeps the condition False (written once, however many polls), HEALTHY
// turns it True (two writes in all); the Pod counts as waiting meanwhile, its wait is observed once ready, and the waiting series goes
// with the reflector.
func TestUnhealthyWaitsHealthyIsReady(t *testing.T) {
	metrics.Register()
	before := attachToReadyCount(t, testTenant)
	h := newHarness(t, 10*time.Minute, func(h *harness) {
		h.health.set("neg-web", "10.0.0.1", "UNHEALTHY")
	},
		negService("web"), translation("neg-v1-web-80", "neg-web", true, "10.0.0.1"),
		gatedPod("web-1", "10.0.0.1", map[string]string{"app": "web"}))

	c := h.waitCondition("web-1", corev1.ConditionFalse, ReasonNotReady)
	if c.Message != "Waiting for the endpoint to be healthy: zone-a/neg-web (UNHEALTHY)" {
		t.Errorf("message = %q", c.Message)
	}
	h.waitFor("a second health poll", func() bool { return h.health.callsOf("neg-web") >= 2 })
	if got := h.podWrites("web-1"); len(got) != 1 {
		t.Errorf("writes while unhealthy = %v, want one", got)
	}
	if v, _ := metrics.NEGReadinessPodsWaiting.Value(testTenant); v != 1 {
		t.Errorf("Pods waiting = %v, want 1", v)
	}

	h.health.set("neg-web", "10.0.0.1", "HEALTHY")
	c = h.waitCondition("web-1", corev1.ConditionTrue, ReasonReady)
	if c.Message != "Healthy in NEG zone-a/neg-web" {
		t.Errorf("message = %q", c.Message)
	}
	h.waitFor("the Event", func() bool { return h.events.Count(corev1.EventTypeNormal, ReasonReady) == 1 })
	if got := h.podWrites("web-1"); !slices.Equal(got, []string{"patch/status", "patch/status"}) {
		t.Errorf("writes of the Pod = %v, want two status patches (False once, then True)", got)
	}
	h.waitFor("no Pod waiting", func() bool {
		v, _ := metrics.NEGReadinessPodsWaiting.Value(testTenant)
		return v == 0
	})
	// The sync observes the wait after it has forgotten the Pod (the gauge above), so the observation is waited for.
	h.waitFor("the attach-to-ready observation", func() bool { return attachToReadyCount(t, testTenant) >= before+1 })
	if n := attachToReadyCount(t, testTenant); n != before+1 {
		t.Errorf("attach-to-ready observations = %d, want %d", n, before+1)
	}
	h.shutdown()
	if _, ok := metrics.NEGReadinessPodsWaiting.Value(testTenant); ok {
		t.Error("the Pods waiting series outlived the reflector")
	}
}

// attachToReadyCount is how many waits the attach-to-ready histogram of a tenant has observed.
func attachToReadyCount(t *testing.T, tenant string) uint64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "multiproject_neg_readiness_attach_to_ready_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "provider_config" && l.GetValue() == tenant {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}

// TestTimeout: a Pod older than the timeout is set True with LoadBalancerNegTimeout and a Warning; one that waits
// for an attach that never comes is set True when the timeout passes, with no event to wake it.
func TestTimeout(t *testing.T) {
	old := gatedPod("old", "10.0.0.1", map[string]string{"app": "web"})
	old.CreationTimestamp = metav1.NewTime(time.Now().Add(-time.Hour))
	young := gatedPod("young", "10.0.0.2", map[string]string{"app": "web"})
	young.CreationTimestamp = metav1.NewTime(time.Now().Add(-9*time.Minute - 58*time.Second))
	h := newHarness(t, 10*time.Minute, func(h *harness) {
		h.health.set("neg-web", "10.0.0.1", "UNHEALTHY")
	},
		negService("web"), translation("neg-v1-web-80", "neg-web", true, "10.0.0.1"), old, young)

	c := h.waitCondition("old", corev1.ConditionTrue, ReasonTimeout)
	if c.Message != "Timed out after 10m0s waiting for the endpoint to be ready in a NEG: Waiting for the endpoint to be healthy: zone-a/neg-web (UNHEALTHY)" {
		t.Errorf("message = %q", c.Message)
	}
	h.waitCondition("young", corev1.ConditionFalse, ReasonNotReady)
	h.waitCondition("young", corev1.ConditionTrue, ReasonTimeout)
	h.waitFor("the Warnings", func() bool { return h.events.Count(corev1.EventTypeWarning, ReasonTimeout) == 2 })
}

// TestTheAttachFollowsTheTranslationStatus: a Pod listed in a Translation the pusher has not synced waits without
// polling GCE; the status write that records the attach brings it back.
func TestTheAttachFollowsTheTranslationStatus(t *testing.T) {
	tr := translation("neg-v1-web-80", "neg-web", false, "10.0.0.1")
	h := newHarness(t, 0, func(h *harness) {
		h.health.set("neg-web", "10.0.0.1", "HEALTHY")
	}, negService("web"), tr, gatedPod("web-1", "10.0.0.1", map[string]string{"app": "web"}))

	c := h.waitCondition("web-1", corev1.ConditionFalse, ReasonNotReady)
	if c.Message != "Waiting for the endpoint to be attached to the NEGs of the Services that select the Pod" {
		t.Errorf("message = %q", c.Message)
	}
	h.waitFor("the queue to be idle", h.r.workers.Idle)
	if n := h.health.callsOf("neg-web"); n != 0 {
		t.Errorf("health lists before the attach = %d, want 0", n)
	}
	markSynced(tr)
	tr.ResourceVersion = "2" // the fake clientset keeps it as given; the handlers skip an update that keeps it
	if _, err := h.mp.MultiprojectV1alpha1().Translations(testNamespace).UpdateStatus(context.Background(), tr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitCondition("web-1", corev1.ConditionTrue, ReasonReady)
}

// TestTheAttachFollowsThePusherBeforeTheStatus: a generation the pusher pushed and has not reported yet
// (pushed.Generations) attaches the Pods it lists at once, with no Translation event: the pusher's word brings the
// namespace's waiting Pods back.
func TestTheAttachFollowsThePusherBeforeTheStatus(t *testing.T) {
	tr := translation("neg-v1-web-80", "neg-web", false, "10.0.0.1")
	pushes := pushed.New()
	h := newHarness(t, 0, func(h *harness) {
		h.health.set("neg-web", "10.0.0.1", "HEALTHY")
		h.r.FollowPushes(pushes)
	}, negService("web"), tr, gatedPod("web-1", "10.0.0.1", map[string]string{"app": "web"}))

	h.waitCondition("web-1", corev1.ConditionFalse, ReasonNotReady)
	h.waitFor("the queue to be idle", h.r.workers.Idle)
	pushes.Pushed(tr)
	h.waitCondition("web-1", corev1.ConditionTrue, ReasonReady)
}

// TestServicesOfTwoPorts: a Pod in the NEGs of two ports is ready once healthy in one of them.
func TestServicesOfTwoPorts(t *testing.T) {
	h := newHarness(t, 0, func(h *harness) {
		h.health.set("neg-web-80", "10.0.0.1", "UNHEALTHY")
		h.health.set("neg-web-443", "10.0.0.1", "UNHEALTHY")
	}, negService("web"),
		translation("neg-v1-web-80", "neg-web-80", true, "10.0.0.1"), translation("neg-v1-web-443", "neg-web-443", true, "10.0.0.1"),
		gatedPod("web-1", "10.0.0.1", map[string]string{"app": "web"}))
	h.waitCondition("web-1", corev1.ConditionFalse, ReasonNotReady)
	h.health.set("neg-web-443", "10.0.0.1", "HEALTHY")
	c := h.waitCondition("web-1", corev1.ConditionTrue, ReasonReady)
	if c.Message != "Healthy in NEG zone-a/neg-web-443" {
		t.Errorf("message = %q", c.Message)
	}
}

// TestGCEFailingTheHealthPoll: while the list fails the Pod waits (False), and is retried with backoff; once GCE
// answers it is ready.
func TestGCEFailingTheHealthPoll(t *testing.T) {
	h := newHarness(t, 0, func(h *harness) {
		h.health.set("neg-web", "10.0.0.1", "HEALTHY")
		h.health.fail(errGCE)
	}, negService("web"), translation("neg-v1-web-80", "neg-web", true, "10.0.0.1"),
		gatedPod("web-1", "10.0.0.1", map[string]string{"app": "web"}))
	h.waitCondition("web-1", corev1.ConditionFalse, ReasonNotReady)
	h.waitFor("a retry", func() bool { return h.health.callsOf("neg-web") >= 2 })
	h.health.fail(nil)
	h.waitCondition("web-1", corev1.ConditionTrue, ReasonReady)
}

// TestAPodDeletedMidPoll: the Pod is deleted while its health list is under way; the sync ends without an error
// (its one write finds the Pod gone), and the Pod no longer counts as waiting.
func TestAPodDeletedMidPoll(t *testing.T) {
	block := make(chan struct{})
	entered := make(chan struct{}, 10)
	failedBefore, _ := metrics.Syncs.Value(testTenant, "neg", "error")
	h := newHarness(t, 0, func(h *harness) {
		h.health.block, h.health.entered = block, entered
	}, negService("web"), translation("neg-v1-web-80", "neg-web", true, "10.0.0.1"),
		gatedPod("web-1", "10.0.0.1", map[string]string{"app": "web"}))
	<-entered
	if err := h.kube.CoreV1().Pods(testNamespace).Delete(context.Background(), "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	close(block)
	h.waitFor("the queue to be idle", h.r.workers.Idle)
	if got := h.podWrites("web-1"); len(got) > 1 {
		t.Errorf("writes = %v", got)
	}
	h.waitFor("no Pod waiting", func() bool { return !h.r.isWaiting(testNamespace, "web-1") })
	if failed, _ := metrics.Syncs.Value(testTenant, "neg", "error"); failed != failedBefore {
		t.Errorf("failed syncs = %v, want none", failed-failedBefore)
	}
}

// TestOneListPerNEGPerRound: Pods waiting in one NEG share its list: one call per round, however many Pods.
func TestOneListPerNEGPerRound(t *testing.T) {
	frozen := time.Now()
	h := newHarness(t, 0, func(h *harness) { h.r.now = func() time.Time { return frozen } },
		negService("web"), translation("neg-v1-web-80", "neg-web", true, "10.0.0.1", "10.0.0.2", "10.0.0.3"),
		gatedPod("web-1", "10.0.0.1", map[string]string{"app": "web"}),
		gatedPod("web-2", "10.0.0.2", map[string]string{"app": "web"}),
		gatedPod("web-3", "10.0.0.3", map[string]string{"app": "web"}))
	for _, ip := range []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"} {
		h.health.set("neg-web", ip, "HEALTHY")
	}
	for _, name := range []string{"web-1", "web-2", "web-3"} {
		h.waitCondition(name, corev1.ConditionTrue, ReasonReady)
	}
	if n := h.health.callsOf("neg-web"); n != 1 {
		t.Errorf("lists of the NEG = %d, want 1", n)
	}
}
