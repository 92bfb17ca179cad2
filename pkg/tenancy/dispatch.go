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
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
)

// routedResource is one shared informer as the router sees it. It is the router's only event handler on that
// informer.
type routedResource struct {
	router             *Router
	resource           schema.GroupVersionResource
	informer           cache.SharedIndexInformer
	kind               resourceKind
	routerRegistration cache.ResourceEventHandlerRegistration

	// registryMu guards the live registrations below. The slices are copy-on-write: dispatch reads them under a
	// read lock and iterates after releasing it, so a handler may remove itself (which takes the write lock) while
	// being called.
	registryMu sync.RWMutex
	byTenant   map[string][]*registration
	// everyTenant holds all live registrations; kept only for ClusterScoped resources, whose shared objects go to
	// every tenant.
	everyTenant []*registration

	// byNamespace holds, by namespace and name, the last delivered state of every object of a Namespaced resource:
	// what has to move when its namespace is relabeled. Guarded by router.dispatchMu.
	byNamespace map[string]map[string]any
	// ignoredLabels holds, by namespace and name, the tenant label value that TenantLabelIgnored was reported for,
	// so each object and value is reported once. Only objects with an ignored label have an entry. Guarded by
	// router.dispatchMu.
	ignoredLabels map[string]map[string]string

	syncedOnce    sync.Once
	syncedChecker cache.DoneChecker
}

var _ cache.ResourceEventHandler = &routedResource{}

func (res *routedResource) OnAdd(obj any, isInInitialList bool) {
	m, err := meta.Accessor(obj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("tenancy: resource %s: cannot route an added %T: %w", res.resource, obj, err))
		return
	}
	r := res.router
	r.dispatchMu.Lock()
	defer r.dispatchMu.Unlock()

	res.remember(m, obj)
	for _, h := range res.handlersFor(r.deliveredOwner(res, m)) {
		h.onAdd(obj, isInInitialList)
	}
	switch res.kind {
	case kindNamespaces:
		r.moveNamespace(m.GetName(), tenantLabel(m, r.labelKey), true, isInInitialList)
	case kindNamespaced:
		res.reportIgnoredLabel(m, obj)
	}
}

func (res *routedResource) OnUpdate(oldObj, newObj any) {
	oldMeta, err := meta.Accessor(oldObj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("tenancy: resource %s: cannot route an updated %T: %w", res.resource, oldObj, err))
		return
	}
	newMeta, err := meta.Accessor(newObj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("tenancy: resource %s: cannot route an updated %T: %w", res.resource, newObj, err))
		return
	}
	r := res.router
	r.dispatchMu.Lock()
	defer r.dispatchMu.Unlock()

	oldOwner, newOwner := r.deliveredOwner(res, oldMeta), r.deliveredOwner(res, newMeta)
	res.remember(newMeta, newObj)
	// An unchanged resourceVersion is a resync (or a relist that found nothing new), which client-go hands only to
	// handlers that asked for resyncs.
	isResync := oldMeta.GetResourceVersion() == newMeta.GetResourceVersion()
	res.deliverUpdate(oldOwner, newOwner, oldObj, newObj, isResync)
	switch res.kind {
	case kindNamespaces:
		r.moveNamespace(newMeta.GetName(), tenantLabel(newMeta, r.labelKey), true, false)
	case kindNamespaced:
		res.reportIgnoredLabel(newMeta, newObj)
	}
}

func (res *routedResource) OnDelete(obj any) {
	// A tombstone carries the last state the informer knew; it decides the owner. The tombstone itself is passed on,
	// as client-go handlers expect.
	last := worker.LastState(obj)
	m, err := meta.Accessor(last)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("tenancy: resource %s: cannot route a deleted %T: %w", res.resource, last, err))
		return
	}
	r := res.router
	r.dispatchMu.Lock()
	defer r.dispatchMu.Unlock()

	res.forget(m)
	for _, h := range res.handlersFor(r.deliveredOwner(res, m)) {
		h.onDelete(obj)
	}
	if res.kind == kindNamespaces {
		r.moveNamespace(m.GetName(), "", false, false)
	}
}

// deliverUpdate turns an update into what each tenant sees: Update where the object stays visible, Delete where it
// stops being visible, Add where it becomes visible.
func (res *routedResource) deliverUpdate(oldOwner, newOwner owner, oldObj, newObj any, isResync bool) {
	if oldOwner == newOwner {
		for _, h := range res.handlersFor(newOwner) {
			if isResync && !h.wantsResync {
				continue
			}
			h.onUpdate(oldObj, newObj)
		}
		return
	}
	if !oldOwner.shared && !newOwner.shared {
		// Relabeled from one tenant (or nobody) to another: two lookups, whatever the number of tenants.
		for _, h := range res.handlersOf(oldOwner.tenant) {
			h.onDelete(oldObj)
		}
		for _, h := range res.handlersOf(newOwner.tenant) {
			h.onAdd(newObj, false)
		}
		return
	}
	// A shared object became one tenant's, or the reverse: every tenant's view changes.
	for _, h := range res.everyHandler() {
		sawOld, seesNew := oldOwner.visibleTo(h.tenant.name), newOwner.visibleTo(h.tenant.name)
		switch {
		case sawOld && seesNew:
			h.onUpdate(oldObj, newObj)
		case sawOld:
			h.onDelete(oldObj)
		case seesNew:
			h.onAdd(newObj, false)
		}
	}
}

// remember records obj as the delivered state of an object of a Namespaced resource. dispatchMu must be held.
func (res *routedResource) remember(m metav1.Object, obj any) {
	if res.kind != kindNamespaced {
		return
	}
	byName := res.byNamespace[m.GetNamespace()]
	if byName == nil {
		byName = map[string]any{}
		res.byNamespace[m.GetNamespace()] = byName
	}
	byName[m.GetName()] = obj
}

// forget drops a deleted object from the delivered state, and from the ignored labels reported. dispatchMu must be
// held.
func (res *routedResource) forget(m metav1.Object) {
	if res.kind != kindNamespaced {
		return
	}
	namespace, name := m.GetNamespace(), m.GetName()
	if byName, ok := res.byNamespace[namespace]; ok {
		delete(byName, name)
		if len(byName) == 0 {
			delete(res.byNamespace, namespace)
		}
	}
	res.forgetIgnoredLabel(namespace, name)
}
