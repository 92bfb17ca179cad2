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
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/multiproject/multiproject-controller-manager/pkg/tenancy"
	"github.com/multiproject/multiproject-controller-manager/test/benchresult"
)

// The benchmarks compare this package with the reference implementation's approach, one
// cache.FilteringResourceEventHandler (and one post-filtering store) per tenant, over the same objects: benchTotal
// Services spread evenly over 1 to 1000 tenants. Tenant i owns namespace ns-i; every other Service also carries
// the tenant label of its namespace, which decides nothing but must be checked against the namespace's. The
// baseline's filter applies the same ownership rule.
// Run them with:
//
//	go test -run '^$' -bench . -benchmem ./pkg/tenancy/
const benchTotal = 10000

var benchTenantCounts = []int{1, 10, 100, 1000}

// benchCluster is the shared informers of one benchmark run, synced from a static list.
type benchCluster struct {
	tenants    int
	namespaces cache.SharedIndexInformer
	services   cache.SharedIndexInformer
	// updates holds, for each Service, an old and a new version as an informer would hand them to a handler.
	updates [][2]*corev1.Service
	cancel  context.CancelFunc
}

func tenantName(i int) string { return "tenant-" + strconv.Itoa(i) }

func newBenchCluster(b *testing.B, tenants int) *benchCluster {
	b.Helper()
	namespaceList := &corev1.NamespaceList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}
	for i := range tenants {
		namespaceList.Items = append(namespaceList.Items, *namespaceObj("ns-"+strconv.Itoa(i), tenantName(i)))
	}
	serviceList := &corev1.ServiceList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}
	c := &benchCluster{tenants: tenants}
	for j := range benchTotal {
		owner := j % tenants
		label := ""
		if j%2 == 0 {
			label = tenantName(owner)
		}
		svc := serviceObj("ns-"+strconv.Itoa(owner), "svc-"+strconv.Itoa(j), label)
		svc.ResourceVersion = "1"
		serviceList.Items = append(serviceList.Items, *svc)
		updated := svc.DeepCopy()
		updated.ResourceVersion = "2"
		updated.Annotations = map[string]string{"changed": "yes"}
		c.updates = append(c.updates, [2]*corev1.Service{svc, updated})
	}
	c.namespaces = cache.NewSharedIndexInformer(staticListWatch(namespaceList), &corev1.Namespace{}, 0, tenancy.Indexers(labelKey))
	c.services = cache.NewSharedIndexInformer(staticListWatch(serviceList), &corev1.Service{}, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := c.services.AddIndexers(tenancy.Indexers(labelKey)); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go c.namespaces.RunWithContext(ctx)
	go c.services.RunWithContext(ctx)
	if !cache.WaitFor(ctx, "", c.namespaces.HasSyncedChecker(), c.services.HasSyncedChecker()) {
		b.Fatal("informers did not sync")
	}
	return c
}

func (c *benchCluster) stop() { c.cancel() }

// owns is the ownership rule as a per-tenant filter, the way the reference implementation decides visibility: a
// Service belongs to its namespace's tenant.
func (c *benchCluster) owns(tenant string, obj any) bool {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	ns, exists, err := c.namespaces.GetIndexer().GetByKey(m.GetNamespace())
	if err != nil || !exists {
		return false
	}
	return ns.(*corev1.Namespace).Labels[labelKey] == tenant
}

func staticListWatch(list k8sruntime.Object) cache.ListerWatcher {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (k8sruntime.Object, error) { return list, nil },
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			return watch.NewFake(), nil // never sends, never closes: the lists are all there is
		},
	}
	return cache.ToListWatcherWithWatchListSemantics(lw, listThenWatch{})
}

type listThenWatch struct{}

func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }

// countingHandler counts the events it is given; a tenant controller would enqueue a key instead.
type countingHandler struct{ events atomic.Int64 }

func (h *countingHandler) OnAdd(any, bool)   { h.events.Add(1) }
func (h *countingHandler) OnUpdate(_, _ any) { h.events.Add(1) }
func (h *countingHandler) OnDelete(any)      { h.events.Add(1) }
func (h *countingHandler) count() int64      { return h.events.Load() }
func (h *countingHandler) reset()            { h.events.Store(0) }

