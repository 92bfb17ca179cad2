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
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/tenancy"
)

const labelKey = mpv1alpha1.DefaultProviderConfigLabelKey

var (
	servicesResource = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	nodesResource    = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	// configMapsResource stands in for a resource that only the manager writes (Translations, PangolinResources):
	// the fixture routes it ManagerWritten.
	configMapsResource = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

// waitTimeout bounds every wait for a condition; generous because the race detector on a loaded machine is slow.
const waitTimeout = 30 * time.Second

// waitFor polls cond until it holds, failing the test after waitTimeout.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, waitTimeout, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// waitClosed waits for a channel to close, failing the test after waitTimeout.
func waitClosed(t testing.TB, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitTimeout):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func tenantLabels(tenant string) map[string]string {
	if tenant == "" {
		return nil
	}
	return map[string]string{labelKey: tenant}
}

func namespaceObj(name, tenant string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: tenantLabels(tenant)}}
}

func serviceObj(namespace, name, tenant string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: tenantLabels(tenant)}}
}

func nodeObj(name, tenant string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: tenantLabels(tenant)}}
}

// writtenObj is an object of the ManagerWritten stand-in, labeled for the tenant that "wrote" it.
func writtenObj(namespace, name, tenant string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: tenantLabels(tenant)}}
}

// eventLog is a record.EventRecorder that keeps what it is given. Unlike record.FakeRecorder it never blocks, as
// the router requires.
type eventLog struct {
	mu     sync.Mutex
	events []string
}

var _ record.EventRecorder = &eventLog{}

func (l *eventLog) Event(object runtime.Object, eventtype, reason, message string) {
	key, err := cache.MetaNamespaceKeyFunc(object)
	if err != nil {
		panic(err)
	}
	if isSentinel(key) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, fmt.Sprintf("%s %s %s %s: %s", eventtype, reason, resourceOf(object), key, message))
}

