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
	"fmt"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"

	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
)

// Claimant is an object that claims names, as its tenant's controller read it.
type Claimant struct {
	// Key is the object's namespace/name, what its tenant's workqueue takes.
	Key     string
	UID     types.UID
	Created metav1.Time
	// tenant is filled in by the Member that passes the claimant on.
	tenant string
}

type claimantID struct{ tenant, key string }

func (c Claimant) id() claimantID { return claimantID{c.tenant, c.Key} }

// Before says whether c's claim comes first: the earlier creation, then (the API server records whole seconds) the
// smaller UID. Both are set by the API server and never change, so every controller agrees on the order.
func (c Claimant) Before(o Claimant) bool {
	if !c.Created.Equal(&o.Created) {
		return c.Created.Before(&o.Created)
	}
	return c.UID < o.UID
}

// Holding is what one object of the holdings informer publishes.
type Holding struct {
	Names []string
	// Owner is the UID of the claimant the object was made for; "" when it was made by hand.
	Owner types.UID
	// Holder says, for a person, who holds the names through this object: "Ingress <namespace>/<name>" for an
	// object made for a claimant, the object itself otherwise.
	Holder string
}

// HoldingFunc tells what an object of the holdings informer publishes; false: nothing.
type HoldingFunc func(obj any) (Holding, bool)

// pendingTimeout bounds a reservation whose object the informer never showed. Every object the API server
// creates reaches the informer as an add, unless the watch broke and the relist no longer found it (created and
// deleted meanwhile); only then does a reservation wait this long.
const pendingTimeout = 2 * time.Minute

// reservation is an object being created for a name and not yet shown by the holdings informer.
type reservation struct {
	object string
	owner  types.UID
	holder string
	since  time.Time
}

// Registry is the process's claim state for one kind of name over one holdings informer.
type Registry struct {
	kind      string
	store     cache.Store
	holdingOf HoldingFunc

	mu      sync.Mutex
	members map[string]*Member
	// carrier is the member whose shared informer carries the registry's handler; the manager removes a
	// controller's handlers when it stops, so the handler moves to another member before its carrier leaves.
	carrier     *Member
	carried     cache.ResourceEventHandlerRegistration
	stopWaiting chan struct{}

	claims  map[string]map[claimantID]Claimant // name → its claimants
	claimed map[claimantID][]string            // claimant → its names
	// held lists, per name, the keys of objects that published it when last seen; Reserve checks each against the
	// store, so a key that is gone or changed costs nothing but a lookup.
	held    map[string]sets.Set[string]
	pending map[string]reservation
	waiters map[string]map[claimantID]struct{}

	// records, if set, makes the claims hold across processes (records.go); releases deletes the records of names
	// this process's claimants stopped claiming, off the event handlers.
	records        *Records
	releases       *worker.Queue
	releasesDone   chan struct{}
	stopReleases   context.CancelFunc
	carriedRecords cache.ResourceEventHandlerRegistration
}

type registryKey struct {
	store cache.Store
	kind  string
}

// registries holds one Registry per holdings store: every tenant's Shared informer of a resource hands out the same
// store, so every tenant's controller of the process meets the others there.
var registries = struct {
	sync.Mutex
	byStore map[registryKey]*Registry
}{byStore: map[registryKey]*Registry{}}

// Member is one tenant's controller in a Registry.
type Member struct {
	r        *Registry
	tenant   string
	informer cache.SharedIndexInformer
	// records is the member's shared informer of claim records, when the registry has Records.
	records cache.SharedIndexInformer
	enqueue func(key string)
	left    bool
}

// Join adds the controller of tenant to the registry of names of kind (which also names claimants in messages:
// "Ingress", "Service") over holdings, the unfiltered shared informer of the objects that publish the names.
// enqueue puts one of the tenant's claimants on the tenant's workqueue. A tenant is a member once at a time; Leave
// ends it.
func Join(kind string, holdings cache.SharedIndexInformer, holdingOf HoldingFunc, tenant string, enqueue func(key string)) (*Member, error) {
	return JoinWithRecords(kind, holdings, holdingOf, nil, tenant, enqueue)
}

