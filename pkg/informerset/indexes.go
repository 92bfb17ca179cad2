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

package informerset

import (
	"maps"
	"slices"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
)

// The indexes a controller's hot path reads instead of listing a namespace: a sync that looks up one Service's
// EndpointSlices or Translations costs the same whether its namespace holds ten Services or ten thousand. They are
// installed on the shared informers when those are built (Resources), and a tenant's view answers ByIndex with its
// own objects only.

// EndpointSlicesByService is the index of EndpointSlices by the Service they belong to (label
// kubernetes.io/service-name), as ServiceKey.
const EndpointSlicesByService = "multiproject.io/endpointslice-service"

// ServiceKey is the value EndpointSlicesByService files a Service's slices under.
func ServiceKey(namespace, name string) string { return namespace + "/" + name }

// EndpointSlicesByPod is the index of EndpointSlices by the Pods of their endpoints that are not ready and not
// terminating (targetRef of kind Pod), as PodKey: a Pod's event finds the slices, and so the Services, whose
// endpoints its state decides (the neg translator counts such an endpoint when its Pod waits only for the NEG
// readiness gate). A ready or terminating endpoint counts or not whatever its Pod says, and a change of the Pod that
// changes that changes the slice too, whose own event brings its Service; leaving them out keeps the index empty in
// a converged cluster (filing every endpoint cost about 350 bytes per endpoint). Only references to a Pod of the
// slice's own namespace are filed; a Pod elsewhere may be another tenant's.
const EndpointSlicesByPod = "multiproject.io/endpointslice-pod"

// PodKey is the value EndpointSlicesByPod files the slices with an endpoint of the Pod under.
func PodKey(namespace, name string) string { return namespace + "/" + name }

// EndpointSliceIndexers are the indexers of the shared EndpointSlice informer.
func EndpointSliceIndexers() cache.Indexers {
	return withNamespaceIndex(cache.Indexers{EndpointSlicesByService: endpointSliceService, EndpointSlicesByPod: endpointSlicePods})
}

func endpointSliceService(obj any) ([]string, error) {
	slice, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil, nil
	}
	service := slice.Labels[discoveryv1.LabelServiceName]
	if service == "" {
		return nil, nil
	}
	return []string{ServiceKey(slice.Namespace, service)}, nil
}

func endpointSlicePods(obj any) ([]string, error) {
	slice, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil, nil
	}
	var keys []string
	for i := range slice.Endpoints {
		ep := &slice.Endpoints[i]
		ref := ep.TargetRef
		if ptr.Deref(ep.Conditions.Ready, true) || ptr.Deref(ep.Conditions.Terminating, false) ||
			ref == nil || ref.Kind != "Pod" || ref.Name == "" || (ref.Namespace != "" && ref.Namespace != slice.Namespace) {
			continue
		}
		keys = append(keys, PodKey(slice.Namespace, ref.Name))
	}
	// A Pod has one endpoint per slice, but a hand-made slice may list it twice.
	slices.Sort(keys)
	return slices.Compact(keys), nil
}

// TranslationsByOwner is the index of Translations by the object they were made for. A Translation is filed
//
//   - under its owner's UID (TranslationOwnerUIDKey), from its owner-UID label or else its controller reference;
//   - under its controller (TranslationControllerKey), if it has one;
//   - as uncontrolled in its namespace (TranslationUncontrolledKey), if it has none: the garbage collector removes
//     the reference when its owner is deleted with --cascade=orphan, and only its name then says whom it was for.
const TranslationsByOwner = "multiproject.io/translation-owner"

// TranslationOwnerUIDKey is the value TranslationsByOwner files the Translations made for the object uid under.
func TranslationOwnerUIDKey(namespace string, uid types.UID) string {
	return namespace + "/uid/" + string(uid)
}

// TranslationControllerKey is the value TranslationsByOwner files the Translations controlled by the object
// apiVersion, kind, name of the namespace under.
func TranslationControllerKey(namespace, apiVersion, kind, name string) string {
	return namespace + "/controller/" + apiVersion + "/" + kind + "/" + name
}

// TranslationUncontrolledKey is the value TranslationsByOwner files the namespace's Translations without a
// controller reference under.
func TranslationUncontrolledKey(namespace string) string { return namespace + "/uncontrolled" }

// TranslationIndexers are the indexers of the shared Translation informer.
func TranslationIndexers() cache.Indexers {
	return withNamespaceIndex(cache.Indexers{TranslationsByOwner: translationOwner})
}

func translationOwner(obj any) ([]string, error) {
	tr, ok := obj.(*mpv1alpha1.Translation)
	if !ok {
		return nil, nil
	}
	ref := metav1.GetControllerOf(tr)
	uid := types.UID(tr.Labels[mpv1alpha1.TranslationOwnerUIDLabelKey])
	if uid == "" && ref != nil {
		uid = ref.UID
	}
	keys := make([]string, 0, 2)
	if uid != "" {
		keys = append(keys, TranslationOwnerUIDKey(tr.Namespace, uid))
	}
	if ref != nil {
		keys = append(keys, TranslationControllerKey(tr.Namespace, ref.APIVersion, ref.Kind, ref.Name))
	} else {
		keys = append(keys, TranslationUncontrolledKey(tr.Namespace))
	}
	return keys, nil
}

func withNamespaceIndex(indexers cache.Indexers) cache.Indexers {
	all := namespaceIndex()
	maps.Copy(all, indexers)
	return all
}
