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

package tenancy

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
)

// moveNamespace records a namespace's new owner (exists is false once it is deleted) and moves every object in it,
// for every Namespaced resource, from the old owner's handlers (Delete) to the new owner's (Add). The objects come
// from delivered state, not from the informers' stores: a store may already lack an object whose Delete has not
// been delivered yet, and the old owner must still be told. The tenant labels of the objects are judged again
// against the new owner, and for a namespace seen for the first time, whose objects may have been delivered before
// it. dispatchMu must be held.
func (r *Router) moveNamespace(namespace, newOwner string, exists, isInInitialList bool) {
	oldOwner, known := r.namespaceOwner[namespace]
	if exists {
		r.namespaceOwner[namespace] = newOwner
	} else {
		delete(r.namespaceOwner, namespace)
	}
	moved := oldOwner != newOwner
	if moved {
		if oldOwner != "" {
			r.tenantNamespaces[oldOwner].Delete(namespace)
			if r.tenantNamespaces[oldOwner].Len() == 0 {
				delete(r.tenantNamespaces, oldOwner)
			}
		}
		if newOwner != "" {
			if r.tenantNamespaces[newOwner] == nil {
				r.tenantNamespaces[newOwner] = sets.New[string]()
			}
			r.tenantNamespaces[newOwner].Insert(namespace)
		}
	}
	judge := r.recorder != nil && exists && (moved || !known)
	if !moved && !judge {
		return
	}

	for _, res := range r.namespacedResources() {
		objects := res.byNamespace[namespace]
		if len(objects) == 0 {
			continue
		}
		var from, to []*registration
		if moved {
			from, to = res.handlersOf(oldOwner), res.handlersOf(newOwner)
		}
		if len(from) == 0 && len(to) == 0 && !judge {
			continue
		}
		for _, obj := range objects {
			for _, h := range from {
				h.onDelete(obj)
			}
			for _, h := range to {
				h.onAdd(obj, isInInitialList)
			}
			if judge {
				if m, err := meta.Accessor(obj); err == nil {
					res.reportIgnoredLabel(m, obj)
				}
			}
		}
	}
}

// reportIgnoredLabel emits a Warning Event TenantLabelIgnored on an object of a Namespaced resource whose tenant label
// names another tenant than its namespace does (or any tenant, in a namespace of none). It reports each object and
// label value once: again only after the label was changed, not on resyncs, updates or namespace moves that leave
// it as it was. An object whose namespace has not been delivered yet is judged when the namespace is, so that the
// order in which the informers sync at startup reports nothing false. dispatchMu must be held.
func (res *routedResource) reportIgnoredLabel(m metav1.Object, obj any) {
	r := res.router
	if r.recorder == nil {
		return
	}
	namespace, name := m.GetNamespace(), m.GetName()
	label := tenantLabel(m, r.labelKey)
	if reported, ok := res.ignoredLabels[namespace][name]; ok {
		if reported == label {
			return
		}
		res.forgetIgnoredLabel(namespace, name)
	}
	if label == "" {
		return
	}
	nsOwner, known := r.namespaceOwner[namespace]
	if !known || label == nsOwner {
		return
	}
	object, ok := obj.(runtime.Object)
	if !ok {
		return
	}
	byName := res.ignoredLabels[namespace]
	if byName == nil {
		byName = map[string]string{}
		res.ignoredLabels[namespace] = byName
	}
	byName[name] = label
	belongs := "to no tenant"
	if nsOwner != "" {
		belongs = "to tenant " + nsOwner
	}
	r.recorder.Eventf(object, corev1.EventTypeWarning, ReasonTenantLabelIgnored,
		"Label %s=%s is ignored: namespace %s belongs %s, and a namespaced object belongs to its namespace's tenant",
		r.labelKey, label, namespace, belongs)
}

// forgetIgnoredLabel drops the record of a reported ignored label. dispatchMu must be held.
func (res *routedResource) forgetIgnoredLabel(namespace, name string) {
	byName, ok := res.ignoredLabels[namespace]
	if !ok {
		return
	}
	delete(byName, name)
	if len(byName) == 0 {
		delete(res.ignoredLabels, namespace)
	}
}
