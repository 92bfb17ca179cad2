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

package pusher

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	compute "google.golang.org/api/compute/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clienttesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
)

func TestCreatesNEGsWithTheirEndpointsInFewestAttachCalls(t *testing.T) {
	tr := translation("web", map[string]int{"us-central1-a": 1200, "us-central1-b": 3}, true)
	h := newHarness(t, nil, tr)

	got := h.waitSynced("web", metav1.ConditionTrue)
	// The pusher's syncs count under the --controllers name, as the translator's do.
	if n, _ := metrics.Syncs.Value("tenant-a", "neg", "success"); n == 0 {
		t.Errorf("multiproject_controller_syncs_total{controller=%q,result=\"success\"} = %v, want > 0", "neg", n)
	}
	if n := h.endpointCount("us-central1-a", "k8s1-web"); n != 1200 {
		t.Errorf("zone a has %d endpoints, want 1200", n)
	}
	if n := h.endpointCount("us-central1-b", "k8s1-web"); n != 3 {
		t.Errorf("zone b has %d endpoints, want 3", n)
	}
	calls := h.gce.Calls(testProject)
	if calls[fakegce.MethodAttachEndpoints] != 3+1 {
		t.Errorf("attach calls = %d, want 4 (ceil(1200/500) + ceil(3/500))", calls[fakegce.MethodAttachEndpoints])
	}
	if calls[fakegce.MethodInsert] != 2 {
		t.Errorf("insert calls = %d, want 2", calls[fakegce.MethodInsert])
	}
	// The status records where each NEG is and the marker it carries, so it can be found and deleted later, and
	// GCE's id and selfLink of each, by which a backend service or a tool names it.
	negA, _ := h.gce.NEG(testProject, "us-central1-a", "k8s1-web")
	negB, _ := h.gce.NEG(testProject, "us-central1-b", "k8s1-web")
	want := []mpv1alpha1.BackendResourceStatus{
		{Kind: mpv1alpha1.BackendResourceKindNetworkEndpointGroup, Name: "k8s1-web", Zone: "us-central1-a", Project: testProject, Network: "default",
			Description: testMarker, ID: strconv.FormatUint(negA.Id, 10), SelfLink: negA.SelfLink,
			State: mpv1alpha1.BackendResourceStateReady, Lifecycle: mpv1alpha1.BackendResourceLifecycleActive, EndpointCount: 1200},
		{Kind: mpv1alpha1.BackendResourceKindNetworkEndpointGroup, Name: "k8s1-web", Zone: "us-central1-b", Project: testProject, Network: "default",
			Description: testMarker, ID: strconv.FormatUint(negB.Id, 10), SelfLink: negB.SelfLink,
			State: mpv1alpha1.BackendResourceStateReady, Lifecycle: mpv1alpha1.BackendResourceLifecycleActive, EndpointCount: 3},
	}
	for i := range want {
		if i >= len(got.Status.Resources) || !apiequality.Semantic.DeepEqual(got.Status.Resources[i], want[i]) || want[i].ID == "0" || want[i].SelfLink == "" {
			t.Fatalf("status.resources = %+v, want %+v", got.Status.Resources, want)
		}
	}
	if s := got.Status; s.ActiveResources != 2 || s.InactiveResources != 0 || s.EndpointCount != 1203 {
		t.Errorf("active, inactive, endpoints = %d, %d, %d; want 2, 0, 1203", s.ActiveResources, s.InactiveResources, s.EndpointCount)
	}
	neg := negA
	if neg.Description != testMarker || neg.DefaultPort != 8080 || neg.NetworkEndpointType != "GCE_VM_IP_PORT" {
		t.Errorf("NEG = %+v, want the spec's description, port 8080 and GCE_VM_IP_PORT", neg)
	}

	// A converged Translation costs nothing: neither GCE calls nor status writes. The resync comes once the pusher
	// has seen its own last status write (a cache behind it would rightly write the status again).
	h.waitQuiet("web")
	h.gce.ResetCalls()
	writes := len(h.client.Actions())
	h.pusher.workers.Add("shop/web")
	h.waitFor("the resync to be processed", func() bool { return h.pusher.workers.Idle() })
	h.shutdown() // drains the worker, so the counts below are final
	if c := h.gce.Calls(testProject); len(c) != 0 {
		t.Errorf("a converged resync made GCE calls: %v", c)
	}
	if n := len(h.client.Actions()); n != writes {
		t.Errorf("a converged resync made %d API calls", n-writes)
	}
}

