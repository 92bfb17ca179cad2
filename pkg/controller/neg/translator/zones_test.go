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
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

const (
	zoneD = "europe-west1-d"
	zoneE = "europe-west1-e"
)

func TestDecideZones(t *testing.T) {
	for _, tc := range []struct {
		name                                  string
		nodes, fixed, declared, declaredFixed []string
		want                                  []string
	}{
		{name: "the zones of the Nodes", nodes: []string{zoneC, zoneB}, want: []string{zoneB, zoneC}},
		{name: "fixed ahead beside the Nodes' zones", nodes: []string{zoneB}, fixed: []string{zoneD, zoneB}, want: []string{zoneB, zoneD}},
		{name: "fixed ahead without any Node", fixed: []string{zoneD}, want: []string{zoneD}},
		{name: "a zone that lost its Nodes is kept", nodes: []string{zoneB}, declared: []string{zoneB, zoneC},
			want: []string{zoneB, zoneC}},
		{name: "a fixed zone off the list goes", nodes: []string{zoneB}, declared: []string{zoneB, zoneD},
			declaredFixed: []string{zoneD}, want: []string{zoneB}},
		{name: "a fixed zone off the list stays while it has Nodes", nodes: []string{zoneB, zoneD},
			declared: []string{zoneB, zoneD}, declaredFixed: []string{zoneD}, want: []string{zoneB, zoneD}},
		{name: "a fixed zone still listed stays", nodes: []string{zoneB}, fixed: []string{zoneD}, declared: []string{zoneB, zoneD},
			declaredFixed: []string{zoneD}, want: []string{zoneB, zoneD}},
		{name: "a zone that lost its Nodes, then was fixed and taken off the list, goes", declared: []string{zoneC},
			declaredFixed: []string{zoneC}, want: []string{}},
		{name: "nothing", want: []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := decideZones(tc.nodes, tc.fixed, tc.declared, tc.declaredFixed)
			if got == nil {
				got = []string{}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("decideZones = %v, want %v", got, tc.want)
			}
		})
	}
}

// zonesOf returns the zones of a Translation's NEGs and the endpoint count of each.
func zonesOf(tr *mpv1alpha1.Translation) map[string]int {
	out := map[string]int{}
	for _, r := range tr.Spec.Resources {
		out[r.Zone] = len(r.NetworkEndpointGroup.Endpoints)
	}
	return out
}

func TestFixedZonesAreDeclaredEmptyBesideTheNodesZones(t *testing.T) {
	for _, tc := range []struct {
		name, zones string
		tenant      []mpv1alpha1.GCEZone
		want        map[string]int
		fixed       string
		warning     string
	}{
		{name: "the annotation's zones", zones: `["europe-west1-d","europe-west1-b"]`,
			want: map[string]int{zoneB: 3, zoneC: 2, zoneD: 0}, fixed: zoneB + "," + zoneD},
		{name: "an invalid zone is ignored with a Warning", zones: `["europe-west1-d","Moon-1"]`,
			want: map[string]int{zoneB: 3, zoneC: 2, zoneD: 0}, fixed: zoneD, warning: `"Moon-1"`},
		{name: "the tenant's zones without zones in the annotation", tenant: []mpv1alpha1.GCEZone{zoneE},
			want: map[string]int{zoneB: 3, zoneC: 2, zoneE: 0}, fixed: zoneE},
		{name: "an empty list fixes none", zones: `[]`, tenant: []mpv1alpha1.GCEZone{zoneE},
			want: map[string]int{zoneB: 3, zoneC: 2}},
		{name: "* is the tenant's zones", zones: `["*","europe-west1-d"]`, tenant: []mpv1alpha1.GCEZone{zoneE},
			want: map[string]int{zoneB: 3, zoneC: 2, zoneD: 0, zoneE: 0}, fixed: zoneD + "," + zoneE},
		{name: "* without the tenant's zones", zones: `["*"]`, want: map[string]int{zoneB: 3, zoneC: 2},
			warning: "lists none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := webObjects()
			if tc.zones != "" {
				objs[4] = service("web", `{"exposed_ports":{"80":{}},"zones":`+tc.zones+`}`,
					servicePort("http", 80, "web"), servicePort("https", 443, "8443"))
			}
			h := newHarness(t, objs...)
			h.translator.gcp.Zones = tc.tenant
			h.sync("web")

			tr := h.translations()["neg-v1-web-80"]
			if tr == nil {
				t.Fatal("no Translation neg-v1-web-80")
			}
			if got := zonesOf(tr); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("zones and endpoints = %v, want %v", got, tc.want)
			}
			if got := tr.Annotations[mpv1alpha1.TranslationNEGFixedZonesAnnotationKey]; got != tc.fixed {
				t.Errorf("fixed-zones annotation = %q, want %q", got, tc.fixed)
			}
			warnings := h.events.With("Warning " + ReasonInvalidZone)
			if tc.warning == "" && len(warnings) != 0 || tc.warning != "" && (len(warnings) != 1 || !strings.Contains(warnings[0], tc.warning)) {
				t.Errorf("%s Warnings = %v, want one containing %q (none if empty)", ReasonInvalidZone, warnings, tc.warning)
			}
			status := h.service("web").Annotations[negapi.StatusAnnotationKey]
			for zone := range tc.want {
				if !strings.Contains(status, zone) {
					t.Errorf("neg-status %s does not name zone %s", status, zone)
				}
			}
		})
	}
}

