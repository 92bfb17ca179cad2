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
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Answer is who holds a name, as this process can tell without an API call (Member.Answer), and what the claim
// record still needs before that is so across processes (Member.Settle).
type Answer struct {
	// Name is the name asked about and Self the claimant that asked.
	Name string
	Self Claimant
	// Holder holds the name; IsSelf says that is Self.
	Holder Claimant
	IsSelf bool
	// step is what Settle must do; rec is the record as the cache showed it.
	step settleStep
	rec  *record
}

type settleStep int

const (
	// settled: nothing to write or read, the answer stands.
	settled settleStep = iota
	// createRecord: no record yet; Self creates it.
	createRecord
	// takeRecord: Self takes the record over (it claimed first and the recorded holder publishes nothing yet, or
	// the recorded holder no longer claims the name).
	takeRecord
	// readHolder: the recorded holder, a claimant of another process, publishes the name or claimed it first;
	// Settle reads it live, and Self takes the record over if it no longer claims the name.
	readHolder
)

// Settled says whether the answer stands as it is: Settle would make no API call.
func (a Answer) Settled() bool { return a.step == settled }

// Answer says who holds name, self included as it is now, from memory and the claim records' cache alone: the
// holder is the earliest claimant of this process, or else the one the record names. A Member without Records
// answers as Holder does. The answer is not final until Settled: Settle then writes the record, or reads its
// holder. The only error is records not synced yet; self is enqueued once they are.
func (m *Member) Answer(name string, self Claimant) (Answer, error) {
	self.tenant = m.tenant
	r := m.r
	a := Answer{Name: name, Self: self}
	if holder, isSelf := m.Holder(name, self); !isSelf {
		// The earlier claimant of this process decides for itself; who to name is the record's holder when that
		// one comes even earlier (it holds the name in another process).
		a.Holder = holder
		if r.records != nil {
			if rec, found := r.cachedRecord(name); found && rec.holder.UID != holder.UID && (rec.object != "" || rec.holder.Before(holder)) {
				if _, local := r.localClaims(rec); !local {
					a.Holder = rec.holder
				}
			}
		}
		return a, nil
	}
	a.Holder, a.IsSelf = self, true
	if r.records == nil {
		return a, nil
	}
	r.mu.Lock()
	synced := r.syncedLocked()
	if !synced {
		r.waitLocked(name, self)
	}
	r.mu.Unlock()
	if !synced {
		return Answer{}, fmt.Errorf("claims: the %s claim records are not synced yet", r.kind)
	}
	rec, found := r.cachedRecord(name)
	switch {
	case !found:
		a.step = createRecord
	case rec.holder.UID == self.UID:
	default:
		a.rec = rec
		a.answerRecorded()
		if alive, local := r.localClaims(rec); a.step == readHolder && local {
			// A claimant of this process: its controller keeps its claims current, no read needed.
			a.settleRead(alive)
			if alive {
				r.mu.Lock()
				r.waitLocked(name, self)
				r.mu.Unlock()
			}
		}
	}
	return a, nil
}

// settleRead settles a readHolder answer once it is known whether the recorded holder still claims the name: it
// holds it, or self takes the record over.
func (a *Answer) settleRead(alive bool) {
	if alive {
		a.step = settled
		return
	}
	a.Holder, a.IsSelf, a.step = a.Self, true, takeRecord
}

// answerRecorded answers from a record that names another claimant.
func (a *Answer) answerRecorded() {
	if a.rec.object == "" && a.Self.Before(a.rec.holder) {
		// The recorded holder has published nothing yet: among claimants of a name nobody publishes, the earlier
		// claim decides.
		a.step = takeRecord
		return
	}
	// The recorded holder publishes the name (or came first): it keeps it while it claims it, whatever Self's age.
	a.Holder, a.IsSelf, a.step = a.rec.holder, false, readHolder
}

// Settle makes a in the API server: it creates or takes over the claim record, or reads live whether the recorded
// holder still claims the name, and returns the final answer. Every write is a Create or an Update with the
// resourceVersion read, so of two processes racing for a name exactly one succeeds, and the other's error requeues
// it. A holder that loses its record to an earlier claimant is enqueued by the record's event; a claimant that
// waits for a live holder is enqueued once the record changes.
func (m *Member) Settle(ctx context.Context, a Answer) (Answer, error) {
	r := m.r
	if a.step == createRecord {
		lease := &coordinationv1.Lease{}
		r.encodeRecord(lease, a.Name, a.Self, "", nil)
		_, err := r.records.Client.CoordinationV1().Leases(r.records.Namespace).Create(ctx, lease, metav1.CreateOptions{})
		if err == nil {
			a.step = settled
			return a, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return Answer{}, fmt.Errorf("claims: creating the claim record of %s %q: %w", strings.ToLower(r.kind), a.Name, err)
		}
		// Another process got there first: compare with what it wrote.
		if a.rec, err = r.liveRecord(ctx, a.Name); err != nil {
			return Answer{}, err
		}
		if a.rec.holder.UID == a.Self.UID {
			a.step = settled
			return a, nil
		}
		a.Holder, a.IsSelf = a.Self, true
		a.answerRecorded()
	}
	if a.step == readHolder {
		alive, err := r.stillClaims(ctx, a.rec)
		if err != nil {
			return Answer{}, err
		}
		if a.settleRead(alive); alive {
			r.mu.Lock()
			r.waitLocked(a.Name, a.Self)
			r.mu.Unlock()
			return a, nil
		}
	}
	if a.step == takeRecord {
		if err := m.take(ctx, a.Name, a.Self, a.rec); err != nil {
			return Answer{}, err
		}
		a.step = settled
	}
	return a, nil
}

// take takes rec over for self: the holder's object (and those it had still to wait for) must be gone before self
// publishes.
func (m *Member) take(ctx context.Context, name string, self Claimant, rec *record) error {
	r := m.r
	previous := slices.Clone(rec.previous)
	if rec.object != "" {
		announced := time.Now()
		if rec.lease.Spec.RenewTime != nil {
			announced = rec.lease.Spec.RenewTime.Time
		}
		previous = append(previous, previousEntry(rec.object, announced))
	}
	lease := rec.lease.DeepCopy()
	r.encodeRecord(lease, name, self, "", previous)
	if _, err := r.records.Client.CoordinationV1().Leases(r.records.Namespace).Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("claims: taking the claim record of %s %q from %s: %w", strings.ToLower(r.kind), name, m.Describe(rec.holder), err)
	}
	return nil
}

// Decide is Answer then Settle: who holds name, made so in the API server.
func (m *Member) Decide(ctx context.Context, name string, self Claimant) (holder Claimant, isSelf bool, err error) {
	a, err := m.Answer(name, self)
	if err != nil {
		return Claimant{}, false, err
	}
	if a, err = m.Settle(ctx, a); err != nil {
		return Claimant{}, false, err
	}
	return a.Holder, a.IsSelf, nil
}