func sumOf(hs []*countingHandler) (n int64) {
	for _, h := range hs {
		n += h.count()
	}
	return n
}

// memory is what a variant's routing costs once it is set up: heap in use and goroutines.
type memory struct {
	heap       uint64
	goroutines int
}

func measure() memory {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return memory{heap: m.HeapAlloc, goroutines: runtime.NumGoroutine()}
}

func (m memory) report(b *testing.B, base memory) (heap float64) {
	heap = float64(int64(m.heap) - int64(base.heap))
	b.ReportMetric(heap, "heap-B")
	b.ReportMetric(float64(m.goroutines-base.goroutines), "goroutines")
	return heap
}

// routerSetup is this package: one router, one registration per tenant.
type routerSetup struct {
	router   *tenancy.Router
	tenants  []*tenancy.TenantViews
	handlers []*countingHandler
	dispatch cache.ResourceEventHandler
}

func newRouterSetup(b *testing.B, c *benchCluster) *routerSetup {
	b.Helper()
	// As in the manager, the router judges tenant labels and would report ignored ones (none are here; a
	// FakeRecorder without a channel drops what it is given).
	router, err := tenancy.NewRouterWithOptions(labelKey, c.namespaces, tenancy.RouterOptions{Recorder: &record.FakeRecorder{}})
	if err != nil {
		b.Fatal(err)
	}
	if err := router.AddResource(servicesResource, c.services, tenancy.Namespaced); err != nil {
		b.Fatal(err)
	}
	s := &routerSetup{router: router, dispatch: tenancy.RouterHandlerOf(router, servicesResource)}
	var regs []cache.ResourceEventHandlerRegistration
	for i := range c.tenants {
		tenant, err := router.Tenant(tenantName(i))
		if err != nil {
			b.Fatal(err)
		}
		view, err := tenant.Informer(servicesResource)
		if err != nil {
			b.Fatal(err)
		}
		h := &countingHandler{}
		reg, err := view.AddEventHandler(h)
		if err != nil {
			b.Fatal(err)
		}
		s.tenants, s.handlers, regs = append(s.tenants, tenant), append(s.handlers, h), append(regs, reg)
	}
	for _, reg := range regs {
		<-reg.HasSyncedChecker().Done()
	}
	if got := sumOf(s.handlers); got != benchTotal {
		b.Fatalf("initial lists delivered %d services, want %d", got, benchTotal)
	}
	return s
}

func (s *routerSetup) close() {
	for _, t := range s.tenants {
		t.Close()
	}
	_ = s.router.Close()
}

// filteringSetup is the reference implementation's approach: one FilteringResourceEventHandler per tenant on the
// shared informer, each applying the ownership rule to every event.
type filteringSetup struct {
	informer  cache.SharedIndexInformer
	regs      []cache.ResourceEventHandlerRegistration
	filtering []cache.ResourceEventHandler
	handlers  []*countingHandler
}

func newFilteringSetup(b *testing.B, c *benchCluster) *filteringSetup {
	b.Helper()
	s := &filteringSetup{informer: c.services}
	for i := range c.tenants {
		tenant := tenantName(i)
		h := &countingHandler{}
		filtering := cache.FilteringResourceEventHandler{
			FilterFunc: func(obj any) bool { return c.owns(tenant, obj) },
			Handler:    h,
		}
		reg, err := c.services.AddEventHandler(filtering)
		if err != nil {
			b.Fatal(err)
		}
		s.regs, s.filtering, s.handlers = append(s.regs, reg), append(s.filtering, filtering), append(s.handlers, h)
	}
	for _, reg := range s.regs {
		<-reg.HasSyncedChecker().Done()
	}
	if got := sumOf(s.handlers); got != benchTotal {
		b.Fatalf("initial lists delivered %d services, want %d", got, benchTotal)
	}
	return s
}

func (s *filteringSetup) close() {
	for _, reg := range s.regs {
		_ = s.informer.RemoveEventHandler(reg)
	}
}

