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
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
)

// TestAServiceTurningDualStackChangesItsEndpointsInPlace: endpoints that gain an IPv6 address (the Service turned
// dual-stack) are detached in their IPv4 form and attached with both addresses in the same NEG, never recreated;
// losing it again does the reverse. The endpoints name their Pods, as the translator's do wherever it joins two
// addresses.
func TestAServiceTurningDualStackChangesItsEndpointsInPlace(t *testing.T) {
	const zone = "us-central1-a"
	tr := translation("web", map[string]int{zone: 3}, true)
	h := newHarness(t, nil, tr)
	tr = h.waitSynced("web", metav1.ConditionTrue)
	neg, ok := h.gce.NEG(testProject, zone, "k8s1-web")
	if !ok {
		t.Fatal("no NEG")
	}

	for _, dualStack := range []bool{true, false} {
		h.gce.ResetCalls()
		eps := tr.Spec.Resources[0].NetworkEndpointGroup.Endpoints
		for i := range eps {
			eps[i].Pod, eps[i].Ipv6Address = fmt.Sprintf("pod-%d", i), ""
			if dualStack {
				eps[i].Ipv6Address = fmt.Sprintf("fd00::%d", i+1)
			}
		}
		tr.Generation++
		if _, err := h.client.MultiprojectV1alpha1().Translations(testNamespace).Update(context.Background(), tr, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr = h.waitSynced("web", metav1.ConditionTrue)
		if got, ok := h.gce.NEG(testProject, zone, "k8s1-web"); !ok || got.Id != neg.Id {
			t.Fatalf("dual-stack %v: the NEG was recreated or is gone (%v, id %d, was %d)", dualStack, ok, got.Id, neg.Id)
		}
		calls := h.gce.Calls(testProject)
		if calls[fakegce.MethodInsert] != 0 || calls[fakegce.MethodDelete] != 0 || calls[fakegce.MethodDetachEndpoints] != 1 ||
			calls[fakegce.MethodAttachEndpoints] != 1 {
			t.Errorf("dual-stack %v: calls %v; want one detach and one attach, no insert or delete", dualStack, calls)
		}
		inGCE, _ := h.gce.Endpoints(testProject, zone, "k8s1-web")
		want := map[string]string{}
		for _, ep := range eps {
			want[ep.IPAddress] = ep.Ipv6Address
		}
		got := map[string]string{}
		for _, ep := range inGCE {
			got[ep.IpAddress] = ep.Ipv6Address
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("dual-stack %v: GCE holds %v (IPv4 → IPv6), want %v", dualStack, got, want)
		}
	}
}

// TestAnOlderBuildsEndpointKeepsItsIPv6AddressInGCE: a spec an older build rewrote lists a dual-stack Pod's endpoint
// with its IPv4 address alone and no Pod (the build knows neither field); GCE's endpoint with both addresses is that
// endpoint, as the older build matches it (instance, IPv4 address, port), so nothing is detached, and an added
// endpoint is attached alone.
func TestAnOlderBuildsEndpointKeepsItsIPv6AddressInGCE(t *testing.T) {
	const zone = "us-central1-a"
	tr := translation("web", map[string]int{zone: 2}, true)
	eps := tr.Spec.Resources[0].NetworkEndpointGroup.Endpoints
	for i := range eps {
		eps[i].Pod, eps[i].Ipv6Address = fmt.Sprintf("pod-%d", i), fmt.Sprintf("fd00::%d", i+1)
	}
	h := newHarness(t, nil, tr)
	tr = h.waitSynced("web", metav1.ConditionTrue)

	h.gce.ResetCalls()
	eps = tr.Spec.Resources[0].NetworkEndpointGroup.Endpoints
	for i := range eps {
		eps[i].Pod, eps[i].Ipv6Address = "", ""
	}
	added := eps[0]
	added.IPAddress = "10.0.0.99"
	tr.Spec.Resources[0].NetworkEndpointGroup.Endpoints = append(eps, added)
	tr.Generation++
	if _, err := h.client.MultiprojectV1alpha1().Translations(testNamespace).Update(context.Background(), tr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitSynced("web", metav1.ConditionTrue)
	if calls := h.gce.Calls(testProject); calls[fakegce.MethodDetachEndpoints] != 0 || calls[fakegce.MethodAttachEndpoints] != 1 {
		t.Errorf("calls %v; want one attach (the added endpoint) and no detach", calls)
	}
	inGCE, _ := h.gce.Endpoints(testProject, zone, "k8s1-web")
	got := map[string]string{}
	for _, ep := range inGCE {
		got[ep.IpAddress] = ep.Ipv6Address
	}
	want := map[string]string{eps[0].IPAddress: "fd00::1", eps[1].IPAddress: "fd00::2", "10.0.0.99": ""}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("GCE holds %v (IPv4 → IPv6), want %v", got, want)
	}
}
