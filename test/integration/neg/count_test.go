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
	"net/http"
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
	// The workqueue metrics, which tell when a controller's queue has processed every key it was given; the
	// binary imports them too.
	_ "k8s.io/component-base/metrics/prometheus/workqueue"

	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
)

// apiCalls counts the requests sent through a rest.Config it wraps, by "<verb> <resource>[/<subresource>]", with
// the verbs of the API (get, list, watch, create, update, patch, delete); discovery requests count as
// "get discovery".
type apiCalls struct {
	mu     sync.Mutex
	counts map[string]int
}

func (c *apiCalls) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		c.mu.Lock()
		if c.counts == nil {
			c.counts = map[string]int{}
		}
		kind := requestKind(req)
		c.counts[kind]++
		c.mu.Unlock()
		resp, err := rt.RoundTrip(req)
		if err == nil && resp.StatusCode == http.StatusConflict {
			c.mu.Lock()
			c.counts[conflictPrefix+kind]++
			c.mu.Unlock()
		}
		return resp, err
	})
}

// conflictPrefix marks, in apiCalls' counts, the requests answered 409 Conflict (a write based on a stale object,
// or a create of a name that exists).
const conflictPrefix = "409 "

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// snapshot returns the counts so far.
func (c *apiCalls) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

// since returns the requests made after before was taken, leaving out watches (long-running, started once per
// informer) and discovery (the informer set's periodic look for optional APIs): neither is a cost of a change.
func (c *apiCalls) since(before map[string]int) map[string]int {
	out := map[string]int{}
	for kind, n := range c.snapshot() {
		if d := n - before[kind]; d > 0 && !strings.HasPrefix(kind, "watch ") && kind != "get discovery" &&
			!strings.HasPrefix(kind, conflictPrefix) {
			out[kind] = d
		}
	}
	return out
}

// conflictsSince returns the requests answered 409 Conflict after before was taken.
func (c *apiCalls) conflictsSince(before map[string]int) int {
	n := 0
	for kind, count := range c.snapshot() {
		if strings.HasPrefix(kind, conflictPrefix) {
			n += count - before[kind]
		}
	}
	return n
}

// reads sums the get and list requests of counts.
func reads(counts map[string]int) int {
	n := 0
	for kind, c := range counts {
		if strings.HasPrefix(kind, "get ") || strings.HasPrefix(kind, "list ") {
			n += c
		}
	}
	return n
}

// requestKind names a request as "<verb> <resource>[/<subresource>]" from its method and path:
// /api/v1[/namespaces/<ns>]/<resource>[/<name>[/<sub>]] or /apis/<group>/<version>[/namespaces/<ns>]/<resource>...
func requestKind(req *http.Request) string {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	var rest []string
	switch {
	case len(parts) > 2 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) > 3 && parts[0] == "apis":
		rest = parts[3:]
	default:
		return "get discovery"
	}
	if len(rest) >= 3 && rest[0] == "namespaces" {
		rest = rest[2:]
	}
	resource, named := rest[0], len(rest) > 1
	if len(rest) > 2 {
		resource += "/" + rest[2]
	}
	verb := map[string]string{http.MethodPost: "create", http.MethodPut: "update", http.MethodPatch: "patch",
		http.MethodDelete: "delete"}[req.Method]
	if req.Method == http.MethodGet {
		switch {
		case req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1":
			verb = "watch"
		case named:
			verb = "get"
		default:
			verb = "list"
		}
	}
	if verb == "" {
		verb = strings.ToLower(req.Method)
	}
	return verb + " " + resource
}

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
// Translation's status.
func TestEndpointChangeCostsNoReadsAndOneWrite(t *testing.T) {
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

	for i := range 3 {
		before := e.calls.snapshot()
		eps[1].ip = fmt.Sprintf("10.99.0.%d", i+1)
		e.setSlices(ns, "web", "http", 8080, eps)
		e.waitConverged(projectA, ns, "web", 80, 8080, eps)
		a.settle(services, translations, ns, "web")

		got := e.calls.since(before)
		t.Logf("endpoint change %d: API requests %v", i+1, got)
		if n := reads(got); n != 0 {
			t.Errorf("endpoint change %d: %d API reads, want none: %v", i+1, n, got)
		}
		writes := maps.Clone(got)
		maps.DeleteFunc(writes, func(kind string, _ int) bool {
			return strings.HasPrefix(kind, "get ") || strings.HasPrefix(kind, "list ") || kind == "update translations/status"
		})
		if want := map[string]int{"update translations": 1}; !maps.Equal(writes, want) {
			t.Errorf("endpoint change %d: writes %v, want %v (and the pusher's status)", i+1, writes, want)
		}
	}
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

	before, adds := e.calls.snapshot(), a.translatorAdds()
	start := services.minResyncs(keys)
	e.waitFor(fmt.Sprintf("%d resyncs of every Service", resyncs), 60*time.Second, func() (bool, error) {
		return services.minResyncs(keys) >= start+resyncs, nil
	})
	a.waitIdle()
	if got := e.calls.since(before); len(got) != 0 {
		t.Errorf("%d resyncs of a converged tenant made API requests: %v", resyncs, got)
	}
	if after := a.translatorAdds(); after != adds {
		t.Errorf("%d resyncs of a converged tenant gave the translator %v keys, want none", resyncs, after-adds)
	}
}