func (l *eventLog) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	l.Event(object, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

func (l *eventLog) AnnotatedEventf(object runtime.Object, _ map[string]string, eventtype, reason, messageFmt string, args ...any) {
	l.Eventf(object, eventtype, reason, messageFmt, args...)
}

// take returns the events recorded since the last call.
func (l *eventLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	events := l.events
	l.events = nil
	return events
}

func resourceOf(obj runtime.Object) string {
	switch obj.(type) {
	case *corev1.Namespace:
		return "namespaces"
	case *corev1.Service:
		return "services"
	case *corev1.Node:
		return "nodes"
	case *corev1.ConfigMap:
		return "configmaps"
	}
	return fmt.Sprintf("%T", obj)
}

// countingInformer counts the handlers added to and removed from a shared informer, to show that tenants never
// touch the shared informers' handler lists.
type countingInformer struct {
	cache.SharedIndexInformer
	added, removed atomic.Int32
}

func (c *countingInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	c.added.Add(1)
	return c.SharedIndexInformer.AddEventHandler(h)
}

func (c *countingInformer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, p time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	c.added.Add(1)
	return c.SharedIndexInformer.AddEventHandlerWithResyncPeriod(h, p)
}

func (c *countingInformer) AddEventHandlerWithOptions(h cache.ResourceEventHandler, o cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	c.added.Add(1)
	return c.SharedIndexInformer.AddEventHandlerWithOptions(h, o)
}

func (c *countingInformer) RemoveEventHandler(r cache.ResourceEventHandlerRegistration) error {
	c.removed.Add(1)
	return c.SharedIndexInformer.RemoveEventHandler(r)
}

func (c *countingInformer) handlers() int { return int(c.added.Load() - c.removed.Load()) }

// fixture is a router over real shared informers (Namespaces, Services, Nodes, and ConfigMaps standing in for a
// ManagerWritten resource) fed by a fake clientset. The router reports ignored tenant labels to events.
type fixture struct {
	t          testing.TB
	client     *fake.Clientset
	router     *tenancy.Router
	events     *eventLog
	namespaces *countingInformer
	services   *countingInformer
	nodes      *countingInformer
	configMaps *countingInformer
	sentinelID atomic.Int64
}

func newFixture(t testing.TB, objects ...runtime.Object) *fixture {
	return newFixtureWithResync(t, 0, objects...)
}

func newFixtureWithResync(t testing.TB, resync time.Duration, objects ...runtime.Object) *fixture {
	t.Helper()
	client := fake.NewClientset(objects...)
	factory := informers.NewSharedInformerFactory(client, resync)
	f := &fixture{
		t:          t,
		client:     client,
		events:     &eventLog{},
		namespaces: &countingInformer{SharedIndexInformer: factory.Core().V1().Namespaces().Informer()},
		services:   &countingInformer{SharedIndexInformer: factory.Core().V1().Services().Informer()},
		nodes:      &countingInformer{SharedIndexInformer: factory.Core().V1().Nodes().Informer()},
		configMaps: &countingInformer{SharedIndexInformer: factory.Core().V1().ConfigMaps().Informer()},
	}
	for _, informer := range []cache.SharedIndexInformer{f.namespaces, f.services, f.nodes, f.configMaps} {
		if err := informer.AddIndexers(tenancy.Indexers(labelKey)); err != nil {
			t.Fatalf("AddIndexers: %v", err)
		}
	}
	router, err := tenancy.NewRouterWithOptions(labelKey, f.namespaces, tenancy.RouterOptions{Recorder: f.events})
	if err != nil {
		t.Fatalf("NewRouter: %v", err)
	}
	f.router = router
	if err := router.AddResource(servicesResource, f.services, tenancy.Namespaced); err != nil {
		t.Fatalf("AddResource(services): %v", err)
	}
	if err := router.AddResource(nodesResource, f.nodes, tenancy.ClusterScoped); err != nil {
		t.Fatalf("AddResource(nodes): %v", err)
	}
	if err := router.AddResource(configMapsResource, f.configMaps, tenancy.ManagerWritten); err != nil {
		t.Fatalf("AddResource(configmaps): %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	t.Cleanup(func() {
		if err := router.Close(); err != nil {
			t.Errorf("router.Close: %v", err)
		}
		cancel()
		factory.Shutdown()
	})
	waitFor(t, "shared informers to sync", func() bool {
		return f.namespaces.HasSynced() && f.services.HasSynced() && f.nodes.HasSynced() && f.configMaps.HasSynced()
	})
	return f
}

func (f *fixture) tenant(name string) *tenancy.TenantViews {
	f.t.Helper()
	tenant, err := f.router.Tenant(name)
	if err != nil {
		f.t.Fatalf("Tenant(%q): %v", name, err)
	}
	return tenant
}

func (f *fixture) view(tenant *tenancy.TenantViews, resource schema.GroupVersionResource) *tenancy.View {
	f.t.Helper()
	view, err := tenant.Informer(resource)
	if err != nil {
		f.t.Fatalf("Informer(%s): %v", resource, err)
	}
	return view
}

// watch registers rec on the tenant's views of every routed resource and waits until it has its initial list.
func (f *fixture) watch(tenant *tenancy.TenantViews, rec *recorder) []cache.ResourceEventHandlerRegistration {
	f.t.Helper()
	var regs []cache.ResourceEventHandlerRegistration
	for _, resource := range allResources {
		reg, err := f.view(tenant, resource).AddEventHandler(rec.handler(resource.Resource))
		if err != nil {
			f.t.Fatalf("AddEventHandler(%s): %v", resource, err)
		}
		regs = append(regs, reg)
	}
	for _, reg := range regs {
		waitClosed(f.t, "handler to sync", reg.HasSyncedChecker().Done())
	}
	return regs
}

func (f *fixture) create(obj runtime.Object) {
	f.t.Helper()
	ctx := context.Background()
	var err error
	switch o := obj.(type) {
	case *corev1.Namespace:
		_, err = f.client.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
	case *corev1.Service:
		_, err = f.client.CoreV1().Services(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *corev1.Node:
		_, err = f.client.CoreV1().Nodes().Create(ctx, o, metav1.CreateOptions{})
	case *corev1.ConfigMap:
		_, err = f.client.CoreV1().ConfigMaps(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	default:
		f.t.Fatalf("create: unexpected %T", obj)
	}
	if err != nil {
		f.t.Fatalf("create %T: %v", obj, err)
	}
}

// relabel sets (or, for tenant "", removes) the tenant label of an existing object.
func (f *fixture) relabel(obj runtime.Object, tenant string) {
	f.t.Helper()
	f.mutate(obj, func(m metav1.Object) {
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
	})
}

// touch changes an annotation of an existing object, an update that moves nothing.
func (f *fixture) touch(obj runtime.Object) {
	f.t.Helper()
	f.mutate(obj, func(m metav1.Object) {
		m.SetAnnotations(map[string]string{"touched": fmt.Sprint(time.Now().UnixNano())})
	})
}

func (f *fixture) mutate(obj runtime.Object, change func(metav1.Object)) {
	f.t.Helper()
	ctx := context.Background()
	var err error
	switch o := obj.(type) {
	case *corev1.Namespace:
		var cur *corev1.Namespace
		if cur, err = f.client.CoreV1().Namespaces().Get(ctx, o.Name, metav1.GetOptions{}); err == nil {
			change(cur)
			_, err = f.client.CoreV1().Namespaces().Update(ctx, cur, metav1.UpdateOptions{})
		}
	case *corev1.Service:
		var cur *corev1.Service
		if cur, err = f.client.CoreV1().Services(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{}); err == nil {
			change(cur)
			_, err = f.client.CoreV1().Services(o.Namespace).Update(ctx, cur, metav1.UpdateOptions{})
		}
	case *corev1.Node:
		var cur *corev1.Node
		if cur, err = f.client.CoreV1().Nodes().Get(ctx, o.Name, metav1.GetOptions{}); err == nil {
			change(cur)
			_, err = f.client.CoreV1().Nodes().Update(ctx, cur, metav1.UpdateOptions{})
		}
	case *corev1.ConfigMap:
		var cur *corev1.ConfigMap
		if cur, err = f.client.CoreV1().ConfigMaps(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{}); err == nil {
			change(cur)
			_, err = f.client.CoreV1().ConfigMaps(o.Namespace).Update(ctx, cur, metav1.UpdateOptions{})
		}
	default:
		f.t.Fatalf("mutate: unexpected %T", obj)
	}
	if err != nil {
		f.t.Fatalf("mutate %T: %v", obj, err)
	}
}

func (f *fixture) remove(obj runtime.Object) {
	f.t.Helper()
	ctx := context.Background()
	var err error
	switch o := obj.(type) {
	case *corev1.Namespace:
		err = f.client.CoreV1().Namespaces().Delete(ctx, o.Name, metav1.DeleteOptions{})
	case *corev1.Service:
		err = f.client.CoreV1().Services(o.Namespace).Delete(ctx, o.Name, metav1.DeleteOptions{})
	case *corev1.Node:
		err = f.client.CoreV1().Nodes().Delete(ctx, o.Name, metav1.DeleteOptions{})
	case *corev1.ConfigMap:
		err = f.client.CoreV1().ConfigMaps(o.Namespace).Delete(ctx, o.Name, metav1.DeleteOptions{})
	default:
		f.t.Fatalf("remove: unexpected %T", obj)
	}
	if err != nil {
		f.t.Fatalf("remove %T: %v", obj, err)
	}
}

// barrier returns once every listed tenant's recorder has received every event routed so far, and the router has
// reported every ignored label it was going to. It creates, per tenant, a sentinel Namespace labeled for that
// tenant, a Service in it, and a Node and a ConfigMap labeled for the tenant, and waits until the tenant has seen
// all four: each shared informer delivers in order and namespace moves are delivered by the Namespace informer's
// handler, so whatever came before a sentinel has been delivered when the sentinel is. (A sentinel Service that
// reaches the router before its namespace is held until the namespace arrives; either way the Service informer
// has delivered everything before it.) Sentinels are not recorded as events.
func (f *fixture) barrier(recorders map[string]*recorder) {
	f.t.Helper()
	id := f.sentinelID.Add(1)
	for tenant, rec := range recorders {
		name := fmt.Sprintf("%s%d-%s", sentinelPrefix, id, tenant)
		f.create(namespaceObj(name, tenant))
		f.create(serviceObj(name, name, ""))
		f.create(nodeObj(name, tenant))
		f.create(writtenObj("sentinels", name, tenant))
		waitFor(f.t, "tenant "+tenant+" to see sentinel "+name, func() bool {
			return rec.sawSentinel("namespaces", name) && rec.sawSentinel("services", name+"/"+name) &&
				rec.sawSentinel("nodes", name) && rec.sawSentinel("configmaps", "sentinels/"+name)
		})
	}
}

const sentinelPrefix = "sentinel-"

func isSentinel(key string) bool {
	_, name, _ := strings.Cut(key, "/")
	return strings.HasPrefix(key, sentinelPrefix) || strings.HasPrefix(name, sentinelPrefix)
}

// recorder is a tenant handler that records what it is told: the events in order, and the state they add up to
// (what a controller that trusts its events believes exists).
type recorder struct {
	mu        sync.Mutex
	events    []string
	state     map[string]any
	sentinels map[string]bool
	initial   map[string]int
	tombstone map[string]int
}

func newRecorder() *recorder {
	return &recorder{state: map[string]any{}, sentinels: map[string]bool{}, initial: map[string]int{}, tombstone: map[string]int{}}
}

func (r *recorder) handler(resource string) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			r.record(resource, "ADD", obj, obj, isInInitialList)
		},
		UpdateFunc: func(_, newObj any) {
			r.record(resource, "UPDATE", newObj, newObj, false)
		},
		DeleteFunc: func(obj any) {
			r.record(resource, "DELETE", obj, nil, false)
		},
	}
}

