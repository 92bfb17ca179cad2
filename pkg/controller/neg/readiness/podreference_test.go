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
	"testing"
	"time"

	compute "google.golang.org/api/compute/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
)

// forPods names the Pod of each endpoint of the Translation's NEG, in order.
func forPods(tr *mpv1alpha1.Translation, pods ...string) *mpv1alpha1.Translation {
	eps := tr.Spec.Resources[0].NetworkEndpointGroup.Endpoints
	for i, pod := range pods {
		eps[i].Pod = pod
	}
	return tr
}

// TestANewPodReusingAnIPIsNotTakenForTheOldEndpoint: a synced Translation still lists the endpoint of a gone Pod
// whose IP a new gated Pod now has, and GCE reports that endpoint healthy. The new Pod is not in that NEG (the
// endpoint names the old Pod), so it waits; once the translator lists it and the pusher has synced, it is ready.
func TestANewPodReusingAnIPIsNotTakenForTheOldEndpoint(t *testing.T) {
	stale := forPods(translation("neg-v1-web-80", "neg-web", true, "10.0.0.1"), "web-old")
	h := newHarness(t, 10*time.Minute, func(h *harness) { h.health.set("neg-web", "10.0.0.1", "HEALTHY") },
		negService("web"), stale, gatedPod("web-new", "10.0.0.1", map[string]string{"app": "web"}))

	h.waitCondition("web-new", corev1.ConditionFalse, ReasonNotReady)
	h.waitFor("the queue to be idle", h.r.workers.Idle)
	if got := h.podWrites("web-new"); len(got) != 1 {
		t.Fatalf("writes of the new Pod = %v, want only its False condition", got)
	}
	if n := h.health.callsOf("neg-web"); n != 0 {
		t.Errorf("health lists for the new Pod = %d, want 0: it is in no NEG yet", n)
	}

	current := forPods(translation("neg-v1-web-80", "neg-web", true, "10.0.0.1"), "web-new")
	current.Generation, current.Status.ObservedGeneration = 2, 2
	markSynced(current)
	current.ResourceVersion = "2" // the fake clientset keeps it as given; the handlers skip an update that keeps it
	if _, err := h.mp.MultiprojectV1alpha1().Translations(testNamespace).Update(context.Background(), current, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitCondition("web-new", corev1.ConditionTrue, ReasonReady)
}

// TestAnEndpointWithoutAPodReferenceMatchesByIP: a Translation written by a build from before the Pod reference
// (or stored by its CRD) lists endpoints by address only; its Pods are matched by IP, as that build does.
func TestAnEndpointWithoutAPodReferenceMatchesByIP(t *testing.T) {
	h := newHarness(t, 10*time.Minute, func(h *harness) { h.health.set("neg-web", "10.0.0.1", "HEALTHY") },
		negService("web"), translation("neg-v1-web-80", "neg-web", true, "10.0.0.1"),
		gatedPod("web-1", "10.0.0.1", map[string]string{"app": "web"}))
	h.waitCondition("web-1", corev1.ConditionTrue, ReasonReady)
}

// TestADualStackPodIsMatchedByBothAddresses: a dual-stack Pod is found in a Translation by its name and either
// address, and its health is that of GCE's endpoint with both of the Translation's addresses (however the IPv6 one
// is written), not of an endpoint of the same IPv4 address in another form.
func TestADualStackPodIsMatchedByBothAddresses(t *testing.T) {
	tr := forPods(translation("neg-v1-web-80", "neg-web", true, "10.0.0.1"), "web-1")
	tr.Spec.Resources[0].NetworkEndpointGroup.Endpoints[0].Ipv6Address = "fd00::1"

	pod := gatedPod("web-1", "10.0.0.1", nil)
	pod.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}}
	ep := &tr.Spec.Resources[0].NetworkEndpointGroup.Endpoints[0]
	for _, c := range []struct {
		name string
		ips  []string
		want bool
	}{
		{"web-1", podIPs(pod), true},
		{"web-1", []string{"fd00::1"}, true},
		{"web-2", podIPs(pod), false},
		{"web-1", []string{"10.0.0.2", "fd00::2"}, false},
	} {
		if got := listsPod(ep, c.name, c.ips); got != c.want {
			t.Errorf("Pod %s at %v listed: %v, want %v", c.name, c.ips, got, c.want)
		}
	}

	healthy := []*compute.HealthStatusForNetworkEndpoint{{HealthState: "HEALTHY"}}
	dual := &compute.NetworkEndpointWithHealthStatus{Healths: healthy,
		NetworkEndpoint: &compute.NetworkEndpoint{IpAddress: "10.0.0.1", Ipv6Address: "fd00:0:0::1", Port: 8080}}
	single := &compute.NetworkEndpointWithHealthStatus{Healths: healthy,
		NetworkEndpoint: &compute.NetworkEndpoint{IpAddress: "10.0.0.1", Port: 8080}}
	at := addresses{ipv4: "10.0.0.1", ipv6: "fd00::1"}
	if h, _ := healthOf([]*compute.NetworkEndpointWithHealthStatus{dual}, at, 8080); h != healthHealthy {
		t.Errorf("health of the dual-stack endpoint = %v, want healthy", h)
	}
	if h, _ := healthOf([]*compute.NetworkEndpointWithHealthStatus{single}, at, 8080); h != healthUnknown {
		t.Errorf("health from the IPv4-only form of the endpoint = %v, want unknown", h)
	}
	if h, _ := healthOf([]*compute.NetworkEndpointWithHealthStatus{dual}, addresses{ipv4: "10.0.0.1", ipv6: "fd00::2"}, 8080); h != healthUnknown {
		t.Errorf("health from an endpoint of another IPv6 address = %v, want unknown", h)
	}
}
