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

package claims

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
)

// SharedInformers returns the process's unfiltered shared informer of a resource, false while it has none (an
// optional API not served yet). The Service watches through it directly, not through a controller's handle, whose
// handlers go when that controller stops.
type SharedInformers func(resource schema.GroupVersionResource) (cache.SharedIndexInformer, bool)

// ServiceConfig is what a Service is built from.
type ServiceConfig struct {
	// Informers hands out the shared informers of the objects that publish names (a Kind's Holdings).
	Informers SharedInformers
	// Records, when the replicas share the tenants (--sharding), makes every Registry of the Service hold its names
	// across processes through claim records (records.go); nil: the claims are decided in memory.
	Records *RecordsConfig
}

// RecordsConfig is where the claim records of a Service are.
type RecordsConfig struct {
	Client kubernetes.Interface
	// Namespace holds the records (the leader-election namespace); kube-system when empty.
	Namespace string
	// Informer is the shared informer of the claim records: Leases of Namespace labeled KindLabel.
	Informer cache.SharedIndexInformer
	// PartialHoldings, if set, says whether the holdings informers read only this replica's namespaces (the API
	// server honours --sharded-watch's shard selector): an object of another shard's namespace that publishes a name
	// no claim record announces is then found only by a live lookup (Kind.Publishers) before each publish.
	PartialHoldings func() bool
}

// Kind is one kind of name a controller claims, and what the Service needs to watch and check it.
type Kind struct {
	// Name names the claimants ("Ingress", "Service"), in messages and in the claim records' names.
	Name string
	// Holdings is the resource whose objects publish the names (PangolinResources, Translations), read unfiltered.
	Holdings  schema.GroupVersionResource
	HoldingOf HoldingFunc
	// Live and Object read a recorded holder and a previous holder's object from the API server; only a Service with
	// Records uses them (TenantObjects.Kind builds both).
	Live   LiveFunc
	Object ObjectFunc
	// Publishers lists, live, the objects of every namespace that publish a name; only a Service whose holdings
	// informers are partial (RecordsConfig.PartialHoldings) uses it.
	Publishers PublishersFunc
}

// Service is the claims of one run of the controllers: one Registry per Kind, which every tenant's controller of the
// run joins. The command builds it with the controller context and closes it once every controller has stopped;
// nothing of it outlives the run.
type Service struct {
	cfg ServiceConfig

	mu         sync.Mutex
	registries map[string]*Registry
	closed     bool
}

// NewService returns an empty Service; it watches nothing until a controller joins.
func NewService(cfg ServiceConfig) *Service {
	return &Service{cfg: cfg, registries: map[string]*Registry{}}
}

// Join adds the controller of tenant to the Registry of kind, which is made, and starts watching its holdings,
// when the first controller joins. enqueue puts one of the tenant's claimants on the tenant's workqueue. A tenant is
// a member once at a time; Leave ends it.
func (s *Service) Join(kind Kind, tenant string, enqueue func(key string)) (*Member, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("claims: tenant %s joins the %s claims after the run ended", tenant, kind.Name)
	}
	r := s.registries[kind.Name]
	if r == nil {
		var err error
		if r, err = s.newRegistry(kind); err != nil {
			return nil, err
		}
		s.registries[kind.Name] = r
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.members[tenant]; dup {
		return nil, fmt.Errorf("claims: tenant %s already holds %s claims", tenant, kind.Name)
	}
	m := &Member{r: r, tenant: tenant, enqueue: enqueue}
	r.members[tenant] = m
	return m, nil
}

