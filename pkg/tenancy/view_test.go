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

package tenancy_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/multiproject/multiproject-controller-manager/pkg/tenancy"
)

// twoTenantObjects is a small cluster where tenants a and b each own a namespace, each namespace has a service
// labeled for the other tenant (which it does not get), there is one shared node and one node labeled for b, and
// each tenant has a manager-written object in the other's namespace.
func twoTenantObjects() []runtime.Object {
	appX := serviceObj("ns-a", "app-x", "")
	appX.Labels = map[string]string{"app": "x"}
	return []runtime.Object{
		namespaceObj("ns-a", "a"), namespaceObj("ns-b", "b"), namespaceObj("ns-free", ""),
		serviceObj("ns-a", "s1", ""), appX, serviceObj("ns-a", "to-b", "b"),
		serviceObj("ns-b", "s1", ""), serviceObj("ns-b", "to-a", "a"),
		serviceObj("ns-free", "s1", ""), serviceObj("ns-free", "to-a", "a"),
		nodeObj("shared", ""), nodeObj("for-b", "b"),
		writtenObj("ns-a", "by-b", "b"), writtenObj("ns-b", "by-a", "a"), writtenObj("ns-free", "by-nobody", ""),
	}
}

func serviceNames(services []*corev1.Service) []string {
	var out []string
	for _, s := range services {
		out = append(out, s.Namespace+"/"+s.Name)
	}
	slices.Sort(out)
	return out
}