// BenchmarkRouteEvent measures one Service update reaching its tenant's handler. The router variant calls the
// router's handler as the shared informer would; the baseline calls every tenant's filtering handler, as the shared
// informer would with one listener per tenant. The baseline leaves out the informer's per-listener channel hops and
// goroutines, so its real cost is higher than measured; heap-B and goroutines show what each approach holds once
// set up (10,000 Services, one handler per tenant).
func BenchmarkRouteEvent(b *testing.B) {
	var figures benchresult.Figures
	defer recordRouteRows(b, &figures)
	for _, tenants := range benchTenantCounts {
		b.Run(fmt.Sprintf("tenants=%d", tenants), func(b *testing.B) {
			b.Run("router", func(b *testing.B) {
				c := newBenchCluster(b, tenants)
				defer c.stop()
				base := measure()
				s := newRouterSetup(b, c)
				defer s.close()
				used := measure()
				for _, h := range s.handlers {
					h.reset()
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					u := c.updates[i%benchTotal]
					s.dispatch.OnUpdate(u[0], u[1])
				}
				b.StopTimer()
				if got := sumOf(s.handlers); got != int64(b.N) {
					b.Fatalf("%d events reached handlers, want %d", got, b.N)
				}
				figures.Set(figureName(tenants, "router", "heap"), used.report(b, base))
				figures.Set(figureName(tenants, "router", "ns"), nsPerOp(b))
			})
			b.Run("filter-per-tenant", func(b *testing.B) {
				c := newBenchCluster(b, tenants)
				defer c.stop()
				base := measure()
				s := newFilteringSetup(b, c)
				defer s.close()
				used := measure()
				for _, h := range s.handlers {
					h.reset()
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					u := c.updates[i%benchTotal]
					for _, h := range s.filtering {
						h.OnUpdate(u[0], u[1])
					}
				}
				b.StopTimer()
				if got := sumOf(s.handlers); got != int64(b.N) {
					b.Fatalf("%d events reached handlers, want %d", got, b.N)
				}
				figures.Set(figureName(tenants, "filter-per-tenant", "heap"), used.report(b, base))
				figures.Set(figureName(tenants, "filter-per-tenant", "ns"), nsPerOp(b))
			})
		})
	}
}

// BenchmarkTenantList measures listing one tenant's Services: through the tenant's view (the ownership index) and
// by filtering the whole shared store, as the reference implementation's filtered store does.
func BenchmarkTenantList(b *testing.B) {
	var figures benchresult.Figures
	defer recordTenantListRow(b, &figures)
	for _, tenants := range benchTenantCounts {
		b.Run(fmt.Sprintf("tenants=%d", tenants), func(b *testing.B) {
			c := newBenchCluster(b, tenants)
			defer c.stop()
			want := benchTotal / tenants
			b.Run("index", func(b *testing.B) {
				router, err := tenancy.NewRouter(labelKey, c.namespaces)
				if err != nil {
					b.Fatal(err)
				}
				defer func() { _ = router.Close() }()
				if err := router.AddResource(servicesResource, c.services, tenancy.Namespaced); err != nil {
					b.Fatal(err)
				}
				indexers := make([]cache.Indexer, tenants)
				for i := range tenants {
					tenant, err := router.Tenant(tenantName(i))
					if err != nil {
						b.Fatal(err)
					}
					view, err := tenant.Informer(servicesResource)
					if err != nil {
						b.Fatal(err)
					}
					indexers[i] = view.GetIndexer()
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					if got := len(indexers[i%tenants].List()); got != want {
						b.Fatalf("listed %d, want %d", got, want)
					}
				}
				figures.Set(figureName(tenants, "index", "ns"), nsPerOp(b))
			})
			b.Run("post-filter", func(b *testing.B) {
				store := c.services.GetStore()
				names := make([]string, tenants)
				for i := range tenants {
					names[i] = tenantName(i)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					tenant := names[i%tenants]
					var owned []any
					for _, obj := range store.List() {
						if c.owns(tenant, obj) {
							owned = append(owned, obj)
						}
					}
					if len(owned) != want {
						b.Fatalf("listed %d, want %d", len(owned), want)
					}
				}
				figures.Set(figureName(tenants, "post-filter", "ns"), nsPerOp(b))
			})
		})
	}
}
