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
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/multiproject/multiproject-controller-manager/pkg/tenancy"
)

// TestTenantStartStopLeavesNothingBehind starts and stops tenants many times, in the ways a controller manager
// does (register and sync, remove one handler and wait for it, close before the initial list is through), while
// events flow. Afterwards the shared informers carry only the router's handler, the router holds no registration,
// and the goroutine count is back to where it was.
func TestTenantStartStopLeavesNothingBehind(t *testing.T) {
	const tenants, cycles = 5, 200
	var objects []k8sruntime.Object
	for i := range tenants {
		ns := fmt.Sprintf("ns-%d", i)
		objects = append(objects, namespaceObj(ns, fmt.Sprintf("t%d", i)), serviceObj(ns, "s", ""), nodeObj(ns, ""))
	}
	f := newFixture(t, objects...)

	cycle := func(i int) {
		tenant := f.tenant(fmt.Sprintf("t%d", i%tenants))
		regs := f.watch(tenant, newRecorder())
		for _, resource := range allResources {
			// HasSyncedChecker starts a helper goroutine once per resource, not per tenant.
			if !cache.IsDone(f.view(tenant, resource).HasSyncedChecker()) {
				waitClosed(t, "view sync", f.view(tenant, resource).HasSyncedChecker().Done())
			}
		}
		if err := cache.ShutDownEventHandler(f.view(tenant, tenancy.NamespacesResource), regs[0]); err != nil {
			t.Fatalf("ShutDownEventHandler: %v", err)
		}
		// Closed before its initial list may have been delivered.
		if _, err := f.view(tenant, servicesResource).AddEventHandler(newRecorder().handler("services")); err != nil {
			t.Fatal(err)
		}
		f.touch(serviceObj(fmt.Sprintf("ns-%d", i%tenants), "s", ""))
		f.touch(nodeObj(fmt.Sprintf("ns-%d", i%tenants), ""))
		tenant.Close()
	}

	cycle(0)
	waitFor(t, "the first cycle's goroutines to end", func() bool { return f.router.RegistrationCount() == 0 })
	// The fake clientset keeps every action it served; drop them so the heap shows what the tenants left behind.
	f.client.ClearActions()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	baseline := runtime.NumGoroutine()

	for i := 1; i <= cycles; i++ {
		cycle(i)
	}

	if got := f.router.RegistrationCount(); got != 0 {
		t.Errorf("RegistrationCount = %d after every tenant closed, want 0", got)
	}
	if got := tenancy.RoutingEntries(f.router); got != 0 {
		t.Errorf("the router still has %d per-tenant routing entries", got)
	}
	for name, informer := range map[string]*countingInformer{"namespaces": f.namespaces, "services": f.services, "nodes": f.nodes, "configmaps": f.configMaps} {
		if informer.added.Load() != 1 || informer.handlers() != 1 {
			t.Errorf("%s informer: %d handlers added, %d live; want exactly the router's one", name, informer.added.Load(), informer.handlers())
		}
	}
	waitFor(t, fmt.Sprintf("goroutines to return to %d", baseline), func() bool { return runtime.NumGoroutine() <= baseline })

	f.client.ClearActions()
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	t.Logf("heap in use: %d KiB before %d cycles, %d KiB after", before.HeapAlloc/1024, cycles, after.HeapAlloc/1024)
	// A cycle registers five handlers; leaking them would cost well over a KiB per cycle. The slack is for the
	// runtime's and the fake clientset's own noise.
	const slack = 256 << 10
	if after.HeapAlloc > before.HeapAlloc+slack {
		t.Errorf("heap grew by %d KiB over %d cycles", (after.HeapAlloc-before.HeapAlloc)/1024, cycles)
	}
}

