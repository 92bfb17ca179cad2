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
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Claim records the names c claims now, replacing what it claimed before; none releases them. Call it from the
// handler of the tenant's view, for every add, update and delete. When the holder of a name changes, every claimant
// of the name is enqueued.
func (m *Member) Claim(c Claimant, names []string) {
	c.tenant = m.tenant
	m.r.mu.Lock()
	if m.left {
		m.r.mu.Unlock()
		return
	}
	wake := m.r.setLocked(c, m.r.claimed[c.id()], names, true)
	m.r.mu.Unlock()
	m.r.wake(wake)
}

// setLocked replaces c's claims; release says whether the records of names it no longer claims are released.
func (r *Registry) setLocked(c Claimant, old, names []string, release bool) []func() {
	id := c.id()
	if release && r.releases != nil {
		for _, name := range old {
			if !slices.Contains(names, name) {
				r.releases.Add(name)
			}
		}
	}
	affected := sets.New(old...).Insert(names...)
	before := map[string]claimantID{}
	for name := range affected {
		if h, ok := r.holderLocked(name); ok {
			before[name] = h.id()
		}
	}
	for _, name := range old {
		delete(r.claims[name], id)
		if len(r.claims[name]) == 0 {
			delete(r.claims, name)
		}
	}
	if len(names) == 0 {
		delete(r.claimed, id)
	} else {
		r.claimed[id] = slices.Clone(names)
		for _, name := range names {
			if r.claims[name] == nil {
				r.claims[name] = map[claimantID]Claimant{}
			}
			r.claims[name][id] = c
		}
	}
	var wake []func()
	for name := range affected {
		after, ok := r.holderLocked(name)
		if prev, had := before[name]; had == ok && (!ok || prev == after.id()) {
			continue
		}
		for _, claimant := range r.claims[name] {
			wake = append(wake, r.enqueueLocked(claimant.id()))
		}
	}
	return wake
}

func (r *Registry) holderLocked(name string) (Claimant, bool) {
	incumbents := r.incumbentsLocked(name)
	var holder Claimant
	found := false
	for _, c := range r.claims[name] {
		if !found || precedes(c, holder, incumbents) {
			holder, found = c, true
		}
	}
	return holder, found
}

// Holder returns the claimant that holds name, counting self as it is now (the registry may not have seen its
// latest change yet), and whether that is self: the claimant whose publication of the name exists holds it, and
// among claimants none of which publishes it, the earliest.
func (m *Member) Holder(name string, self Claimant) (holder Claimant, isSelf bool) {
	self.tenant = m.tenant
	m.r.mu.Lock()
	defer m.r.mu.Unlock()
	incumbents := m.r.incumbentsLocked(name)
	holder, isSelf = self, true
	for id, c := range m.r.claims[name] {
		if id != self.id() && precedes(c, holder, incumbents) {
			holder, isSelf = c, false
		}
	}
	return holder, isSelf
}

// precedes says whether c holds name rather than o: an incumbent (its publication of the name exists) before any
// other claimant, whatever their ages, so nobody takes a published name by editing an older object of their own;
// then the earlier claim.
func precedes(c, o Claimant, incumbents sets.Set[types.UID]) bool {
	if ci, oi := incumbents.Has(c.UID), incumbents.Has(o.UID); ci != oi {
		return ci
	}
	return c.Before(o)
}

// incumbentsLocked returns the UIDs of the claimants whose publication of name exists, as far as this process can
// tell: an object of the holdings made for them that publishes the name, a reservation of theirs (their create call
// is on its way), and, with claim records, the recorded holder once the record announced its object. A UID that is
// no claimant of the name (its object let go of it) holds nothing.
func (r *Registry) incumbentsLocked(name string) sets.Set[types.UID] {
	uids := sets.New[types.UID]()
	for key := range r.held[name] {
		obj, exists, err := r.store.GetByKey(key)
		if err != nil || !exists {
			continue
		}
		if h, publishes := r.holdingOf(obj); publishes && h.Owner != "" && slices.Contains(h.Names, name) {
			uids.Insert(h.Owner)
		}
	}
	if p, found := r.pending[name]; found && time.Since(p.since) <= pendingTimeout {
		uids.Insert(p.owner)
	}
	if r.records != nil {
		if rec, found := r.cachedRecord(name); found && rec.object != "" {
			uids.Insert(rec.holder.UID)
		}
	}
	return uids
}

