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
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
)

var widgets = schema.GroupVersionResource{Group: "example.io", Version: "v1", Resource: "widgets"}

// switchableDiscovery serves widgets only once told to, safely under -race.
type switchableDiscovery struct {
	mu     sync.Mutex
	served bool
	calls  int
}

func (d *switchableDiscovery) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	if gv == widgets.GroupVersion().String() && d.served {
		return &metav1.APIResourceList{GroupVersion: gv, APIResources: []metav1.APIResource{{Name: "widgets", Kind: "Widget", Namespaced: true}}}, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: widgets.Group}, gv)
}

func (d *switchableDiscovery) serve() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.served = true
}

func testService(name string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{
		Namespace: "default", Name: name,
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}},
	}}
}

func TestStartSyncsCoreInformersAndDropsManagedFields(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client := fake.NewClientset(testService("web"))
	set, err := New(Config{Client: client, Discovery: &switchableDiscovery{}})
	if err != nil {
		t.Fatal(err)
	}
	if set.HasSynced() {
		t.Fatal("HasSynced before Start")
	}
	if err := set.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := set.WaitForCacheSync(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, gvr := range []schema.GroupVersionResource{Services, EndpointSlices, Nodes, Namespaces, Ingresses} {
		if set.Informer(gvr) == nil {
			t.Errorf("no informer for %s", gvr)
		}
	}
	obj, exists, err := set.Informer(Services).GetIndexer().GetByKey("default/web")
	if err != nil || !exists {
		t.Fatalf("service not cached: exists=%v err=%v", exists, err)
	}
	if mf := obj.(*corev1.Service).ManagedFields; mf != nil {
		t.Errorf("managedFields kept in the cache: %v", mf)
	}
}

func TestStartIsOnceAndAddAfterStartFails(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	set, err := New(Config{Client: fake.NewClientset(), Discovery: &switchableDiscovery{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := set.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := set.Start(ctx); err == nil {
		t.Error("second Start succeeded; shared informers must start exactly once")
	}
	if err := set.Add(widgets, neverSyncingInformer()); err == nil {
		t.Error("Add after Start succeeded")
	}
	if err := set.AddOptional(widgets, nil); err == nil {
		t.Error("AddOptional after Start succeeded")
	}
}

func TestIndexersAreInstalledOnEveryInformer(t *testing.T) {
	set, err := New(Config{
		Client:    fake.NewClientset(),
		Discovery: &switchableDiscovery{},
		Indexers:  cache.Indexers{"by-name": func(obj interface{}) ([]string, error) { return nil, nil }},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, gvr := range []schema.GroupVersionResource{Services, EndpointSlices, Nodes, Namespaces, Ingresses} {
		if _, ok := set.Informer(gvr).GetIndexer().GetIndexers()["by-name"]; !ok {
			t.Errorf("%s lacks the configured indexer", gvr)
		}
	}
}

func neverSyncingInformer() cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			return nil, errors.New("list always fails")
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			return nil, errors.New("watch always fails")
		},
	}
	return cache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, cache.Indexers{})
}

func TestWaitForCacheSyncIsBoundedAndNamesTheLaggard(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	set, err := New(Config{Client: fake.NewClientset(), Discovery: &switchableDiscovery{}})
	if err != nil {
		t.Fatal(err)
	}
	broken := schema.GroupVersionResource{Group: "example.io", Version: "v1", Resource: "brokens"}
	if err := set.Add(broken, neverSyncingInformer()); err != nil {
		t.Fatal(err)
	}
	if err := set.Start(ctx); err != nil {
		t.Fatal(err)
	}
	err = set.WaitForCacheSync(ctx, 500*time.Millisecond)
	if err == nil {
		t.Fatal("WaitForCacheSync succeeded with an informer that cannot list")
	}
	if !strings.Contains(err.Error(), broken.String()) || strings.Contains(err.Error(), "services") {
		t.Errorf("error %q should name only the unsynced informer %s", err, broken)
	}
}

func TestMissingOptionalAPIDoesNotBlockAndStartsWhenServed(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "w1"}})
	disco := &switchableDiscovery{}
	set, err := New(Config{Client: client, Discovery: disco, DiscoveryInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// A ConfigMap informer stands in for a CRD informer: what matters is when it is created and started.
	if err := set.AddOptional(widgets, func(resync time.Duration) cache.SharedIndexInformer {
		return informers.NewSharedInformerFactory(client, resync).Core().V1().ConfigMaps().Informer()
	}); err != nil {
		t.Fatal(err)
	}
	if got := set.OptionalStates()[widgets]; got != OptionalPending {
		t.Errorf("state before start = %s, want %s", got, OptionalPending)
	}
	if err := set.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := set.WaitForCacheSync(ctx, 30*time.Second); err != nil {
		t.Fatalf("a missing optional API blocked the sync: %v", err)
	}
	informer, started, ok := set.Optional(widgets)
	if !ok || informer != nil {
		t.Fatalf("Optional(widgets) = %v, %v; want a registered, not yet created informer", informer, ok)
	}
	if got := set.OptionalStates()[widgets]; got != OptionalNotServed {
		t.Errorf("state = %s, want %s", got, OptionalNotServed)
	}

	disco.serve()
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("optional informer never started")
	}
	informer, _, _ = set.Optional(widgets)
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return informer.HasSynced(), nil
	}); err != nil {
		t.Fatal("optional informer did not sync")
	}
	if _, exists, _ := informer.GetIndexer().GetByKey("default/w1"); !exists {
		t.Error("optional informer does not hold the object")
	}
	if got := set.OptionalStates()[widgets]; got != OptionalStarted {
		t.Errorf("state = %s, want %s", got, OptionalStarted)
	}
}

func TestNewRequiresClient(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Error("New without a client succeeded")
	}
}

// TestClaimRecordsAreWatchedOnlyWhenSharded: the claim records' informer exists only with a ClaimsNamespace (a
// sharded replica), and holds only the Leases of that namespace that carry the claim label.
func TestClaimRecordsAreWatchedOnlyWhenSharded(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lease := func(namespace, name string, labels map[string]string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels}}
	}
	claim := map[string]string{ClaimRecordLabel: "ingress"}
	client := fake.NewClientset(lease("kube-system", "record", claim), lease("kube-system", "kube-scheduler", nil),
		lease("elsewhere", "record", claim))

	unsharded, err := New(Config{Client: client, Discovery: &switchableDiscovery{}})
	if err != nil {
		t.Fatal(err)
	}
	if unsharded.Informer(ClaimRecords) != nil {
		t.Error("an unsharded process watches claim records")
	}

	sharded, err := New(Config{Client: client, Discovery: &switchableDiscovery{}, ClaimsNamespace: "kube-system"})
	if err != nil {
		t.Fatal(err)
	}
	if err := sharded.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sharded.WaitForCacheSync(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if keys := sharded.Informer(ClaimRecords).GetIndexer().ListKeys(); len(keys) != 1 || keys[0] != "kube-system/record" {
		t.Errorf("claim records cached: %v, want only kube-system/record", keys)
	}
}