// TestConcurrentChurnKeepsEveryTenantConsistent mutates services, namespaces, nodes and manager-written objects from
// several goroutines while tenants come and go. Once it is over, what each tenant learned from its events must be
// exactly what its view lists: no lost delete, no object left with the wrong tenant.
func TestConcurrentChurnKeepsEveryTenantConsistent(t *testing.T) {
	const writers, opsPerWriter, namespaces = 4, 150, 6
	tenantNames := []string{"a", "b", "c"}
	labelChoices := append([]string{""}, tenantNames...)

	var objects []k8sruntime.Object
	for i := range namespaces {
		objects = append(objects, namespaceObj(fmt.Sprintf("ns-%d", i), tenantNames[i%len(tenantNames)]))
	}
	for i := range 4 {
		objects = append(objects, nodeObj(fmt.Sprintf("node-%d", i), ""))
	}
	f := newFixture(t, objects...)

	recorders := map[string]*recorder{}
	tenants := map[string]*tenancy.TenantViews{}
	for _, name := range tenantNames {
		tenants[name] = f.tenant(name)
		recorders[name] = newRecorder()
		f.watch(tenants[name], recorders[name])
	}

	ctx := context.Background()
	core := f.client.CoreV1()
	relabel := func(get func() (metav1.Object, error), update func() error, tenant string) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			m, err := get()
			if err != nil {
				return err
			}
			labels := maps.Clone(m.GetLabels())
			if labels == nil {
				labels = map[string]string{}
			}
			if tenant == "" {
				delete(labels, labelKey)
			} else {
				labels[labelKey] = tenant
			}
			m.SetLabels(labels)
			return update()
		})
	}

	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(w), 42))
			var mine []string
			for op := range opsPerWriter {
				label := labelChoices[rnd.IntN(len(labelChoices))]
				ns := fmt.Sprintf("ns-%d", rnd.IntN(namespaces+1)) // ns-6 never exists
				var err error
				switch k := rnd.IntN(11); {
				case k < 4 || len(mine) == 0:
					name := fmt.Sprintf("w%d-s%d", w, op)
					_, err = core.Services(ns).Create(ctx, serviceObj(ns, name, label), metav1.CreateOptions{})
					mine = append(mine, ns+"/"+name)
				case k < 6:
					ns, name, _ := cache.SplitMetaNamespaceKey(mine[rnd.IntN(len(mine))])
					var svc *corev1.Service
					err = relabel(func() (metav1.Object, error) {
						svc, err = core.Services(ns).Get(ctx, name, metav1.GetOptions{})
						return svc, err
					}, func() error {
						_, err := core.Services(ns).Update(ctx, svc, metav1.UpdateOptions{})
						return err
					}, label)
				case k < 7:
					i := rnd.IntN(len(mine))
					ns, name, _ := cache.SplitMetaNamespaceKey(mine[i])
					err = core.Services(ns).Delete(ctx, name, metav1.DeleteOptions{})
					mine = slices.Delete(mine, i, i+1)
				case k < 9:
					var nsObj *corev1.Namespace
					err = relabel(func() (metav1.Object, error) {
						nsObj, err = core.Namespaces().Get(ctx, ns, metav1.GetOptions{})
						return nsObj, err
					}, func() error {
						_, err := core.Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{})
						return err
					}, label)
				case k < 10:
					// A manager-written object, created or relabeled: its label decides, not its namespace.
					name := fmt.Sprintf("w%d-c%d", w, rnd.IntN(3))
					_, err = core.ConfigMaps(ns).Create(ctx, writtenObj(ns, name, label), metav1.CreateOptions{})
					if apierrors.IsAlreadyExists(err) {
						var cm *corev1.ConfigMap
						err = relabel(func() (metav1.Object, error) {
							cm, err = core.ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
							return cm, err
						}, func() error {
							_, err := core.ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
							return err
						}, label)
					}
				default:
					node := fmt.Sprintf("node-%d", rnd.IntN(4))
					var nodeObj *corev1.Node
					err = relabel(func() (metav1.Object, error) {
						nodeObj, err = core.Nodes().Get(ctx, node, metav1.GetOptions{})
						return nodeObj, err
					}, func() error {
						_, err := core.Nodes().Update(ctx, nodeObj, metav1.UpdateOptions{})
						return err
					}, label)
				}
				if err != nil && !apierrors.IsNotFound(err) {
					t.Errorf("writer %d op %d: %v", w, op, err)
					return
				}
			}
		})
	}
	// Meanwhile a fourth tenant starts and stops over and over, and one of a's handlers comes and goes.
	stop := make(chan struct{})
	var churn sync.WaitGroup
	churn.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			tenant, err := f.router.Tenant("d")
			if err != nil {
				t.Error(err)
				return
			}
			for _, resource := range allResources {
				view, err := tenant.Informer(resource)
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := view.AddEventHandler(newRecorder().handler(resource.Resource)); err != nil {
					t.Error(err)
					return
				}
			}
			tenant.Close()

			view, err := tenants["a"].Informer(servicesResource)
			if err != nil {
				t.Error(err)
				return
			}
			reg, err := view.AddEventHandler(newRecorder().handler("services"))
			if err != nil {
				t.Error(err)
				return
			}
			if err := view.RemoveEventHandler(reg); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Wait()
	close(stop)
	churn.Wait()
	if t.Failed() {
		return
	}

	f.barrier(recorders)
	for _, name := range tenantNames {
		known, listed := sets.New(recorders[name].stateKeys()...), sets.New(listedKeys(t, tenants[name], allResources...)...)
		if !known.Equal(listed) {
			t.Errorf("tenant %s: events left it believing in %v, which its view does not list, and never told it of %v, which it does",
				name, sets.List(known.Difference(listed)), sets.List(listed.Difference(known)))
		}
	}
	for _, tenant := range tenants {
		tenant.Close()
	}
	if got := f.router.RegistrationCount(); got != 0 {
		t.Errorf("RegistrationCount = %d after every tenant closed, want 0", got)
	}
}

