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
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"

	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
)

// Claimant is an object that claims names, as its tenant's controller read it.
type Claimant struct {
	// Key is what its tenant's workqueue takes: the object's namespace/name for an object of the Kind's own kind
	// (Kind.Name), KindKey(kind, namespace/name) for an object of another kind that claims the same names (an
	// HTTPRoute beside Ingresses).
	Key     string
	UID     types.UID
	Created metav1.Time
	// tenant is filled in by the Member that passes the claimant on.
	tenant string
}

type claimantID struct{ tenant, key string }

// KindKey is the Claimant.Key of the object namespace/name (key) of kind when kind is not its Kind's own:
// "<kind>/<namespace>/<name>", which no namespace/name can be. The Kind's own claimants keep their bare
// namespace/name, so their claim records (named by the claimed name and the Kind, annotated with the key) read as
// every earlier build wrote them.
func KindKey(kind, key string) string { return kind + "/" + key }

// SplitKindKey splits a Claimant.Key into the kind KindKey put in it ("" for the Kind's own claimants) and the
// object's namespace/name.
func SplitKindKey(key string) (kind, objectKey string) {
	if strings.Count(key, "/") == 2 {
		kind, objectKey, _ = strings.Cut(key, "/")
		return kind, objectKey
	}
	return "", key
}

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

// Registry is the claim state of one kind of name over one holdings informer, in a Service.
type Registry struct {
	kind      string
	store     cache.Store
	holdingOf HoldingFunc
	// informer is the shared informer of the holdings, which carries handler.
	informer cache.SharedIndexInformer

	mu      sync.Mutex
	members map[string]*Member
	// handler and recordsHandler are the registry's own registrations on the process's shared informers, made
	// when the first member joins and removed when the Service closes; stopWaiting ends the wait for their sync.
	handler        cache.ResourceEventHandlerRegistration
	recordsHandler cache.ResourceEventHandlerRegistration
	stopWaiting    chan struct{}

	claims  map[string]map[claimantID]Claimant // name → its claimants
	claimed map[claimantID][]string            // claimant → its names
	// held lists, per name, the keys of objects that published it when last seen; Reserve checks each against the
	// store, so a key that is gone or changed costs nothing but a lookup.
	held    map[string]sets.Set[string]
	pending map[string]reservation
	waiters map[string]map[claimantID]struct{}

	// records, if set, makes the claims hold across processes (records.go); releases deletes the records of names
	// this process's claimants stopped claiming, off the event handlers.
	records      *Records
	releases     *worker.Queue
	releasesDone chan struct{}
	stopReleases context.CancelFunc
}

// Member is one tenant's controller in a Registry.
type Member struct {
	r       *Registry
	tenant  string
	enqueue func(key string)
	left    bool
}

// HasSynced says whether the registry knows every object that publishes a name, so Reserve can answer.
func (m *Member) HasSynced() bool {
	m.r.mu.Lock()
	defer m.r.mu.Unlock()
	return m.r.syncedLocked()
}

func (r *Registry) syncedLocked() bool {
	return r.handler != nil && r.handler.HasSynced() && (r.recordsHandler == nil || r.recordsHandler.HasSynced())
}

// Leave ends the membership: the tenant's claims are released (its controller stops, so it publishes nothing any
// more) and the claimants of those names are enqueued. Call it once the controller's workers are gone and its
// handlers removed; claims made afterwards are ignored. The registry goes on watching the objects that publish
// names, with no member or many, until its Service closes.
func (m *Member) Leave() {
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
	r.mu.Unlock()
	r.wake(wake)
}
