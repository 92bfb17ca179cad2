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
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	apisharding "k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	apiserversharding "k8s.io/apiserver/pkg/sharding"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
)

// namespaceTerm selects exactly one namespace, as kube-apiserver hashes it.
func namespaceTerm(namespace string) string {
	h, _ := strconv.ParseUint(apisharding.HashField(namespace), 16, 64)
	return fmt.Sprintf("shardRange(object.metadata.namespace, '0x%016x', '0x%016x')", h, h+1)
}

// shardingServer makes a fake clientset's Service LISTs honour shard selectors as kube-apiserver does with the
// ShardedListAndWatch gate: only the selected objects, and the selector echoed in ShardInfo.
func shardingServer(t *testing.T, client *fake.Clientset) {
	client.PrependReactor("list", "services", func(action k8stesting.Action) (bool, runtime.Object, error) {
		opts, ok := action.(k8stesting.ListActionImpl)
		if !ok {
			return false, nil, nil
		}
		obj, err := client.Tracker().List(corev1.SchemeGroupVersion.WithResource("services"), corev1.SchemeGroupVersion.WithKind("Service"), opts.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		list := obj.(*corev1.ServiceList)
		selector := opts.GetListOptions().ShardSelector
		if selector == "" {
			return true, list, nil
		}
		sel, err := apiserversharding.Parse(selector)
		if err != nil {
			t.Errorf("the scope sent a selector kube-apiserver refuses: %v", err)
			return true, nil, err
		}
		var items []corev1.Service
		for _, s := range list.Items {
			if ok, _ := sel.Matches(&s); ok {
				items = append(items, s)
			}
		}
		list.Items = items
		list.ShardInfo = &metav1.ShardInfo{Selector: selector}
		return true, list, nil
	})
}

// rawServices lists and watches through the fake's reactors without the typed fake client, which copies only part
// of a list's metadata (not ShardInfo).
func rawServices(client *fake.Clientset) *cache.ListWatch {
	gvr := corev1.SchemeGroupVersion.WithResource("services")
	return &cache.ListWatch{
		ListWithContextFunc: func(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.Invokes(k8stesting.NewListActionWithOptions(gvr, corev1.SchemeGroupVersion.WithKind("Service"), "", o), &corev1.ServiceList{})
		},
		WatchFuncWithContext: client.CoreV1().Services(metav1.NamespaceAll).Watch,
	}
}

func service(namespace, name string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
}

// recorder counts a handler's events per key.
type recorder struct {
	mu      sync.Mutex
	added   map[string]int
	deleted map[string]int
}

func (r *recorder) handler() cache.ResourceEventHandler {
	r.added, r.deleted = map[string]int{}, map[string]int{}
	key := func(obj any) string { k, _ := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); return k }
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.mu.Lock(); r.added[key(obj)]++; r.mu.Unlock() },
		DeleteFunc: func(obj any) { r.mu.Lock(); r.deleted[key(obj)]++; r.mu.Unlock() },
	}
}

func (r *recorder) counts(key string) (int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.added[key], r.deleted[key]
}

func TestShardScopeWidensWithoutRestartingTheInformer(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client := fake.NewClientset(service("mine", "a"), service("joining", "b"), service("other", "c"))
	shardingServer(t, client)

	scope := NewShardScope(namespaceTerm("mine"))
	inf := scope.NewInformer(Services, rawServices(client), &corev1.Service{}, 0, namespaceIndex())
	var rec recorder
	if _, err := inf.AddEventHandler(rec.handler()); err != nil {
		t.Fatal(err)
	}
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("no sync")
	}
	if keys := inf.GetStore().ListKeys(); len(keys) != 1 || keys[0] != "mine/a" {
		t.Fatalf("the first LIST cached %v, want only mine/a", keys)
	}
	if scope.Ignored() {
		t.Fatal("a server that echoes ShardInfo counted as ignoring the selector")
	}
	first := scope.Listed()
	// An event on the watch first: a watch that ends after one is continued from its resourceVersion, not listed
	// again, unless the scope refuses it (a watch that ends at once, empty, is listed again by the reflector anyway).
	if _, err := client.CoreV1().Services("mine").Create(ctx, service("mine", "a2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, ok, _ := inf.GetStore().GetByKey("mine/a2")
		return ok, nil
	}); err != nil {
		t.Fatal("the watch did not deliver mine/a2")
	}

	if !scope.ListedCurrent() {
		t.Fatal("ListedCurrent false once the only selector was listed")
	}
	gen := scope.Set(namespaceTerm("mine") + " || " + namespaceTerm("joining"))
	// No LIST can carry the new selector yet: the informer may miss joining's objects.
	if scope.ListedCurrent() {
		t.Fatal("ListedCurrent true before any LIST with the new selector")
	}
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		_, ok, _ := inf.GetStore().GetByKey("joining/b")
		return ok && scope.Listed() >= gen, nil
	})
	if err != nil {
		t.Fatalf("joining/b never arrived after the selector widened (listed generation %d, want %d)", scope.Listed(), gen)
	}
	if !scope.ListedCurrent() {
		t.Error("ListedCurrent false once the new selector was listed and delivered")
	}
	if first >= gen {
		t.Fatalf("generation %d listed before the change to %d", first, gen)
	}
	if added, deleted := rec.counts("joining/b"); added != 1 || deleted != 0 {
		t.Errorf("joining/b: %d adds and %d deletes, want one add", added, deleted)
	}
	// The same informer, cache and handler: mine/a was neither deleted nor added again.
	if added, deleted := rec.counts("mine/a"); added != 1 || deleted != 0 {
		t.Errorf("mine/a: %d adds and %d deletes, want the first add alone (the informer was restarted)", added, deleted)
	}
	if _, ok, _ := inf.GetStore().GetByKey("other/c"); ok {
		t.Error("other/c is cached though no selector selected it")
	}
	if got := scope.Cached()[Services]; got != 3 {
		t.Errorf("Cached says %d Services, want the 3 of mine and joining", got)
	}

	// Narrowed: what is no longer selected is deleted from the cache.
	gen = scope.Set(namespaceTerm("joining"))
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		_, deleted := rec.counts("mine/a")
		return deleted == 1 && scope.Listed() >= gen, nil
	})
	if err != nil {
		t.Fatalf("mine/a was not deleted after the selector narrowed")
	}
}

