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

// Package informerset owns the process's shared informers: the table of the resources it watches and how each
// reaches the tenants (Resources), one SharedIndexInformer per resource, created once, trimmed of what no controller
// reads (trim.go), started once on the global (leader) stop and synced, with a bounded wait, before anything
// consumes them, and the tenancy Router and Fanouts built over them (NewRouting). Informers for optional APIs (CRDs
// a cluster may not serve) are started only once discovery shows the API, and a missing one never blocks the others.
// Tracked (counted.go) keeps the handlers registered through an informer: the Set wraps each of its informers in
// one, which Set.Handlers counts, and the ProviderConfig manager wraps a shared informer it hands a tenant's
// controller in another, whose handlers it removes at once when that controller stops.
package informerset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	gatewayclientset "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	mpclientset "github.com/multiproject/client-go/clientset/versioned"
)

// DefaultDiscoveryInterval is how often the set looks again for optional APIs that the cluster did not serve.
const DefaultDiscoveryInterval = 30 * time.Second

// Config configures a Set.
type Config struct {
	Client kubernetes.Interface
	// MultiprojectClient serves the CRD-backed Resources; without it the Set holds only the built-in ones. Custom
	// resources have no protobuf encoding, so it should speak JSON.
	MultiprojectClient mpclientset.Interface
	// GatewayClient serves the Gateway API Resources; without it the Set holds none of them. It should speak JSON, as
	// MultiprojectClient.
	GatewayClient gatewayclientset.Interface
	// Discovery answers whether an optional API is served. Defaults to Client.Discovery().
	Discovery ResourceDiscoverer
	// ResyncPeriod of every informer; 0 disables resync.
	ResyncPeriod time.Duration
	// Indexers are added to every informer before it starts (e.g. the tenant index).
	Indexers cache.Indexers
	// DiscoveryInterval is how often missing optional APIs are looked up again; DefaultDiscoveryInterval if 0.
	DiscoveryInterval time.Duration
	// ProviderConfigSelector, if not empty, limits the ProviderConfigs informer to the tenants it selects (the
	// ones assigned to this replica's shard).
	ProviderConfigSelector string
	// ClaimsNamespace, set when this replica shares the tenants with others (--sharding), is where the claim
	// records of hosts and NEG names are watched; empty: no Sharded resource is watched.
	ClaimsNamespace string
	// Scope, if set, is the shard selector of the informers of the tenancy.Namespaced resources (Clients.Scope).
	Scope *ShardScope
}

// ResourceDiscoverer is the part of discovery the set needs; client-go's discovery clients implement it.
type ResourceDiscoverer interface {
	ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error)
}

// NewInformerFunc builds the informer of an optional resource. It is called at most once, and only when discovery
// shows the resource.
type NewInformerFunc func(resync time.Duration) cache.SharedIndexInformer

// OptionalState tells whether an optional API is being watched.
type OptionalState string

const (
	// OptionalPending: not looked up yet (the set has not started).
	OptionalPending OptionalState = "Pending"
	// OptionalNotServed: discovery does not list the resource; it is looked up again periodically.
	OptionalNotServed OptionalState = "NotServed"
	// OptionalStarted: the informer runs.
	OptionalStarted OptionalState = "Started"
)

type optional struct {
	gvr      schema.GroupVersionResource
	newFunc  NewInformerFunc
	state    OptionalState
	informer cache.SharedIndexInformer
	// ready is closed once the informer has started (and then once it has synced); consumers wait on it.
	started chan struct{}
}

// Set is the process's collection of shared informers.
type Set struct {
	cfg       Config
	required  map[schema.GroupVersionResource]cache.SharedIndexInformer
	discovery ResourceDiscoverer

	mu        sync.Mutex
	optionals map[schema.GroupVersionResource]*optional
	startCtx  context.Context
	started   bool
}

// New creates the informers of Resources: those that are not optional are added, the optional ones registered.
// Without a MultiprojectClient it leaves out the CRD-backed ones. Nothing runs until Start.
func New(cfg Config) (*Set, error) {
	if cfg.Client == nil {
		return nil, errors.New("informerset: a client is required")
	}
	if cfg.Discovery == nil {
		cfg.Discovery = cfg.Client.Discovery()
	}
	if cfg.DiscoveryInterval <= 0 {
		cfg.DiscoveryInterval = DefaultDiscoveryInterval
	}
	s := &Set{
		cfg:       cfg,
		required:  map[schema.GroupVersionResource]cache.SharedIndexInformer{},
		discovery: cfg.Discovery,
		optionals: map[schema.GroupVersionResource]*optional{},
	}
	clients := Clients{Kube: cfg.Client, Multiproject: cfg.MultiprojectClient, Gateway: cfg.GatewayClient, ProviderConfigSelector: cfg.ProviderConfigSelector,
		ClaimsNamespace: cfg.ClaimsNamespace, Scope: cfg.Scope}
	for _, r := range Resources {
		if (r.CRD && !r.GatewayAPI && cfg.MultiprojectClient == nil) || (r.GatewayAPI && cfg.GatewayClient == nil) || (r.Sharded && cfg.ClaimsNamespace == "") {
			continue
		}
		var err error
		if r.Optional {
			err = s.AddOptional(r.GVR, func(resync time.Duration) cache.SharedIndexInformer { return r.NewInformer(clients, resync) })
		} else {
			err = s.Add(r.GVR, r.NewInformer(clients, cfg.ResyncPeriod))
		}
		if err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Add registers an informer that must sync before anything runs (for example one of our own CRDs, which the
// manifests always install). It must be called before Start.
func (s *Set) Add(gvr schema.GroupVersionResource, informer cache.SharedIndexInformer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return fmt.Errorf("informerset: cannot add %s after start", gvr)
	}
	if _, dup := s.required[gvr]; dup {
		return fmt.Errorf("informerset: %s added twice", gvr)
	}
	if err := prepare(informer, transformFor(gvr), s.cfg.Indexers); err != nil {
		return fmt.Errorf("informerset: %s: %w", gvr, err)
	}
	s.required[gvr] = Track(informer)
	return nil
}

// AddOptional registers the informer of an API the cluster may not serve. It must be called before Start.
func (s *Set) AddOptional(gvr schema.GroupVersionResource, newFunc NewInformerFunc) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return fmt.Errorf("informerset: cannot add %s after start", gvr)
	}
	if _, dup := s.optionals[gvr]; dup {
		return fmt.Errorf("informerset: %s added twice", gvr)
	}
	s.optionals[gvr] = &optional{gvr: gvr, newFunc: newFunc, state: OptionalPending, started: make(chan struct{})}
	return nil
}

