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

package translator

import (
	"context"
	"reflect"
	"slices"
	"testing"

	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// otherGate is a readiness gate of some other controller.
const otherGate corev1.PodConditionType = "example.com/other-ready"

// gatedPod is a Pod of the test namespace that declares the NEG readiness gate, whose containers are ready and
// whose gate is not set yet: ready but for the gate. The changes apply in order.
func gatedPod(name string, changes ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: name, UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: "n1", ReadinessGates: []corev1.PodReadinessGate{{ConditionType: negapi.ReadinessGate}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionFalse}}}}
	for _, change := range changes {
		change(p)
	}
	return p
}

func withCondition(t corev1.PodConditionType, s corev1.ConditionStatus) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == t {
				p.Status.Conditions[i].Status = s
				return
			}
		}
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: s})
	}
}

func withGate(t corev1.PodConditionType) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.ReadinessGates = append(p.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: t})
	}
}

func withoutGates(p *corev1.Pod) { p.Spec.ReadinessGates = nil }

func deleting(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.Now()) }

func TestEndpointReady(t *testing.T) {
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, p := range []*corev1.Pod{gatedPod("waiting"), gatedPod("unready", withCondition(corev1.ContainersReady, corev1.ConditionFalse)),
		gatedPod("plain", withoutGates)} {
		if err := pods.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	tr := &Translator{keys: negapi.DefaultKeys(), podLister: corelisters.NewPodLister(pods)}
	endpoint := func(ready *bool, ref *corev1.ObjectReference, changes ...func(*discoveryv1.Endpoint)) *discoveryv1.Endpoint {
		e := &discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ready}, TargetRef: ref}
		for _, change := range changes {
			change(e)
		}
		return e
	}
	podRef := func(name string) *corev1.ObjectReference {
		return &corev1.ObjectReference{Kind: "Pod", Namespace: testNamespace, Name: name, UID: types.UID("uid-" + name)}
	}
	terminating := func(e *discoveryv1.Endpoint) { e.Conditions.Terminating = ptr.To(true) }
	for _, tc := range []struct {
		name string
		ep   *discoveryv1.Endpoint
		want bool
	}{
		{"ready", endpoint(ptr.To(true), nil), true},
		{"readiness unset", endpoint(nil, nil), true},
		{"ready, of a Pod not ready", endpoint(ptr.To(true), podRef("unready")), true},
		{"not ready, of a Pod ready but for the gate", endpoint(ptr.To(false), podRef("waiting")), true},
		{"the same without a UID in the reference", endpoint(ptr.To(false), &corev1.ObjectReference{Kind: "Pod", Name: "waiting"}), true},
		{"not ready, terminating", endpoint(ptr.To(false), podRef("waiting"), terminating), false},
		{"not ready, containers not ready", endpoint(ptr.To(false), podRef("unready")), false},
		{"not ready, a Pod without the gate", endpoint(ptr.To(false), podRef("plain")), false},
		{"not ready, no reference", endpoint(ptr.To(false), nil), false},
		{"not ready, a reference to another kind", endpoint(ptr.To(false), &corev1.ObjectReference{Kind: "Node", Name: "waiting"}), false},
		{"not ready, a Pod of another namespace", endpoint(ptr.To(false), &corev1.ObjectReference{Kind: "Pod", Namespace: "other", Name: "waiting"}), false},
		{"not ready, a Pod the view does not have", endpoint(ptr.To(false), podRef("gone")), false},
		{"not ready, another Pod of the same name", endpoint(ptr.To(false), &corev1.ObjectReference{Kind: "Pod", Name: "waiting", UID: "uid-old"}), false},
	} {
		if got, _ := tr.endpointReady(testNamespace, tc.ep); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func withIPs(ips ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		for _, ip := range ips {
			p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
		}
	}
}

