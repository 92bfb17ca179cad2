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
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
)

// hybridTranslation is sweptTranslation with NON_GCP_PRIVATE_IP_PORT NEGs, as a hybrid tenant's translator declares
// them: no subnetwork, and endpoints of an IPv4 address, a port and a Pod, without an instance.
func hybridTranslation(endpoints map[string]int) *mpv1alpha1.Translation {
	tr := sweptTranslation(endpoints)
	for i := range tr.Spec.Resources {
		params := tr.Spec.Resources[i].NetworkEndpointGroup
		params.NetworkEndpointType = mpv1alpha1.NetworkEndpointTypeNonGCPPrivateIPPort
		params.Subnetwork = ""
		for j := range params.Endpoints {
			params.Endpoints[j].Instance, params.Endpoints[j].Pod = "", "pod"
		}
	}
	return tr
}

// TestHybridNEGsArePushedKeptAndDeletedLikeAnyOther: the pusher makes a hybrid Translation's NEGs of its type in
// GCE, attaches its instance-less endpoints, finds nothing to change on a second look (GCE's endpoint and the spec's
// are the same endpoint), changes one endpoint with one detach and one attach, records the NEG's id and lifecycle,
// keeps an emptied NEG (inactive, same id), and deletes the NEGs before it releases the Translation; the sweep
// leaves the NEGs of a live Translation alone.
func TestHybridNEGsArePushedKeptAndDeletedLikeAnyOther(t *testing.T) {
	const zoneA, zoneB = "us-central1-a", "us-central1-b"
	h := newHarness(t, nil, hybridTranslation(map[string]int{zoneA: 3, zoneB: 2}))
	h.withSweeps(false)
	tr := h.waitSynced("web", metav1.ConditionTrue)
	neg, ok := h.gce.NEG(testProject, zoneA, "k8s1-web")
	if !ok || neg.NetworkEndpointType != fakegce.TypeNonGCPPrivateIPPort || neg.Subnetwork != "" {
		t.Fatalf("NEG in GCE = %+v (found %v); want a NON_GCP_PRIVATE_IP_PORT NEG without a subnetwork", neg, ok)
	}
	if got := h.endpointCount(zoneA, "k8s1-web"); got != 3 {
		t.Fatalf("%d endpoints in %s, want 3", got, zoneA)
	}
	if s := tr.Status.Resources[0]; s.Lifecycle != mpv1alpha1.BackendResourceLifecycleActive || s.EndpointCount != 3 || s.ID == "" {
		t.Errorf("status of the NEG in %s = %+v", zoneA, s)
	}

	h.gce.ResetCalls()
	tr.Spec.Resources[0].NetworkEndpointGroup.Endpoints[0].IPAddress = "10.0.9.9"
	tr.Spec.Resources[1].NetworkEndpointGroup.Endpoints = nil
	tr.Generation++
	if _, err := h.client.MultiprojectV1alpha1().Translations(testNamespace).Update(context.Background(), tr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr = h.waitSynced("web", metav1.ConditionTrue)
	if calls := h.gce.Calls(testProject); calls[fakegce.MethodInsert] != 0 || calls[fakegce.MethodDelete] != 0 ||
		calls[fakegce.MethodAttachEndpoints] != 1 || calls[fakegce.MethodDetachEndpoints] != 2 {
		t.Errorf("calls %v; want one attach, two detaches (one per zone), no insert or delete", calls)
	}
	inGCE, _ := h.gce.Endpoints(testProject, zoneA, "k8s1-web")
	found := false
	for _, ep := range inGCE {
		found = found || ep.IpAddress == "10.0.9.9"
	}
	if !found || len(inGCE) != 3 {
		t.Errorf("endpoints in %s = %+v; want 3 with 10.0.9.9", zoneA, inGCE)
	}
	if got, ok := h.gce.NEG(testProject, zoneB, "k8s1-web"); !ok || tr.Status.Resources[1].Lifecycle != mpv1alpha1.BackendResourceLifecycleInactive ||
		tr.Status.Resources[1].ID != strconv.FormatUint(got.Id, 10) {
		t.Errorf("emptied NEG of %s: in GCE %v, status %+v; want it kept, inactive, with its id", zoneB, ok, tr.Status.Resources[1])
	}

	h.markDeleted("web")
	h.waitReleased("web")
	for _, zone := range []string{zoneA, zoneB} {
		if _, ok := h.gce.NEG(testProject, zone, "k8s1-web"); ok {
			t.Errorf("the NEG of %s outlived its Translation", zone)
		}
	}
}
