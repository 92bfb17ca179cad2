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

package readiness

import (
	"slices"
	"time"

	"k8s.io/client-go/tools/cache"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

// triggerOf is the trigger time (negapi.TriggerTimeAnnotation) of the synced Translations in the namespace that list
// one of the IPs: the latest, that of the last endpoint change written into the NEGs the Pod's condition follows; ok
// is false when none carries one.
func (r *Reflector) triggerOf(namespace string, ips []string) (latest time.Time, ok bool) {
	objs, _ := r.translations.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
	for _, obj := range objs {
		tr, isTr := obj.(*mpv1alpha1.Translation)
		if !isTr || !r.pushed.Synced(tr) || !lists(tr, ips) {
			continue
		}
		if at, has := negapi.TriggerTime(tr.Annotations, negapi.TriggerTimeAnnotation); has && at.After(latest) {
			latest, ok = at, true
		}
	}
	return latest, ok
}

// lists says whether one of the Translation's NEGs lists one of the IPs.
func lists(tr *mpv1alpha1.Translation, ips []string) bool {
	for _, res := range tr.Spec.Resources {
		if res.NetworkEndpointGroup == nil {
			continue
		}
		for _, ep := range res.NetworkEndpointGroup.Endpoints {
			if slices.Contains(ips, ep.IPAddress) {
				return true
			}
		}
	}
	return false
}
