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
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

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
	views  *tenancy.Tenant
	shared SharedInformerGetter

	mu sync.Mutex
	// wrapped is a slice, not a map: a controller wraps one or two informers, and a map of them cost about 450 bytes
	// per controller of every tenant.
	wrapped   []*trackedInformer
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
	t := &trackedInformer{SharedIndexInformer: inf, resource: resource}
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
		t.close()
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
		t.mu.Lock()
		n += len(t.regs)
		t.mu.Unlock()
	}
	for _, in := range i.interests {
		if !in.Closed() {
			n++
		}
	}
	return n
}

// trackedInformer is a shared informer as one tenant's controller may use it: handlers are recorded so the manager
// can remove them, Run starts nothing (the shared informer runs once, on the global stop), and nothing that would
// reconfigure it for every tenant is allowed.
type trackedInformer struct {
	cache.SharedIndexInformer
	resource schema.GroupVersionResource

	mu     sync.Mutex
	regs   []cache.ResourceEventHandlerRegistration
	closed bool
}

func (t *trackedInformer) track(reg cache.ResourceEventHandlerRegistration, err error) (cache.ResourceEventHandlerRegistration, error) {
	if err != nil {
		return reg, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		_ = t.SharedIndexInformer.RemoveEventHandler(reg)
		return nil, errors.New("the controller's informers are closed")
	}
	t.regs = append(t.regs, reg)
	return reg, nil
}

func (t *trackedInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return t.track(t.SharedIndexInformer.AddEventHandler(h))
}

func (t *trackedInformer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return t.track(t.SharedIndexInformer.AddEventHandlerWithResyncPeriod(h, resync))
}

func (t *trackedInformer) AddEventHandlerWithOptions(h cache.ResourceEventHandler, o cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return t.track(t.SharedIndexInformer.AddEventHandlerWithOptions(h, o))
}

func (t *trackedInformer) RemoveEventHandler(reg cache.ResourceEventHandlerRegistration) error {
	t.mu.Lock()
	for i, r := range t.regs {
		if r == reg {
			t.regs = append(t.regs[:i], t.regs[i+1:]...)
			break
		}
	}
	t.mu.Unlock()
	return t.SharedIndexInformer.RemoveEventHandler(reg)
}

func (t *trackedInformer) Run(stopCh <-chan struct{})         { <-stopCh }
func (t *trackedInformer) RunWithContext(ctx context.Context) { <-ctx.Done() }
func (t *trackedInformer) SetTransform(cache.TransformFunc) error {
	return errReadOnlyShared
}
func (t *trackedInformer) AddIndexers(cache.Indexers) error { return errReadOnlyShared }
func (t *trackedInformer) SetWatchErrorHandler(cache.WatchErrorHandler) error {
	return errReadOnlyShared
}
func (t *trackedInformer) SetWatchErrorHandlerWithContext(cache.WatchErrorHandlerWithContext) error {
	return errReadOnlyShared
}

func (t *trackedInformer) close() {
	t.mu.Lock()
	regs := t.regs
	t.regs = nil
	t.closed = true
	t.mu.Unlock()
	for _, reg := range regs {
		_ = t.SharedIndexInformer.RemoveEventHandler(reg)
	}
}
