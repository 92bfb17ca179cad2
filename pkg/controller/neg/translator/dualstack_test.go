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
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
)

func ipv6Slice(service, name, portName string, port int32, endpoints ...ep) *discoveryv1.EndpointSlice {
	s := slice(service, name, portName, port, endpoints...)
	s.AddressType = discoveryv1.AddressTypeIPv6
	return s
}

// TestADualStackPodIsOneEndpointWithBothAddresses: the IPv4 and IPv6 slices of a Service are joined by Pod and port
// into one endpoint carrying both addresses and the Pod's name; a Pod with only an IPv4 address is an IPv4 endpoint;
// an IPv6 address without an IPv4 one of its Pod (or without a Pod to join by) is left out and counted.
func TestADualStackPodIsOneEndpointWithBothAddresses(t *testing.T) {
	topo := newTopology([]*corev1.Node{node("n1", zoneB), node("n2", zoneC)})
	v4 := slice("web", "web-v4", "http", 8080,
		ep{ip: "10.0.0.1", node: "n1", pod: "a"},
		ep{ip: "10.0.0.2", node: "n2", pod: "b"},
		ep{ip: "10.0.0.3", node: "n1", pod: "c"}, // no IPv6 address yet
		ep{ip: "10.0.0.9", node: "n1"},           // a selector-less Service's address: no Pod
	)
	v6 := ipv6Slice("web", "web-v6", "http", 8080,
		ep{ip: "fd00::2", node: "n2", pod: "b"},
		ep{ip: "fd00::1", node: "n1", pod: "a"},
		ep{ip: "fd00::4", node: "n1", pod: "d"}, // no IPv4 address
		ep{ip: "fd00::9", node: "n1"},           // no Pod to join by
	)
	// The same Pod in a second IPv6 slice while the EndpointSlice controller moves it.
	moving := ipv6Slice("web", "web-v6-2", "http", 8080, ep{ip: "fd00::1", node: "n1", pod: "a"})
	port := servicePort("http", 80, "http")
	got, left := endpointsByZone([]*discoveryv1.EndpointSlice{v6, v4, moving}, &port, topo, (&Translator{}).endpointReady)
	want := map[string][]mpv1alpha1.NetworkEndpoint{
		zoneB: {
			{Instance: "n1", IPAddress: "10.0.0.1", Ipv6Address: "fd00::1", Port: 8080, Pod: "a"},
			{Instance: "n1", IPAddress: "10.0.0.3", Port: 8080, Pod: "c"},
			{Instance: "n1", IPAddress: "10.0.0.9", Port: 8080},
		},
		zoneC: {{Instance: "n2", IPAddress: "10.0.0.2", Ipv6Address: "fd00::2", Port: 8080, Pod: "b"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("endpoints:\n got %+v\nwant %+v", got, want)
	}
	if want := (leftOut{ipv6Only: 2}); left != want {
		t.Errorf("left out %+v, want %+v", left, want)
	}
}

// TestAPodWaitingForTheGateWaitsForBothFamilies: while a Service has an IPv6 slice, a Pod that waits for the NEG
// readiness gate (its endpoint not ready) and has an IPv6 address is an endpoint only once both slices list it, so it never passes the gate
// on an IPv4-only endpoint that would then be detached to take its IPv6 address; a ready IPv4 address alone is still
// an endpoint, and without an IPv6 slice a waiting Pod's IPv4 address is one at once.
func TestAPodWaitingForTheGateWaitsForBothFamilies(t *testing.T) {
	topo := newTopology([]*corev1.Node{node("n1", zoneB)})
	v4 := slice("web", "web-v4", "http", 8080,
		ep{ip: "10.0.0.1", node: "n1", pod: "a", notReady: true},
		ep{ip: "10.0.0.2", node: "n1", pod: "b", notReady: true}, // not in the IPv6 slice yet
		ep{ip: "10.0.0.3", node: "n1", pod: "c"},                 // ready, not in the IPv6 slice yet
	)
	v6 := ipv6Slice("web", "web-v6", "http", 8080, ep{ip: "fd00::1", node: "n1", pod: "a", notReady: true})
	port := servicePort("http", 80, "http")
	// Every endpoint counts; a not-ready one is a Pod waiting for the gate, with an IPv6 address.
	waitingForTheGate := func(_ string, e *discoveryv1.Endpoint) (bool, bool) {
		return true, !ptr.Deref(e.Conditions.Ready, true)
	}
	got, _ := endpointsByZone([]*discoveryv1.EndpointSlice{v4, v6}, &port, topo, waitingForTheGate)
	want := map[string][]mpv1alpha1.NetworkEndpoint{zoneB: {
		{Instance: "n1", IPAddress: "10.0.0.1", Ipv6Address: "fd00::1", Port: 8080, Pod: "a"},
		{Instance: "n1", IPAddress: "10.0.0.3", Port: 8080, Pod: "c"},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("dual-stack endpoints:\n got %+v\nwant %+v", got, want)
	}

	got, _ = endpointsByZone([]*discoveryv1.EndpointSlice{v4}, &port, topo, waitingForTheGate)
	want = map[string][]mpv1alpha1.NetworkEndpoint{zoneB: {
		{Instance: "n1", IPAddress: "10.0.0.1", Port: 8080, Pod: "a"},
		{Instance: "n1", IPAddress: "10.0.0.2", Port: 8080, Pod: "b"},
		{Instance: "n1", IPAddress: "10.0.0.3", Port: 8080, Pod: "c"},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("single-stack endpoints:\n got %+v\nwant %+v", got, want)
	}
}

// TestAnIPv6OnlyServiceGetsEmptyNEGsAndAWarning: a Service with only an IPv6 slice gets its NEGs (so that turning
// it dual-stack later fills them in place) without endpoints, and one Warning says why.
func TestAnIPv6OnlyServiceGetsEmptyNEGsAndAWarning(t *testing.T) {
	h := newHarness(t,
		node("n1", zoneB),
		service("web", `{"exposed_ports":{"80":{}}}`, servicePort("http", 80, "8080")),
		ipv6Slice("web", "web-v6", "http", 8080, ep{ip: "fd00::1", node: "n1", pod: "a"}),
	)
	h.sync("web")
	tr := h.translations()[translationName("web", 80)]
	if tr == nil || len(tr.Spec.Resources) != 1 {
		t.Fatalf("Translation %+v; want one with one NEG", tr)
	}
	if eps := tr.Spec.Resources[0].NetworkEndpointGroup.Endpoints; len(eps) != 0 {
		t.Errorf("the NEG lists %+v; want no endpoint", eps)
	}
	if got := h.events.With("Warning " + ReasonIPv6EndpointsNotServed); len(got) != 1 {
		t.Errorf("want one %s Warning, got %v", ReasonIPv6EndpointsNotServed, got)
	}
	h.sync("web")
	if got := h.events.With("Warning " + ReasonIPv6EndpointsNotServed); len(got) != 1 {
		t.Errorf("a second sync repeated the Warning: %v", got)
	}
}

// TestAServiceTurningDualStackKeepsItsTranslationsNEGs: the IPv6 slice that comes when a Service turns dual-stack
// changes the endpoints of the same Translation and NEGs (same names, markers and zones), and its removal changes
// them back.
func TestAServiceTurningDualStackKeepsItsTranslationsNEGs(t *testing.T) {
	h := newHarness(t,
		node("n1", zoneB),
		service("web", `{"exposed_ports":{"80":{}}}`, servicePort("http", 80, "8080")),
		slice("web", "web-v4", "http", 8080, ep{ip: "10.0.0.1", node: "n1", pod: "a"}),
	)
	h.sync("web")
	before := h.translations()[translationName("web", 80)].DeepCopy()
	v6 := ipv6Slice("web", "web-v6", "http", 8080, ep{ip: "fd00::1", node: "n1", pod: "a"})
	if _, err := h.kube.DiscoveryV1().EndpointSlices(v6.Namespace).Create(h.ctx, v6, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.settle()
	h.writes()
	h.sync("web")
	noTranslationReplaced(t, h.writes())
	after := h.translations()[translationName("web", 80)]
	if after.Spec.Resources[0].Name != before.Spec.Resources[0].Name ||
		after.Spec.Resources[0].Description != before.Spec.Resources[0].Description {
		t.Fatalf("turning dual-stack replaced the Translation or its NEG: %+v, was %+v", after, before)
	}
	want := []mpv1alpha1.NetworkEndpoint{{Instance: "n1", IPAddress: "10.0.0.1", Ipv6Address: "fd00::1", Port: 8080, Pod: "a"}}
	if got := after.Spec.Resources[0].NetworkEndpointGroup.Endpoints; !reflect.DeepEqual(got, want) {
		t.Errorf("dual-stack endpoints %+v, want %+v", got, want)
	}

	if err := h.kube.DiscoveryV1().EndpointSlices(v6.Namespace).Delete(h.ctx, v6.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.settle()
	h.writes()
	h.sync("web")
	noTranslationReplaced(t, h.writes())
	back := h.translations()[translationName("web", 80)]
	want[0].Ipv6Address = ""
	if got := back.Spec.Resources[0].NetworkEndpointGroup.Endpoints; !reflect.DeepEqual(got, want) {
		t.Errorf("back to single-stack: %+v, want %+v", got, want)
	}
}

// noTranslationReplaced fails unless writes change Translations only in place (a patch or update).
func noTranslationReplaced(t *testing.T, writes []string) {
	t.Helper()
	changed := false
	for _, w := range writes {
		switch w {
		case "create translations", "delete translations":
			t.Errorf("a Translation was replaced: %q", writes)
		case "patch translations", "update translations":
			changed = true
		}
	}
	if !changed {
		t.Errorf("no Translation was changed: %q", writes)
	}
}
