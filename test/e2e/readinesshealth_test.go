//go:build integration

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

package e2e

import (
	"context"
	"net/netip"
	"path"
	"sync"
	"testing"
	"time"

	compute "google.golang.org/api/compute/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
)

// The NEG readiness gate's health-aware cases (TestNEGReadinessGate in readiness_test.go runs them).

// endpointLists counts the fake's listNetworkEndpoints calls per project, zone and NEG: the reflector's health polls.
type endpointLists struct {
	mu     sync.Mutex
	counts map[string]int
}

func (l *endpointLists) record(r fakegce.CallRecord) {
	if r.Method != fakegce.MethodListEndpoints {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.counts == nil {
		l.counts = map[string]int{}
	}
	l.counts[r.Project+"/"+r.Zone+"/"+r.Resource]++
}

func (l *endpointLists) count(project, zone, neg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counts[project+"/"+zone+"/"+neg]
}

// --- health-aware readiness, the timeout, and a Pod in no NEG ----------------------------------------------------

// testHealthAndTimeout: a backend service uses the Service's NEGs and reports every endpoint UNHEALTHY from its
// first listing. Two gated Pods are attached and polled for health, and both stay not Ready with
// LoadBalancerNegNotReady; one reported HEALTHY turns True with LoadBalancerNegReady (a Normal Event says so); the
// other turns True with LoadBalancerNegTimeout once --neg-readiness-timeout has passed since its creation, not
// before (a Warning Event says so). A gated Pod that no NEG Service selects turns True with LoadBalancerNegReady.
func testHealthAndTimeout(t *testing.T, gce *fakegce.Server, lists *endpointLists) {
	w := newWorkload(t, gce)
	startKubelet(t, w, []string{w.nodeName(0, 0)}, netip.MustParsePrefix("10.243.0.0/24"))
	createNEGService(t, w, "web")
	negs := waitNEGs(t, w)
	for _, n := range negs {
		zone := path.Base(n.Zone)
		if err := gce.SetInUseBy(w.project, zone, n.Name, "web-backend"); err != nil {
			t.Fatal(err)
		}
		if err := gce.SetDefaultEndpointHealth(w.project, zone, n.Name, "UNHEALTHY"); err != nil {
			t.Fatal(err)
		}
	}
	zone, neg := zones[0], negs[0].Name

	healthy, timedOut := createGatedPod(t, w, "healthy", "web"), createGatedPod(t, w, "unhealthy", "web")
	lonely := createGatedPod(t, w, "lonely", "nobody")
	ips := map[string]string{}
	for _, name := range []string{healthy, timedOut} {
		ips[name] = waitPodState(t, w, name, "with an IP", func(p *corev1.Pod) bool { return p.Status.PodIP != "" }).Status.PodIP
	}
	waitInNEG(t, w, zone, neg, ips[healthy], ips[timedOut])
	// Two health listings after both are attached: the reflector has seen them UNHEALTHY.
	polled := lists.count(w.project, zone, neg)
	if err := wait.PollUntilContextTimeout(w.ctx, 100*time.Millisecond, convergeTimeout, true, func(context.Context) (bool, error) {
		return lists.count(w.project, zone, neg) >= polled+2, nil
	}); err != nil {
		t.Fatalf("NEG %s was not listed again after its endpoints were attached: %v", neg, err)
	}
	for _, name := range []string{healthy, timedOut} {
		p := waitPodState(t, w, name, "waiting", func(*corev1.Pod) bool { return true })
		if c := podCondition(p, negReadyGate); c == nil || c.Status != corev1.ConditionFalse || c.Reason != reasonNEGNotReady {
			t.Errorf("Pod %s attached and UNHEALTHY: gate condition %+v, want False %s", name, c, reasonNEGNotReady)
		}
		if isPodConditionTrue(p, corev1.PodReady) {
			t.Errorf("Pod %s is Ready while UNHEALTHY", name)
		}
	}

	if err := gce.SetEndpointHealth(w.project, zone, neg, ips[healthy], servicePort, "HEALTHY"); err != nil {
		t.Fatal(err)
	}
	waitGate(t, w, healthy, reasonNEGReady)
	waitPodState(t, w, healthy, "Ready", func(p *corev1.Pod) bool { return isPodConditionTrue(p, corev1.PodReady) })
	waitPodEvent(t, w.appNS, healthy, corev1.EventTypeNormal, reasonNEGReady)
	waitGate(t, w, lonely, reasonNEGReady)

	p := waitGate(t, w, timedOut, reasonNEGTimeout)
	// The condition's transition time is second-granular: allow for the truncation.
	if c := podCondition(p, negReadyGate); c.LastTransitionTime.Add(time.Second).Before(p.CreationTimestamp.Add(negReadinessTimeout)) {
		t.Errorf("Pod %s (created %s) timed out at %s, before --neg-readiness-timeout=%s", timedOut,
			p.CreationTimestamp, c.LastTransitionTime, negReadinessTimeout)
	}
	waitPodEvent(t, w.appNS, timedOut, corev1.EventTypeWarning, reasonNEGTimeout)
}

// waitNEGs waits until the tenant's project holds the Service's NEGs, one per zone of the tenant's Nodes, and
// returns them in the order of zones.
func waitNEGs(t *testing.T, w *workload) []*compute.NetworkEndpointGroup {
	t.Helper()
	var byZone map[string]*compute.NetworkEndpointGroup
	err := wait.PollUntilContextTimeout(w.ctx, 250*time.Millisecond, convergeTimeout, true, func(context.Context) (bool, error) {
		byZone = map[string]*compute.NetworkEndpointGroup{}
		for _, n := range w.gce.NEGs(w.project) {
			byZone[path.Base(n.Zone)] = n
		}
		return len(byZone) == len(zones), nil
	})
	if err != nil {
		t.Fatalf("the NEGs of tenant %s: %d zones of %d within %s", w.tenant, len(byZone), len(zones), convergeTimeout)
	}
	out := make([]*compute.NetworkEndpointGroup, 0, len(zones))
	for _, z := range zones {
		out = append(out, byZone[z])
	}
	return out
}

// createGatedPod creates a bare Pod labeled app=app on the tenant's first Node, declaring the gate.
func createGatedPod(t *testing.T, w *workload, name, app string) string {
	t.Helper()
	tmpl := podTemplate(w, app, true)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.appNS, Name: name, Labels: tmpl.Labels}, Spec: tmpl.Spec}
	if _, err := w.kube.CoreV1().Pods(w.appNS).Create(w.ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
}