// TestClosingBeforeTheInformersSyncEndsTheWait: a handler added before the shared informers have synced waits for
// them in a goroutine; closing the tenant must end that goroutine even if the informers never sync.
func TestClosingBeforeTheInformersSyncEndsTheWait(t *testing.T) {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
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
	baseline := runtime.NumGoroutine()
	for i := range 50 {
		tenant, err := router.Tenant(fmt.Sprintf("t%d", i))
		if err != nil {
			t.Fatal(err)
		}
		for _, resource := range []schema.GroupVersionResource{tenancy.NamespacesResource, servicesResource} {
			view, err := tenant.Informer(resource)
			if err != nil {
				t.Fatal(err)
			}
			reg, err := view.AddEventHandler(newRecorder().handler(resource.Resource))
			if err != nil {
				t.Fatal(err)
			}
			if reg.HasSynced() {
				t.Fatal("a handler synced although the informers never ran")
			}
		}
		tenant.Close()
	}
	if got := router.RegistrationCount(); got != 0 {
		t.Errorf("RegistrationCount = %d, want 0", got)
	}
	waitFor(t, fmt.Sprintf("goroutines to return to %d", baseline), func() bool { return runtime.NumGoroutine() <= baseline })
}

// handlerRemovalWaits is a shared informer whose RemoveEventHandler waits, as client-go's does while the informer
// stops, for a handler that is delivering an event of the router's and needs the router's lock.
type handlerRemovalWaits struct {
	cache.SharedIndexInformer
	delivery func()
}

func (i *handlerRemovalWaits) RemoveEventHandler(handle cache.ResourceEventHandlerRegistration) error {
	delivered := make(chan struct{})
	go func() {
		defer close(delivered)
		i.delivery()
	}()
	select {
	case <-delivered:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("a delivery of the router's never got the router's lock while its handler was removed")
	}
	return i.SharedIndexInformer.RemoveEventHandler(handle)
}

// TestCloseDoesNotHoldTheLockItsHandlersNeed: the manager closes the router while the informers stop. client-go's
// informer, stopping, holds its listeners until each handler returns, and removing a handler waits for that; a
// handler delivering a namespace move takes the router's lock. Close must not hold that lock while it removes its
// handlers, or the three wait for each other for good (seen once in 20 runs of a graceful stop).
func TestCloseDoesNotHoldTheLockItsHandlersNeed(t *testing.T) {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
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
	waiting := &handlerRemovalWaits{SharedIndexInformer: services, delivery: func() { tenancy.TakeResourcesLock(router) }}
	if err := router.AddResource(servicesResource, waiting, tenancy.Namespaced); err != nil {
		t.Fatal(err)
	}
	if err := router.Close(); err != nil {
		t.Fatal(err)
	}
}