func TestScalesDownAndRemovesAResource(t *testing.T) {
	tr := translation("web", map[string]int{"us-central1-a": 700, "us-central1-b": 10}, true)
	h := newHarness(t, nil, tr)
	tr = h.waitSynced("web", metav1.ConditionTrue)

	h.gce.ResetCalls()
	tr.Spec.Resources = tr.Spec.Resources[:1]
	tr.Spec.Resources[0].NetworkEndpointGroup.Endpoints = tr.Spec.Resources[0].NetworkEndpointGroup.Endpoints[:100]
	tr.Generation++
	if _, err := h.client.MultiprojectV1alpha1().Translations(testNamespace).Update(context.Background(), tr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr = h.waitSynced("web", metav1.ConditionTrue)
	if n := h.endpointCount("us-central1-a", "k8s1-web"); n != 100 {
		t.Errorf("zone a has %d endpoints, want 100", n)
	}
	if _, ok := h.gce.NEG(testProject, "us-central1-b", "k8s1-web"); ok {
		t.Error("the NEG removed from the spec still exists")
	}
	calls := h.gce.Calls(testProject)
	if calls[fakegce.MethodDetachEndpoints] != 2 || calls[fakegce.MethodDelete] != 1 || calls[fakegce.MethodAttachEndpoints] != 0 {
		t.Errorf("calls = %v, want 2 detaches (600 endpoints) and 1 delete", calls)
	}
	if len(tr.Status.Resources) != 1 {
		t.Errorf("status.resources = %+v, want only zone a", tr.Status.Resources)
	}
}

func TestNameCollisionLeavesTheForeignNEGAlone(t *testing.T) {
	tr := translation("web", map[string]int{"us-central1-a": 5, "us-central1-b": 5}, true)
	h := newHarness(t, nil)
	// The foreign NEG first, then the Translation: a pusher that already had the Translation could make its NEG
	// before the test seeds the foreign one.
	foreign := &compute.NetworkEndpointGroup{Name: "k8s1-web", Description: "someone else's", NetworkEndpointType: "GCE_VM_IP_PORT", DefaultPort: 80}
	if _, err := h.gce.SeedNEG(testProject, "us-central1-b", foreign, &compute.NetworkEndpoint{Instance: "vm-1", IpAddress: "192.168.0.1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.MultiprojectV1alpha1().Translations(tr.Namespace).Create(context.Background(), tr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := h.waitReason("web", metav1.ConditionFalse, ReasonNameCollision)
	if s := got.Status.Resources[1]; s.State != mpv1alpha1.BackendResourceStateError || !strings.Contains(s.LastError, "ownership marker") {
		t.Errorf("zone b status = %+v, want Error about the marker", s)
	}
	if n := h.endpointCount("us-central1-a", "k8s1-web"); n != 5 {
		t.Errorf("the other zone's NEG has %d endpoints, want 5", n)
	}
	h.waitFor("a collision event", func() bool { return len(h.events.With(corev1.EventTypeWarning+" "+ReasonNameCollision)) > 0 })
	h.waitFor("the NEGReady condition", func() bool {
		c, ok := h.conditions.Last()
		return ok && c.Status == metav1.ConditionFalse && c.Reason == ReasonNameCollision
	})

	// Deleting the Translation deletes our NEG and leaves the foreign one.
	now := metav1.Now()
	got.DeletionTimestamp = &now
	if _, err := h.client.MultiprojectV1alpha1().Translations(testNamespace).Update(context.Background(), got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the finalizer to be removed", func() bool { return len(h.get("web").Finalizers) == 0 })
	if _, ok := h.gce.NEG(testProject, "us-central1-a", "k8s1-web"); ok {
		t.Error("our NEG was not deleted")
	}
	eps, ok := h.gce.Endpoints(testProject, "us-central1-b", "k8s1-web")
	if !ok || len(eps) != 1 {
		t.Errorf("the foreign NEG was touched: exists=%v endpoints=%d", ok, len(eps))
	}
	if h.gce.Calls(testProject)[fakegce.MethodDelete] != 1 {
		t.Errorf("delete calls = %d, want 1", h.gce.Calls(testProject)[fakegce.MethodDelete])
	}
	h.waitFor("the NEGReady condition to clear", func() bool {
		c, ok := h.conditions.Last()
		return ok && c.Status == metav1.ConditionTrue
	})
}

func TestAddsAMissingFinalizerBeforeCreatingNEGs(t *testing.T) {
	h := newHarness(t, nil, translation("web", map[string]int{"us-central1-a": 1}, false))
	tr := h.waitSynced("web", metav1.ConditionTrue)
	if !hasFinalizer(tr) {
		t.Error("no finalizer")
	}
	checkFinalizerWritesArePatches(t, h)
}

// checkFinalizerWritesArePatches: the pusher writes finalizers with a patch naming the finalizers and the version it
// read, never with an update of the whole Translation, which would drop the fields of a newer build that this
// build's types do not know (docs/upgrade.md).
func checkFinalizerWritesArePatches(t *testing.T, h *harness) {
	t.Helper()
	patches := 0
	for _, a := range h.client.Actions() {
		if a.GetResource().Resource != "translations" || a.GetSubresource() != "" {
			continue
		}
		switch a := a.(type) {
		case clienttesting.UpdateAction:
			t.Errorf("the pusher updated the whole Translation %v", a.GetObject())
		case clienttesting.PatchAction:
			patches++
			var body map[string]map[string]any
			if err := json.Unmarshal(a.GetPatch(), &body); err != nil || len(body) != 1 || len(body["metadata"]) != 2 ||
				body["metadata"]["finalizers"] == nil || body["metadata"]["resourceVersion"] == nil {
				t.Errorf("the finalizer patch is %s (%v); want metadata.finalizers and metadata.resourceVersion only", a.GetPatch(), err)
			}
		}
	}
	if patches == 0 {
		t.Error("no finalizer patch was sent")
	}
}

func TestFaultsConvergeWithNothingLost(t *testing.T) {
	tr := translation("web", map[string]int{"us-central1-a": 1200, "us-central1-b": 600, "us-central1-c": 30}, true)
	h := newHarness(t, nil, tr)
	h.gce.InjectFault(testProject, fakegce.MethodAttachEndpoints, fakegce.Fault{Code: 503, EveryNth: 2})
	h.gce.InjectFault(testProject, fakegce.MethodInsert, fakegce.Fault{Code: 403, Reason: fakegce.ReasonRateLimitExceeded, Times: 2})
	h.gce.InjectFault(testProject, fakegce.MethodListEndpoints, fakegce.Fault{Code: 429, Times: 1})
	h.waitSynced("web", metav1.ConditionTrue)
	for zone, want := range map[string]int{"us-central1-a": 1200, "us-central1-b": 600, "us-central1-c": 30} {
		if n := h.endpointCount(zone, "k8s1-web"); n != want {
			t.Errorf("zone %s has %d endpoints, want %d", zone, n, want)
		}
	}
}

func TestInvalidRequestIsAWarningNotAHotLoop(t *testing.T) {
	tr := translation("web", map[string]int{"us-central1-a": 1}, true)
	tr.Spec.Resources[0].NetworkEndpointGroup.Port = 0 // endpoints without a port and a NEG without a default: 400
	h := newHarness(t, nil, tr)
	h.waitReason("web", metav1.ConditionFalse, ReasonInvalid)
	h.waitFor("a Warning event", func() bool { return len(h.events.With(corev1.EventTypeWarning)) > 0 })
	h.shutdown()
	// One attempt and one after re-reading GCE; the next one is scheduled minutes later, not with backoff.
	if n := h.gce.Calls(testProject)[fakegce.MethodAttachEndpoints]; n != 2 {
		t.Errorf("attach calls = %d, want 2", n)
	}
	if n := h.pusher.workers.NumRequeues("shop/web"); n != 0 {
		t.Errorf("the key is in rate-limited backoff (%d failed syncs in a row)", n)
	}
}

func TestCredentialsProblemsAreAConditionAndRetried(t *testing.T) {
	gcp := &mpv1alpha1.GCPConfig{ProjectID: testProject, Network: "default",
		CredentialsSecretRef: &mpv1alpha1.SecretKeyReference{Namespace: "kube-system", Name: "tenant-a-gcp", Key: "key.json"}}
	h := newHarness(t, gcp, translation("web", map[string]int{"us-central1-a": 1}, true))
	got := h.waitReason("web", metav1.ConditionFalse, ReasonCredentialsUnavailable)
	if c := findCondition(got); c.Reason != ReasonCredentialsUnavailable || !strings.Contains(c.Message, "does not exist") {
		t.Errorf("Synced = %+v, want CredentialsUnavailable about a missing Secret", c)
	}
	key := `{"type":"service_account","client_email":"neg@tenant-a-project.iam.gserviceaccount.com","private_key":"-----BEGIN PRIVATE KEY-----\n"}`
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "tenant-a-gcp"}, Data: map[string][]byte{"key.json": []byte(key)}}
	if _, err := h.kube.CoreV1().Secrets("kube-system").Create(context.Background(), secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitSynced("web", metav1.ConditionTrue)
}

func TestPendingNamesTranslationsWithTheFinalizer(t *testing.T) {
	h := newHarness(t, nil, translation("web", map[string]int{"us-central1-a": 1}, true), translation("api", map[string]int{"us-central1-a": 1}, true))
	h.waitFor("the informer", h.pusher.informer.HasSynced)
	msg, err := Pending(context.Background(), h.tctx)
	if err != nil || msg != "2 Translations with NEGs not yet deleted: shop/api, shop/web" {
		t.Errorf("Pending = %q, %v", msg, err)
	}
}

// TestStopDrainsAndRecordsThePushes stops the pusher while attaches are on the wire and another Translation waits
// in the queue (two workers, three Translations): every push completes and its outcome reaches the Translation's
// status, so GCE is never ahead of what the cluster records.
func TestStopDrainsAndRecordsThePushes(t *testing.T) {
	h := newHarness(t, nil)
	h.gce.SetLatency(testProject, fakegce.MethodAttachEndpoints, 2*time.Second)
	names := []string{"web", "api", "admin"}
	for _, name := range names {
		tr := translation(name, map[string]int{"us-central1-a": 3}, true)
		if _, err := h.client.MultiprojectV1alpha1().Translations(testNamespace).Create(context.Background(), tr, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The third Translation must be queued, not only created: a stop drains the queue, and a Translation the
	// informer has not handed over yet is not in it (under load it was not, once).
	h.waitFor("both workers to have an attach on the wire and the third push queued", func() bool {
		return h.gce.Calls(testProject)[fakegce.MethodAttachEndpoints] >= 2 && h.pusher.workers.Len() >= 1
	})
	h.shutdown()

	for _, name := range names {
		if n := h.endpointCount("us-central1-a", "k8s1-"+name); n != 3 {
			t.Errorf("%s: the push was abandoned on stop: the NEG has %d endpoints, want 3", name, n)
		}
		got := h.get(name)
		if len(got.Status.Resources) != 1 || got.Status.Resources[0].EndpointCount != 3 ||
			got.Status.Resources[0].State != mpv1alpha1.BackendResourceStateReady {
			t.Errorf("%s: the status does not record the push made during the stop: %+v", name, got.Status.Resources)
		}
	}
}

// TestPersistentGCEFailureReachesTheTenantCondition: a 503 now and then is retried quietly, but a GCE that keeps
// failing turns the tenant's condition False (GCEUnavailable) while the pusher keeps retrying, and True again once
// GCE answers.
func TestPersistentGCEFailureReachesTheTenantCondition(t *testing.T) {
	h := newHarness(t, nil)
	h.gce.InjectFault(testProject, fakegce.AnyMethod, fakegce.Fault{Code: 503})
	tr := translation("web", map[string]int{"us-central1-a": 3}, true)
	if _, err := h.client.MultiprojectV1alpha1().Translations(testNamespace).Create(context.Background(), tr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the tenant condition to say GCE is unavailable", func() bool {
		c, ok := h.conditions.Last()
		return ok && c.Status == metav1.ConditionFalse && c.Reason == ReasonGCEUnavailable
	})
	if c, _ := h.conditions.Last(); !strings.Contains(c.Message, "503") {
		t.Errorf("the condition does not say what GCE answered: %q", c.Message)
	}

	h.gce.ClearFaults(testProject)
	h.waitSynced("web", metav1.ConditionTrue)
	h.waitFor("the tenant condition to recover", func() bool {
		c, ok := h.conditions.Last()
		return ok && c.Status == metav1.ConditionTrue
	})
}

// A status that only reports a generation the spec has already left is not written: the next generation, patched
// while the pusher was attaching the previous one, gets the one status write of both, and no write is refused for
// a stale version. The fake GCE's attach waits on a clock that only the test moves.
func TestAStatusOfASupersededGenerationIsNotWritten(t *testing.T) {
	const zone = "us-central1-a"
	clk := testingclock.NewFakeClock(time.Now())
	h := newHarnessWithGCE(t, fakegce.Options{Clock: clk}, nil, translation("web", map[string]int{zone: 1}, true))
	tr := h.waitSynced("web", metav1.ConditionTrue)
	h.waitQuiet("web")
	statusWrites := func() int {
		n := 0
		for _, a := range h.client.Actions() {
			if a.GetVerb() == "update" && a.GetSubresource() == "status" {
				n++
			}
		}
		return n
	}
	before := statusWrites()
	// grow gives the Translation n endpoints in a new generation.
	grow := func(n int) {
		tr.Spec = translation("web", map[string]int{zone: n}, true).Spec
		tr.Generation++
		var err error
		if tr, err = h.client.MultiprojectV1alpha1().Translations(testNamespace).Update(context.Background(), tr, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h.gce.SetLatency(testProject, fakegce.MethodAttachEndpoints, time.Second)
	grow(2)
	h.waitFor("the attach of generation 2 to wait on the fake GCE's clock", clk.HasWaiters)
	grow(3)
	h.waitFor("the pusher's cache to show generation 3", func() bool {
		cached, err := h.pusher.lister.Translations(testNamespace).Get("web")
		return err == nil && cached.Generation == tr.Generation
	})
	h.gce.SetLatency(testProject, fakegce.MethodAttachEndpoints, 0)
	clk.Step(time.Second)
	got := h.waitSynced("web", metav1.ConditionTrue)
	h.waitQuiet("web")
	if got.Status.ObservedGeneration != tr.Generation || h.endpointCount(zone, "k8s1-web") != 3 {
		t.Fatalf("synced at generation %d with %d endpoints in GCE, want generation %d with 3",
			got.Status.ObservedGeneration, h.endpointCount(zone, "k8s1-web"), tr.Generation)
	}
	if n := statusWrites() - before; n != 1 {
		t.Errorf("status writes for generations 2 and 3 = %d, want 1: generation 3's", n)
	}
}