// waitPodState polls the Pod until ok holds and returns it.
func waitPodState(t *testing.T, w *workload, name, what string, ok func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	err := wait.PollUntilContextTimeout(w.ctx, 250*time.Millisecond, convergeTimeout, true, func(ctx context.Context) (bool, error) {
		p, err := w.kube.CoreV1().Pods(w.appNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		pod = p
		return ok(pod), nil
	})
	if err != nil {
		t.Fatalf("Pod %s/%s not %s within %s: %v; last: %+v", w.appNS, name, what, convergeTimeout, err, pod)
	}
	return pod
}

// waitGate waits until the Pod's gate condition is True and checks its reason.
func waitGate(t *testing.T, w *workload, name, reason string) *corev1.Pod {
	t.Helper()
	p := waitPodState(t, w, name, "past the gate", func(p *corev1.Pod) bool { return isPodConditionTrue(p, negReadyGate) })
	if c := podCondition(p, negReadyGate); c.Reason != reason {
		t.Errorf("Pod %s: gate condition True with reason %s (%q), want %s", name, c.Reason, c.Message, reason)
	}
	return p
}

// waitInNEG waits until the NEG holds endpoints of every IP.
func waitInNEG(t *testing.T, w *workload, zone, neg string, ips ...string) {
	t.Helper()
	var got sets.Set[string]
	err := wait.PollUntilContextTimeout(w.ctx, 100*time.Millisecond, convergeTimeout, true, func(context.Context) (bool, error) {
		eps, _ := w.gce.Endpoints(w.project, zone, neg)
		got = sets.New[string]()
		for _, ep := range eps {
			got.Insert(ep.IpAddress)
		}
		return got.HasAll(ips...), nil
	})
	if err != nil {
		t.Fatalf("NEG %s in %s holds %v, want %v, within %s", neg, zone, sets.List(got), ips, convergeTimeout)
	}
}
