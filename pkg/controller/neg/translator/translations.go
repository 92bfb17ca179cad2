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
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
)

// isOurs says whether this controller wrote the Translation, whatever its version: its name has our prefix.
// What a Translation of ours says about the Service it was made for and the NEGs it declares; naming.go makes and
// parses its name.

func IsOurs(tr *mpv1alpha1.Translation) bool {
	rest, found := strings.CutPrefix(tr.Name, translationPrefix)
	return found && rest != ""
}

// serviceOf is the name of the Service a Translation of ours was made for: its controller reference's or, when it
// has none (the garbage collector removed it after a delete with --cascade=orphan), the one in its name.
func serviceOf(tr *mpv1alpha1.Translation) (string, bool) {
	if ref := metav1.GetControllerOf(tr); ref != nil && ref.Kind == "Service" && ref.APIVersion == "v1" {
		return ref.Name, true
	}
	_, service, _, ok := parseTranslationName(tr.Name)
	return service, ok
}

// ownerUID is the UID of the Service a Translation was made for: its owner-UID label's or, without the label, its
// controller reference's. It outlives the reference, which a delete with --cascade=orphan removes.
func ownerUID(tr *mpv1alpha1.Translation) types.UID {
	if uid := tr.Labels[mpv1alpha1.TranslationOwnerUIDLabelKey]; uid != "" {
		return types.UID(uid)
	}
	if ref := metav1.GetControllerOf(tr); ref != nil {
		return ref.UID
	}
	return ""
}

// synced says whether the pusher has pushed the Translation's current spec: its NEGs exist as declared, as its
// status says or, before the pusher reports it, as the pusher told the process (pushed.Generations.Synced, the
// rule the readiness reflector reads too).
func (t *Translator) synced(tr *mpv1alpha1.Translation) bool { return t.pushed.Synced(tr) }

// sharesNEGs says whether two Translations list a NEG of the same zone and name. Generated names differ between
// versions and Service ports; a custom name (the annotation's "name") is the same in every version.
func sharesNEGs(a, b *mpv1alpha1.Translation) bool {
	type zoneName struct{ zone, name string }
	names := map[zoneName]bool{}
	for _, r := range a.Spec.Resources {
		names[zoneName{r.Zone, r.Name}] = true
	}
	for _, r := range b.Spec.Resources {
		if names[zoneName{r.Zone, r.Name}] {
			return true
		}
	}
	return false
}

// declares says whether a Translation lists a NEG of that name.
func declares(tr *mpv1alpha1.Translation, name string) bool {
	return slices.ContainsFunc(tr.Spec.Resources, func(r mpv1alpha1.BackendResource) bool { return r.Name == name })
}

// portOf is the Service port a Translation of ours is for, from its name.
func portOf(tr *mpv1alpha1.Translation) int32 {
	_, _, port, _ := parseTranslationName(tr.Name)
	return port
}
