//go:build integration

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

package neg

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

// queueCounts reads a named workqueue's metrics: keys added, keys whose processing finished, keys waiting.
func queueCounts(t testing.TB, name string) (adds, done, depth float64) {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if !hasLabel(m, "name", name) {
				continue
			}
			switch f.GetName() {
			case "workqueue_adds_total":
				adds = m.GetCounter().GetValue()
			case "workqueue_work_duration_seconds":
				done = float64(m.GetHistogram().GetSampleCount())
			case "workqueue_depth":
				depth = m.GetGauge().GetValue()
			}
		}
	}
	return adds, done, depth
}

func hasLabel(m *dto.Metric, name, value string) bool {
	return slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == name && l.GetValue() == value })
}

// waitIdle waits until both halves of the tenant's neg controller have processed every key they were given: each
// key added to a workqueue is processed exactly once (a key added again while waiting is not added twice), so a
// queue whose adds equal its finished keys and that holds none is idle.
func (tr *tenantRun) waitIdle() {
	e := tr.e
	e.t.Helper()
	for _, queue := range []string{"translator", "pusher"} {
		name := tr.name + "-neg-" + queue
		e.waitFor("the "+queue+" to be idle", 60*time.Second, func() (bool, error) {
			adds, done, depth := queueCounts(e.t, name)
			return adds > 0 && adds == done && depth == 0, nil
		})
	}
}

// translatorAdds is how many keys the tenant's translator queue has been given.
func (tr *tenantRun) translatorAdds() float64 {
	adds, _, _ := queueCounts(tr.e.t, tr.name+"-neg-translator")
	return adds
}

// viewRecorder remembers the last resourceVersion of each object a tenant's view delivered, and counts resyncs.
type viewRecorder struct {
	mu      sync.Mutex
	seen    map[string]string
	resyncs map[string]int
}

// watchView adds a handler to the tenant's view of a resource. The Router delivers an event to every handler of
// the tenant in turn, so once this one has seen an object's resourceVersion, the controller's handlers have been
// called for it and for every earlier event of that resource.
func (tr *tenantRun) watchView(gvr schema.GroupVersionResource) *viewRecorder {
	e := tr.e
	e.t.Helper()
	views, err := e.tenancy.Router.Tenant(tr.name)
	if err != nil {
		e.t.Fatal(err)
	}
	view, err := views.Informer(gvr)
	if err != nil {
		e.t.Fatal(err)
	}
	r := &viewRecorder{seen: map[string]string{}, resyncs: map[string]int{}}
	record := func(oldObj, obj any) {
		m, err := metaOf(obj)
		if err != nil {
			return
		}
		key := m.GetNamespace() + "/" + m.GetName()
		r.mu.Lock()
		defer r.mu.Unlock()
		r.seen[key] = m.GetResourceVersion()
		if old, err := metaOf(oldObj); err == nil && old.GetResourceVersion() == m.GetResourceVersion() {
			r.resyncs[key]++
		}
	}
	reg, err := view.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { record(nil, obj) },
		UpdateFunc: record,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = view.RemoveEventHandler(reg) })
	return r
}

func metaOf(obj any) (metav1.Object, error) {
	if obj == nil {
		return nil, fmt.Errorf("nil")
	}
	if o, ok := obj.(metav1.Object); ok {
		return o, nil
	}
	return nil, fmt.Errorf("%T has no metadata", obj)
}

// hasSeen says whether the view delivered the object at that resourceVersion.
func (r *viewRecorder) hasSeen(key, resourceVersion string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[key] == resourceVersion
}

// minResyncs is the fewest resyncs delivered for any of keys.
func (r *viewRecorder) minResyncs(keys []string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	least := -1
	for _, k := range keys {
		if n := r.resyncs[k]; least < 0 || n < least {
			least = n
		}
	}
	return least
}

