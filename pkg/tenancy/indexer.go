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
	"errors"
	"fmt"
	"maps"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
)

// ErrReadOnly is returned by the mutating methods of a tenant's indexer: the store belongs to the shared informer.
var ErrReadOnly = errors.New("tenancy: a tenant's view of a shared store is read-only")

// tenantIndexer is a read-only cache.Indexer over a shared informer's store that holds only one tenant's objects.
//
// Unlike the router, it reads ownership from the stores as they are now (the Namespace store's labels), which is
// what a lister should see: the latest known state, possibly ahead of the events delivered so far.
//
// List and ListKeys use the ownership index: for a Namespaced resource, one entry per namespace the tenant owns
// (found through the same index on the Namespace informer); otherwise the tenant's own-label entry, plus the shared
// entry for ClusterScoped resources. Their cost is O(the tenant's objects + its namespaces), not O(all objects). Get
// and the other index queries ask the shared store and drop what the tenant does not own.
type tenantIndexer struct {
	router *Router
	res    *routedResource
	tenant string
}

var _ cache.Indexer = &tenantIndexer{}

// owns reports whether the tenant owns a stored object, judged by the stores' current state.
func (x *tenantIndexer) owns(obj any) bool {
	m, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	label := tenantLabel(m, x.router.labelKey)
	switch x.res.kind {
	case kindNamespaced:
		ns, exists, err := x.router.namespaces.informer.GetIndexer().GetByKey(m.GetNamespace())
		if err != nil || !exists {
			return false
		}
		nsMeta, err := meta.Accessor(ns)
		return err == nil && tenantLabel(nsMeta, x.router.labelKey) == x.tenant
	case kindClusterShared:
		return label == x.tenant || label == ""
	default:
		return label == x.tenant
	}
}

// ownedIndexValues returns the ownership index values under which the tenant's objects are stored.
func (x *tenantIndexer) ownedIndexValues() []string {
	switch x.res.kind {
	case kindNamespaced:
		namespaces, _ := x.router.namespaces.informer.GetIndexer().IndexKeys(x.router.indexName, labelIndexValue(x.tenant))
		values := make([]string, 0, len(namespaces))
		for _, ns := range namespaces {
			values = append(values, namespaceIndexValue(ns))
		}
		return values
	case kindClusterShared:
		return []string{labelIndexValue(x.tenant), sharedIndexValue}
	default:
		return []string{labelIndexValue(x.tenant)}
	}
}

func (x *tenantIndexer) shared() cache.Indexer { return x.res.informer.GetIndexer() }

// List returns the tenant's objects.
func (x *tenantIndexer) List() []any {
	var out []any
	for _, value := range x.ownedIndexValues() {
		objects, _ := x.shared().ByIndex(x.router.indexName, value)
		out = append(out, objects...)
	}
	return out
}

// ListKeys returns the keys of the tenant's objects.
func (x *tenantIndexer) ListKeys() []string {
	var out []string
	for _, value := range x.ownedIndexValues() {
		keys, _ := x.shared().IndexKeys(x.router.indexName, value)
		out = append(out, keys...)
	}
	return out
}

// Get returns the stored object with obj's key, if the tenant owns it.
func (x *tenantIndexer) Get(obj any) (any, bool, error) {
	item, exists, err := x.shared().Get(obj)
	if err != nil || !exists || !x.owns(item) {
		return nil, false, err
	}
	return item, true, nil
}

// GetByKey returns the stored object with the key, if the tenant owns it.
func (x *tenantIndexer) GetByKey(key string) (any, bool, error) {
	item, exists, err := x.shared().GetByKey(key)
	if err != nil || !exists || !x.owns(item) {
		return nil, false, err
	}
	return item, true, nil
}

// Index returns the tenant's objects that share an indexed value with obj in the named index.
func (x *tenantIndexer) Index(indexName string, obj any) ([]any, error) {
	objects, err := x.shared().Index(indexName, obj)
	if err != nil {
		return nil, err
	}
	return x.filter(objects), nil
}

// ByIndex returns the tenant's objects with the indexed value in the named index.
func (x *tenantIndexer) ByIndex(indexName, indexedValue string) ([]any, error) {
	objects, err := x.shared().ByIndex(indexName, indexedValue)
	if err != nil {
		return nil, err
	}
	return x.filter(objects), nil
}

// IndexKeys returns the keys of the tenant's objects with the indexed value in the named index.
func (x *tenantIndexer) IndexKeys(indexName, indexedValue string) ([]string, error) {
	keys, err := x.shared().IndexKeys(indexName, indexedValue)
	if err != nil {
		return nil, err
	}
	out := keys[:0:0]
	for _, key := range keys {
		if _, owned, _ := x.GetByKey(key); owned {
			out = append(out, key)
		}
	}
	return out, nil
}

// ListIndexFuncValues returns the values of the named index among the tenant's objects.
func (x *tenantIndexer) ListIndexFuncValues(indexName string) []string {
	indexFunc, ok := x.shared().GetIndexers()[indexName]
	if !ok {
		return nil
	}
	values := sets.New[string]()
	for _, obj := range x.List() {
		objectValues, err := indexFunc(obj)
		if err != nil {
			continue
		}
		values.Insert(objectValues...)
	}
	return values.UnsortedList()
}

// GetIndexers returns a copy of the shared informer's indexers.
func (x *tenantIndexer) GetIndexers() cache.Indexers { return maps.Clone(x.shared().GetIndexers()) }

// LastStoreSyncResourceVersion returns the shared store's.
func (x *tenantIndexer) LastStoreSyncResourceVersion() string {
	return x.shared().LastStoreSyncResourceVersion()
}

func (x *tenantIndexer) filter(objects []any) []any {
	out := objects[:0:0]
	for _, obj := range objects {
		if x.owns(obj) {
			out = append(out, obj)
		}
	}
	return out
}

// Add returns ErrReadOnly.
func (x *tenantIndexer) Add(any) error { return ErrReadOnly }

// Update returns ErrReadOnly.
func (x *tenantIndexer) Update(any) error { return ErrReadOnly }

// Delete returns ErrReadOnly.
func (x *tenantIndexer) Delete(any) error { return ErrReadOnly }

// Replace returns ErrReadOnly.
func (x *tenantIndexer) Replace([]any, string) error { return ErrReadOnly }

// Resync returns ErrReadOnly.
func (x *tenantIndexer) Resync() error { return ErrReadOnly }

// AddIndexers returns an error: indexers are installed on the shared informer before it starts.
func (x *tenantIndexer) AddIndexers(cache.Indexers) error {
	return fmt.Errorf("tenancy: cannot add indexers through a tenant's view: %w", ErrReadOnly)
}

// Bookmark does nothing: only the shared informer's reflector may move its store's resource version, and the
// interface leaves no way to report an error.
func (x *tenantIndexer) Bookmark(string) {}
