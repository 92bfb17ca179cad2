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
	"slices"
	"strings"
	"testing"

	compute "google.golang.org/api/compute/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
)

func joining(tr *mpv1alpha1.Translation, memberships ...mpv1alpha1.BackendServiceMembership) *mpv1alpha1.Translation {
	for i := range tr.Spec.Resources {
		tr.Spec.Resources[i].NetworkEndpointGroup.BackendServices = memberships
	}
	return tr
}

// backendGroups returns the backend service's backends by NEG "zone/name", with their settings.
func (h *harness) backendGroups(name string) (map[string]*compute.Backend, *compute.BackendService) {
	h.t.Helper()
	bs, ok := h.gce.BackendService(testProject, "", name)
	if !ok {
		h.t.Fatalf("no backend service %s", name)
	}
	out := map[string]*compute.Backend{}
	for _, b := range bs.Backends {
		parts := strings.Split(b.Group, "/")
		out[parts[len(parts)-3]+"/"+parts[len(parts)-1]] = b
	}
	return out, bs
}

// TestNEGsJoinAndLeaveBackendServicesKeepingOthersChanges: the pusher adds each zone's NEG to the backend service
// the spec names, with its balancing settings, keeps someone else's backend (its capacityScaler of 0 too) and a
// change made between its read and its write (retried on the 412), records the membership in the status, and
// removes the NEGs when the spec stops naming the service and, once named again, before it deletes them.
func TestNEGsJoinAndLeaveBackendServicesKeepingOthersChanges(t *testing.T) {
	h := newHarness(t, nil)
	if _, err := h.gce.SeedNEG(testProject, "us-central1-a", &compute.NetworkEndpointGroup{Name: "terraform-neg", Description: "not ours"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.gce.InsertBackendService(testProject, "", &compute.BackendService{Name: "web", Description: "made by terraform",
		HealthChecks: []string{"global/healthChecks/hc"},
		Backends: []*compute.Backend{{Group: "projects/" + testProject + "/zones/us-central1-a/networkEndpointGroups/terraform-neg",
			BalancingMode: "RATE", MaxRatePerEndpoint: 1, CapacityScaler: 0, ForceSendFields: []string{"CapacityScaler"}}}}); err != nil {
		t.Fatal(err)
	}
	h.gce.ChangeAfterNextGet(testProject, "", "web", func(bs *compute.BackendService) { bs.Description = "changed meanwhile" })

	rate := mpv1alpha1.BackendServiceMembership{Name: "web", BalancingMode: mpv1alpha1.BalancingModeRate, MaxRatePerEndpoint: 100, CapacityScaler: "0.5"}
	tr := joining(translation("web", map[string]int{"us-central1-a": 2, "us-central1-b": 1}, true), rate)
	if _, err := h.client.MultiprojectV1alpha1().Translations(testNamespace).Create(context.Background(), tr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := h.waitSynced("web", metav1.ConditionTrue)

	backends, bs := h.backendGroups("web")
	if n := h.gce.Errors(testProject)[fakegce.MethodBackendServicePatch]; n != 1 {
		t.Errorf("%d patches failed, want 1: the write after the injected change must meet a stale fingerprint", n)
	}
	if bs.Description != "changed meanwhile" {
		t.Errorf("description = %q: the change made between the pusher's read and write is lost", bs.Description)
	}
	if b := backends["us-central1-a/terraform-neg"]; b == nil || b.CapacityScaler != 0 || b.MaxRatePerEndpoint != 1 {
		t.Errorf("someone else's backend = %+v, want it as it was (capacityScaler 0, rate 1)", b)
	}
	for _, zone := range []string{"us-central1-a", "us-central1-b"} {
		b := backends[zone+"/k8s1-web"]
		if b == nil || b.BalancingMode != "RATE" || b.MaxRatePerEndpoint != 100 || b.CapacityScaler != 0.5 {
			t.Errorf("backend of NEG in %s = %+v, want RATE 100 per endpoint at 0.5", zone, b)
		}
	}
	for _, r := range got.Status.Resources {
		if !slices.Equal(r.BackendServices, []string{bs.SelfLink}) {
			t.Errorf("status of %s: backendServices = %v, want [%s]", r.Zone, r.BackendServices, bs.SelfLink)
		}
	}
	if n, _ := metrics.NEGBackendServiceMemberships.Value("tenant-a"); n != 2 {
		t.Errorf("neg_backend_service_memberships = %v, want 2", n)
	}

	// A sync that changes nothing reads the backend service and writes nothing.
	patches, gets := h.gce.Calls(testProject)[fakegce.MethodBackendServicePatch], h.gce.Calls(testProject)[fakegce.MethodBackendServiceGet]
	tr = h.get("web")
	tr.Generation++
	if _, err := h.client.MultiprojectV1alpha1().Translations(testNamespace).Update(context.Background(), tr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitSynced("web", metav1.ConditionTrue)
	if calls := h.gce.Calls(testProject); calls[fakegce.MethodBackendServicePatch] != patches || calls[fakegce.MethodBackendServiceGet] <= gets {
		t.Errorf("a sync with nothing to change: %d patches (was %d), %d gets (was %d); want no patch and a read",
			calls[fakegce.MethodBackendServicePatch], patches, calls[fakegce.MethodBackendServiceGet], gets)
	}

	// The spec stops naming the service: the NEGs leave it, and stay.
	tr = h.get("web")
	tr = joining(tr)
	tr.Generation++
	if _, err := h.client.MultiprojectV1alpha1().Translations(testNamespace).Update(context.Background(), tr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got = h.waitSynced("web", metav1.ConditionTrue)
	backends, _ = h.backendGroups("web")
	if len(backends) != 1 || backends["us-central1-a/terraform-neg"] == nil {
		t.Errorf("backends after the spec dropped the service = %v, want only terraform-neg", backends)
	}
	for _, r := range got.Status.Resources {
		if len(r.BackendServices) != 0 {
			t.Errorf("status of %s: backendServices = %v, want none", r.Zone, r.BackendServices)
		}
	}

	// Named again, then deleted: the NEGs leave the service before they go.
	tr = joining(h.get("web"), rate)
	tr.Generation++
	if _, err := h.client.MultiprojectV1alpha1().Translations(testNamespace).Update(context.Background(), tr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitFor("both NEGs back in the service", func() bool {
		backends, _ := h.backendGroups("web")
		return len(backends) == 3
	})
	h.waitSynced("web", metav1.ConditionTrue)
	h.markDeleted("web")
	h.waitReleased("web")
	backends, _ = h.backendGroups("web")
	if len(backends) != 1 || backends["us-central1-a/terraform-neg"] == nil {
		t.Errorf("backends after the Translation went = %v, want only terraform-neg", backends)
	}
	for _, zone := range []string{"us-central1-a", "us-central1-b"} {
		if _, ok := h.gce.NEG(testProject, zone, "k8s1-web"); ok {
			t.Errorf("NEG in %s still exists: it should have left the service and been deleted", zone)
		}
	}
	if errs := h.gce.Errors(testProject)[fakegce.MethodDelete]; errs != 0 {
		t.Errorf("%d NEG deletes failed: the NEGs must leave the backend service before they are deleted", errs)
	}
	h.waitFor("the memberships metric back to 0", func() bool {
		n, _ := metrics.NEGBackendServiceMemberships.Value("tenant-a")
		return n == 0
	})
}

// TestARefusedLeaveDoesNotHoldADeletion: when GCE refuses to take the NEGs out of their backend service (a missing
// permission), a live Translation reports it, and a deleted one is not held by it: the delete is tried, GCE's in-use
// answer hands the NEGs over to the sweep, and the finalizer goes.
func TestARefusedLeaveDoesNotHoldADeletion(t *testing.T) {
	h := newHarness(t, nil)
	h.withSweeps(false)
	if _, err := h.gce.InsertBackendService(testProject, "", &compute.BackendService{Name: "web", HealthChecks: []string{"hc"}}); err != nil {
		t.Fatal(err)
	}
	rate := mpv1alpha1.BackendServiceMembership{Name: "web", BalancingMode: mpv1alpha1.BalancingModeRate, MaxRatePerEndpoint: 10}
	tr := joining(sweptTranslation(map[string]int{"us-central1-a": 1}), rate)
	if _, err := h.client.MultiprojectV1alpha1().Translations(testNamespace).Create(context.Background(), tr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitSynced("web", metav1.ConditionTrue)
	h.gce.InjectFault(testProject, fakegce.MethodBackendServicePatch, fakegce.Fault{Code: 403})

	h.markDeleted("web")
	h.waitReleased("web")
	if _, ok := h.gce.NEG(testProject, "us-central1-a", "k8s1-web"); !ok {
		t.Fatal("the NEG is gone: GCE would have refused its delete while the backend service uses it")
	}
	if eps := h.endpointCount("us-central1-a", "k8s1-web"); eps != 0 {
		t.Errorf("the NEG handed over to the sweep has %d endpoints, want it emptied", eps)
	}
	if h.events.Count(corev1.EventTypeWarning, ReasonBackendServiceFailed) == 0 {
		t.Error("no Warning NEGBackendServiceFailed for the refused leave")
	}
}

// A NEG handed to the sweep while a backend service the tenant allows still used it (its Translation released
// after GCE refused the leave) is taken out of that backend service by the sweep and then deleted: the record of
// its membership went with the Translation, and the tenant's allowed list names every backend service the manager
// could have made it join. Someone else's backend in the same service stays.
func TestTheSweepTakesAnUnclaimedNEGOutOfTheAllowedBackendServices(t *testing.T) {
	gcp := &mpv1alpha1.GCPConfig{ProjectID: testProject, Network: "default",
		BackendServices: []mpv1alpha1.AllowedBackendService{{Name: "web"}, {Name: "other", Region: "us-central1"}}}
	h := newHarness(t, gcp)
	h.withSweeps(false)
	if _, err := h.gce.SeedNEG(testProject, "us-central1-a", &compute.NetworkEndpointGroup{Name: "theirs", Network: "default", NetworkEndpointType: "GCE_VM_IP_PORT"}); err != nil {
		t.Fatal(err)
	}
	foreign := &compute.Backend{Group: "projects/" + testProject + "/zones/us-central1-a/networkEndpointGroups/theirs", BalancingMode: "RATE", MaxRatePerEndpoint: 5}
	if _, err := h.gce.InsertBackendService(testProject, "", &compute.BackendService{Name: "web", HealthChecks: []string{"hc"}, Backends: []*compute.Backend{foreign}}); err != nil {
		t.Fatal(err)
	}
	rate := mpv1alpha1.BackendServiceMembership{Name: "web", BalancingMode: mpv1alpha1.BalancingModeRate, MaxRatePerEndpoint: 10}
	tr := joining(sweptTranslation(map[string]int{"us-central1-a": 1}), rate)
	if _, err := h.client.MultiprojectV1alpha1().Translations(testNamespace).Create(context.Background(), tr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitSynced("web", metav1.ConditionTrue)
	if groups, _ := h.backendGroups("web"); groups["us-central1-a/k8s1-web"] == nil {
		t.Fatalf("the NEG did not join backend service web: %v", groups)
	}
	h.gce.InjectFault(testProject, fakegce.MethodBackendServicePatch, fakegce.Fault{Code: 403})
	h.markDeleted("web")
	h.waitReleased("web")
	if _, ok := h.gce.NEG(testProject, "us-central1-a", "k8s1-web"); !ok {
		t.Fatal("the NEG is gone before the sweep: GCE would have refused its delete while the backend service uses it")
	}

	h.waitFor("the sweep to find the NEG still in use", func() bool { return h.pusher.awaiting.count() == 1 })
	h.gce.ClearFaults(testProject)
	h.waitFor("the sweep to delete the NEG", func() bool {
		_, ok := h.gce.NEG(testProject, "us-central1-a", "k8s1-web")
		return !ok
	})
	groups, _ := h.backendGroups("web")
	if groups["us-central1-a/k8s1-web"] != nil {
		t.Error("the swept NEG is still a backend of backend service web")
	}
	if b := groups["us-central1-a/theirs"]; b == nil || b.MaxRatePerEndpoint != 5 {
		t.Errorf("someone else's backend changed: %+v", b)
	}
}
