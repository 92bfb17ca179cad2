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
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// ShardScope is the server-side shard selector (KEP-5866, ListOptions.ShardSelector) with which a sharded
// replica's informers of namespaced resources list and watch: only the namespaces its tenants need.
//
// A new selector does not restart an informer: Set stops the informers' watches, and their next watch is refused
// as expired, so each reflector lists again with the new selector and the informer turns the difference into
// events (objects of newly selected namespaces are added, those no longer selected deleted) while its cache, its
// handlers and every tenant's view stay as they are. The informers list with plain LISTs, not WatchList streams:
// every response then says whether the server honoured the selector (ListMeta.ShardInfo). A LIST counts as listed
// (Listed) once the informer has delivered every object it returned to its handlers, which it does only after
// it has put the object in its cache; the watch that continues a LIST starts as soon as that LIST has returned,
// while the handlers still deliver it, so that a change costs one LIST and the watch is down only for the
// reflector's backoff and the LIST itself.
type ShardScope struct {
	mu       sync.Mutex
	selector string
	gen      uint64
	// listed is, per informer, the generation of the selector of its last LIST.
	listed  map[*scopedListWatch]uint64
	watches map[*scopedListWatch]watch.Interface
	// ignored is set once a LIST came back without ShardInfo: the server ignores the selector.
	ignored bool
	// onListed, if set, is called after a LIST, outside the lock.
	onListed func()
}

// NewShardScope returns a scope with a first selector (which must not be empty: an empty shard selector is refused
// by the API server; sharding.NamespaceSelector(nil) selects nothing).
func NewShardScope(selector string) *ShardScope {
	return &ShardScope{selector: selector, gen: 1, listed: map[*scopedListWatch]uint64{},
		watches: map[*scopedListWatch]watch.Interface{}}
}

// OnListed sets a function called after every LIST of a scoped informer (e.g. to look again at tenants that wait
// for their namespaces to be read). Call it before the informers start.
func (s *ShardScope) OnListed(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onListed = f
}

// Selector returns the current selector and its generation.
func (s *ShardScope) Selector() (string, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.selector, s.gen
}

// Set replaces the selector: every scoped informer lists again with it. It returns the new generation.
func (s *ShardScope) Set(selector string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if selector == s.selector {
		return s.gen
	}
	s.selector = selector
	s.gen++
	for lw, w := range s.watches {
		w.Stop()
		delete(s.watches, lw)
	}
	return s.gen
}

// Listed returns the oldest generation any scoped informer has listed with (0 while one has not listed yet): every
// scoped informer's cache holds, or has queued, what a selector of that generation or later selects.
func (s *ShardScope) Listed() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var oldest uint64
	first := true
	for _, gen := range s.listed {
		if first || gen < oldest {
			oldest, first = gen, false
		}
	}
	return oldest
}

// ListedCurrent reports whether every scoped informer has delivered a LIST made with the current selector, or the
// API server ignores the selector (every object is received). Until then, a namespace the selector newly holds may
// be in one informer's cache (its Pods) and not yet in another's (its Services): an answer that reads the absence
// of an object as a fact must wait.
func (s *ShardScope) ListedCurrent() bool {
	gen := func() uint64 {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.gen
	}()
	return s.Listed() >= gen || s.Ignored()
}

// Ignored reports whether a LIST came back without ShardInfo: the API server does not honour the selector (the
// ShardedListAndWatch gate is off), and the informers receive every object, which the Router filters as it does
// without a scope.
func (s *ShardScope) Ignored() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ignored
}

// Cached returns how many objects each scoped informer holds, by resource: what this replica reads.
func (s *ShardScope) Cached() map[schema.GroupVersionResource]int {
	s.mu.Lock()
	lws := make([]*scopedListWatch, 0, len(s.listed))
	for lw := range s.listed {
		lws = append(lws, lw)
	}
	s.mu.Unlock()
	out := make(map[schema.GroupVersionResource]int, len(lws))
	for _, lw := range lws {
		out[lw.gvr] += len(lw.store.ListKeys())
	}
	return out
}

// NewInformer builds an informer of gvr whose every LIST and WATCH carries the scope's selector.
func (s *ShardScope) NewInformer(gvr schema.GroupVersionResource, lw *cache.ListWatch, example runtime.Object, resync time.Duration,
	indexers cache.Indexers) cache.SharedIndexInformer {
	return s.newInformer(&scopedListWatch{scope: s, gvr: gvr, inner: lw, reportsShardInfo: true}, example, resync, indexers)
}

// NewCustomResourceInformer is NewInformer for a resource served by a CustomResourceDefinition. kube-apiserver
// 1.37 filters custom resources by the selector but does not echo it in their lists' ShardInfo, so their LISTs
// say nothing about whether the server honours it: the built-in resources' LISTs and the probe at start do.
func (s *ShardScope) NewCustomResourceInformer(gvr schema.GroupVersionResource, lw *cache.ListWatch, example runtime.Object,
	resync time.Duration, indexers cache.Indexers) cache.SharedIndexInformer {
	return s.newInformer(&scopedListWatch{scope: s, gvr: gvr, inner: lw}, example, resync, indexers)
}

func (s *ShardScope) newInformer(scoped *scopedListWatch, example runtime.Object, resync time.Duration,
	indexers cache.Indexers) cache.SharedIndexInformer {
	inf := cache.NewSharedIndexInformer(scoped, example, resync, indexers)
	scoped.store = inf.GetStore()
	s.mu.Lock()
	s.listed[scoped] = 0
	s.mu.Unlock()
	// Never removed: it lives as long as the informer, and only counts deliveries.
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    scoped.delivered,
		UpdateFunc: func(_, obj any) { scoped.delivered(obj) },
		DeleteFunc: scoped.delivered,
	})
	return inf
}