// TestAGatedPodWithoutAnIPv6AddressIsAttachedInADualStackService: in a Service with an IPv6 slice, a Pod ready but
// for the NEG readiness gate waits for both families only when it has an IPv6 address: one without (an IPv4-only
// Node pool of a PreferDualStack Service, a hostNetwork Pod there) is never in the IPv6 slice, so its IPv4 address
// is its endpoint at once, and it does not turn Ready at the gate's timeout outside its NEG.
func TestAGatedPodWithoutAnIPv6AddressIsAttachedInADualStackService(t *testing.T) {
	h := newHarness(t,
		node("n1", zoneB),
		service("web", `{"exposed_ports":{"80":{}}}`, servicePort("http", 80, "web")),
		slice("web", "web-v4", "http", 8080,
			ep{ip: "10.0.0.9", node: "n1", pod: "ready"},
			ep{ip: "10.0.0.1", node: "n1", pod: "ipv4-only", notReady: true},
			ep{ip: "10.0.0.2", node: "n1", pod: "dual", notReady: true}),
		ipv6Slice("web", "web-v6", "http", 8080, ep{ip: "fd00::9", node: "n1", pod: "ready"}),
		gatedPod("ipv4-only", withIPs("10.0.0.1")),
		gatedPod("dual", withIPs("10.0.0.2", "fd00::2")),
	)
	h.sync("web")
	if got, want := h.endpointIPs("neg-v1-web-80"), []string{"10.0.0.1", "10.0.0.9"}; !reflect.DeepEqual(got, want) {
		t.Errorf("NEG endpoints = %v, want %v (the Pod without an IPv6 address, not the one waiting for its IPv6 slice)", got, want)
	}
}

// gateObjects is a Service whose slice has, on Node n1 of zone b, a ready endpoint and one not ready for each Pod
// kind the translator tells apart.
func gateObjects() []runtimeObject {
	return []runtimeObject{
		node("n1", zoneB),
		service("web", `{"exposed_ports":{"80":{}}}`, servicePort("http", 80, "web")),
		slice("web", "web-1", "http", 8080,
			ep{ip: "10.0.0.9", node: "n1"},
			ep{ip: "10.0.0.1", node: "n1", pod: "waiting", notReady: true},
			ep{ip: "10.0.0.2", node: "n1", pod: "other-gate", notReady: true},
			ep{ip: "10.0.0.3", node: "n1", pod: "deleted", notReady: true, terminating: true},
			ep{ip: "10.0.0.4", node: "n1", pod: "containers-unready", notReady: true},
			ep{ip: "10.0.0.5", node: "n1", pod: "no-gate", notReady: true},
		),
		gatedPod("waiting"),
		gatedPod("other-gate", withGate(otherGate), withCondition(otherGate, corev1.ConditionFalse)),
		gatedPod("deleted", deleting),
		gatedPod("containers-unready", withCondition(corev1.ContainersReady, corev1.ConditionFalse)),
		gatedPod("no-gate", withoutGates),
	}
}

func (h *harness) endpointIPs(translation string) []string {
	h.t.Helper()
	tr := h.translations()[translation]
	if tr == nil {
		h.t.Fatalf("no Translation %s: %v", translation, keys(h.translations()))
	}
	var ips []string
	for _, r := range tr.Spec.Resources {
		for _, e := range r.NetworkEndpointGroup.Endpoints {
			ips = append(ips, e.IPAddress)
		}
	}
	slices.Sort(ips)
	return ips
}

// TestTheEndpointOfAPodWaitingOnlyForTheGateIsAttached: of the not-ready endpoints, only the one whose Pod waits
// for nothing but the NEG readiness gate joins the ready one in the NEG; another unmet gate, a terminating Pod,
// containers not ready, or no gate at all keep an endpoint out, as before.
func TestTheEndpointOfAPodWaitingOnlyForTheGateIsAttached(t *testing.T) {
	h := newHarness(t, gateObjects()...)
	h.sync("web")
	if got, want := h.endpointIPs("neg-v1-web-80"), []string{"10.0.0.1", "10.0.0.9"}; !reflect.DeepEqual(got, want) {
		t.Errorf("NEG endpoints = %v, want %v", got, want)
	}
}

