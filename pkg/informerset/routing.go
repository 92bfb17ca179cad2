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
	"errors"
	"fmt"
	"maps"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/tenancy"
)

// RoutingConfig configures NewRouting.
type RoutingConfig struct {
	// Config configures the Set; both clients are required. The tenancy index is added to its Indexers.
	Config
	// LabelKey names an object's tenant (mpv1alpha1.DefaultProviderConfigLabelKey if empty).
	LabelKey string
	// Recorder, if set, gets the Router's Warning Events (tenancy.RouterOptions).
	Recorder record.EventRecorder
}

// Routing is what the process builds once per leadership term: the Set of every shared informer of Resources and
// the Router that splits them between tenants, each by the Scope its entry names. The manager and the
// integration tests build it with NewRouting, so both run on the same wiring.
type Routing struct {
	Set    *Set
	Router *tenancy.Router

	mu     sync.RWMutex
	served sets.Set[schema.GroupVersionResource]
	// fanouts holds the one Fanout of each shared informer whose resource has InterestKeys.
	fanouts map[schema.GroupVersionResource]*tenancy.Fanout
}

// NewRouting builds the shared informers of Resources, indexed for the tenancy Router, and the Router with every
// resource that is not optional routed. Optional resources are routed by RouteOptionals once served. Nothing runs
// until Start.
func NewRouting(cfg RoutingConfig) (*Routing, error) {
	if cfg.Client == nil || cfg.MultiprojectClient == nil {
		return nil, errors.New("informerset: a Kubernetes and a multiproject client are required")
	}
	if cfg.LabelKey == "" {
		cfg.LabelKey = mpv1alpha1.DefaultProviderConfigLabelKey
	}
	indexers := maps.Clone(cfg.Indexers)
	if indexers == nil {
		indexers = cache.Indexers{}
	}
	maps.Copy(indexers, tenancy.Indexers(cfg.LabelKey))
	cfg.Indexers = indexers
	set, err := New(cfg.Config)
	if err != nil {
		return nil, err
	}
	router, err := tenancy.NewRouterWithOptions(cfg.LabelKey, set.Informer(Namespaces), tenancy.RouterOptions{Recorder: cfg.Recorder})
	if err != nil {
		return nil, err
	}
	tn := &Routing{Set: set, Router: router, served: sets.New[schema.GroupVersionResource](),
		fanouts: map[schema.GroupVersionResource]*tenancy.Fanout{}}
	for _, r := range Resources {
		if r.Optional {
			continue
		}
		if err := tn.route(r, set.Informer(r.GVR)); err != nil {
			_ = tn.Close()
			return nil, err
		}
	}
	return tn, nil
}

// route hands a served resource to the tenants: through the Router, by its Scope, or, for a NotRouted resource
// with InterestKeys, through a Fanout.
func (t *Routing) route(r Resource, inf cache.SharedIndexInformer) error {
	if r.Scope != NotRouted {
		return t.Router.AddResource(r.GVR, inf, r.Scope)
	}
	if r.InterestKeys == nil {
		return nil
	}
	f, err := tenancy.NewFanout(inf, r.InterestKeys)
	if err != nil {
		return fmt.Errorf("informerset: %s: %w", r.GVR, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.fanouts[r.GVR] = f
	return nil
}

// RouteOptionals waits, for every optional resource, until its API is served and its informer synced, then routes
// it (if its Scope says so), marks it Served and calls onServed (if not nil) with it. It returns once every optional
// resource is served, or when ctx ends. Call it once, after Set.Start.
func (t *Routing) RouteOptionals(ctx context.Context, onServed func(schema.GroupVersionResource)) {
	logger := klog.FromContext(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, r := range Resources {
		if !r.Optional {
			continue
		}
		wg.Go(func() {
			if err := t.routeWhenServed(ctx, r); err != nil {
				if ctx.Err() == nil {
					logger.Error(err, "Optional API could not be routed to tenants", "resource", r.GVR.String())
				}
				return
			}
			t.mu.Lock()
			t.served.Insert(r.GVR)
			t.mu.Unlock()
			if onServed != nil {
				onServed(r.GVR)
			}
		})
	}
}

func (t *Routing) routeWhenServed(ctx context.Context, r Resource) error {
	_, started, ok := t.Set.Optional(r.GVR)
	if !ok {
		return fmt.Errorf("informerset: %s is not registered", r.GVR)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-started:
	}
	inf, _, _ := t.Set.Optional(r.GVR)
	if !cache.WaitForNamedCacheSyncWithContext(ctx, inf.HasSynced) {
		return ctx.Err()
	}
	return t.route(r, inf)
}

// Served reports whether the informer of gvr is there to be used: always for the resources that are not optional,
// and for optional ones once RouteOptionals has found them served, synced and routed.
func (t *Routing) Served(gvr schema.GroupVersionResource) bool {
	if r, ok := LookupResource(gvr); ok && !r.Optional {
		// A Sharded one only where it was built.
		return !r.Sharded || t.Set.Informer(gvr) != nil
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.served.Has(gvr)
}

// Shared returns the unfiltered shared informer of gvr, or false while the process has none that is Served. For a
// resource with InterestKeys it is the informer's tenancy.Fanout: read it as the informer, and watch it through
// Interests (it refuses handlers of its own).
func (t *Routing) Shared(gvr schema.GroupVersionResource) (cache.SharedIndexInformer, bool) {
	t.mu.RLock()
	f := t.fanouts[gvr]
	t.mu.RUnlock()
	if f != nil {
		return f, true
	}
	if inf := t.Set.Informer(gvr); inf != nil {
		return inf, true
	}
	if !t.Served(gvr) {
		return nil, false
	}
	inf, _, _ := t.Set.Optional(gvr)
	return inf, inf != nil
}

// Close removes the Router's and the Fanouts' handlers from the shared informers. Call it once RouteOptionals has
// returned.
func (t *Routing) Close() error {
	t.mu.Lock()
	fanouts := t.fanouts
	t.fanouts = map[schema.GroupVersionResource]*tenancy.Fanout{}
	t.mu.Unlock()
	errs := []error{t.Router.Close()}
	for _, f := range fanouts {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}
