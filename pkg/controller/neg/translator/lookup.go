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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
)

// planInput gathers what planTranslations decides from: the Service's desired Translations and, from the
// unfiltered cache, the Translations made for it or for a Service of its name, with those of them this translator
// asked to delete.
func (t *Translator) planInput(svc *corev1.Service, d desired) planInput {
	in := planInput{service: svc, tenant: t.tenant, labelKey: t.labelKey, project: t.gcp.ProjectID, version: t.version, desired: d.translations, custom: d.custom,
		unsettled: d.unsettled, synced: t.synced,
		cached: t.cachedTranslationsFor(svc)}
	for _, tr := range in.cached {
		if t.writes.deleteAsked(tr.UID) {
			if in.asked == nil {
				in.asked = map[types.UID]bool{}
			}
			in.asked[tr.UID] = true
		}
	}
	return in
}

// cachedTranslationsFor returns, sorted by name, the Translations of ours of any tenant in the Service's namespace
// that were made for it (its UID) or for a Service of its name. It reads the unfiltered cache's owner index only.
func (t *Translator) cachedTranslationsFor(svc *corev1.Service) []*mpv1alpha1.Translation {
	keys := append(serviceKeys(svc.Namespace, svc.Name), informerset.TranslationOwnerUIDKey(svc.Namespace, svc.UID))
	var out []*mpv1alpha1.Translation
	for _, tr := range translationsByOwner(t.allTranslationIndex, keys...) {
		if !IsOurs(tr) {
			continue
		}
		if service, ok := serviceOf(tr); ownerUID(tr) == svc.UID || (ok && service == svc.Name) {
			out = append(out, tr)
		}
	}
	slices.SortFunc(out, func(a, b *mpv1alpha1.Translation) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// translationsNaming returns the Translations of ours in the tenant's view (labeled for the tenant) that were made
// for a Service of that namespace and name, whatever its UID. It reads the cache's owner index only.
func (t *Translator) translationsNaming(namespace, service string) []*mpv1alpha1.Translation {
	var out []*mpv1alpha1.Translation
	for _, tr := range translationsByOwner(t.translationIndex, serviceKeys(namespace, service)...) {
		if s, ok := serviceOf(tr); ok && s == service && IsOurs(tr) && tr.Labels[t.labelKey] == t.tenant {
			out = append(out, tr)
		}
	}
	return out
}

// serviceKeys are the owner-index values under which a Translation made for a Service of that name may be filed:
// controlled by it, or left without a controller (its name then says which Service it was for; see serviceOf). A
// Translation controlled by anything but a Service was not made by this controller.
func serviceKeys(namespace, service string) []string {
	return []string{
		informerset.TranslationControllerKey(namespace, "v1", "Service", service),
		informerset.TranslationUncontrolledKey(namespace),
	}
}

// translationsByOwner returns the Translations that indexer's owner index files under any of keys, each once.
// New made sure the index exists, so a lookup cannot fail.
func translationsByOwner(indexer cache.Indexer, keys ...string) []*mpv1alpha1.Translation {
	var out []*mpv1alpha1.Translation
	for _, key := range keys {
		objs, _ := indexer.ByIndex(informerset.TranslationsByOwner, key)
		for _, obj := range objs {
			if tr, ok := obj.(*mpv1alpha1.Translation); ok && !slices.Contains(out, tr) {
				out = append(out, tr)
			}
		}
	}
	return out
}

// cachedTranslation looks a Translation of the namespace up by name in the unfiltered cache, for ownWrites.
func (t *Translator) cachedTranslation(namespace string) func(name string) cached {
	return func(name string) cached {
		obj, exists, err := t.allTranslationIndex.GetByKey(namespace + "/" + name)
		if err != nil || !exists {
			return cached{}
		}
		tr, ok := obj.(*mpv1alpha1.Translation)
		if !ok {
			return cached{}
		}
		return cached{exists: true, uid: tr.UID, resourceVersion: tr.ResourceVersion, generation: tr.Generation}
	}
}

// leaving says whether a Translation is on its way out: marked for deletion, or deleted by this translator and not
// yet seen so by the view.
func (t *Translator) leaving(tr *mpv1alpha1.Translation) bool {
	if tr.DeletionTimestamp != nil {
		return true
	}
	return t.writes.deleteAsked(tr.UID)
}
