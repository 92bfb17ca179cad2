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
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// View is one tenant's view of one shared informer. It implements cache.SharedIndexInformer so that controllers
// written against client-go informers run on it unchanged: handlers receive only the tenant's objects, and the
// indexer (usable with generated listers) holds only the tenant's objects.
//
// A view never runs, stops or reconfigures the shared informer (the informer's owner does). What cannot be done
// honestly on a view says so: SetTransform, SetWatchErrorHandler, SetWatchErrorHandlerWithContext and AddIndexers
// return errors, the indexer's mutating methods return errors, and Run only waits for its stop signal.
type View struct {
	tenant *TenantViews
	res    *routedResource
	// indexer is held by value: one allocation per view, not two.
	indexer tenantIndexer
}

var (
	_ cache.SharedIndexInformer = &View{}
	_ cache.Controller          = &View{}
)

// ErrNotSupportedOnView is returned by the cache.SharedIndexInformer methods that would reconfigure the shared
// informer behind a view.
var ErrNotSupportedOnView = errors.New("tenancy: not supported on a tenant's view; the shared informer is configured by its owner")

// Tenant returns the name of the tenant whose view this is.
func (v *View) Tenant() string { return v.tenant.name }

// Resource returns the routed resource this is a view of.
func (v *View) Resource() schema.GroupVersionResource { return v.res.resource }

// AddEventHandler registers a handler for the tenant's objects. It is called, asynchronously, with the tenant's
// existing objects as Adds with isInInitialList=true once the shared informers have synced, then with the tenant's
// events as they are routed. The returned registration's HasSynced is true once those initial Adds are delivered.
func (v *View) AddEventHandler(handler cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return v.AddEventHandlerWithOptions(handler, cache.HandlerOptions{})
}

// AddEventHandlerWithResyncPeriod is AddEventHandler for a handler that wants resyncs (resyncPeriod > 0) or not (0).
// Resyncs come at the shared informer's default period, which client-go allows ("may be longer", or none at all for
// an informer that does not resync).
func (v *View) AddEventHandlerWithResyncPeriod(handler cache.ResourceEventHandler, resyncPeriod time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return v.AddEventHandlerWithOptions(handler, cache.HandlerOptions{ResyncPeriod: &resyncPeriod})
}

// AddEventHandlerWithOptions is AddEventHandler with options. Only ResyncPeriod is honored, as described for
// AddEventHandlerWithResyncPeriod; nil means the shared informer's default.
func (v *View) AddEventHandlerWithOptions(handler cache.ResourceEventHandler, options cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	if handler == nil {
		return nil, errors.New("tenancy: nil event handler")
	}
	wantsResync := options.ResyncPeriod == nil || *options.ResyncPeriod > 0
	g, err := v.tenant.addRegistration(v.res, handler, wantsResync)
	if err != nil {
		return nil, err
	}
	go v.tenant.router.deliverInitialList(g)
	return g, nil
}

// RemoveEventHandler removes a handler added through a view of the same tenant and resource. It is idempotent, and
// safe to call from the handler itself; like client-go's, it does not wait for a call in progress.
func (v *View) RemoveEventHandler(handle cache.ResourceEventHandlerRegistration) error {
	g, ok := handle.(*registration)
	if !ok || g.tenant != v.tenant || g.res != v.res {
		return fmt.Errorf("tenancy: this %T was not returned by tenant %q's view of %s", handle, v.tenant.name, v.res.resource)
	}
	v.tenant.router.removeRegistration(g)
	return nil
}

// GetStore returns the tenant's read-only, filtered store.
func (v *View) GetStore() cache.Store { return &v.indexer }

// GetIndexer returns the tenant's read-only, filtered indexer, for listers.
func (v *View) GetIndexer() cache.Indexer { return &v.indexer }

// GetController returns the view itself: like client-go's, the controller of a shared informer is of no use to its
// users, and running it must not run the shared informer.
func (v *View) GetController() cache.Controller { return v }

// Run does not run anything: the shared informer is run by its owner for the life of the process. It only waits for
// stopCh, so code that runs its informers until a stop signal works unchanged.
func (v *View) Run(stopCh <-chan struct{}) { <-stopCh }

// RunWithContext is Run with a context.
func (v *View) RunWithContext(ctx context.Context) { <-ctx.Done() }

// HasSynced reports whether the shared informer, and the Namespace informer that decides ownership, have synced.
func (v *View) HasSynced() bool {
	return v.res.informer.HasSynced() && v.tenant.router.namespaces.informer.HasSynced()
}

// HasSyncedChecker is HasSynced as a channel, for cache.WaitFor.
func (v *View) HasSyncedChecker() cache.DoneChecker { return v.res.hasSyncedChecker() }

// LastSyncResourceVersion returns the shared informer's.
func (v *View) LastSyncResourceVersion() string { return v.res.informer.LastSyncResourceVersion() }

// SetWatchErrorHandler returns ErrNotSupportedOnView.
func (v *View) SetWatchErrorHandler(cache.WatchErrorHandler) error { return ErrNotSupportedOnView }

// SetWatchErrorHandlerWithContext returns ErrNotSupportedOnView.
func (v *View) SetWatchErrorHandlerWithContext(cache.WatchErrorHandlerWithContext) error {
	return ErrNotSupportedOnView
}

// SetTransform returns ErrNotSupportedOnView: a transform would apply to every tenant's objects.
func (v *View) SetTransform(cache.TransformFunc) error { return ErrNotSupportedOnView }

// IsStopped reports whether the shared informer has stopped or the tenant handle is closed; either way no handler
// can be added any more.
func (v *View) IsStopped() bool { return v.res.informer.IsStopped() || v.tenant.isClosed() }

// AddIndexers returns ErrNotSupportedOnView: indexers are installed on the shared informer before it starts.
func (v *View) AddIndexers(cache.Indexers) error { return ErrNotSupportedOnView }
