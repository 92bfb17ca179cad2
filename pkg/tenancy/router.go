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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
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
func (r *Router) Tenant(name string) (*TenantViews, error) {
	if name == "" {
		return nil, errors.New("tenancy: a tenant needs a name")
	}
	return &TenantViews{router: r, name: name}, nil
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
