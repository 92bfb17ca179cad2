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
	"slices"
	"strconv"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/multiproject/multiproject-controller-manager/pkg/tenancy"
)

// serviceSource is a ListerWatcher whose objects can vanish without a watch event, the way they do when a watch
// breaks: the informer's next relist then reports them as cache.DeletedFinalStateUnknown tombstones.
type serviceSource struct {
	mu       sync.Mutex
	services map[string]*corev1.Service
	watcher  *watch.FakeWatcher
	version  int
}

// IsWatchListSemanticsUnSupported makes the reflector list then watch, which this source implements.
func (s *serviceSource) IsWatchListSemanticsUnSupported() bool { return true }

func (s *serviceSource) list(context.Context, metav1.ListOptions) (runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version++
	list := &corev1.ServiceList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(s.version)}}
	for _, svc := range s.services {
		list.Items = append(list.Items, *svc.DeepCopy())
	}
	return list, nil
}

func (s *serviceSource) watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watcher = watch.NewFake()
	return s.watcher, nil
}

// vanish drops services without telling the watch, then breaks the watch so the informer relists.
func (s *serviceSource) vanish(keys ...string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watcher == nil {
		return false
	}
	for _, key := range keys {
		delete(s.services, key)
	}
	s.watcher.Stop()
	s.watcher = nil
	return true
}

func TestTombstonesReachTheOwner(t *testing.T) {
	source := &serviceSource{services: map[string]*corev1.Service{}}
	for _, svc := range []*corev1.Service{
		serviceObj("ns-a", "labeled-c", "c"), // the label is ignored: a's, like its namespace
		serviceObj("ns-b", "unlabeled", ""),
		serviceObj("ns-c", "labeled-c", "c"),
	} {
		svc.ResourceVersion = "1"
		source.services[svc.Namespace+"/"+svc.Name] = svc
	}
	lw := &cache.ListWatch{ListWithContextFunc: source.list, WatchFuncWithContext: source.watch}
	services := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, source), &corev1.Service{}, 0,
		tenancy.Indexers(labelKey))

	factory := informers.NewSharedInformerFactory(fake.NewClientset(namespaceObj("ns-a", "a"), namespaceObj("ns-b", "b"), namespaceObj("ns-c", "c")), 0)
	namespaces := factory.Core().V1().Namespaces().Informer()
	if err := namespaces.AddIndexers(tenancy.Indexers(labelKey)); err != nil {
		t.Fatal(err)
	}
	router, err := tenancy.NewRouter(labelKey, namespaces)
	if err != nil {
		t.Fatal(err)
	}
	if err := router.AddResource(servicesResource, services, tenancy.Namespaced); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() {
		cancel()
		factory.Shutdown()
	}()
	factory.Start(ctx.Done())
	go services.RunWithContext(ctx)

	recorders := map[string]*recorder{}
	for _, name := range []string{"a", "b", "c"} {
		tenant, err := router.Tenant(name)
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
		waitClosed(t, "tenant "+name+" to sync", reg.HasSyncedChecker().Done())
		rec.takeEvents()
		recorders[name] = rec
	}

	waitFor(t, "the services watch to start", func() bool {
		return source.vanish("ns-a/labeled-c", "ns-b/unlabeled", "ns-c/labeled-c")
	})
	want := map[string]string{"a": "services ns-a/labeled-c", "b": "services ns-b/unlabeled", "c": "services ns-c/labeled-c"}
	for name, id := range want {
		waitFor(t, "tenant "+name+" to get the tombstone of "+id, func() bool { return recorders[name].tombstoneCount(id) == 1 })
	}
	// The three tombstones come from one relist, so once each tenant has its own, every one has been routed.
	for name, id := range want {
		if got := recorders[name].takeEvents(); !slices.Equal(got, []string{"DELETE " + id}) {
			t.Errorf("tenant %s: events = %v, want only the delete of %s", name, got, id)
		}
	}
	if n, _ := tenancy.DeliveredNamespaced(router); n != 0 {
		t.Errorf("router still remembers %d services after their tombstones", n)
	}
}
