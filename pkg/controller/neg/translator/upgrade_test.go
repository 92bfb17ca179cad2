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
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

// The naming contract across builds (docs/upgrade.md): a NEG recorded in a Service's own Translation keeps its name
// and marker in every build, and the version path moves only forward.

// withMarker sets the marker of every NEG of the Translation.
func withMarker(tr *mpv1alpha1.Translation, marker string) *mpv1alpha1.Translation {
	for i := range tr.Spec.Resources {
		tr.Spec.Resources[i].Description = marker
	}
	return tr
}

// recordedAsGenerated records the Translation's NEG name as generated, as the build that made it does.
func recordedAsGenerated(tr *mpv1alpha1.Translation, name string) *mpv1alpha1.Translation {
	tr.Annotations = map[string]string{mpv1alpha1.TranslationGeneratedNEGNameAnnotationKey: name}
	return tr
}

// TestAGeneratedNEGNameAnotherBuildRecordedIsKept: a Translation whose generated NEG name this build would not
// compute (another build's layout of the name), marked for this cluster, tenant and Service port with a field this
// build does not know, keeps its name and marker through a sync that changes its endpoints, and the neg-status
// names it.
func TestAGeneratedNEGNameAnotherBuildRecordedIsKept(t *testing.T) {
	const recorded = "mp1-other-layout-shop-web-80-0a1b2c3d4e"
	tr := recordedAsGenerated(translationOf(translationName("web", 80), "web", "uid-web", testTenant, true, recorded), recorded)
	marker := strings.Replace(negDescription(testIdentity, testTenant, testNamespace, "web", "uid-web", 80),
		`"managed-by"`, `"layout":"2","managed-by"`, 1)
	withMarker(tr, marker)
	h := newHarness(t, append(webObjects(), tr)...)
	h.sync("web")
	got := h.translations()[translationName("web", 80)]
	if got == nil || endpointCount(got) == 0 {
		t.Fatalf("the Translation after the sync = %+v, want its endpoints written", got)
	}
	for _, r := range got.Spec.Resources {
		if r.Name != recorded || r.Description != marker {
			t.Errorf("the Translation declares %s in %s marked %s; want the recorded %s marked %s", r.Name, r.Zone, r.Description, recorded, marker)
		}
	}
	var status negStatus
	if err := json.Unmarshal([]byte(h.service("web").Annotations[negapi.StatusAnnotationKey]), &status); err != nil || status.NetworkEndpointGroups["80"] != recorded {
		t.Errorf("neg-status names %v (%v); want the recorded NEG %s", status.NetworkEndpointGroups, err, recorded)
	}
}

