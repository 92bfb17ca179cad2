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
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
)

// Scope tells the router who owns the objects of a resource.
type Scope int

const (
	// Namespaced: an object belongs to the tenant named by its namespace's label, and moves with it. Its own tenant
	// label grants nothing: a tenant's controllers act with that tenant's cloud identity, so whoever may write
	// objects in a namespace must not be able to pick the tenant. An object whose label names another tenant than
	// its namespace does (or any tenant, in a namespace of none) stays with its namespace's tenant (or with none),
	// and the router reports it with a Warning Event (see [RouterOptions]).
	Namespaced Scope = iota + 1
	// ClusterScoped: an object belongs to the tenant its label names; an unlabeled one is shared, every tenant sees
	// it (Nodes).
	ClusterScoped
	// ManagerWritten: a namespaced resource that only the manager writes, each object labeled with the tenant whose
	// controller wrote it (Translations, PangolinResources). The label is the manager's record of whose cloud
	// identity made the object's side effects, so the label decides, also after the namespace moved to another
	// tenant: that tenant must still see the object to undo those effects with its own identity. An unlabeled
	// object belongs to nobody. Only for resources that tenants cannot write.
	ManagerWritten
)

func (s Scope) String() string {
	switch s {
	case Namespaced:
		return "Namespaced"
	case ClusterScoped:
		return "ClusterScoped"
	case ManagerWritten:
		return "ManagerWritten"
	default:
		return fmt.Sprintf("Scope(%d)", int(s))
	}
}

// ReasonTenantLabelIgnored is the reason of the Warning Event on an object of a [Namespaced] resource whose tenant
// label is ignored because it names another tenant than the object's namespace does.
const ReasonTenantLabelIgnored = "TenantLabelIgnored"

// RouterOptions are the optional settings of a [Router].
type RouterOptions struct {
	// Recorder, if set, gets a Warning Event [ReasonTenantLabelIgnored] for each object of a [Namespaced] resource
	// whose tenant label names another tenant than its namespace does, once per object and label value. It is
	// called on the dispatch path, under the dispatch lock, so it must not block: client-go's record.EventRecorder
	// queues the Event, or drops it when its queue is full.
	Recorder record.EventRecorder
}

// NamespacesResource names the Namespace informer given to [NewRouter]; pass it to [Tenant.Informer] for a tenant's
// view of its Namespaces (those carrying its label).
var NamespacesResource = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// resourceKind is how a routed resource resolves an object's owner: by its namespace, by its label (or shared when
// unlabeled), or by its label alone (manager-written objects, and the Namespaces themselves).
type resourceKind int

const (
	kindNamespaced resourceKind = iota
	kindClusterShared
	kindManagerWritten
	kindNamespaces
)

// owner is the resolved owner of an object: one tenant, every tenant (shared), or nobody (zero value).
type owner struct {
	tenant string
	shared bool
}

func (o owner) visibleTo(tenant string) bool { return o.shared || o.tenant == tenant }

// Router splits shared informers between tenants. It adds exactly one event handler to each shared informer and
// delivers every event to the handlers of the tenant that owns the object, found with a map lookup, so the cost of an
// event does not grow with the number of tenants (except for shared objects, which every tenant must see).
//
// Delivery is synchronous and serialized across all routed informers: at most one tenant handler runs at a time.
// That keeps the client-go promise that a handler sees its events one at a time and in order, even though a
// namespace relabel delivers events of other resources from the Namespace informer's handler. Tenant handlers must
// therefore return quickly (enqueue and return); they may call back into the router.
type Router struct {
	labelKey   string
	indexName  string
	namespaces *routedResource
	recorder   record.EventRecorder

	resourcesMu sync.RWMutex
	resources   map[schema.GroupVersionResource]*routedResource
	closed      bool

	// dispatchMu is held while events are delivered to tenant handlers. It guards the delivered-state below: what
	// tenants have been told, as opposed to what the informers' stores hold now (the stores run ahead of delivery).
	dispatchMu sync.Mutex
	// namespaceOwner maps every namespace whose Add has been delivered, and not yet its Delete, to the tenant its
	// label named at its last delivered event ("" for none).
	namespaceOwner map[string]string
	// tenantNamespaces is namespaceOwner inverted, for a new handler's initial list.
	tenantNamespaces map[string]sets.Set[string]

	liveRegistrations atomic.Int64
}

// NewRouter returns a router that resolves ownership by labelKey ([mpv1alpha1.DefaultProviderConfigLabelKey] if empty) and looks namespaces'
// owners up in the shared Namespace informer, which it also routes (see [NamespacesResource]). The informer must
// carry [Indexers] for labelKey; it may be started before or after this call.
func NewRouter(labelKey string, namespaces cache.SharedIndexInformer) (*Router, error) {
	return NewRouterWithOptions(labelKey, namespaces, RouterOptions{})
}