// Describe names a claimant for a person: "Ingress <namespace>/<name>", or "<kind> <namespace>/<name>" for a
// claimant of another kind (KindKey).
func (m *Member) Describe(c Claimant) string { return m.r.describe(c.Key) }

func (r *Registry) describe(key string) string {
	kind, objectKey := SplitKindKey(key)
	if kind == "" {
		kind = r.kind
	}
	return kind + " " + objectKey
}

// Reserve asks to create object (namespace/name) publishing name for self, which holds the name. It refuses while
// another object publishes the name, or is being created for it, and self is then enqueued once that changes. holder
// says whose object that is, when a person may need to know: it is "" when the wait needs nobody, because the
// registry is not synced yet or the object's claimant still claims the name and so yields it to self (its
// controller deletes it). After a yes, Created must follow the create call.
func (m *Member) Reserve(name string, self Claimant, object string) (holder string, ok bool) {
	self.tenant = m.tenant
	r := m.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.syncedLocked() {
		r.waitLocked(name, self)
		return "", false
	}
	if p, found := r.pending[name]; found && p.object != object {
		if _, shown, _ := r.store.GetByKey(p.object); shown || time.Since(p.since) > pendingTimeout {
			// The store has it now (and held lists it), or it never came.
			delete(r.pending, name)
		} else if p.owner != self.UID {
			r.waitLocked(name, self)
			return r.unlessYieldingLocked(name, self, p.owner, p.holder), false
		}
	}
	for key := range r.held[name] {
		obj, exists, err := r.store.GetByKey(key)
		if err != nil {
			continue
		}
		h, publishes := Holding{}, false
		if exists {
			h, publishes = r.holdingOf(obj)
		}
		if !publishes || !slices.Contains(h.Names, name) {
			r.held[name].Delete(key)
			continue
		}
		if h.Owner != "" && h.Owner == self.UID {
			continue
		}
		r.waitLocked(name, self)
		return r.unlessYieldingLocked(name, self, h.Owner, h.Holder), false
	}
	if len(r.held[name]) == 0 {
		delete(r.held, name)
	}
	r.pending[name] = reservation{object: object, owner: self.UID, holder: m.Describe(self), since: time.Now()}
	r.heldLocked(name, object)
	return "", true
}

// unlessYieldingLocked returns holder, or "" when owner is another claimant of the name that comes after self, which
// holds the name, so its controller is deleting its object or giving up its reservation.
func (r *Registry) unlessYieldingLocked(name string, self Claimant, owner types.UID, holder string) string {
	if owner == "" {
		return holder
	}
	for id, c := range r.claims[name] {
		if id != self.id() && c.UID == owner {
			if precedes(c, self, r.incumbentsLocked(name)) {
				// It holds the name: it publishes it.
				return holder
			}
			return ""
		}
	}
	return holder
}

// Created ends a reservation: created says whether the object now exists. If not, the name is free again and the
// claimants waiting for it are enqueued.
func (m *Member) Created(name, object string, created bool) {
	r := m.r
	r.mu.Lock()
	var wake []func()
	if p, found := r.pending[name]; found && p.object == object && !created {
		delete(r.pending, name)
		wake = r.takeWaitersLocked(name)
	}
	r.mu.Unlock()
	r.wake(wake)
}

func (r *Registry) heldLocked(name, key string) {
	if r.held[name] == nil {
		r.held[name] = sets.New[string]()
	}
	r.held[name].Insert(key)
}

func (r *Registry) waitLocked(name string, c Claimant) {
	if r.waiters[name] == nil {
		r.waiters[name] = map[claimantID]struct{}{}
	}
	r.waiters[name][c.id()] = struct{}{}
}

func (r *Registry) takeWaitersLocked(name string) []func() {
	var wake []func()
	for id := range r.waiters[name] {
		wake = append(wake, r.enqueueLocked(id))
	}
	delete(r.waiters, name)
	return wake
}

func (r *Registry) takeAllWaiters() []func() {
	r.mu.Lock()
	defer r.mu.Unlock()
	var wake []func()
	for name := range r.waiters {
		wake = append(wake, r.takeWaitersLocked(name)...)
	}
	return wake
}

// enqueueLocked returns the call that enqueues a claimant in its tenant's controller; it runs after the lock is
// released.
func (r *Registry) enqueueLocked(id claimantID) func() {
	m := r.members[id.tenant]
	if m == nil {
		return func() {}
	}
	return func() { m.enqueue(id.key) }
}

func (r *Registry) wake(calls []func()) {
	for _, call := range calls {
		call()
	}
}