// TestARecordedNEGIsKeptOnlyForItsOwnServicePort: which recorded names and markers a sync keeps, and which it
// replaces with its own choice.
func TestARecordedNEGIsKeptOnlyForItsOwnServicePort(t *testing.T) {
	const other = "mp1-other-layout-shop-web-80-0a1b2c3d4e"
	own := negName(translationVersion, testIdentity, testTenant, testNamespace, "web", 80)
	ownMarker := negDescription(testIdentity, testTenant, testNamespace, "web", "uid-web", 80)
	legacyName := negName(translationVersion, testIdentity.legacy(), testTenant, testNamespace, "web", 80)
	legacyMarker := negDescription(testIdentity.legacy(), testTenant, testNamespace, "web", "uid-web", 80)
	anotherCluster := clusterIdentity{name: testIdentity.name, uid: "another-cluster-uid"}
	cases := []struct {
		name     string
		recorded *mpv1alpha1.Translation
		custom   string
		want     negID
	}{{
		name:     "nothing recorded: this build's generated name",
		recorded: nil,
		want:     negID{name: own, description: ownMarker, generated: true},
	}, {
		name:     "an older build's Translation without the record, of this build's name",
		recorded: translationOf(translationName("web", 80), "web", "uid-web", testTenant, true, own),
		want:     negID{name: own, description: ownMarker, generated: true},
	}, {
		name:     "an older build's Translation without the record, of the legacy identity",
		recorded: withMarker(translationOf(translationName("web", 80), "web", "uid-web", testTenant, true, legacyName), legacyMarker),
		want:     negID{name: legacyName, description: legacyMarker, generated: true},
	}, {
		name:     "a name without the record that this build does not generate: a former custom name, replaced",
		recorded: translationOf(translationName("web", 80), "web", "uid-web", testTenant, true, other),
		want:     negID{name: own, description: ownMarker, generated: true},
	}, {
		name: "a record naming another name than the NEG's: stale, the name was a custom one",
		recorded: recordedAsGenerated(translationOf(translationName("web", 80), "web", "uid-web", testTenant, true, other),
			"mp1-formerly-generated-0000000000"),
		want: negID{name: own, description: ownMarker, generated: true},
	}, {
		name: "another cluster's marker",
		recorded: recordedAsGenerated(withMarker(translationOf(translationName("web", 80), "web", "uid-web", testTenant, true, other),
			negDescription(anotherCluster, testTenant, testNamespace, "web", "uid-web", 80)), other),
		want: negID{name: own, description: ownMarker, generated: true},
	}, {
		name: "another tenant's marker",
		recorded: recordedAsGenerated(withMarker(translationOf(translationName("web", 80), "web", "uid-web", testTenant, true, other),
			negDescription(testIdentity, "tenant-b", testNamespace, "web", "uid-web", 80)), other),
		want: negID{name: own, description: ownMarker, generated: true},
	}, {
		name: "another Service UID's marker in this Service's Translation",
		recorded: recordedAsGenerated(withMarker(translationOf(translationName("web", 80), "web", "uid-web", testTenant, true, other),
			negDescription(testIdentity, testTenant, testNamespace, "web", "uid-old-web", 80)), other),
		want: negID{name: own, description: ownMarker, generated: true},
	}, {
		name:     "a Translation of another Service UID",
		recorded: recordedAsGenerated(translationOf(translationName("web", 80), "web", "uid-old-web", testTenant, true, other), other),
		want:     negID{name: own, description: ownMarker, generated: true},
	}, {
		name:     "a custom name asked: a recorded generated name gives way",
		recorded: recordedAsGenerated(translationOf(translationName("web", 80), "web", "uid-web", testTenant, true, other), other),
		custom:   "custom-web",
		want:     negID{name: "custom-web", description: ownMarker},
	}, {
		name:     "a custom name asked and recorded with the legacy marker: the marker is kept",
		recorded: withMarker(translationOf(translationName("web", 80), "web", "uid-web", testTenant, true, "custom-web"), legacyMarker),
		custom:   "custom-web",
		want:     negID{name: "custom-web", description: legacyMarker},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, webObjects()...)
			if tc.recorded != nil {
				if err := h.translator.allTranslationIndex.Add(tc.recorded); err != nil {
					t.Fatal(err)
				}
			}
			if got := h.translator.negIdentity(h.service("web"), negapi.ExposedPort{Port: 80, CustomName: tc.custom}); got != tc.want {
				t.Errorf("negIdentity = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestAnOlderBuildsTranslationGetsItsGeneratedNameRecorded: a Translation made before the record existed gets it
// (one update) and keeps its NEG, so a later build that generates names otherwise keeps it too.
func TestAnOlderBuildsTranslationGetsItsGeneratedNameRecorded(t *testing.T) {
	name := negName(translationVersion, testIdentity, testTenant, testNamespace, "web", 80)
	h := newHarness(t, append(webObjects(), translationOf(translationName("web", 80), "web", "uid-web", testTenant, true, name))...)
	h.sync("web")
	got := h.translations()[translationName("web", 80)]
	if got == nil || got.Annotations[mpv1alpha1.TranslationGeneratedNEGNameAnnotationKey] != name || negNameOf(got) != name {
		t.Fatalf("the Translation after the sync = %+v; want NEG %s, recorded as generated", got, name)
	}
	// A user's annotation stays.
	got.Annotations["example.com/note"] = "kept"
	if _, err := h.mp.MultiprojectV1alpha1().Translations(testNamespace).Update(h.ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.writes()
	h.sync("web")
	if w := h.writes(); len(w) != 0 {
		t.Errorf("a second sync wrote %v, want nothing", w)
	}
	if got := h.translations()[translationName("web", 80)]; got.Annotations["example.com/note"] != "kept" {
		t.Errorf("annotations after the sync = %v, want the user's kept", got.Annotations)
	}
}

// TestARollbackLeavesANewerVersionsTranslationAlone: a Translation of a newer version than this build's (a newer
// build made it, then a rollback brought this build back) is neither deleted nor given a successor of this version,
// synced or not; the neg-status names its NEG and a Warning says the NEG no longer follows the endpoints. Once the
// port is no longer exposed, it goes.
func TestARollbackLeavesANewerVersionsTranslationAlone(t *testing.T) {
	const newerNEG = "mp2-e2e-shop-web-80-0a1b2c3d4e"
	newer := translationOf("neg-v2-web-80", "web", "uid-web", testTenant, true, newerNEG)
	h := newHarness(t, append(webObjects(), newer)...)
	for _, synced := range []bool{false, true} {
		if synced {
			h.markSynced("neg-v2-web-80")
		}
		h.sync("web")
		trs := h.translations()
		if len(trs) != 1 || trs["neg-v2-web-80"] == nil {
			t.Fatalf("Translations (newer one synced: %v) = %v; want the newer build's only", synced, keys(trs))
		}
	}
	var status negStatus
	if err := json.Unmarshal([]byte(h.service("web").Annotations[negapi.StatusAnnotationKey]), &status); err != nil || status.NetworkEndpointGroups["80"] != newerNEG {
		t.Errorf("neg-status names %v (%v); want the newer build's NEG %s", status.NetworkEndpointGroups, err, newerNEG)
	}
	if got := h.events.With("Warning " + ReasonNewerTranslation); len(got) != 1 || !strings.Contains(got[0], newerNEG) {
		t.Errorf("want one %s Warning naming %s, got %v", ReasonNewerTranslation, newerNEG, got)
	}

	svc := h.service("web")
	svc.Annotations[negapi.AnnotationKey] = `{"exposed_ports":{"443":{}}}`
	if _, err := h.kube.CoreV1().Services(testNamespace).Update(h.ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.sync("web")
	if trs := h.translations(); trs["neg-v2-web-80"] != nil {
		t.Errorf("Translations = %v; want the newer build's of a port no longer exposed deleted", keys(trs))
	}
}

// TestARollbackKeepsItsOwnTranslationBesideANewerOne: when both exist (the newer build had not retired this
// version's yet), this build keeps its own up to date and deletes neither.
func TestARollbackKeepsItsOwnTranslationBesideANewerOne(t *testing.T) {
	own := negName(translationVersion, testIdentity, testTenant, testNamespace, "web", 80)
	h := newHarness(t, append(webObjects(),
		translationOf("neg-v2-web-80", "web", "uid-web", testTenant, true, "mp2-e2e-shop-web-80-0a1b2c3d4e"),
		translationOf(translationName("web", 80), "web", "uid-web", testTenant, true, own))...)
	h.sync("web")
	trs := h.translations()
	if len(trs) != 2 || trs["neg-v2-web-80"] == nil || trs[translationName("web", 80)] == nil {
		t.Fatalf("Translations = %v; want both", keys(trs))
	}
	if endpointCount(trs[translationName("web", 80)]) == 0 {
		t.Error("this build's own Translation was not kept up to date")
	}
}

func TestNewerLayoutIsOnlyAVersionThisBuildDoesNotWrite(t *testing.T) {
	for _, tc := range []struct {
		version string
		want    bool
	}{
		{"v1", false}, {"v0", false}, {"h1", false}, {"h0", false},
		{"v2", true}, {"v10", true}, {"h2", true},
		// A layout this build cannot read is never older than one it can.
		{"beta", true}, {"v01", true}, {"x1", true}, {"1", true}, {"v", true},
	} {
		if got := newerLayout(tc.version); got != tc.want {
			t.Errorf("newerLayout(%q) = %v, want %v", tc.version, got, tc.want)
		}
	}
}