// NewRouterWithOptions is [NewRouter] with options.
func NewRouterWithOptions(labelKey string, namespaces cache.SharedIndexInformer, options RouterOptions) (*Router, error) {
	if labelKey == "" {
		labelKey = mpv1alpha1.DefaultProviderConfigLabelKey
	}
	r := &Router{
		labelKey:         labelKey,
		indexName:        IndexName(labelKey),
		recorder:         options.Recorder,
		resources:        map[schema.GroupVersionResource]*routedResource{},
		namespaceOwner:   map[string]string{},
		tenantNamespaces: map[string]sets.Set[string]{},
	}
	res, err := r.attach(NamespacesResource, namespaces, kindNamespaces)
	if err != nil {
		return nil, err
	}
	r.namespaces = res
	return r, nil
}

// LabelKey returns the label that names an object's tenant.
func (r *Router) LabelKey() string { return r.labelKey }

// AddResource routes one more shared informer. The informer must carry [Indexers] for the router's label key. It
// may be called before or after the informer starts: an informer that is already running replays its objects to
// the router, so an optional API discovered late can be routed when its informer is created.
func (r *Router) AddResource(resource schema.GroupVersionResource, informer cache.SharedIndexInformer, scope Scope) error {
	var kind resourceKind
	switch scope {
	case Namespaced:
		kind = kindNamespaced
	case ClusterScoped:
		kind = kindClusterShared
	case ManagerWritten:
		kind = kindManagerWritten
	default:
		return fmt.Errorf("tenancy: resource %s: unknown scope %v", resource, scope)
	}
	_, err := r.attach(resource, informer, kind)
	return err
}

func (r *Router) attach(resource schema.GroupVersionResource, informer cache.SharedIndexInformer, kind resourceKind) (*routedResource, error) {
	if informer == nil {
		return nil, fmt.Errorf("tenancy: resource %s: nil informer", resource)
	}
	if _, ok := informer.GetIndexer().GetIndexers()[r.indexName]; !ok {
		return nil, fmt.Errorf("tenancy: resource %s: informer lacks the index %q; install tenancy.Indexers(%q) before it starts",
			resource, r.indexName, r.labelKey)
	}
	res := &routedResource{
		router:        r,
		resource:      resource,
		informer:      informer,
		kind:          kind,
		byTenant:      map[string][]*registration{},
		byNamespace:   map[string]map[string]any{},
		ignoredLabels: map[string]map[string]string{},
	}

	r.resourcesMu.Lock()
	defer r.resourcesMu.Unlock()
	if r.closed {
		return nil, errors.New("tenancy: router is closed")
	}
	if _, dup := r.resources[resource]; dup {
		return nil, fmt.Errorf("tenancy: resource %s is already routed", resource)
	}
	// The router's handler is added while resourcesMu is held, so the resource is in the map (and visible to
	// namespace moves) before its first event can be delivered. Adding a handler never calls it synchronously.
	reg, err := informer.AddEventHandler(res)
	if err != nil {
		return nil, fmt.Errorf("tenancy: resource %s: %w", resource, err)
	}
	res.routerRegistration = reg
	r.resources[resource] = res
	return res, nil
}

// Close removes the router's handlers from every shared informer. Tenant views stop receiving events; their stores
// stay readable. It does not stop the informers, which belong to their owner.
func (r *Router) Close() error {
	r.resourcesMu.Lock()
	if r.closed {
		r.resourcesMu.Unlock()
		return nil
	}
	r.closed = true
	resources := slices.Collect(maps.Values(r.resources))
	r.resourcesMu.Unlock()
	// Not under resourcesMu: removing a handler waits for the informer's processor, which, while it stops, waits for
	// a handler that may be delivering an event of the router's, and that needs resourcesMu (a namespace move).
	var errs []error
	for _, res := range resources {
		if err := res.informer.RemoveEventHandler(res.routerRegistration); err != nil {
			errs = append(errs, fmt.Errorf("tenancy: resource %s: %w", res.resource, err))
		}
	}
	return errors.Join(errs...)
}

// RegistrationCount returns the number of tenant handlers registered on views and not yet removed, across all
// tenants and resources. After every tenant is closed it is back to zero.
func (r *Router) RegistrationCount() int { return int(r.liveRegistrations.Load()) }

// Tenant returns a new handle for the tenant with the given name (a ProviderConfig name). Handles are independent:
// closing one removes only the handlers registered through it, so a tenant's controllers can be restarted with a
// new handle while the old one is being closed.
func (r *Router) Tenant(name string) (*Tenant, error) {
	if name == "" {
		return nil, errors.New("tenancy: a tenant needs a name")
	}
	return &Tenant{router: r, name: name}, nil
}