// TestAZonesNEGIsKeptUntilItsZoneLeavesTheFixedList walks one Service port through the keep/delete decision: the
// zone c loses its only Node and keeps its NEG, emptied, then fills again when a Node returns; a zone fixed ahead
// goes when it leaves the list, while c, which only lost its Nodes, stays.
func TestAZonesNEGIsKeptUntilItsZoneLeavesTheFixedList(t *testing.T) {
	h := newHarness(t, webObjects()...)
	h.sync("web")
	if got := zonesOf(h.translations()["neg-v1-web-80"]); !reflect.DeepEqual(got, map[string]int{zoneB: 3, zoneC: 2}) {
		t.Fatalf("first sync: zones = %v", got)
	}

	n3, err := h.kube.CoreV1().Nodes().Get(h.ctx, "n3", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.kube.CoreV1().Nodes().Delete(h.ctx, "n3", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.translator.onNodeDelete(n3)
	h.sync("web")
	if got := zonesOf(h.translations()["neg-v1-web-80"]); !reflect.DeepEqual(got, map[string]int{zoneB: 3, zoneC: 0}) {
		t.Errorf("zone c lost its Node: zones = %v, want c kept and emptied", got)
	}

	n3.ResourceVersion = ""
	if _, err := h.kube.CoreV1().Nodes().Create(h.ctx, n3, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.translator.onNodeAdd(n3, false)
	h.sync("web")
	if got := zonesOf(h.translations()["neg-v1-web-80"]); !reflect.DeepEqual(got, map[string]int{zoneB: 3, zoneC: 2}) {
		t.Errorf("a Node is back in zone c: zones = %v, want c filled again", got)
	}

	// Zone d fixed ahead, c loses its Node again, then d leaves the list: d goes, c stays.
	h.setAnnotation("web", `{"exposed_ports":{"80":{}},"zones":["europe-west1-d"]}`)
	h.sync("web")
	if err := h.kube.CoreV1().Nodes().Delete(h.ctx, "n3", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.translator.onNodeDelete(n3)
	h.sync("web")
	if got := zonesOf(h.translations()["neg-v1-web-80"]); !reflect.DeepEqual(got, map[string]int{zoneB: 3, zoneC: 0, zoneD: 0}) {
		t.Errorf("d fixed ahead, c without Nodes: zones = %v", got)
	}
	h.setAnnotation("web", `{"exposed_ports":{"80":{}}}`)
	h.sync("web")
	tr := h.translations()["neg-v1-web-80"]
	if got := zonesOf(tr); !reflect.DeepEqual(got, map[string]int{zoneB: 3, zoneC: 0}) {
		t.Errorf("d left the list: zones = %v, want b and c (kept), not d", got)
	}
	if got, ok := tr.Annotations[mpv1alpha1.TranslationNEGFixedZonesAnnotationKey]; ok {
		t.Errorf("fixed-zones annotation = %q after the list went, want none", got)
	}

	// The port goes: its Translation, and so every NEG of it, kept ones included, goes.
	h.setAnnotation("web", `{"exposed_ports":{}}`)
	h.sync("web")
	if got := h.translations()["neg-v1-web-80"]; got != nil && got.DeletionTimestamp == nil {
		t.Errorf("the port is no longer exposed and its Translation is still there: %v", zonesOf(got))
	}
}
