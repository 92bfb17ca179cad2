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
	"slices"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// TenantViews is one running tenant's handle on a [Router]. Its views only ever show the tenant's objects, and Close
// removes every handler registered through them, which is how a stopped tenant leaves nothing behind on the shared
// informers.
type TenantViews struct {
	router *Router
	name   string

	mu     sync.Mutex
	closed bool
	// registrations is a slice, not a set: a controller's handle holds a few, and a map of them cost every tenant
	// about 600 bytes.
	registrations []*registration
}

// Name returns the tenant's name, the value of the label that marks its objects.
func (t *TenantViews) Name() string { return t.name }

// Informer returns the tenant's view of a routed resource (one given to [Router.AddResource], or
// [NamespacesResource]).
func (t *TenantViews) Informer(resource schema.GroupVersionResource) (*View, error) {
	res, ok := t.router.resource(resource)
	if !ok {
		return nil, fmt.Errorf("tenancy: resource %s is not routed", resource)
	}
	return &View{tenant: t, res: res, indexer: tenantIndexer{router: t.router, res: res, tenant: t.name}}, nil
}

// Close removes every handler registered through this handle's views and refuses new ones. It does not wait for the
// handler call being dispatched at that moment, if any, so a handler may close its own tenant; no later event
// reaches the handlers. To wait for that call too, pass each registration to cache.ShutDownEventHandler from outside
// the handlers. Close is idempotent.
func (t *TenantViews) Close() {
	t.mu.Lock()
	t.closed = true
	registrations := slices.Clone(t.registrations)
	t.mu.Unlock()
	for _, g := range registrations {
		t.router.removeRegistration(g)
	}
}

// RegistrationCount returns the number of handlers registered through this handle and not yet removed.
func (t *TenantViews) RegistrationCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.registrations)
}

func (t *TenantViews) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// addRegistration creates a registration for a handler on res, unless the tenant is closed.
func (t *TenantViews) addRegistration(res *routedResource, handler cache.ResourceEventHandler, wantsResync bool) (*registration, error) {
	g := &registration{
		tenant:      t,
		res:         res,
		handler:     handler,
		wantsResync: wantsResync,
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, fmt.Errorf("tenancy: tenant %q is closed", t.name)
	}
	t.registrations = append(t.registrations, g)
	t.router.liveRegistrations.Add(1)
	return g, nil
}

// removeRegistration removes g from routing and from its tenant; only the first call does anything.
func (r *Router) removeRegistration(g *registration) {
	if !g.res.remove(g) {
		return
	}
	g.removedSignal.fire()
	g.tenant.mu.Lock()
	g.tenant.registrations = slices.DeleteFunc(g.tenant.registrations, func(h *registration) bool { return h == g })
	g.tenant.mu.Unlock()
	r.liveRegistrations.Add(-1)
}

// deliverInitialList runs once per registration, in its own goroutine so that AddEventHandler never calls the
// handler on the caller's goroutine (client-go does not either, and callers may hold locks the handler takes). It
// waits until the router has been handed the informers' initial lists, then, under the dispatch lock, gives the
// handler the tenant's objects as initial Adds and makes it live, so no routed event can slip between the two. It
// gives up when the registration is removed first.
func (r *Router) deliverInitialList(g *registration) {
	waitFor := []cache.DoneChecker{g.res.routerRegistration.HasSyncedChecker()}
	if g.res != r.namespaces {
		waitFor = append(waitFor, r.namespaces.routerRegistration.HasSyncedChecker())
	}
	for _, checker := range waitFor {
		select {
		case <-checker.Done():
			continue // the usual case once the process runs, and it makes no channel for the removal
		default:
		}
		select {
		case <-checker.Done():
		case <-g.removedSignal.done():
			return
		}
	}

	r.dispatchMu.Lock()
	defer r.dispatchMu.Unlock()
	for _, obj := range r.initialObjects(g.res, g.tenant.name) {
		if g.removed.Load() {
			return
		}
		g.handler.OnAdd(obj, true)
	}
	if g.res.goLive(g) {
		g.synced.fire()
	}
}

// initialObjects is what a new handler of tenant on res is told exists. Objects of a Namespaced resource come from
// delivered state, like namespace moves, so a namespace relabel in flight cannot leave the handler holding an
// object nobody will delete for it. The others (labeled, or shared) come from the store, which may be ahead of
// delivery; that can only repeat an Add or announce an object whose Delete follows, both harmless.
// dispatchMu must be held.
func (r *Router) initialObjects(res *routedResource, tenant string) []any {
	if res.kind == kindNamespaced {
		var objects []any
		for namespace := range r.tenantNamespaces[tenant] {
			for _, obj := range res.byNamespace[namespace] {
				objects = append(objects, obj)
			}
		}
		return objects
	}
	indexer := res.informer.GetIndexer()
	objects, err := indexer.ByIndex(r.indexName, labelIndexValue(tenant))
	if err != nil {
		// attach checked the index exists, and indexes cannot be removed.
		panic(fmt.Sprintf("tenancy: resource %s: %v", res.resource, err))
	}
	if res.kind == kindClusterShared {
		shared, _ := indexer.ByIndex(r.indexName, sharedIndexValue)
		objects = append(objects, shared...)
	}
	return objects
}

// registration is one tenant handler on one view. It is what AddEventHandler returns.
type registration struct {
	tenant      *TenantViews
	res         *routedResource
	handler     cache.ResourceEventHandler
	wantsResync bool

	// removed is checked before every call, so a handler removed in the middle of a dispatch is not called again.
	removed       atomic.Bool
	removedSignal signal
	// synced fires once the initial list has been delivered and the handler is live.
	synced signal

	shutdownOnce sync.Once
	shutdownCh   chan struct{}
}

var _ cache.ResourceEventHandlerRegistration = &registration{}

// HasSynced reports whether the shared informers have synced and the tenant's initial list has been delivered.
func (g *registration) HasSynced() bool { return g.synced.hasFired() }

// HasSyncedChecker is HasSynced as a channel, for cache.WaitFor.
func (g *registration) HasSyncedChecker() cache.DoneChecker {
	return doneChecker{
		name: fmt.Sprintf("tenancy: tenant %q handler on %s", g.tenant.name, g.res.resource),
		done: g.synced.done(),
	}
}

// ShutdownChan is closed once the registration has been removed and no call to its handler is in progress, so
// client-go's cache.ShutDownEventHandler works on views. Like there, do not wait on it from the handler itself.
func (g *registration) ShutdownChan() <-chan struct{} {
	// Made on first use: few callers ask, and every tenant has a registration per handler.
	g.shutdownOnce.Do(func() {
		g.shutdownCh = make(chan struct{})
		go func() {
			<-g.removedSignal.done()
			// Every call happens under dispatchMu and checks removed first; once the lock has been taken after the
			// removal, no call is in progress and none will start.
			g.tenant.router.dispatchMu.Lock()
			g.tenant.router.dispatchMu.Unlock()
			close(g.shutdownCh)
		}()
	})
	return g.shutdownCh
}

func (g *registration) onAdd(obj any, isInInitialList bool) {
	if !g.removed.Load() {
		g.handler.OnAdd(obj, isInInitialList)
	}
}

func (g *registration) onUpdate(oldObj, newObj any) {
	if !g.removed.Load() {
		g.handler.OnUpdate(oldObj, newObj)
	}
}

func (g *registration) onDelete(obj any) {
	if !g.removed.Load() {
		g.handler.OnDelete(obj)
	}
}