// TestListersSeeOnlyTheTenant runs generated listers over the tenant's indexer.
func TestListersSeeOnlyTheTenant(t *testing.T) {
	f := newFixture(t, twoTenantObjects()...)
	cases := []struct {
		tenant       string
		all          []string
		inNamespaceA []string
		appX         []string
		nodes        []string
		namespaces   []string
		written      []string
	}{
		{
			tenant:       "a",
			all:          []string{"ns-a/app-x", "ns-a/s1", "ns-a/to-b"},
			inNamespaceA: []string{"ns-a/app-x", "ns-a/s1", "ns-a/to-b"},
			appX:         []string{"ns-a/app-x"},
			nodes:        []string{"shared"},
			namespaces:   []string{"ns-a"},
			written:      []string{"ns-b/by-a"},
		},
		{
			tenant:     "b",
			all:        []string{"ns-b/s1", "ns-b/to-a"},
			nodes:      []string{"for-b", "shared"},
			namespaces: []string{"ns-b"},
			written:    []string{"ns-a/by-b"},
		},
		{
			tenant: "nobody",
			nodes:  []string{"shared"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.tenant, func(t *testing.T) {
			tenant := f.tenant(tc.tenant)
			services := corelisters.NewServiceLister(f.view(tenant, servicesResource).GetIndexer())

			all, err := services.List(labels.Everything())
			if err != nil {
				t.Fatal(err)
			}
			if got := serviceNames(all); !slices.Equal(got, tc.all) {
				t.Errorf("List = %v, want %v", got, tc.all)
			}
			inA, err := services.Services("ns-a").List(labels.Everything())
			if err != nil {
				t.Fatal(err)
			}
			if got := serviceNames(inA); !slices.Equal(got, tc.inNamespaceA) {
				t.Errorf("Services(ns-a).List = %v, want %v", got, tc.inNamespaceA)
			}
			appX, err := services.List(labels.SelectorFromSet(labels.Set{"app": "x"}))
			if err != nil {
				t.Fatal(err)
			}
			if got := serviceNames(appX); !slices.Equal(got, tc.appX) {
				t.Errorf("List(app=x) = %v, want %v", got, tc.appX)
			}
			for _, key := range []string{"ns-a/s1", "ns-a/to-b", "ns-b/s1", "ns-b/to-a", "ns-free/s1", "ns-free/to-a"} {
				ns, name, _ := cache.SplitMetaNamespaceKey(key)
				_, err := services.Services(ns).Get(name)
				switch owned := slices.Contains(tc.all, key); {
				case owned && err != nil:
					t.Errorf("Get(%s) = %v, want the service", key, err)
				case !owned && !apierrors.IsNotFound(err):
					t.Errorf("Get(%s) = %v, want NotFound", key, err)
				}
			}

			nodes, err := corelisters.NewNodeLister(f.view(tenant, nodesResource).GetIndexer()).List(labels.Everything())
			if err != nil {
				t.Fatal(err)
			}
			var nodeNames []string
			for _, n := range nodes {
				nodeNames = append(nodeNames, n.Name)
			}
			slices.Sort(nodeNames)
			if !slices.Equal(nodeNames, tc.nodes) {
				t.Errorf("nodes = %v, want %v", nodeNames, tc.nodes)
			}

			namespaces, err := corelisters.NewNamespaceLister(f.view(tenant, tenancy.NamespacesResource).GetIndexer()).List(labels.Everything())
			if err != nil {
				t.Fatal(err)
			}
			var namespaceNames []string
			for _, n := range namespaces {
				namespaceNames = append(namespaceNames, n.Name)
			}
			if !slices.Equal(namespaceNames, tc.namespaces) {
				t.Errorf("namespaces = %v, want %v", namespaceNames, tc.namespaces)
			}

			written, err := corelisters.NewConfigMapLister(f.view(tenant, configMapsResource).GetIndexer()).List(labels.Everything())
			if err != nil {
				t.Fatal(err)
			}
			var writtenKeys []string
			for _, w := range written {
				writtenKeys = append(writtenKeys, w.Namespace+"/"+w.Name)
			}
			slices.Sort(writtenKeys)
			if !slices.Equal(writtenKeys, tc.written) {
				t.Errorf("manager-written = %v, want %v", writtenKeys, tc.written)
			}

			// The other index queries are filtered the same way.
			indexer := f.view(tenant, servicesResource).GetIndexer()
			keys, err := indexer.IndexKeys(cache.NamespaceIndex, "ns-a")
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(keys)
			if !slices.Equal(keys, tc.inNamespaceA) {
				t.Errorf("IndexKeys(namespace, ns-a) = %v, want %v", keys, tc.inNamespaceA)
			}
			var wantNamespaces []string
			for _, key := range tc.all {
				ns, _, _ := cache.SplitMetaNamespaceKey(key)
				if !slices.Contains(wantNamespaces, ns) {
					wantNamespaces = append(wantNamespaces, ns)
				}
			}
			gotNamespaces := indexer.ListIndexFuncValues(cache.NamespaceIndex)
			slices.Sort(gotNamespaces)
			if !slices.Equal(gotNamespaces, wantNamespaces) {
				t.Errorf("ListIndexFuncValues(namespace) = %v, want %v", gotNamespaces, wantNamespaces)
			}
		})
	}
}

func TestViewIsReadOnlyAndSaysWhatItCannotDo(t *testing.T) {
	f := newFixture(t, serviceObj("ns-x", "s1", "a"))
	view := f.view(f.tenant("a"), servicesResource)
	indexer := view.GetIndexer()
	svc := serviceObj("ns-x", "s1", "a")

	for name, err := range map[string]error{
		"Add":         indexer.Add(svc),
		"Update":      indexer.Update(svc),
		"Delete":      indexer.Delete(svc),
		"Replace":     indexer.Replace([]any{svc}, "1"),
		"Resync":      indexer.Resync(),
		"AddIndexers": indexer.AddIndexers(cache.Indexers{"x": cache.MetaNamespaceIndexFunc}),
	} {
		if !errors.Is(err, tenancy.ErrReadOnly) {
			t.Errorf("indexer.%s = %v, want ErrReadOnly", name, err)
		}
	}
	for name, err := range map[string]error{
		"SetTransform":                    view.SetTransform(func(o any) (any, error) { return o, nil }),
		"SetWatchErrorHandler":            view.SetWatchErrorHandler(func(*cache.Reflector, error) {}),
		"SetWatchErrorHandlerWithContext": view.SetWatchErrorHandlerWithContext(func(context.Context, *cache.Reflector, error) {}),
		"AddIndexers":                     view.AddIndexers(cache.Indexers{"x": cache.MetaNamespaceIndexFunc}),
	} {
		if !errors.Is(err, tenancy.ErrNotSupportedOnView) {
			t.Errorf("view.%s = %v, want ErrNotSupportedOnView", name, err)
		}
	}
	// The store was not touched by any of it.
	if _, exists, _ := f.services.GetStore().GetByKey("ns-x/s1"); !exists {
		t.Error("the shared store lost ns-x/s1")
	}
	if got := len(f.services.GetStore().List()); got != 1 {
		t.Errorf("the shared store holds %d services, want 1", got)
	}

	// Run does not run the shared informer; it returns when told to stop.
	stop := make(chan struct{})
	returned := make(chan struct{})
	go func() {
		view.Run(stop)
		close(returned)
	}()
	close(stop)
	waitClosed(t, "Run to return after stop", returned)
	if !view.HasSynced() || view.GetController().HasSynced() != view.HasSynced() {
		t.Error("view and its controller disagree on, or lack, sync")
	}
	if view.LastSyncResourceVersion() != f.services.LastSyncResourceVersion() {
		t.Error("LastSyncResourceVersion is not the shared informer's")
	}
}

func TestSetupErrors(t *testing.T) {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	unindexed := factory.Core().V1().Namespaces().Informer()
	if _, err := tenancy.NewRouter(labelKey, unindexed); err == nil {
		t.Error("NewRouter accepted a Namespace informer without the ownership index")
	}
	otherKey := factory.Core().V1().Services().Informer()
	if err := otherKey.AddIndexers(tenancy.Indexers("example.com/other")); err != nil {
		t.Fatal(err)
	}

	f := newFixture(t)
	if err := f.router.AddResource(schema.GroupVersionResource{Version: "v1", Resource: "endpoints"}, otherKey, tenancy.Namespaced); err == nil {
		t.Error("AddResource accepted an informer indexed for another label key")
	}
	if err := f.router.AddResource(servicesResource, f.services, tenancy.Namespaced); err == nil {
		t.Error("AddResource accepted a resource twice")
	}
	if err := f.router.AddResource(schema.GroupVersionResource{Resource: "things"}, f.services, tenancy.Scope(0)); err == nil {
		t.Error("AddResource accepted scope 0")
	}
	if _, err := f.router.Tenant(""); err == nil {
		t.Error("Tenant accepted an empty name")
	}
	if _, err := f.tenant("a").Informer(schema.GroupVersionResource{Resource: "unrouted"}); err == nil {
		t.Error("Informer returned a view of a resource that is not routed")
	}
}

func TestHandlerSyncWaitsForTheSharedInformers(t *testing.T) {
	client := fake.NewClientset(namespaceObj("ns-a", "a"), serviceObj("ns-a", "s1", ""))
	factory := informers.NewSharedInformerFactory(client, 0)
	namespaces := factory.Core().V1().Namespaces().Informer()
	services := factory.Core().V1().Services().Informer()
	for _, informer := range []cache.SharedIndexInformer{namespaces, services} {
		if err := informer.AddIndexers(tenancy.Indexers(labelKey)); err != nil {
			t.Fatal(err)
		}
	}
	router, err := tenancy.NewRouter(labelKey, namespaces)
	if err != nil {
		t.Fatal(err)
	}
	if err := router.AddResource(servicesResource, services, tenancy.Namespaced); err != nil {
		t.Fatal(err)
	}
	tenant, err := router.Tenant("a")
	if err != nil {
		t.Fatal(err)
	}
	view, err := tenant.Informer(servicesResource)
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	reg, err := view.AddEventHandler(rec.handler("services"))
	if err != nil {
		t.Fatal(err)
	}
	// Nothing runs yet, so nothing can have synced.
	if view.HasSynced() || reg.HasSynced() {
		t.Fatalf("synced before the informers started: view %v, handler %v", view.HasSynced(), reg.HasSynced())
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer func() {
		cancel()
		factory.Shutdown()
	}()
	factory.Start(ctx.Done())
	if !cache.WaitFor(ctx, "", view.HasSyncedChecker(), reg.HasSyncedChecker()) {
		t.Fatal("never synced")
	}
	// By the time the handler reports synced it has its initial list.
	if got, want := rec.stateKeys(), []string{"services ns-a/s1"}; !slices.Equal(got, want) {
		t.Errorf("at sync the handler knows %v, want %v", got, want)
	}
	if rec.initialCount("services ns-a/s1") != 1 {
		t.Error("the initial Add did not say isInInitialList")
	}
	tenant.Close()
}

func TestRemoveEventHandler(t *testing.T) {
	f := newFixture(t, namespaceObj("ns-a", "a"))
	tenantA, tenantB := f.tenant("a"), f.tenant("b")
	removed, kept := newRecorder(), newRecorder()
	removedRegs := f.watch(tenantA, removed)
	f.watch(tenantA, kept)
	if got, want := f.router.RegistrationCount(), 2*len(allResources); got != want {
		t.Fatalf("RegistrationCount = %d, want %d", got, want)
	}

	for i, resource := range allResources {
		view := f.view(tenantA, resource)
		if err := view.RemoveEventHandler(removedRegs[i]); err != nil {
			t.Fatalf("RemoveEventHandler(%s): %v", resource, err)
		}
		if err := view.RemoveEventHandler(removedRegs[i]); err != nil {
			t.Errorf("removing twice: %v", err)
		}
	}
	if got, want := f.router.RegistrationCount(), len(allResources); got != want {
		t.Errorf("RegistrationCount = %d after removing one handler per resource, want %d", got, want)
	}
	if got, want := tenantA.RegistrationCount(), len(allResources); got != want {
		t.Errorf("tenant RegistrationCount = %d, want %d", got, want)
	}

	// A registration can only be removed through a view of its own tenant and resource.
	bReg, err := f.view(tenantB, servicesResource).AddEventHandler(newRecorder().handler("services"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.view(tenantA, servicesResource).RemoveEventHandler(bReg); err == nil {
		t.Error("tenant a's view removed tenant b's handler")
	}
	if err := f.view(tenantB, nodesResource).RemoveEventHandler(bReg); err == nil {
		t.Error("the nodes view removed a services handler")
	}

	removed.takeEvents()
	kept.takeEvents()
	f.create(serviceObj("ns-a", "s1", ""))
	f.create(nodeObj("n1", ""))
	f.barrier(map[string]*recorder{"a": kept})
	if got := kept.takeEvents(); !slices.Equal(byObject(got), []string{"ADD nodes n1", "ADD services ns-a/s1"}) {
		t.Errorf("kept handler got %v", got)
	}
	if got := removed.takeEvents(); len(got) != 0 {
		t.Errorf("removed handler still got %v", got)
	}

	// client-go's ShutDownEventHandler works on views and returns once no call is in progress.
	if err := cache.ShutDownEventHandler(f.view(tenantB, servicesResource), bReg); err != nil {
		t.Errorf("ShutDownEventHandler: %v", err)
	}
}

func TestClosedTenantRefusesHandlers(t *testing.T) {
	f := newFixture(t)
	tenant := f.tenant("a")
	view := f.view(tenant, servicesResource)
	f.watch(tenant, newRecorder())
	tenant.Close()
	tenant.Close()
	if got := tenant.RegistrationCount(); got != 0 {
		t.Errorf("RegistrationCount = %d after Close, want 0", got)
	}
	if _, err := view.AddEventHandler(newRecorder().handler("services")); err == nil {
		t.Error("a closed tenant accepted a handler")
	}
	if !view.IsStopped() {
		t.Error("a closed tenant's view does not report stopped")
	}
	// Another handle for the same tenant is independent.
	if got, want := len(f.watch(f.tenant("a"), newRecorder())), len(allResources); got != want {
		t.Errorf("a new handle registered %d handlers, want %d", got, want)
	}
}

// callbackHandler calls fn on every event that is not part of the initial list.
type callbackHandler struct {
	fn func(kind string, obj any)
}

func (h callbackHandler) OnAdd(obj any, isInInitialList bool) {
	if !isInInitialList {
		h.fn("ADD", obj)
	}
}
func (h callbackHandler) OnUpdate(_, newObj any) { h.fn("UPDATE", newObj) }
func (h callbackHandler) OnDelete(obj any)       { h.fn("DELETE", obj) }

func nameOf(obj any) string {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if svc, ok := obj.(*corev1.Service); ok {
		return svc.Name
	}
	return ""
}

// TestHandlersMayCallBackIntoTheRouter: during dispatch a handler removes itself, removes another handler that
// would be called next for the same event, registers a new handler, lists its view, and closes its tenant. None of
// it may deadlock, and a removed handler gets nothing more.
func TestHandlersMayCallBackIntoTheRouter(t *testing.T) {
	f := newFixture(t, namespaceObj("ns-a", "a"), namespaceObj("ns-c", "c"))
	tenantA := f.tenant("a")
	view := f.view(tenantA, servicesResource)

	var selfReg, victimReg atomic.Pointer[cache.ResourceEventHandlerRegistration]
	var selfCalls, victimCalls atomic.Int32
	selfRemoved, victimRemoved, added, listed := make(chan struct{}), make(chan struct{}), make(chan struct{}), make(chan struct{})
	var addedReg atomic.Pointer[cache.ResourceEventHandlerRegistration]

	self, err := view.AddEventHandler(callbackHandler{fn: func(kind string, obj any) {
		if selfCalls.Add(1) > 1 {
			return
		}
		if err := view.RemoveEventHandler(*selfReg.Load()); err != nil {
			t.Errorf("removing itself: %v", err)
		}
		close(selfRemoved)
	}})
	if err != nil {
		t.Fatal(err)
	}
	selfReg.Store(&self)
	// The remover is registered before the victim, so for the same event it is called first.
	remover, err := view.AddEventHandler(callbackHandler{fn: func(kind string, obj any) {
		if nameOf(obj) != "remove-victim" {
			return
		}
		if err := view.RemoveEventHandler(*victimReg.Load()); err != nil {
			t.Errorf("removing the victim: %v", err)
		}
		close(victimRemoved)
	}})
	if err != nil {
		t.Fatal(err)
	}
	waitClosed(t, "remover to sync", remover.HasSyncedChecker().Done())
	victim, err := view.AddEventHandler(callbackHandler{fn: func(kind string, obj any) {
		if nameOf(obj) == "remove-victim" {
			victimCalls.Add(1)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	victimReg.Store(&victim)
	adder, err := view.AddEventHandler(callbackHandler{fn: func(kind string, obj any) {
		switch nameOf(obj) {
		case "add-handler":
			reg, err := view.AddEventHandler(newRecorder().handler("services"))
			if err != nil {
				t.Errorf("adding a handler during dispatch: %v", err)
				return
			}
			addedReg.Store(&reg)
			close(added)
		case "list":
			if got := len(view.GetIndexer().List()); got == 0 {
				t.Error("listing during dispatch found nothing")
			}
			close(listed)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, reg := range []cache.ResourceEventHandlerRegistration{self, victim, adder} {
		waitClosed(t, "handlers to sync", reg.HasSyncedChecker().Done())
	}

	f.create(serviceObj("ns-a", "remove-self", ""))
	waitClosed(t, "the handler to remove itself", selfRemoved)
	f.create(serviceObj("ns-a", "remove-victim", ""))
	waitClosed(t, "the victim to be removed", victimRemoved)
	f.create(serviceObj("ns-a", "add-handler", ""))
	waitClosed(t, "a handler to be added during dispatch", added)
	waitClosed(t, "the handler added during dispatch to sync", (*addedReg.Load()).HasSyncedChecker().Done())
	f.create(serviceObj("ns-a", "list", ""))
	waitClosed(t, "a list during dispatch", listed)

	// A handler of tenant c closes its own tenant while being called.
	tenantC := f.tenant("c")
	closed := make(chan struct{})
	closer, err := f.view(tenantC, servicesResource).AddEventHandler(callbackHandler{fn: func(string, any) {
		tenantC.Close()
		close(closed)
	}})
	if err != nil {
		t.Fatal(err)
	}
	waitClosed(t, "closer to sync", closer.HasSyncedChecker().Done())
	f.create(serviceObj("ns-c", "close", ""))
	waitClosed(t, "the tenant to be closed from its handler", closed)

	// Everything after those events reached the remaining handlers; the removed ones got nothing more.
	f.barrier(map[string]*recorder{"a": f.watchedRecorder(tenantA)})
	if got := selfCalls.Load(); got != 1 {
		t.Errorf("the handler that removed itself was called %d times, want 1", got)
	}
	if got := victimCalls.Load(); got != 0 {
		t.Errorf("the handler removed earlier in the same dispatch was called %d times for that event, want 0", got)
	}
	if got := tenantC.RegistrationCount(); got != 0 {
		t.Errorf("tenant c has %d registrations after closing itself", got)
	}
}

// watchedRecorder registers a fresh recorder on all of the tenant's views, for barriers.
func (f *fixture) watchedRecorder(tenant *tenancy.TenantViews) *recorder {
	rec := newRecorder()
	f.watch(tenant, rec)
	return rec
}

// TestResyncsGoOnlyToHandlersThatWantThem: the shared informer resyncs every second; a handler registered with
// resync period 0 must not see those updates, one registered with the default must. Resyncs do not report an
// ignored tenant label again.
func TestResyncsGoOnlyToHandlersThatWantThem(t *testing.T) {
	f := newFixtureWithResync(t, time.Second, namespaceObj("ns-a", "a"), serviceObj("ns-a", "s1", "b"))
	view := f.view(f.tenant("a"), servicesResource)
	noResync, withResync := newRecorder(), newRecorder()
	// noResync is registered first, so within each dispatch it is called before withResync.
	first, err := view.AddEventHandlerWithResyncPeriod(noResync.handler("services"), 0)
	if err != nil {
		t.Fatal(err)
	}
	waitClosed(t, "sync", first.HasSyncedChecker().Done())
	second, err := view.AddEventHandler(withResync.handler("services"))
	if err != nil {
		t.Fatal(err)
	}
	waitClosed(t, "sync", second.HasSyncedChecker().Done())
	withResync.takeEvents()
	noResync.takeEvents()

	waitFor(t, "two resyncs", func() bool {
		return len(withResync.eventsSoFar()) >= 2
	})
	if got := withResync.eventsSoFar(); got[0] != "UPDATE services ns-a/s1" {
		t.Errorf("resync delivered %v", got)
	}
	if got := noResync.eventsSoFar(); len(got) != 0 {
		t.Errorf("a handler that asked for no resync got %v", got)
	}
	if got := f.events.take(); len(got) != 1 {
		t.Errorf("after two resyncs the ignored label was reported %d times, want once: %q", len(got), got)
	}
}

// eventsSoFar returns the events recorded since the last takeEvents, without taking them.
func (r *recorder) eventsSoFar() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}
