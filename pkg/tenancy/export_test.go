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

package tenancy

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// RoutingEntries counts the router's per-tenant bookkeeping for leak tests: entries in the per-resource handler
// maps and lists. It is zero when no tenant has a live handler.
func RoutingEntries(r *Router) int {
	r.resourcesMu.RLock()
	defer r.resourcesMu.RUnlock()
	n := 0
	for _, res := range r.resources {
		res.registryMu.RLock()
		n += len(res.byTenant) + len(res.everyTenant)
		res.registryMu.RUnlock()
	}
	return n
}

// DeliveredNamespaced counts the objects of Namespaced resources the router remembers for namespace moves, and the
// ignored tenant labels it remembers having reported.
func DeliveredNamespaced(r *Router) (objects, ignoredLabels int) {
	r.dispatchMu.Lock()
	defer r.dispatchMu.Unlock()
	r.resourcesMu.RLock()
	defer r.resourcesMu.RUnlock()
	for _, res := range r.resources {
		for _, byName := range res.byNamespace {
			objects += len(byName)
		}
		for _, byName := range res.ignoredLabels {
			ignoredLabels += len(byName)
		}
	}
	return objects, ignoredLabels
}

// RouterHandlerOf returns the router's one event handler on a routed resource's shared informer, so benchmarks can
// measure routing without an informer's goroutines in the way.
func RouterHandlerOf(r *Router, resource schema.GroupVersionResource) cache.ResourceEventHandler {
	res, ok := r.resource(resource)
	if !ok {
		return nil
	}
	return res
}

// FanoutHandlerOf returns a Fanout's one event handler on its shared informer, so tests can hand it what an informer
// rarely produces (a tombstone).
func FanoutHandlerOf(f *Fanout) cache.ResourceEventHandler { return fanoutHandler{f} }

// TakeResourcesLock takes and releases the router's lock on its resources, as a namespace move's delivery does.
func TakeResourcesLock(r *Router) { _ = r.namespacedResources() }
