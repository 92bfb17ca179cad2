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

package translator

import (
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// slowWrite is the answer time past which a Translation write counts as the API server pushing back: half of the
// p99 that Kubernetes' SLO allows a mutating call (1 s). A write answered slower, or refused with 429, holds the
// Service's next endpoint changes back like a write in flight.
const slowWrite = 500 * time.Millisecond

// pushbackBase is the first hold after a pushback; each further one in a row doubles it, up to the ceiling.
const pushbackBase = 100 * time.Millisecond

// groupCommit decides when an endpoint change of a Service is written (--neg-endpoint-batch-period). A Service with
// no Translation write in flight is synced at once. A change that comes while one is in flight (the spec patch sent
// and not yet done in GCE: a Translation of the Service not synced at its generation), or while the API server
// pushes back on the Service's writes, is held: the end of the write in flight (its Translation becoming synced)
// enqueues the Service, so every change held meanwhile makes one write, the group commit of databases. The ceiling
// bounds the hold: a held change is enqueued by then at the latest (the queue's AddAfter). A ceiling of 0 holds
// nothing: every change is synced at once.
type groupCommit struct {
	ceiling time.Duration
	clock   clock.PassiveClock

	mu sync.Mutex
	// held are the Services with a change waiting for the write in flight to end.
	held sets.Set[string]
	// backoff times the holds after pushbacks, per Service, doubling from pushbackBase up to the ceiling; a write
	// answered in time forgets it.
	backoff workqueue.TypedRateLimiter[string]
	// pushedBackUntil is, per Service, when the hold of its last pushback ends.
	pushedBackUntil map[string]time.Time
	// triggers is, per Service, the trigger time of the earliest slice change not written yet (negapi.TriggerTime):
	// the next Translation write carries it, for the network programming latency.
	triggers map[string]time.Time
	// inSync is, per Service being synced, the trigger time the sync took at its start (syncing): a write of the
	// sync carries it (takeTrigger); a sync that wrote nothing drops it (synced), as its change needed no write, so
	// that no later write, maybe hours later, carries it; a sync that failed gives it back.
	inSync map[string]time.Time
}

func newGroupCommit(ceiling time.Duration, c clock.PassiveClock) *groupCommit {
	g := &groupCommit{ceiling: ceiling, clock: c, held: sets.New[string](), pushedBackUntil: map[string]time.Time{},
		triggers: map[string]time.Time{}, inSync: map[string]time.Time{}}
	if ceiling > 0 {
		g.backoff = workqueue.NewTypedItemExponentialFailureRateLimiter[string](min(pushbackBase, ceiling), ceiling)
	}
	return g
}

// change decides for an endpoint change of the Service key: it returns 0 to sync at once, or how long the change
// may wait at most, after which the caller enqueues the Service (the ceiling, or what is left of a pushback's
// hold). inFlight reads the cache under the lock: a Translation update that ends the write in flight is in the
// cache before its event calls writeDone, so either this sees it done or writeDone sees the hold.
func (g *groupCommit) change(key string, inFlight func() bool) time.Duration {
	if g.ceiling <= 0 {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if until, ok := g.pushedBackUntil[key]; ok {
		if left := until.Sub(g.clock.Now()); left > 0 {
			g.held.Insert(key)
			return min(left, g.ceiling)
		}
		delete(g.pushedBackUntil, key)
	}
	if !inFlight() {
		return 0
	}
	g.held.Insert(key)
	return g.ceiling
}

// writeDone says whether the Service had changes held for its write in flight, which has ended; they are no longer
// held, and the caller enqueues the Service.
func (g *groupCommit) writeDone(key string) bool {
	if g.ceiling <= 0 {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.held.Has(key) {
		return false
	}
	if until, ok := g.pushedBackUntil[key]; ok && g.clock.Now().Before(until) {
		// The API server still pushes back: the pushback's own AddAfter brings the Service.
		return false
	}
	g.held.Delete(key)
	return true
}

// isHeld says whether the Service has changes held.
func (g *groupCommit) isHeld(key string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held.Has(key)
}

// syncing forgets the Service's held changes, and takes the trigger time of its changes for the sync: the sync
// about to run writes them.
func (g *groupCommit) syncing(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if at, ok := g.triggers[key]; ok {
		g.inSync[key] = at
		delete(g.triggers, key)
	}
	if g.ceiling > 0 {
		g.held.Delete(key)
	}
}

// synced ends the Service's sync: the trigger time it took and no write carried is dropped if it succeeded (its
// change needed no write), and given back if not.
func (g *groupCommit) synced(key string, succeeded bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	at, ok := g.inSync[key]
	delete(g.inSync, key)
	if ok && !succeeded {
		if was, had := g.triggers[key]; !had || at.Before(was) {
			g.triggers[key] = at
		}
	}
}

// wrote records how the API server answered a Translation write of the Service: a 429 or an answer slower than
// slowWrite holds its next changes back for a backoff; a write answered in time ends the backoff.
func (g *groupCommit) wrote(key string, took time.Duration, err error) {
	if g.ceiling <= 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if apierrors.IsTooManyRequests(err) || took > slowWrite {
		g.pushedBackUntil[key] = g.clock.Now().Add(g.backoff.When(key))
		return
	}
	if err == nil {
		g.backoff.Forget(key)
		delete(g.pushedBackUntil, key)
	}
}

// triggered remembers the trigger time of a change of the Service, unless an earlier one waits for a write.
func (g *groupCommit) triggered(key string, at time.Time) {
	if at.IsZero() {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if was, ok := g.triggers[key]; !ok || at.Before(was) {
		g.triggers[key] = at
	}
}

// takeTrigger returns and forgets the trigger time the Service's next write carries: the earliest of the one its
// sync took and one a change during the sync left; zero for none. A write that fails gives it back (triggered).
func (g *groupCommit) takeTrigger(key string) time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	at, took := g.inSync[key]
	if later, ok := g.triggers[key]; ok && (!took || later.Before(at)) {
		at = later
	}
	delete(g.inSync, key)
	delete(g.triggers, key)
	return at
}

// forget drops what is remembered of a Service the tenant no longer has.
func (g *groupCommit) forget(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.triggers, key)
	delete(g.inSync, key)
	g.held.Delete(key)
	delete(g.pushedBackUntil, key)
	if g.backoff != nil {
		g.backoff.Forget(key)
	}
}