// TestPodEventsEnqueueTheServicesOfTheirSlices: a Pod event enqueues the NEG Services with an endpoint of the Pod
// (through the slices' index by Pod), and only when whether the Pod is ready but for the gate changed.
func TestPodEventsEnqueueTheServicesOfTheirSlices(t *testing.T) {
	objects := append(gateObjects(),
		service("api", `{"exposed_ports":{"80":{}}}`, servicePort("http", 80, "8080")),
		slice("api", "api-1", "http", 8080, ep{ip: "10.0.0.1", node: "n1", pod: "waiting", notReady: true}),
		service("plain", "", servicePort("http", 80, "8080")), // asks for no NEG
		slice("plain", "plain-1", "http", 8080, ep{ip: "10.0.0.1", node: "n1", pod: "waiting", notReady: true}),
	)
	h := newHarness(t, objects...)
	h.settle()
	version := func(rv string, p *corev1.Pod) *corev1.Pod { p.ResourceVersion = rv; return p }
	waiting := version("2", gatedPod("waiting"))
	unready := version("1", gatedPod("waiting", withCondition(corev1.ContainersReady, corev1.ConditionFalse)))
	movedIP := version("3", gatedPod("waiting", func(p *corev1.Pod) { p.Status.PodIP = "10.0.0.11" }))
	both := []string{"shop/api", "shop/web"}
	for _, step := range []struct {
		what  string
		event func()
		want  []string
	}{
		{"the initial list", func() { podEvents{h.translator}.OnAdd(waiting, true) }, nil},
		{"containers become ready", func() { podEvents{h.translator}.OnUpdate(unready, waiting) }, both},
		{"a resync", func() { podEvents{h.translator}.OnUpdate(waiting, waiting) }, nil},
		{"another status change", func() { podEvents{h.translator}.OnUpdate(waiting, movedIP) }, nil},
		{"the gate set True", func() {
			podEvents{h.translator}.OnUpdate(waiting, version("4", gatedPod("waiting", withCondition(negapi.ReadinessGate, corev1.ConditionTrue))))
		}, nil},
		{"containers no longer ready", func() { podEvents{h.translator}.OnUpdate(waiting, version("5", unready.DeepCopy())) }, both},
		{"deleted while waiting", func() { podEvents{h.translator}.OnDelete(waiting) }, both},
		{"deleted, seen by a tombstone", func() {
			podEvents{h.translator}.OnDelete(cache.DeletedFinalStateUnknown{Key: "shop/waiting", Obj: waiting})
		}, both},
		{"deleted while not waiting", func() { podEvents{h.translator}.OnDelete(unready) }, nil},
		{"added while waiting", func() { podEvents{h.translator}.OnAdd(waiting, false) }, both},
		{"a Pod no slice lists", func() { podEvents{h.translator}.OnAdd(version("1", gatedPod("alone")), false) }, nil},
	} {
		step.event()
		if got := h.queued(); !reflect.DeepEqual(got, step.want) && (len(got) != 0 || len(step.want) != 0) {
			t.Errorf("%s: queued %v, want %v", step.what, got, step.want)
		}
	}
}

// TestRunFollowsThePodsContainers: through the informers, a Pod whose containers become ready while it waits for
// the gate joins the NEG, and leaves it when they stop being ready, with no slice change in between.
func TestRunFollowsThePodsContainers(t *testing.T) {
	h := newHarness(t, node("n1", zoneB), service("web", `{"exposed_ports":{"80":{}}}`, servicePort("http", 80, "web")),
		slice("web", "web-1", "http", 8080, ep{ip: "10.0.0.1", node: "n1", pod: "p1", notReady: true}),
		gatedPod("p1", withCondition(corev1.ContainersReady, corev1.ConditionFalse)))
	synced := make(chan struct{})
	h.translator.onSynced = func() { close(synced) }
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.translator.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	<-synced
	h.waitFor("the Translation", func() bool { return h.translations()["neg-v1-web-80"] != nil })
	if got := h.endpointIPs("neg-v1-web-80"); len(got) != 0 {
		t.Fatalf("NEG endpoints = %v before the containers are ready, want none", got)
	}
	setContainersReady := func(s corev1.ConditionStatus) {
		t.Helper()
		p, err := h.kube.CoreV1().Pods(testNamespace).Get(h.ctx, "p1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		withCondition(corev1.ContainersReady, s)(p)
		if _, err := h.kube.CoreV1().Pods(testNamespace).UpdateStatus(h.ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setContainersReady(corev1.ConditionTrue)
	h.waitFor("the endpoint in the NEG", func() bool { return reflect.DeepEqual(h.endpointIPs("neg-v1-web-80"), []string{"10.0.0.1"}) })
	setContainersReady(corev1.ConditionFalse)
	h.waitFor("the endpoint out of the NEG", func() bool { return len(h.endpointIPs("neg-v1-web-80")) == 0 })
}
