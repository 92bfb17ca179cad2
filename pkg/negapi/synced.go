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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
)

// TranslationSynced says whether the pusher has made the Translation's current spec true in GCE: its Synced
// condition is True and was set for exactly this generation. The translator (which deletes a stale version's
// Translation and ends a Service's write in flight once its successor is synced) and the readiness reflector
// (which attaches a Pod once a synced Translation lists it) read this one rule.
//
// The generation must be equal, not at least: the pusher sets the condition for the generation it read, and the
// API server never lowers a generation, so a condition of a later generation is not the pusher's answer to this
// spec (a status restored from a backup onto a recreated object, or written by hand) and is not trusted until the
// pusher answers this one.
func TranslationSynced(tr *mpv1alpha1.Translation) bool {
	c := meta.FindStatusCondition(tr.Status.Conditions, mpv1alpha1.TranslationConditionSynced)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == tr.Generation
}
