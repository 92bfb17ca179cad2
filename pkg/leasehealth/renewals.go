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

package leasehealth

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// ErrLeaseLost is RenewalTracker.Check's answer once the Lease is lost: the process is exiting.
var ErrLeaseLost = errors.New("the Lease was lost")

// RenewalTracker keeps, on a clock that tests replace, when a Lease this process holds was last renewed, and
// answers what both of the process's Leases ask of that: the leader-election Lease (the binary's elector) and a
// shard's own Lease (ShardLease). Check is the core of their /healthz checks: it fails once the Lease is lost, and
// while it is held but was last renewed longer ago than the renew deadline, so that a liveness probe restarts a
// process that hangs instead of exiting. WaitOverdue is their watchdog: it says when renewals have failed for too
// long, so the process gives the Lease up before it expires.
type RenewalTracker struct {
	clock         clock.Clock
	renewDeadline time.Duration

	mu          sync.Mutex
	lastRenewal time.Time
	held, lost  bool
}

// NewRenewalTracker returns a tracker of a Lease that is not held yet.
func NewRenewalTracker(clk clock.Clock, renewDeadline time.Duration) *RenewalTracker {
	return &RenewalTracker{clock: clk, renewDeadline: renewDeadline}
}

// Renewed records a successful acquisition or renewal of the Lease at the time given; the Lease is held from then
// on, until SetHeld(false).
func (t *RenewalTracker) Renewed(at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lastRenewal = at
	t.held = true
}

// LastRenewal is the time of the last successful renewal; zero before the first.
func (t *RenewalTracker) LastRenewal() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lastRenewal
}

// SetHeld says whether the process holds the Lease (leads, for the leader-election Lease): a Lease not held needs
// no renewals, however old the last one is.
func (t *RenewalTracker) SetHeld(held bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.held = held
}

// Held reports whether the process holds the Lease.
func (t *RenewalTracker) Held() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.held
}

// SetLost records that the Lease is lost for good: the process exits, and Check fails until it has.
func (t *RenewalTracker) SetLost() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lost = true
}

// Check returns ErrLeaseLost once the Lease is lost, an error saying how overdue the last renewal is while the Lease
// is held and its last renewal is older than the renew deadline, and nil otherwise.
func (t *RenewalTracker) Check() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.lost:
		return ErrLeaseLost
	case !t.held:
		return nil
	}
	if since := t.clock.Since(t.lastRenewal); since > t.renewDeadline {
		return fmt.Errorf("the Lease was last renewed %s ago, longer than the renew deadline %s",
			since.Round(time.Millisecond), t.renewDeadline)
	}
	return nil
}

// WaitOverdue returns true once no renewal has succeeded for limit since the last one, and false when ctx ends
// first. It wakes up once per limit at most, however often the Lease is renewed.
func (t *RenewalTracker) WaitOverdue(ctx context.Context, limit time.Duration) bool {
	for {
		wait := t.LastRenewal().Add(limit).Sub(t.clock.Now())
		if wait <= 0 {
			return true
		}
		timer := t.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return false
		case <-timer.C():
		}
	}
}