func (r *Router) resource(gvr schema.GroupVersionResource) (*routedResource, bool) {
	r.resourcesMu.RLock()
	defer r.resourcesMu.RUnlock()
	res, ok := r.resources[gvr]
	return res, ok
}

// namespacedResources returns the resources whose objects follow their namespace.
func (r *Router) namespacedResources() []*routedResource {
	r.resourcesMu.RLock()
	defer r.resourcesMu.RUnlock()
	out := make([]*routedResource, 0, len(r.resources))
	for _, res := range r.resources {
		if res.kind == kindNamespaced {
			out = append(out, res)
		}
	}
	return out
}

// deliveredOwner resolves an object's owner from delivered state: for a Namespaced resource, its namespace's owner as
// last delivered, so that an object's events and its namespace's moves agree on who has been told what; otherwise
// its own label (or shared, for an unlabeled object of a ClusterScoped resource). dispatchMu must be held.
func (r *Router) deliveredOwner(res *routedResource, m metav1.Object) owner {
	switch res.kind {
	case kindNamespaced:
		return owner{tenant: r.namespaceOwner[m.GetNamespace()]}
	case kindClusterShared:
		if tenant := tenantLabel(m, r.labelKey); tenant != "" {
			return owner{tenant: tenant}
		}
		return owner{shared: true}
	default:
		return owner{tenant: tenantLabel(m, r.labelKey)}
	}
}

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

func (res *routedResource) handlersFor(o owner) []*registration {
	if o.shared {
		return res.everyHandler()
	}
	return res.handlersOf(o.tenant)
}

func (res *routedResource) handlersOf(tenant string) []*registration {
	if tenant == "" {
		return nil
	}
	res.registryMu.RLock()
	defer res.registryMu.RUnlock()
	return res.byTenant[tenant]
}

func (res *routedResource) everyHandler() []*registration {
	res.registryMu.RLock()
	defer res.registryMu.RUnlock()
	return res.everyTenant
}

// goLive makes a registration receive routed events, unless it was removed meanwhile. Both are decided under
// registryMu, so a registration removed concurrently never lingers in the registry.
func (res *routedResource) goLive(g *registration) bool {
	res.registryMu.Lock()
	defer res.registryMu.Unlock()
	if g.removed.Load() {
		return false
	}
	res.byTenant[g.tenant.name] = appendCopy(res.byTenant[g.tenant.name], g)
	if res.kind == kindClusterShared {
		res.everyTenant = appendCopy(res.everyTenant, g)
	}
	return true
}

// remove marks a registration removed and takes it out of the registry. It reports false if it was already
// removed. It never waits for dispatch, so a handler may remove itself.
func (res *routedResource) remove(g *registration) bool {
	res.registryMu.Lock()
	defer res.registryMu.Unlock()
	if g.removed.Load() {
		return false
	}
	g.removed.Store(true)
	if hs := withoutCopy(res.byTenant[g.tenant.name], g); len(hs) > 0 {
		res.byTenant[g.tenant.name] = hs
	} else {
		delete(res.byTenant, g.tenant.name)
	}
	if res.kind == kindClusterShared {
		res.everyTenant = withoutCopy(res.everyTenant, g)
	}
	return true
}

// appendCopy and withoutCopy never write to the slice they are given, which dispatch may be iterating.
func appendCopy(hs []*registration, g *registration) []*registration {
	out := make([]*registration, len(hs), len(hs)+1)
	copy(out, hs)
	return append(out, g)
}

func withoutCopy(hs []*registration, g *registration) []*registration {
	out := make([]*registration, 0, len(hs))
	for _, h := range hs {
		if h != g {
			out = append(out, h)
		}
	}
	return out
}

// hasSyncedChecker is done once this resource's informer and the Namespace informer have both synced: a tenant's
// view of a namespaced resource is not complete before the namespaces' labels are known.
func (res *routedResource) hasSyncedChecker() cache.DoneChecker {
	res.syncedOnce.Do(func() {
		own := res.informer.HasSyncedChecker()
		if res == res.router.namespaces {
			res.syncedChecker = own
			return
		}
		nsChecker := res.router.namespaces.informer.HasSyncedChecker()
		done := make(chan struct{})
		// One goroutine per routed resource (not per tenant), for the life of the process if the informers never
		// sync.
		go func() {
			<-own.Done()
			<-nsChecker.Done()
			close(done)
		}()
		res.syncedChecker = doneChecker{name: fmt.Sprintf("tenancy view of %s", res.resource), done: done}
	})
	return res.syncedChecker
}

// doneChecker is a named channel, the shape client-go's cache.WaitFor takes.
type doneChecker struct {
	name string
	done <-chan struct{}
}

func (c doneChecker) Name() string          { return c.name }
func (c doneChecker) Done() <-chan struct{} { return c.done }