func TestShardScopeReportsAServerThatIgnoresTheSelector(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The fake clientset, like a server without the gate, ignores the selector and sets no ShardInfo.
	client := fake.NewClientset(service("mine", "a"), service("other", "c"))
	scope := NewShardScope(namespaceTerm("mine"))
	inf := scope.NewInformer(Services, listWatchOf(client.CoreV1().Services(metav1.NamespaceAll)), &corev1.Service{}, 0, namespaceIndex())
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("no sync")
	}
	if !scope.Ignored() {
		t.Error("a LIST without ShardInfo did not count as the server ignoring the selector")
	}
	if n := len(inf.GetStore().ListKeys()); n != 2 {
		t.Errorf("cached %d Services, want both: the client filters as without a scope", n)
	}

	honoured, err := ProbeShardSelector(ctx, client, namespaceTerm("mine"))
	if err != nil || honoured {
		t.Errorf("the probe of a server that ignores the selector said honoured=%v, err=%v", honoured, err)
	}
	// A server that honours it is the end-to-end test's (the fake client drops ShardInfo).

	// kube-apiserver 1.37 filters custom resources without echoing ShardInfo: their LISTs say nothing.
	crScope := NewShardScope(namespaceTerm("mine"))
	cr := crScope.NewCustomResourceInformer(Services, listWatchOf(client.CoreV1().Services(metav1.NamespaceAll)), &corev1.Service{}, 0, namespaceIndex())
	go cr.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), cr.HasSynced) {
		t.Fatal("no sync")
	}
	if crScope.Ignored() {
		t.Error("a custom resource's LIST without ShardInfo counted as the server ignoring the selector")
	}
}

// A selector change costs one LIST, not two: the watch that continues the LIST starts as soon as it has returned,
// while the informer still delivers its thousands of objects to the handlers (the scope once refused that watch until
// they were delivered, and the reflector listed everything again after a second backoff).
func TestShardScopeChangeCostsOneList(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	const joining = 1000 // enough that delivering them takes far longer than the reflector takes to watch
	objects := []runtime.Object{service("mine", "a")}
	for i := range joining {
		objects = append(objects, service("joining", fmt.Sprintf("b-%d", i)))
	}
	client := fake.NewClientset(objects...)
	shardingServer(t, client)
	var lists, watches atomic.Int32
	client.PrependReactor("list", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		lists.Add(1)
		return false, nil, nil
	})
	client.PrependWatchReactor("services", func(k8stesting.Action) (bool, watch.Interface, error) {
		watches.Add(1)
		return false, nil, nil
	})

	scope := NewShardScope(namespaceTerm("mine"))
	inf := scope.NewInformer(Services, rawServices(client), &corev1.Service{}, 0, namespaceIndex())
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("no sync")
	}
	waitWatching := func(want int32) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
			return watches.Load() >= want, nil
		}); err != nil {
			t.Fatalf("the informer does not watch (%d watches, want %d; %d LISTs)", watches.Load(), want, lists.Load())
		}
	}
	waitWatching(1)
	listsBefore, watchesBefore := lists.Load(), watches.Load()

	setAt := time.Now()
	gen := scope.Set(namespaceTerm("mine") + " || " + namespaceTerm("joining"))
	waitWatching(watchesBefore + 1)
	t.Logf("watching again %s after the change (the reflector's backoff and one LIST)", time.Since(setAt).Round(time.Millisecond))
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return scope.Listed() >= gen, nil
	}); err != nil {
		t.Fatalf("the new selector was never listed (listed generation %d, want %d)", scope.Listed(), gen)
	}
	if got := len(inf.GetStore().ListKeys()); got != joining+1 {
		t.Errorf("the cache holds %d Services, want %d", got, joining+1)
	}
	if got := lists.Load() - listsBefore; got != 1 {
		t.Errorf("the selector change cost %d LISTs, want 1", got)
	}
}