// settle waits until the tenant's views have delivered the current state of the Service and of its Translation of
// port 80, and both halves of the controller are idle: whatever those events cause has been done.
func (tr *tenantRun) settle(services, translations *viewRecorder, ns, service string) {
	e := tr.e
	e.t.Helper()
	e.waitFor("the views to deliver the current Service and Translation", 60*time.Second, func() (bool, error) {
		svc, err := e.adminKube.CoreV1().Services(ns).Get(e.ctx, service, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		trName := fmt.Sprintf("neg-v1-%s-80", service)
		current := e.translation(ns, trName)
		return current != nil && services.hasSeen(ns+"/"+service, svc.ResourceVersion) &&
			translations.hasSeen(ns+"/"+trName, current.ResourceVersion), nil
	})
	tr.waitIdle()
}

// TestEndpointChangeCostsNoReadsAndOneWrite: once a Service has converged, one endpoint change costs the whole neg
// controller no API read (the translator reads Services, EndpointSlices, Nodes and Translations from the informer
// caches only) and the translator one write, the Translation's update; the pusher then records the outcome in the
// Translation's status. The API server answers both writes with the Translation's metadata only.
func TestEndpointChangeCostsNoReadsAndOneWrite(t *testing.T) {
	endpointChangeCost(t, 3)
}

// endpointChangeCost is TestEndpointChangeCostsNoReadsAndOneWrite, which BenchmarkEndpointChangeCost also runs to
// record its row: it fails t on any read or any write but the expected ones, and returns each change's API requests.
func endpointChangeCost(t testing.TB, changes int) []map[string]int {
	t.Helper()
	e := newEnvWith(t, envOptions{countCalls: true})
	a := e.newTenant("a", projectA)
	ns := a.namespace()
	e.nodes(a.name, a.name, 1)
	eps := podsIn(a.name, 0, 1, 3, 2, 1)
	e.setSlices(ns, "web", "http", 8080, eps)
	// Added before the controller's handlers, so this one is called first for every event.
	services, translations := a.watchView(informerset.Services), a.watchView(informerset.Translations)
	a.start()
	e.service(ns, "web", `{"exposed_ports":{"80":{}}}`)
	e.waitConverged(projectA, ns, "web", 80, 8080, eps)
	e.waitFor("the neg-status annotation", 30*time.Second, func() (bool, error) {
		_, ok := e.negStatus(ns, "web")
		return ok, nil
	})
	a.settle(services, translations, ns, "web")

	var costs []map[string]int
	for i := range changes {
		before := e.calls.Snapshot()
		eps[1].ip = fmt.Sprintf("10.99.0.%d", i+1)
		e.setSlices(ns, "web", "http", 8080, eps)
		e.waitConverged(projectA, ns, "web", 80, 8080, eps)
		a.settle(services, translations, ns, "web")

		got := e.calls.Since(before)
		costs = append(costs, got)
		t.Logf("endpoint change %d: API requests %v", i+1, got)
		if n := framework.Reads(got); n != 0 {
			t.Errorf("endpoint change %d: %d API reads, want none: %v", i+1, n, got)
		}
		writes := maps.Clone(got)
		maps.DeleteFunc(writes, func(kind string, _ int) bool {
			return strings.HasPrefix(kind, "get ") || strings.HasPrefix(kind, "list ") || kind == "update translations/status"
		})
		if want := map[string]int{"patch translations": 1}; !maps.Equal(writes, want) {
			t.Errorf("endpoint change %d: writes %v, want %v (and the pusher's status)", i+1, writes, want)
		}
		// Neither writer needs the Translation back: the API server answers both with its metadata only.
		answers := e.calls.MetadataAnswersSince(before)
		for _, kind := range []string{"patch translations", "update translations/status"} {
			if answers[kind] != got[kind] {
				t.Errorf("endpoint change %d: %d of %d %q answered with metadata only, want all", i+1, answers[kind], got[kind], kind)
			}
		}
	}
	return costs
}

// TestResyncsOfAConvergedTenantCostNothing: the shared informers resync every second (--resync-period); for a
// converged tenant, resyncs of its Services, EndpointSlices, Nodes and Translations enqueue nothing in the
// translator and cost no API request.
func TestResyncsOfAConvergedTenantCostNothing(t *testing.T) {
	const resyncs = 3
	e := newEnvWith(t, envOptions{countCalls: true, resync: time.Second})
	a := e.newTenant("a", projectA)
	ns := a.namespace()
	e.nodes(a.name, a.name, 1)
	names := []string{"web", "api", "shop"}
	var keys []string
	services, translations := a.watchView(informerset.Services), a.watchView(informerset.Translations)
	for k, name := range names {
		e.setSlices(ns, name, "http", 8080, podsIn(a.name, 3*k, 1, 3, 2, 1))
		keys = append(keys, ns+"/"+name)
	}
	a.start()
	for k, name := range names {
		e.service(ns, name, `{"exposed_ports":{"80":{}}}`)
		e.waitConverged(projectA, ns, name, 80, 8080, podsIn(a.name, 3*k, 1, 3, 2, 1))
	}
	for _, name := range names {
		e.waitFor("the neg-status annotation of "+name, 30*time.Second, func() (bool, error) {
			_, ok := e.negStatus(ns, name)
			return ok, nil
		})
		a.settle(services, translations, ns, name)
	}

	before, adds := e.calls.Snapshot(), a.translatorAdds()
	start := services.minResyncs(keys)
	e.waitFor(fmt.Sprintf("%d resyncs of every Service", resyncs), 60*time.Second, func() (bool, error) {
		return services.minResyncs(keys) >= start+resyncs, nil
	})
	a.waitIdle()
	if got := e.calls.Since(before); len(got) != 0 {
		t.Errorf("%d resyncs of a converged tenant made API requests: %v", resyncs, got)
	}
	if after := a.translatorAdds(); after != adds {
		t.Errorf("%d resyncs of a converged tenant gave the translator %v keys, want none", resyncs, after-adds)
	}
}
