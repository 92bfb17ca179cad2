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
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
)

// slowWrite is the answer time past which a Translation write counts as the API server pushing back: half of the
// p99 that Kubernetes' SLO allows a mutating call (1 s). A write answered slower, or refused with 429, holds the
// Service's next endpoint changes back like a write in flight.
const slowWrite = 500 * time.Millisecond

// pushbackBase is the first hold after a pushback; each further one in a row doubles it, up to the ceiling.
const pushbackBase = 100 * time.Millisecond

// groupCommit decides when an endpoint change of a Service is written (--neg-endpoint-batch-period). The handlers only
// enqueue the Service and say an endpoint change came (endpointsChanged); its sync asks begin first. A Service with
// no Translation write in flight is synced at once. A change that comes while one is in flight (the spec patch sent
// and not yet done in GCE: a Translation of the Service not synced at its generation), or while the API server
// pushes back on the Service's writes, is held: the sync returns and says when to come back, and the end of the
// write in flight (its Translation becoming synced) enqueues the Service earlier, so every change held meanwhile
// makes one write, the group commit of databases. The ceiling bounds the hold: a held change is synced by then at
// the latest. A ceiling of 0 holds nothing: every change is synced at once. Any other cause of a sync (the
// Service's own change, a Node's, a Translation's) is never held (now).
type groupCommit struct {
	ceiling time.Duration
	clock   clock.PassiveClock

	mu sync.Mutex
	// changed are the Services with an endpoint change not synced yet; now those with another cause, which is
	// synced at once.
	changed, now sets.Set[string]
	// heldSince is, per Service with changes held, when its first change was held: the ceiling counts from then.
	heldSince map[string]time.Time
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
	// changed, now and heldSince are made by their first entry: a tenant whose endpoints never change (most of
	// them) holds none.
	g := &groupCommit{ceiling: ceiling, clock: c, pushedBackUntil: map[string]time.Time{},
		triggers: map[string]time.Time{}, inSync: map[string]time.Time{}}
	if ceiling > 0 {
		g.backoff = workqueue.NewTypedItemExponentialFailureRateLimiter[string](min(pushbackBase, ceiling), ceiling)
	}
	return g
}

// endpointsChanged records an endpoint change of the Service, with its trigger time (zero for none), before the
// handler enqueues it: its sync may hold it.
func (g *groupCommit) endpointsChanged(key string, trigger time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.trigger(key, trigger)
	if g.ceiling > 0 {
		if g.changed == nil {
			g.changed = sets.New[string]()
		}
		g.changed.Insert(key)
	}
}

// otherChange records a change of the Service that is not an endpoint change (with the trigger time of a slice it
// concerns, zero for none), before the handler enqueues it: its sync is not held.
func (g *groupCommit) otherChange(key string, trigger time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.trigger(key, trigger)
	if g.ceiling > 0 {
		g.release(key)
	}
}

// release makes the Service's next sync go ahead at once; g.mu is held.
func (g *groupCommit) release(key string) {
	if g.now == nil {
		g.now = sets.New[string]()
	}
	g.now.Insert(key)
}

// begin decides, as the Service's sync starts, whether it waits: it returns 0 when the sync goes ahead, having taken
// the Service's changes for it (syncing), or how long the sync may wait at most before it comes back (what is left of
// the ceiling, or of a pushback's hold). Only endpoint changes are held. inFlight reads the caches and the pusher's
// word (pushed.Generations) under the lock: what ends the write in flight is recorded before writeDone is called, so
// either this sees it done or writeDone sees the hold.
func (g *groupCommit) begin(key string, inFlight func() bool) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	if wait := g.hold(key, inFlight); wait > 0 {
		return wait
	}
	g.syncing(key)
	return 0
}

// hold is begin's decision; g.mu is held.
func (g *groupCommit) hold(key string, inFlight func() bool) time.Duration {
	if g.ceiling <= 0 || !g.changed.Has(key) || g.now.Has(key) {
		return 0
	}
	now := g.clock.Now()
	since, held := g.heldSince[key]
	if !held {
		since = now
		if g.heldSince == nil {
			g.heldSince = map[string]time.Time{}
		}
	}
	left := g.ceiling - now.Sub(since)
	if left <= 0 {
		return 0
	}
	if until, ok := g.pushedBackUntil[key]; ok {
		if pushback := until.Sub(now); pushback > 0 {
			g.heldSince[key] = since
			return min(pushback, left)
		}
		delete(g.pushedBackUntil, key)
	}
	if !inFlight() {
		return 0
	}
	g.heldSince[key] = since
	return left
}

// writeDone says whether the Service had changes held for its write in flight, which has ended; they are released,
// and the caller enqueues the Service.
func (g *groupCommit) writeDone(key string) bool {
	if g.ceiling <= 0 {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, held := g.heldSince[key]; !held {
		return false
	}
	if until, ok := g.pushedBackUntil[key]; ok && g.clock.Now().Before(until) {
		// The API server still pushes back: the held sync comes back when the pushback's hold ends.
		return false
	}
	g.release(key)
	return true
}

// isHeld says whether the Service has changes held.
func (g *groupCommit) isHeld(key string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, held := g.heldSince[key]
	return held
}

// syncing forgets the Service's held changes, and takes the trigger time of its changes for the sync: the sync
// about to run writes them. g.mu is held.
func (g *groupCommit) syncing(key string) {
	if at, ok := g.triggers[key]; ok {
		g.inSync[key] = at
		delete(g.triggers, key)
	}
	g.changed.Delete(key)
	g.now.Delete(key)
	delete(g.heldSince, key)
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

// trigger remembers the trigger time of a change of the Service, unless an earlier one waits for a write; g.mu is
// held.
func (g *groupCommit) trigger(key string, at time.Time) {
	if at.IsZero() {
		return
	}
	if was, ok := g.triggers[key]; !ok || at.Before(was) {
		g.triggers[key] = at
	}
}

// giveBack returns the trigger time a write took and did not carry (it failed) for the next write.
func (g *groupCommit) giveBack(key string, at time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.trigger(key, at)
}

// takeTrigger returns and forgets the trigger time the Service's next write carries: the earliest of the one its
// sync took and one a change during the sync left; zero for none. A write that fails gives it back (giveBack).
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
	g.changed.Delete(key)
	g.now.Delete(key)
	delete(g.heldSince, key)
	delete(g.pushedBackUntil, key)
	if g.backoff != nil {
		g.backoff.Forget(key)
	}
}

// writeInFlight says whether a Translation write of the Service is under way: sent and not yet shown by the cache,
// or shown and not yet done in GCE (a Translation not synced at its generation). A Translation the pusher cannot
// sync (a GCE error) counts as in flight too: its Service's changes then wait for the ceiling.
func (t *Translator) writeInFlight(key string) bool {
	if t.writes.translationWritten(key) {
		return true
	}
	namespace, name, _ := cache.SplitMetaNamespaceKey(key)
	return slices.ContainsFunc(t.translationsNaming(namespace, name), func(tr *mpv1alpha1.Translation) bool {
		return !t.leaving(tr) && !t.synced(tr)
	})
}