// prepare installs the transform and indexers; both must be set before the informer starts.
func prepare(informer cache.SharedIndexInformer, transform cache.TransformFunc, indexers cache.Indexers) error {
	if err := informer.SetTransform(transform); err != nil {
		return err
	}
	if len(indexers) == 0 {
		return nil
	}
	missing := cache.Indexers{}
	existing := informer.GetIndexer().GetIndexers()
	for name, fn := range indexers {
		if _, ok := existing[name]; !ok {
			missing[name] = fn
		}
	}
	return informer.AddIndexers(missing)
}

// Informer returns a required informer, or nil if the set has none for gvr.
func (s *Set) Informer(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	return s.required[gvr]
}

// Optional returns the informer of an optional API and a channel closed once it has started. The informer is nil
// until the API is served.
func (s *Set) Optional(gvr schema.GroupVersionResource) (cache.SharedIndexInformer, <-chan struct{}, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.optionals[gvr]
	if !ok {
		return nil, nil, false
	}
	return o.informer, o.started, true
}

// OptionalStates reports, for every optional API, whether it is watched.
func (s *Set) OptionalStates() map[schema.GroupVersionResource]OptionalState {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[schema.GroupVersionResource]OptionalState, len(s.optionals))
	for gvr, o := range s.optionals {
		out[gvr] = o.state
	}
	return out
}

// Start runs every informer on ctx, the global (leader) stop. It may be called once; informers of optional APIs
// that are not served are looked up again every DiscoveryInterval until ctx ends.
func (s *Set) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return errors.New("informerset: already started")
	}
	s.started = true
	s.startCtx = ctx
	for _, informer := range s.required {
		go informer.RunWithContext(ctx)
	}
	s.mu.Unlock()

	if s.startServedOptionals(ctx) > 0 {
		go wait.UntilWithContext(ctx, func(ctx context.Context) {
			s.startServedOptionals(ctx)
		}, s.cfg.DiscoveryInterval)
	}
	return nil
}

// startServedOptionals starts the optional informers whose APIs are now served and returns how many are still
// missing.
func (s *Set) startServedOptionals(ctx context.Context) int {
	logger := klog.FromContext(ctx)
	s.mu.Lock()
	var pending []*optional
	for _, o := range s.optionals {
		if o.state != OptionalStarted {
			pending = append(pending, o)
		}
	}
	s.mu.Unlock()

	missing := 0
	for _, o := range pending {
		served, err := s.served(o.gvr)
		if err != nil {
			logger.Error(err, "Could not discover an optional API; will look again", "resource", o.gvr.String())
			missing++
			continue
		}
		s.mu.Lock()
		if !served {
			if o.state != OptionalNotServed {
				logger.Info("Optional API is not served by the cluster; its informer waits for it", "resource", o.gvr.String())
			}
			o.state = OptionalNotServed
			s.mu.Unlock()
			missing++
			continue
		}
		o.informer = Track(o.newFunc(s.cfg.ResyncPeriod))
		if err := prepare(o.informer, transformFor(o.gvr), s.cfg.Indexers); err != nil {
			s.mu.Unlock()
			logger.Error(err, "Could not prepare an optional informer", "resource", o.gvr.String())
			missing++
			continue
		}
		o.state = OptionalStarted
		go o.informer.RunWithContext(ctx)
		close(o.started)
		s.mu.Unlock()
		logger.Info("Optional API is served; started its informer", "resource", o.gvr.String())
	}
	return missing
}

func (s *Set) served(gvr schema.GroupVersionResource) (bool, error) {
	list, err := s.discovery.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == gvr.Resource }), nil
}

// HasSynced reports whether every required informer and every started optional informer has synced.
func (s *Set) HasSynced() bool {
	return len(s.unsynced()) == 0
}

func (s *Set) unsynced() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for gvr, informer := range s.required {
		if !informer.HasSynced() {
			out = append(out, gvr.String())
		}
	}
	for gvr, o := range s.optionals {
		if o.informer != nil && !o.informer.HasSynced() {
			out = append(out, gvr.String())
		}
	}
	slices.Sort(out)
	return out
}

// WaitForCacheSync waits, at most timeout, until HasSynced. The error names the informers that did not sync.
func (s *Set) WaitForCacheSync(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		return s.HasSynced(), nil
	})
	if err != nil {
		return fmt.Errorf("informer caches did not sync within %s: %s", timeout, strings.Join(s.unsynced(), ", "))
	}
	return nil
}

// DropManagedFields is every informer's transform (transformFor adds the resource's Trim): controllers never read
// managedFields, and they are a large part of every cached object.
func DropManagedFields(obj interface{}) (interface{}, error) {
	if accessor, err := meta.Accessor(obj); err == nil && accessor.GetManagedFields() != nil {
		accessor.SetManagedFields(nil)
	}
	return obj, nil
}