// scopedListWatch puts the scope's selector on every request of one informer.
type scopedListWatch struct {
	scope *ShardScope
	gvr   schema.GroupVersionResource
	inner *cache.ListWatch
	store cache.Store
	// reportsShardInfo: the server echoes an honoured selector in this resource's lists (not custom resources).
	reportsShardInfo bool
	// pending is the keys of the last LIST that the informer has not delivered yet, and pendingGen the generation
	// of its selector; guarded by scope.mu.
	pending    sets.Set[string]
	pendingGen uint64
	// returnedGen is the generation of the selector of the last LIST that returned, which a watch may continue;
	// guarded by scope.mu.
	returnedGen uint64
}

// delivered notes that the informer has cached and delivered obj: once it has delivered everything its last LIST
// returned, that LIST's generation is listed.
func (lw *scopedListWatch) delivered(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	s := lw.scope
	s.mu.Lock()
	if !lw.pending.Has(key) {
		s.mu.Unlock()
		return
	}
	lw.pending.Delete(key)
	s.mu.Unlock()
	lw.settle()
}

// settle marks the last LIST listed once nothing of it is pending, and tells OnListed.
func (lw *scopedListWatch) settle() {
	s := lw.scope
	s.mu.Lock()
	if lw.pending.Len() > 0 || lw.pendingGen <= s.listed[lw] {
		s.mu.Unlock()
		return
	}
	s.listed[lw] = lw.pendingGen
	onListed := s.onListed
	s.mu.Unlock()
	if onListed != nil {
		onListed()
	}
}

var _ cache.ListerWatcherWithContext = &scopedListWatch{}

// IsWatchListSemanticsUnSupported makes the reflector list with plain LISTs (see ShardScope).
func (lw *scopedListWatch) IsWatchListSemanticsUnSupported() bool { return true }

func (lw *scopedListWatch) List(options metav1.ListOptions) (runtime.Object, error) {
	return lw.ListWithContext(context.Background(), options)
}

func (lw *scopedListWatch) Watch(options metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(context.Background(), options)
}

func (lw *scopedListWatch) ListWithContext(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
	selector, gen := lw.scope.Selector()
	options.ShardSelector = selector
	list, err := lw.inner.ListWithContext(ctx, options)
	if err != nil {
		return nil, err
	}
	honoured := false
	if a, ok := list.(metav1.ListMetaAccessor); ok {
		if lm, ok := a.GetListMeta().(*metav1.ListMeta); ok {
			honoured = lm.ShardInfo != nil
		}
	}
	keys := sets.New[string]()
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	for _, item := range items {
		if key, err := cache.MetaNamespaceKeyFunc(item); err == nil {
			keys.Insert(key)
		}
	}
	s := lw.scope
	s.mu.Lock()
	if lw.reportsShardInfo && !honoured && !s.ignored {
		s.ignored = true
		klog.FromContext(ctx).Info("The API server ignored the shard selector; this replica receives every object and filters on the client",
			"resource", lw.gvr.String())
	}
	if gen > lw.pendingGen {
		lw.pending, lw.pendingGen = keys, gen
	}
	if gen > lw.returnedGen {
		lw.returnedGen = gen
	}
	s.mu.Unlock()
	lw.settle()
	return list, nil
}

// WatchWithContext refuses, as expired, a watch that would continue a LIST made with an older selector, so that
// the reflector lists again; otherwise it watches with the current selector, and Set stops that watch. Whether the
// handlers have delivered that LIST yet does not matter here: waiting for them would refuse the watch and cost a
// second LIST, after a second backoff.
func (lw *scopedListWatch) WatchWithContext(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
	s := lw.scope
	s.mu.Lock()
	selector, gen, returned := s.selector, s.gen, lw.returnedGen
	s.mu.Unlock()
	if returned != gen {
		return nil, apierrors.NewResourceExpired(fmt.Sprintf("the shard selector changed (generation %d, last LIST with %d): list again", gen, returned))
	}
	options.ShardSelector = selector
	w, err := lw.inner.WatchWithContext(ctx, options)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != gen {
		// Set ran meanwhile: this watch has the old selector.
		w.Stop()
		return nil, apierrors.NewResourceExpired("the shard selector changed: list again")
	}
	s.watches[lw] = w
	return w, nil
}

// clientLister is the List and Watch of one typed client-go resource client.
type clientLister[T runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (T, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// listWatchOf is the ListWatch of a typed client, as client-go's generated informers build it.
func listWatchOf[T runtime.Object](c clientLister[T]) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc:  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return c.List(ctx, o) },
		WatchFuncWithContext: c.Watch,
	}
}

// ProbeShardSelector asks the API server whether it honours shard selectors: one LIST of at most one Service with
// the selector. Informers list through WatchList streams by default, which carry no list metadata to inspect, so a
// replica asks once, at start, with a plain LIST: a response without ShardInfo means the server ignored the
// selector (the ShardedListAndWatch feature gate is off, or the server predates it).
func ProbeShardSelector(ctx context.Context, client kubernetes.Interface, selector string) (bool, error) {
	list, err := client.CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{Limit: 1, ShardSelector: selector})
	if err != nil {
		return false, fmt.Errorf("probing for server-side shard selectors: %w", err)
	}
	return list.ShardInfo != nil, nil
}