// newRegistry builds the Registry of kind and registers its handlers on the shared informers. Until they have
// delivered the informers' objects Reserve refuses (the index may miss an object); then every waiter is woken.
func (s *Service) newRegistry(kind Kind) (*Registry, error) {
	holdings, ok := s.cfg.Informers(kind.Holdings)
	if !ok {
		return nil, fmt.Errorf("claims: no shared informer for %s, which publishes %s names", kind.Holdings, kind.Name)
	}
	r := &Registry{kind: kind.Name, store: holdings.GetIndexer(), holdingOf: kind.HoldingOf, members: map[string]*Member{},
		claims: map[string]map[claimantID]Claimant{}, claimed: map[claimantID][]string{},
		held: map[string]sets.Set[string]{}, pending: map[string]reservation{}, waiters: map[string]map[claimantID]struct{}{},
		informer: holdings, stopWaiting: make(chan struct{})}
	if rc := s.cfg.Records; rc != nil {
		namespace := rc.Namespace
		if namespace == "" {
			namespace = metav1.NamespaceSystem
		}
		r.records = &Records{Client: rc.Client, Namespace: namespace, Informer: rc.Informer, Live: kind.Live, Object: kind.Object,
			Publishers: kind.Publishers, Partial: rc.PartialHoldings}
		// Before the handlers, which hand it the names of deleted objects.
		r.startReleases()
	}
	var err error
	if r.handler, err = holdings.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: r.onAdd, UpdateFunc: r.onUpdate,
		DeleteFunc: r.onDelete}); err != nil {
		r.stopReleasesAndWait()
		return nil, fmt.Errorf("claims: watching the objects that publish %s names: %w", kind.Name, err)
	}
	if r.records != nil {
		if r.recordsHandler, err = r.records.Informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: r.onRecord,
			UpdateFunc: func(_, obj any) { r.onRecord(obj) }, DeleteFunc: r.onRecord}); err != nil {
			utilruntime.HandleError(holdings.RemoveEventHandler(r.handler))
			r.stopReleasesAndWait()
			return nil, fmt.Errorf("claims: watching the %s claim records: %w", kind.Name, err)
		}
	}
	go r.wakeOnceSynced()
	return r, nil
}

// wakeOnceSynced wakes every claimant that waited for the registry's handlers to sync.
func (r *Registry) wakeOnceSynced() {
	for _, reg := range []cache.ResourceEventHandlerRegistration{r.handler, r.recordsHandler} {
		if reg == nil {
			continue
		}
		select {
		case <-reg.HasSyncedChecker().Done():
		case <-r.stopWaiting:
			return
		}
	}
	r.wake(r.takeAllWaiters())
}

// startReleases starts the registry's release queue: one worker, on the product's runtime, that deletes the claim
// records of names this process stopped claiming, retried with backoff, until the Service closes.
func (r *Registry) startReleases() {
	r.releases = worker.New(worker.Config{Controller: "claims", Queue: strings.ToLower(r.kind), KeyName: "name",
		Sync: func(ctx context.Context, name string) (worker.Result, error) {
			if err := r.release(ctx, name); err != nil {
				return worker.Result{}, fmt.Errorf("claims: releasing the claim record of %q: %w", name, err)
			}
			return worker.Result{}, nil
		}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	r.stopReleases, r.releasesDone = cancel, done
	r.releases.Start(ctx, worker.RunOptions{}, func() { close(done) })
}

// stopReleasesAndWait stops the release queue, if started, and waits for its worker.
func (r *Registry) stopReleasesAndWait() {
	if r.releases != nil {
		r.stopReleases()
		<-r.releasesDone
	}
}

// Close ends the run's claims: the release workers stop (releases not made yet are left to the next claimant,
// which finds the record's claimant gone) and the handlers leave the shared informers. Call it once every
// controller that joined has stopped; a later Join fails.
func (s *Service) Close() error {
	s.mu.Lock()
	s.closed = true
	registries := s.registries
	s.registries = map[string]*Registry{}
	s.mu.Unlock()
	var errs []error
	for _, r := range registries {
		close(r.stopWaiting)
		r.stopReleasesAndWait()
		errs = append(errs, r.informer.RemoveEventHandler(r.handler))
		if r.recordsHandler != nil {
			errs = append(errs, r.records.Informer.RemoveEventHandler(r.recordsHandler))
		}
	}
	return errors.Join(errs...)
}
