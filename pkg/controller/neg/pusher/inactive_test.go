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
)

// TestAnEmptiedNEGIsInactiveAndKeepsItsID: a NEG the spec keeps without endpoints (its zone lost its Nodes, or it
// was fixed ahead) is emptied, not deleted, and its status says Inactive with its GCE id and selfLink; when the spec
// lists endpoints again the same NEG (same id) fills and is Active.
func TestAnEmptiedNEGIsInactiveAndKeepsItsID(t *testing.T) {
	tr := translation("web", map[string]int{"us-central1-a": 3, "us-central1-b": 2, "us-central1-c": 0}, true)
	h := newHarness(t, nil, tr)
	tr = h.waitSynced("web", metav1.ConditionTrue)
	ids := map[string]string{}
	for _, zone := range []string{"us-central1-a", "us-central1-b", "us-central1-c"} {
		neg, ok := h.gce.NEG(testProject, zone, "k8s1-web")
		if !ok {
			t.Fatalf("no NEG in %s: a zone fixed ahead gets its NEG before any endpoint", zone)
		}
		ids[zone] = strconv.FormatUint(neg.Id, 10)
	}
	check := func(what string, tr *mpv1alpha1.Translation, want map[string]mpv1alpha1.BackendResourceLifecycle) {
		t.Helper()
		if len(tr.Status.Resources) != len(want) {
			t.Fatalf("%s: status.resources = %+v, want %d entries", what, tr.Status.Resources, len(want))
		}
		for _, r := range tr.Status.Resources {
			neg, ok := h.gce.NEG(testProject, r.Zone, r.Name)
			if !ok || r.ID != ids[r.Zone] || r.ID != strconv.FormatUint(neg.Id, 10) || r.SelfLink != neg.SelfLink || r.Lifecycle != want[r.Zone] {
				t.Errorf("%s: zone %s status = id %s, selfLink %s, %s; want the first NEG's id %s, GCE's selfLink %s, %s",
					what, r.Zone, r.ID, r.SelfLink, r.Lifecycle, ids[r.Zone], neg.SelfLink, want[r.Zone])
			}
		}
	}
	active, inactive := mpv1alpha1.BackendResourceLifecycleActive, mpv1alpha1.BackendResourceLifecycleInactive
	check("created", tr, map[string]mpv1alpha1.BackendResourceLifecycle{"us-central1-a": active, "us-central1-b": active, "us-central1-c": inactive})
	if s := tr.Status; s.ActiveResources != 2 || s.InactiveResources != 1 || s.EndpointCount != 5 {
		t.Errorf("active, inactive, endpoints = %d, %d, %d; want 2, 1, 5", s.ActiveResources, s.InactiveResources, s.EndpointCount)
	}

	update := func(change func(*mpv1alpha1.Translation)) *mpv1alpha1.Translation {
		t.Helper()
		tr := h.get("web")
		change(tr)
		tr.Generation++
		if _, err := h.client.MultiprojectV1alpha1().Translations(testNamespace).Update(context.Background(), tr, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		h.waitFor("the pusher to sync the new generation", func() bool {
			got := h.get("web")
			c := findCondition(got)
			return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == tr.Generation
		})
		return h.get("web")
	}
	// Zone b loses its Nodes: the translator keeps its NEG without endpoints.
	tr = update(func(tr *mpv1alpha1.Translation) { tr.Spec.Resources[1] = negResource("web", "us-central1-b", 0) })
	if n := h.endpointCount("us-central1-b", "k8s1-web"); n != 0 {
		t.Errorf("zone b's NEG has %d endpoints, want it emptied", n)
	}
	check("emptied", tr, map[string]mpv1alpha1.BackendResourceLifecycle{"us-central1-a": active, "us-central1-b": inactive, "us-central1-c": inactive})
	// Nodes return to b: the same NEG fills again.
	tr = update(func(tr *mpv1alpha1.Translation) { tr.Spec.Resources[1] = negResource("web", "us-central1-b", 4) })
	if n := h.endpointCount("us-central1-b", "k8s1-web"); n != 4 {
		t.Errorf("zone b's NEG has %d endpoints, want 4", n)
	}
	check("filled again", tr, map[string]mpv1alpha1.BackendResourceLifecycle{"us-central1-a": active, "us-central1-b": active, "us-central1-c": inactive})
}

func TestSummarize(t *testing.T) {
	tr := translation("web", map[string]int{"us-central1-a": 3, "us-central1-b": 0}, true)
	entry := func(zone string, state mpv1alpha1.BackendResourceState, n int32) mpv1alpha1.BackendResourceStatus {
		return mpv1alpha1.BackendResourceStatus{Kind: mpv1alpha1.BackendResourceKindNetworkEndpointGroup, Name: "k8s1-web",
			Zone: zone, Project: testProject, State: state, EndpointCount: n}
	}
	status := mpv1alpha1.TranslationStatus{Resources: []mpv1alpha1.BackendResourceStatus{
		entry("us-central1-a", mpv1alpha1.BackendResourceStateReady, 3),
		entry("us-central1-b", mpv1alpha1.BackendResourceStateReady, 0),
		entry("us-central1-c", mpv1alpha1.BackendResourceStateDeleting, 1), // removed from the spec
	}}
	summarize(tr, &status, testProject)
	want := []mpv1alpha1.BackendResourceLifecycle{mpv1alpha1.BackendResourceLifecycleActive, mpv1alpha1.BackendResourceLifecycleInactive,
		mpv1alpha1.BackendResourceLifecycleAwaitingDeletion}
	for i, r := range status.Resources {
		if r.Lifecycle != want[i] {
			t.Errorf("%s: lifecycle %s, want %s", r.Zone, r.Lifecycle, want[i])
		}
	}
	if status.ActiveResources != 1 || status.InactiveResources != 1 || status.EndpointCount != 4 {
		t.Errorf("active, inactive, endpoints = %d, %d, %d; want 1, 1, 4", status.ActiveResources, status.InactiveResources, status.EndpointCount)
	}

	now := metav1.Now()
	tr.DeletionTimestamp = &now
	summarize(tr, &status, testProject)
	for _, r := range status.Resources {
		if r.Lifecycle != mpv1alpha1.BackendResourceLifecycleAwaitingDeletion {
			t.Errorf("Translation being deleted: %s is %s, want AwaitingDeletion", r.Zone, r.Lifecycle)
		}
	}
	if status.ActiveResources != 0 || status.InactiveResources != 0 {
		t.Errorf("Translation being deleted: active, inactive = %d, %d; want 0, 0", status.ActiveResources, status.InactiveResources)
	}
}
