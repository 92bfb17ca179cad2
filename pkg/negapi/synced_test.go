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

package negapi

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
)

// TestTranslationSynced: synced only with a True Synced condition set for the current generation; an older
// generation's, a later one's (not the pusher's answer to this spec), a False one or none is not.
func TestTranslationSynced(t *testing.T) {
	translation := func(generation, observed int64, status metav1.ConditionStatus) *mpv1alpha1.Translation {
		tr := &mpv1alpha1.Translation{ObjectMeta: metav1.ObjectMeta{Generation: generation}}
		tr.Status.ObservedGeneration = observed
		if status != "" {
			tr.Status.Conditions = []metav1.Condition{{Type: mpv1alpha1.TranslationConditionSynced, Status: status,
				Reason: "Synced", ObservedGeneration: observed}}
		}
		return tr
	}
	for _, tc := range []struct {
		name string
		tr   *mpv1alpha1.Translation
		want bool
	}{
		{"true at the generation", translation(3, 3, metav1.ConditionTrue), true},
		{"true at an older generation", translation(3, 2, metav1.ConditionTrue), false},
		{"true at a later generation", translation(3, 4, metav1.ConditionTrue), false},
		{"false at the generation", translation(3, 3, metav1.ConditionFalse), false},
		{"unknown at the generation", translation(3, 3, metav1.ConditionUnknown), false},
		{"no condition", translation(3, 3, ""), false},
	} {
		if got := TranslationSynced(tc.tr); got != tc.want {
			t.Errorf("%s: TranslationSynced = %v, want %v", tc.name, got, tc.want)
		}
	}
}