// JoinWithRecords is Join for a registry whose claims hold across processes through claim records (records.go).
// Every member of one registry must pass Records over the same client and namespace; records.Informer is the
// member's own handle on the shared informer of claim records (its handlers go when the controller stops).
func JoinWithRecords(kind string, holdings cache.SharedIndexInformer, holdingOf HoldingFunc, records *Records, tenant string,
	enqueue func(key string)) (*Member, error) {
	registries.Lock()
	defer registries.Unlock()
	key := registryKey{store: holdings.GetIndexer(), kind: kind}
	r := registries.byStore[key]
	if r == nil {
		r = &Registry{kind: kind, store: key.store, holdingOf: holdingOf, members: map[string]*Member{},
			claims: map[string]map[claimantID]Claimant{}, claimed: map[claimantID][]string{},
			held: map[string]sets.Set[string]{}, pending: map[string]reservation{}, waiters: map[string]map[claimantID]struct{}{}}
		if records != nil {
			r.records = records
			r.startReleases()
		}
		registries.byStore[key] = r
	}
	if (records == nil) != (r.records == nil) {
		return nil, fmt.Errorf("claims: tenant %s joins the %s claims with records %t, the others with %t", tenant, kind, records != nil, r.records != nil)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.members[tenant]; dup {
		return nil, fmt.Errorf("claims: tenant %s already holds %s claims", tenant, kind)
	}
	m := &Member{r: r, tenant: tenant, informer: holdings, enqueue: enqueue}
	if records != nil {
		m.records = records.Informer
	}
	r.members[tenant] = m
	if r.carrier == nil {
		if err := r.carryLocked(m); err != nil {
			delete(r.members, tenant)
			if len(r.members) == 0 {
				delete(registries.byStore, key)
				r.stopReleasesLocked()
			}
			return nil, err
		}
	}
	return m, nil
}

// carryLocked registers the registry's handler through m's informer. Until that registration has delivered the
// informer's objects, Reserve refuses (the index may miss an object), and then wakes every waiter.
func (r *Registry) carryLocked(m *Member) error {
	reg, err := m.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: r.onAdd, UpdateFunc: r.onUpdate, DeleteFunc: r.onDelete})
	if err != nil {
		return fmt.Errorf("claims: watching the objects that publish %s names: %w", r.kind, err)
	}
	var recordsReg cache.ResourceEventHandlerRegistration
	if m.records != nil {
		recordsReg, err = m.records.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: r.onRecord,
			UpdateFunc: func(_, obj any) { r.onRecord(obj) }, DeleteFunc: r.onRecord})
		if err != nil {
			if rmErr := m.informer.RemoveEventHandler(reg); rmErr != nil {
				utilruntime.HandleError(rmErr)
			}
			return fmt.Errorf("claims: watching the %s claim records: %w", r.kind, err)
		}
	}
	r.carrier, r.carried, r.carriedRecords, r.stopWaiting = m, reg, recordsReg, make(chan struct{})
	stop := r.stopWaiting
	go func() {
		for _, reg := range []cache.ResourceEventHandlerRegistration{reg, recordsReg} {
			if reg == nil {
				continue
			}
			select {
			case <-reg.HasSyncedChecker().Done():
			case <-stop:
				return
			}
		}
		r.wake(r.takeAllWaiters())
	}()
	return nil
}

// HasSynced says whether the registry knows every object that publishes a name, so Reserve can answer.
func (m *Member) HasSynced() bool {
	m.r.mu.Lock()
	defer m.r.mu.Unlock()
	return m.r.syncedLocked()
}

func (r *Registry) syncedLocked() bool {
	return r.carried != nil && r.carried.HasSynced() && (r.carriedRecords == nil || r.carriedRecords.HasSynced())
}

// Leave ends the membership: the tenant's claims are released (its controller stops, so it publishes nothing any
// more) and the claimants of those names are enqueued. Call it once the controller's workers are gone and its
// handlers removed; claims made afterwards are ignored.
func (m *Member) Leave() {
	registries.Lock()
	defer registries.Unlock()
	r := m.r
	r.mu.Lock()
	if m.left {
		r.mu.Unlock()
		return
	}
	m.left = true
	delete(r.members, m.tenant)
	var wake []func()
	for id, names := range r.claimed {
		if id.tenant == m.tenant {
			// The records stay: a tenant that stops (a drain to another replica, a restart) still claims its
			// names, and another process takes a record over only once its claimant is gone.
			wake = append(wake, r.setLocked(Claimant{Key: id.key, tenant: id.tenant}, names, nil, false)...)
		}
	}
	for name, ws := range r.waiters {
		for id := range ws {
			if id.tenant == m.tenant {
				delete(ws, id)
			}
		}
		if len(ws) == 0 {
			delete(r.waiters, name)
		}
	}
	var oldReg, oldRecordsReg cache.ResourceEventHandlerRegistration
	if r.carrier == m {
		oldReg, oldRecordsReg = r.carried, r.carriedRecords
		close(r.stopWaiting)
		r.carrier, r.carried, r.carriedRecords, r.stopWaiting = nil, nil, nil, nil
		// Added before the old one is removed: the two overlap, so the index misses no event. Adding twice is
		// harmless, since entries are checked against the store when they are used.
		for _, tenant := range sets.List(sets.KeySet(r.members)) {
			if err := r.carryLocked(r.members[tenant]); err == nil {
				break
			} else {
				utilruntime.HandleError(err)
			}
		}
	}
	empty := len(r.members) == 0
	var releasesDone <-chan struct{}
	if empty {
		releasesDone = r.stopReleasesLocked()
	}
	r.mu.Unlock()
	if releasesDone != nil {
		<-releasesDone
	}
	if oldReg != nil {
		if err := m.informer.RemoveEventHandler(oldReg); err != nil {
			utilruntime.HandleError(fmt.Errorf("claims: removing the %s holdings handler: %w", r.kind, err))
		}
	}
	if oldRecordsReg != nil {
		if err := m.records.RemoveEventHandler(oldRecordsReg); err != nil {
			utilruntime.HandleError(fmt.Errorf("claims: removing the %s claim records handler: %w", r.kind, err))
		}
	}
	if empty {
		delete(registries.byStore, registryKey{store: r.store, kind: r.kind})
	}
	r.wake(wake)
}

// startReleases starts the registry's release queue: one worker, on the product's runtime, that deletes the claim
// records of names this process stopped claiming, retried with backoff.
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

// stopReleasesLocked ends the release worker of a registry that has no member left; releases not made yet are
// left to the next claimant, which finds the record's claimant gone.
func (r *Registry) stopReleasesLocked() <-chan struct{} {
	if r.releases == nil {
		return nil
	}
	r.stopReleases()
	r.releases = nil
	return r.releasesDone
}