func (r *recorder) record(resource, kind string, obj, newState any, isInInitialList bool) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		panic(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if isSentinel(key) {
		r.sentinels[resource+" "+key] = true
		return
	}
	id := resource + " " + key
	if isInInitialList {
		r.initial[id]++
	}
	if _, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		r.tombstone[id]++
	}
	r.events = append(r.events, kind+" "+id)
	if newState == nil {
		delete(r.state, id)
	} else {
		r.state[id] = newState
	}
}

func (r *recorder) sawSentinel(resource, key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sentinels[resource+" "+key]
}

// takeEvents returns the events recorded since the last call.
func (r *recorder) takeEvents() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	events := r.events
	r.events = nil
	return events
}

// stateKeys returns the sorted ids ("<resource> <key>") of the objects the recorded events add up to.
func (r *recorder) stateKeys() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(r.state))
}

func (r *recorder) initialCount(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.initial[id]
}

func (r *recorder) tombstoneCount(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tombstone[id]
}

// listedKeys returns the sorted ids of the non-sentinel objects in the tenant's views of the given resources.
func listedKeys(t testing.TB, tenant *tenancy.TenantViews, resources ...schema.GroupVersionResource) []string {
	t.Helper()
	var ids []string
	for _, resource := range resources {
		view, err := tenant.Informer(resource)
		if err != nil {
			t.Fatalf("Informer(%s): %v", resource, err)
		}
		for _, key := range view.GetIndexer().ListKeys() {
			if !isSentinel(key) {
				ids = append(ids, resource.Resource+" "+key)
			}
		}
	}
	slices.Sort(ids)
	return ids
}

var allResources = []schema.GroupVersionResource{tenancy.NamespacesResource, servicesResource, nodesResource, configMapsResource}
