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

package pushed

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
)

func translation(uid types.UID, generation, reported int64) *mpv1alpha1.Translation {
	tr := &mpv1alpha1.Translation{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "neg-v1-web-80", UID: uid, Generation: generation}}
	if reported > 0 {
		tr.Status.Conditions = []metav1.Condition{{Type: mpv1alpha1.TranslationConditionSynced, Status: metav1.ConditionTrue,
			Reason: "Synced", ObservedGeneration: reported}}
	}
	return tr
}

// TestSyncedReadsThePushedGenerationBeforeTheStatus: a generation pushed and not reported is synced for exactly that
// object and generation; once reported (or with no Generations at all) the status alone answers.
func TestSyncedReadsThePushedGenerationBeforeTheStatus(t *testing.T) {
	g := New()
	var heard []int64
	g.OnPushed(func(tr *mpv1alpha1.Translation) { heard = append(heard, tr.Generation) })

	if g.Synced(translation("a", 4, 3)) {
		t.Fatal("generation 4 synced before anything was pushed; the status reports 3")
	}
	g.Pushed(translation("a", 4, 3))
	g.Pushed(translation("a", 4, 3)) // again: no news for the listeners
	for _, tc := range []struct {
		name string
		tr   *mpv1alpha1.Translation
		want bool
	}{
		{"the pushed generation", translation("a", 4, 3), true},
		{"a later generation", translation("a", 5, 3), false},
		{"the same name made anew", translation("b", 4, 0), false},
		{"the status alone", translation("c", 7, 7), true},
	} {
		if got := g.Synced(tc.tr); got != tc.want {
			t.Errorf("%s: Synced = %v, want %v", tc.name, got, tc.want)
		}
	}
	if want := []int64{4}; len(heard) != 1 || heard[0] != 4 {
		t.Errorf("listeners heard generations %v, want %v", heard, want)
	}
	g.Reported("app/neg-v1-web-80")
	if g.Synced(translation("a", 4, 3)) || g.Len() != 0 {
		t.Errorf("after Reported, Synced still true or %d held; the status (3) alone must answer", g.Len())
	}
	var none *Generations
	none.Pushed(translation("a", 4, 3))
	if none.Synced(translation("a", 4, 3)) || !none.Synced(translation("a", 4, 4)) {
		t.Error("a nil Generations must read the status alone")
	}
}
