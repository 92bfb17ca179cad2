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

package providerconfig

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/tenancy"
)

// errReadOnlyShared is returned by the methods of a shared informer handed to a tenant that would reconfigure it
// for every tenant.
var errReadOnlyShared = errors.New("a tenant's controller cannot reconfigure a shared informer")

// SharedInformerGetter returns the unfiltered shared informer of a resource, or false while the process has none
// (an optional API the cluster does not serve yet).
type SharedInformerGetter func(resource schema.GroupVersionResource) (cache.SharedIndexInformer, bool)

// controllerInformers is what one running controller sees: its own tenancy handle for filtered views, shared
// informers wrapped so that every handler it adds is recorded and removed when it stops, and its Interests in the
// shared informers watched by key, closed when it stops.
type controllerInformers struct {
	views  *tenancy.TenantViews
	shared SharedInformerGetter

	mu sync.Mutex
	// wrapped is a slice, not a map: a controller wraps one or two informers, and a map of them cost about 450 bytes
	// per controller of every tenant.
	wrapped   []*readOnlyShared
	interests []*tenancy.Interest
	closed    bool
}

func (i *controllerInformers) Informer(resource schema.GroupVersionResource) (cache.SharedIndexInformer, error) {
	return i.views.Informer(resource)
}

func (i *controllerInformers) Shared(resource schema.GroupVersionResource) (cache.SharedIndexInformer, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.closed {
		return nil, errors.New("the controller's informers are closed")
	}
	for _, t := range i.wrapped {
		if t.resource == resource {
			return t, nil
		}
	}
	inf, ok := i.shared(resource)
	if !ok {
		return nil, fmt.Errorf("no shared informer for %s (is the API served?)", resource)
	}
	t := &readOnlyShared{Tracked: informerset.Tracked{SharedIndexInformer: inf}, resource: resource}
	i.wrapped = append(i.wrapped, t)
	return t, nil
}

// Interest registers the controller's interest in a shared informer watched by key: the process's one
// tenancy.Fanout on it, which Shared hands out, delivers the events.
func (i *controllerInformers) Interest(resource schema.GroupVersionResource) (*tenancy.Interest, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.closed {
		return nil, errors.New("the controller's informers are closed")
	}
	inf, ok := i.shared(resource)
	if !ok {
		return nil, fmt.Errorf("no shared informer for %s (is the API served?)", resource)
	}
	f, ok := inf.(*tenancy.Fanout)
	if !ok {
		return nil, fmt.Errorf("%s is not watched by key", resource)
	}
	in, err := f.Interest()
	if err != nil {
		return nil, err
	}
	i.interests = append(i.interests, in)
	return in, nil
}

// close removes every handler added through these informers: the views' through the tenancy handle, the shared
// informers' one by one, and the Interests with their keys.
func (i *controllerInformers) close() {
	i.views.Close()
	i.mu.Lock()
	i.closed = true
	wrapped, interests := i.wrapped, i.interests
	i.wrapped, i.interests = nil, nil
	i.mu.Unlock()
	for _, t := range wrapped {
		t.RemoveAll()
	}
	for _, in := range interests {
		in.Close()
	}
}

// registrations counts the handlers and Interests still registered through these informers, for leak tests.
func (i *controllerInformers) registrations() int {
	n := i.views.RegistrationCount()
	i.mu.Lock()
	defer i.mu.Unlock()
	for _, t := range i.wrapped {
		n += t.Handlers()
	}
	for _, in := range i.interests {
		if !in.Closed() {
			n++
		}
	}
	return n
}

// readOnlyShared is a shared informer as one tenant's controller may use it: its handlers are tracked, so the
// manager can remove them (informerset.Tracked), Run starts nothing (the shared informer runs once, on the global
// stop), and nothing that would reconfigure it for every tenant is allowed.
type readOnlyShared struct {
	informerset.Tracked
	resource schema.GroupVersionResource
}

func (t *readOnlyShared) Run(stopCh <-chan struct{})         { <-stopCh }
func (t *readOnlyShared) RunWithContext(ctx context.Context) { <-ctx.Done() }
func (t *readOnlyShared) SetTransform(cache.TransformFunc) error {
	return errReadOnlyShared
}
func (t *readOnlyShared) AddIndexers(cache.Indexers) error { return errReadOnlyShared }
func (t *readOnlyShared) SetWatchErrorHandler(cache.WatchErrorHandler) error {
	return errReadOnlyShared
}
func (t *readOnlyShared) SetWatchErrorHandlerWithContext(cache.WatchErrorHandlerWithContext) error {
	return errReadOnlyShared
}
