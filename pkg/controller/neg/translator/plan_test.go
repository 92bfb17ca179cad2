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
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
)

// TestPlanTranslations pins the decision of a sync, one row per case the translator tells apart: what it creates,
// patches, updates and deletes, the Events each write records, what it keeps or waits for.
func TestPlanTranslations(t *testing.T) {
	const uid, former = "uid-web", "uid-former"
	web := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "web", UID: uid}}
	generated := negName(translationVersion, testIdentity, testTenant, testNamespace, "web", 80)
	want := func() *mpv1alpha1.Translation {
		return translationOf("neg-v1-web-80", "web", uid, testTenant, true, generated)
	}
	withEndpoint := func(tr *mpv1alpha1.Translation) *mpv1alpha1.Translation {
		tr.Spec.Resources[0].NetworkEndpointGroup.Endpoints = []mpv1alpha1.NetworkEndpoint{{Instance: "n1", IPAddress: "10.0.0.1", Port: 8080}}
		return tr
	}
	deleting := func(tr *mpv1alpha1.Translation) *mpv1alpha1.Translation {
		tr.DeletionTimestamp = &metav1.Time{}
		return tr
	}
	synced := func(tr *mpv1alpha1.Translation) *mpv1alpha1.Translation {
		tr.Status.Conditions = []metav1.Condition{{Type: mpv1alpha1.TranslationConditionSynced, Status: metav1.ConditionTrue}}
		return tr
	}
	withoutOwnerUIDLabel := func(tr *mpv1alpha1.Translation) *mpv1alpha1.Translation {
		delete(tr.Labels, mpv1alpha1.TranslationOwnerUIDLabelKey)
		return tr
	}
	v0 := func(neg string) *mpv1alpha1.Translation {
		return translationOf("neg-v0-web-80", "web", uid, testTenant, true, neg)
	}
	custom := func(tr *mpv1alpha1.Translation) *mpv1alpha1.Translation {
		for i := range tr.Spec.Resources {
			tr.Spec.Resources[i].Name = "shop-web"
		}
		tr.Annotations = map[string]string{mpv1alpha1.TranslationNEGProjectAnnotationKey: testProject}
		return tr
	}
	inProject := func(project string, tr *mpv1alpha1.Translation) *mpv1alpha1.Translation {
		tr.Annotations[mpv1alpha1.TranslationNEGProjectAnnotationKey] = project
		return tr
	}
	// olderBuilds is a custom-named Translation of a build before projects were recorded on it, whose pusher
	// declared its NEGs in project.
	olderBuilds := func(project string, tr *mpv1alpha1.Translation) *mpv1alpha1.Translation {
		tr.Annotations = nil
		for _, r := range tr.Spec.Resources {
			tr.Status.Resources = append(tr.Status.Resources, mpv1alpha1.BackendResourceStatus{Kind: r.Kind, Name: r.Name,
				Zone: r.Zone, Project: project, State: mpv1alpha1.BackendResourceStateReady})
		}
		return tr
	}
	for _, tc := range []struct {
		name    string
		desired []*mpv1alpha1.Translation
		custom  map[string]string
		cached  []*mpv1alpha1.Translation
		asked   []types.UID
		want    []string
	}{
		{name: "converged: nothing to do", desired: []*mpv1alpha1.Translation{want()}, cached: []*mpv1alpha1.Translation{want()}},
		{name: "a new port is created", desired: []*mpv1alpha1.Translation{want()},
			want: []string{"create neg-v1-web-80, Event TranslationCreated"}},
		{name: "an endpoint change patches the spec", desired: []*mpv1alpha1.Translation{withEndpoint(want())}, cached: []*mpv1alpha1.Translation{want()},
			want: []string{"patch neg-v1-web-80"}},
		{name: "a label missing is an update", desired: []*mpv1alpha1.Translation{want()}, cached: []*mpv1alpha1.Translation{withoutOwnerUIDLabel(want())},
			want: []string{"update neg-v1-web-80"}},
		{name: "a port no longer exposed is deleted", cached: []*mpv1alpha1.Translation{want()},
			want: []string{"delete neg-v1-web-80, Event TranslationDeleted"}},
		{name: "a deletion already asked is not asked again", cached: []*mpv1alpha1.Translation{want()}, asked: []types.UID{want().UID}},
		{name: "an own Translation labeled for another tenant is deleted and waited for", desired: []*mpv1alpha1.Translation{want()},
			cached: []*mpv1alpha1.Translation{translationOf("neg-v1-web-80", "web", uid, "tenant-b", true, generated)},
			want:   []string{"delete neg-v1-web-80, Event TranslationDeleted", "waiting"}},
		{name: "an own Translation being deleted is waited for", desired: []*mpv1alpha1.Translation{want()}, cached: []*mpv1alpha1.Translation{deleting(want())},
			want: []string{"waiting"}},
		{name: "a predecessor is deleted and its successor created once that is asked", desired: []*mpv1alpha1.Translation{want()},
			cached: []*mpv1alpha1.Translation{translationOf("neg-v1-web-80", "web", former, testTenant, false, generated)},
			want:   []string{"delete neg-v1-web-80 (predecessor), Event StaleTranslationDeleted", "create neg-v1-web-80 after neg-v1-web-80, Event TranslationCreated"}},
		{name: "another tenant's predecessor holding a wanted name is deleted", desired: []*mpv1alpha1.Translation{want()},
			cached: []*mpv1alpha1.Translation{translationOf("neg-v1-web-80", "web", former, "tenant-b", false, generated)},
			want:   []string{"delete neg-v1-web-80 (predecessor), Event StaleTranslationDeleted", "create neg-v1-web-80 after neg-v1-web-80, Event TranslationCreated"}},
		{name: "another tenant's Translation of the name that holds no wanted name is left alone", desired: []*mpv1alpha1.Translation{want()},
			cached: []*mpv1alpha1.Translation{translationOf("neg-v1-web-443", "web", former, "tenant-b", false, "other")},
			want:   []string{"create neg-v1-web-80, Event TranslationCreated"}},
		{name: "a predecessor being deleted holds the create back", desired: []*mpv1alpha1.Translation{want()},
			cached: []*mpv1alpha1.Translation{deleting(translationOf("neg-v1-web-80", "web", former, testTenant, false, generated))},
			want:   []string{"blocked neg-v1-web-80 by neg-v1-web-80", "waiting"}},
		{name: "a stale version waits for its successor to be synced", desired: []*mpv1alpha1.Translation{want()},
			cached: []*mpv1alpha1.Translation{v0("mp0-old"), want()}, want: []string{"keep neg-v0-web-80 for neg-v1-web-80"}},
		{name: "a stale version waits for its successor to be created", desired: []*mpv1alpha1.Translation{want()}, cached: []*mpv1alpha1.Translation{v0("mp0-old")},
			want: []string{"create neg-v1-web-80, Event TranslationCreated", "keep neg-v0-web-80 for neg-v1-web-80"}},
		{name: "a stale version goes once its successor is synced", desired: []*mpv1alpha1.Translation{want()},
			cached: []*mpv1alpha1.Translation{v0("mp0-old"), synced(want())}, want: []string{"delete neg-v0-web-80, Event TranslationDeleted"}},
		{name: "a stale version of a port no longer exposed goes at once", cached: []*mpv1alpha1.Translation{v0("mp0-old")},
			want: []string{"delete neg-v0-web-80, Event TranslationDeleted"}},
		{name: "a stale version sharing a custom NEG goes before its successor declares it", desired: []*mpv1alpha1.Translation{custom(want())},
			custom: map[string]string{"neg-v1-web-80": "shop-web"}, cached: []*mpv1alpha1.Translation{v0("shop-web")},
			want: []string{"delete neg-v0-web-80, Event TranslationDeleted", "create neg-v1-web-80 reserving shop-web after neg-v0-web-80, Event TranslationCreated"}},
		{name: "a custom name declared already is not reserved again", desired: []*mpv1alpha1.Translation{withEndpoint(custom(want()))},
			custom: map[string]string{"neg-v1-web-80": "shop-web"}, cached: []*mpv1alpha1.Translation{custom(want())}, want: []string{"patch neg-v1-web-80"}},
		{name: "a custom name new to the Translation is reserved", desired: []*mpv1alpha1.Translation{custom(want())},
			custom: map[string]string{"neg-v1-web-80": "shop-web"}, cached: []*mpv1alpha1.Translation{want()}, want: []string{"update neg-v1-web-80 reserving shop-web"}},
		{name: "a custom name declared in another project (the projectID changed) is reserved in the tenant's",
			desired: []*mpv1alpha1.Translation{custom(want())}, custom: map[string]string{"neg-v1-web-80": "shop-web"},
			cached: []*mpv1alpha1.Translation{inProject("old-project", custom(want()))}, want: []string{"update neg-v1-web-80 reserving shop-web"}},
		{name: "an older build's custom name, pushed in the tenant's project, gets its project recorded without a reservation",
			desired: []*mpv1alpha1.Translation{custom(want())}, custom: map[string]string{"neg-v1-web-80": "shop-web"},
			cached: []*mpv1alpha1.Translation{olderBuilds(testProject, custom(want()))}, want: []string{"update neg-v1-web-80"}},
		{name: "an older build's custom name, pushed in another project, is reserved in the tenant's",
			desired: []*mpv1alpha1.Translation{custom(want())}, custom: map[string]string{"neg-v1-web-80": "shop-web"},
			cached: []*mpv1alpha1.Translation{olderBuilds("old-project", custom(want()))}, want: []string{"update neg-v1-web-80 reserving shop-web"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := planInput{service: web, tenant: testTenant, labelKey: testLabelKey, project: testProject, desired: tc.desired,
				custom: tc.custom, cached: tc.cached}
			for _, uid := range tc.asked {
				if in.asked == nil {
					in.asked = map[types.UID]bool{}
				}
				in.asked[uid] = true
			}
			if got := describePlan(planTranslations(in)); !slices.Equal(got, tc.want) {
				t.Errorf("plan:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}

// describePlan is a plan in words, one line per step, for comparison.
func describePlan(p plan) []string {
	var out []string
	for _, d := range p.deletes {
		line := "delete " + d.translation.Name
		if d.predecessor {
			line += " (predecessor)"
		}
		out = append(out, line+", Event "+d.event.reason)
	}
	for _, w := range p.writes {
		line := []string{"create", "patch", "update"}[w.kind] + " " + w.want.Name
		if w.reserve != "" {
			line += " reserving " + w.reserve
		}
		for _, tr := range w.after {
			line += " after " + tr.Name
		}
		if w.event != nil {
			line += ", Event " + w.event.reason
		}
		out = append(out, line)
	}
	for _, k := range p.kept {
		out = append(out, fmt.Sprintf("keep %s for %s", k.translation, k.successor))
	}
	for _, b := range p.blocked {
		out = append(out, fmt.Sprintf("blocked %s by %s", b.translation, b.leaving))
	}
	if p.waiting {
		out = append(out, "waiting")
	}
	return out
}
