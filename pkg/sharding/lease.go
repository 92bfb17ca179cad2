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

package sharding

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/multiproject/multiproject-controller-manager/pkg/leasehealth"
)

// ShardLeaseConfig configures this replica's shard Lease.
type ShardLeaseConfig struct {
	// Client writes the Lease. Like the leader-election client, it should have a rate limit of its own, so that no
	// tenant's traffic can delay a renewal.
	Client coordinationv1client.LeasesGetter
	// Namespace of the shard Leases.
	Namespace string
	// Group names the set of replicas that share the tenants (the value of ShardGroupLabel).
	Group string
	// Identity is this process's shard name: the value of ShardLabel on its tenants. It must never be reused by
	// another process (a restarted process is a new shard; its predecessor's Lease simply expires), so that a
	// tenant labeled with it can only be run by the process that took it.
	Identity string
	// LeaseDuration is how long after a renewal the shard counts as live. RenewDeadline is how long this process
	// goes without a successful renewal before OnLost; it must leave time to stop every tenant before the Lease
	// expires. RetryPeriod is the time between renewals.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// OnLost is called once when the Lease cannot be renewed for RenewDeadline, or when it was deleted or taken by
	// another holder, or (with leasehealth.ErrLeaseRefused) when the API server refused every attempt to acquire it for
	// LeaseDuration. It must stop every tenant of this shard and end the process; it is called at most
	// RenewDeadline after the last successful renewal, LeaseDuration-RenewDeadline before the Lease expires.
	OnLost func(error)
	// Clock defaults to the real clock.
	Clock clock.Clock
}

// ShardLease creates and renews this replica's Lease `<group>-<identity>`, labeled with the group.
//
// It writes through client-go's resourcelock.LeaseLock, which sets its Labels on create and puts them back on every
// update, so the group label cannot be lost. It does not run client-go's LeaderElector: a shard Lease has one
// candidate, so the elector's campaign adds nothing, while it (a) releases the Lease after a failed renewal before
// it tells the holder that it stopped leading, so a sharder could move tenants that still run, (b) notices the loss
// up to a retry period after the renew deadline, and (c) keeps time on a clock that tests cannot replace. The loop
// here is the elector's renew half with the deadline counted from the last successful renewal on Clock.
type ShardLease struct {
	cfg      ShardLeaseConfig
	lock     *resourcelock.LeaseLock
	clock    clock.Clock
	acquired chan struct{}
	// renewals counts the renew deadline from the time written into renewTime, taken before the request: the
	// Lease's expiry as the sharder computes it, on this process's clock.
	renewals *leasehealth.RenewalTracker

	mu      sync.Mutex
	running bool
}

// NewShardLease checks cfg and returns the (not yet running) Lease.
func NewShardLease(cfg ShardLeaseConfig) (*ShardLease, error) {
	if err := validateShard(cfg.Group, cfg.Identity); err != nil {
		return nil, err
	}
	switch {
	case cfg.Client == nil || cfg.Namespace == "" || cfg.OnLost == nil:
		return nil, errors.New("shard lease: Client, Namespace and OnLost are required")
	case cfg.RetryPeriod <= 0 || cfg.RenewDeadline <= cfg.RetryPeriod || leaseSeconds(cfg.LeaseDuration) <= cfg.RenewDeadline:
		// The Lease records whole seconds: the recorded duration is what must exceed the renew deadline.
		return nil, fmt.Errorf("shard lease: want 0 < retry period (%s) < renew deadline (%s) < lease duration in whole seconds (%s)",
			cfg.RetryPeriod, cfg.RenewDeadline, leaseSeconds(cfg.LeaseDuration))
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &ShardLease{
		cfg:   cfg,
		clock: clk,
		lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.Namespace, Name: LeaseName(cfg.Group, cfg.Identity)},
			Client:     cfg.Client,
			LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
			Labels:     map[string]string{ShardGroupLabel: cfg.Group},
		},
		acquired: make(chan struct{}),
		renewals: leasehealth.NewRenewalTracker(clk, cfg.RenewDeadline),
	}, nil
}

// Shard is this replica's shard name, the value of ShardLabel on its tenants.
func (l *ShardLease) Shard() string { return l.cfg.Identity }

// Acquired is closed once the Lease is held. The replica must not run a tenant before.
func (l *ShardLease) Acquired() <-chan struct{} { return l.acquired }

// errLost wraps every reason for OnLost.
var errLost = errors.New("shard lease lost")

// Run acquires the Lease and renews it until ctx ends (it returns nil once no renewal is in flight, and leaves the
// Lease to expire, or to be released by Release) or until the Lease is lost (it calls OnLost, then returns the
// reason at once). A Lease that RBAC does not grant (every attempt refused for LeaseDuration) is lost too, with an
// error wrapping leasehealth.ErrLeaseRefused that names the Role to fix.
func (l *ShardLease) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("lease", l.lock.Describe())
	l.mu.Lock()
	if l.running {
		l.mu.Unlock()
		return errors.New("shard lease: Run called twice")
	}
	l.running = true
	l.mu.Unlock()

	refusals := &leasehealth.RefusalTracker{Clock: l.clock, Limit: l.cfg.LeaseDuration}
	for {
		held, err := l.tryAcquireOrRenew(ctx, false)
		if held {
			break
		}
		if refusals.Observe(err) {
			err = leasehealth.LeaseRefusedError("acquisition", l.cfg.Namespace, l.lock.LeaseMeta.Name, "multiproject-controller-manager:sharding", err)
			logger.Error(err, "Cannot acquire the shard Lease; exiting")
			l.cfg.OnLost(err)
			return err
		}
		if err != nil {
			logger.Error(err, "Could not acquire the shard Lease; retrying")
		}
		if !l.wait(ctx, l.cfg.RetryPeriod) {
			return nil
		}
	}
	logger.Info("Acquired the shard Lease", "shard", l.cfg.Identity)
	close(l.acquired)

	renewCtx, stopRenewing := context.WithCancel(ctx)
	defer stopRenewing()
	fatal := make(chan error, 1)
	go func() { fatal <- l.renewLoop(renewCtx) }()
	overdue := make(chan struct{})
	go func() {
		if l.renewals.WaitOverdue(renewCtx, l.cfg.RenewDeadline) {
			close(overdue)
		}
	}()
	select {
	case <-ctx.Done():
		// Wait for a renewal in flight (its request ends with renewCtx): one landing after a Release would make
		// the shard look live again until the Lease expires.
		stopRenewing()
		<-fatal
		return nil
	case err := <-fatal:
		if ctx.Err() != nil {
			return nil
		}
		return l.lose(logger, stopRenewing, err)
	case <-overdue:
		return l.lose(logger, stopRenewing, fmt.Errorf("no successful renewal for %s (renew deadline %s)",
			l.clock.Since(l.renewals.LastRenewal()).Round(time.Millisecond), l.cfg.RenewDeadline))
	}
}

// lose stops the renewals (a renewal in flight may still land; that only delays the Lease's expiry) and calls OnLost.
func (l *ShardLease) lose(logger klog.Logger, stopRenewing context.CancelFunc, reason error) error {
	stopRenewing()
	l.renewals.SetLost()
	err := fmt.Errorf("%w: %w", errLost, reason)
	logger.Error(err, "Shard Lease lost; stopping every tenant of this shard")
	l.cfg.OnLost(err)
	return err
}

// renewLoop renews every RetryPeriod after the previous attempt. A failed renewal is retried; the watchdog in Run
// decides when failures have lasted too long. It returns an error only when renewing can never succeed again.
func (l *ShardLease) renewLoop(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	for l.wait(ctx, l.cfg.RetryPeriod) {
		held, err := l.tryAcquireOrRenew(ctx, true)
		switch {
		case held:
		case errors.Is(err, errNotOurs):
			return err
		case err != nil && ctx.Err() == nil:
			logger.V(2).Info("Could not renew the shard Lease; retrying", "err", err)
		}
	}
	return nil
}

var errNotOurs = errors.New("the Lease is no longer ours")

// tryAcquireOrRenew writes a renewal naming this process. Before the Lease is held, a Lease that another live
// holder names is left alone. Once held, a Lease that is gone or names another holder is lost: while it was not
// ours the sharder may have moved our tenants.
func (l *ShardLease) tryAcquireOrRenew(ctx context.Context, holding bool) (bool, error) {
	now := l.clock.Now()
	record := resourcelock.LeaderElectionRecord{
		HolderIdentity:       l.cfg.Identity,
		LeaseDurationSeconds: int(leaseSeconds(l.cfg.LeaseDuration) / time.Second),
		AcquireTime:          metav1.NewTime(now),
		RenewTime:            metav1.NewTime(now),
	}
	old, _, err := l.lock.Get(ctx)
	switch {
	case apierrors.IsNotFound(err) && holding:
		return false, fmt.Errorf("%w: it was deleted", errNotOurs)
	case apierrors.IsNotFound(err):
		if err := l.lock.Create(ctx, record); err != nil {
			return false, err
		}
		l.renewals.Renewed(now)
		return true, nil
	case err != nil:
		return false, err
	}
	if old.HolderIdentity != l.cfg.Identity {
		if holding {
			return false, fmt.Errorf("%w: %q holds it", errNotOurs, old.HolderIdentity)
		}
		expires := old.RenewTime.Add(time.Duration(old.LeaseDurationSeconds) * time.Second)
		if old.HolderIdentity != "" && expires.After(now) {
			return false, fmt.Errorf("held by %q until %s", old.HolderIdentity, expires)
		}
		record.LeaderTransitions = old.LeaderTransitions + 1
	} else {
		record.AcquireTime = old.AcquireTime
		record.LeaderTransitions = old.LeaderTransitions
	}
	if err := l.lock.Update(ctx, record); err != nil {
		return false, err
	}
	l.renewals.Renewed(now)
	return true, nil
}

// Release empties the Lease's holder so that the sharder counts the shard dead at once and moves its tenants
// without waiting for the Lease to expire. Call it only after Run has returned and every tenant has stopped.
func (l *ShardLease) Release(ctx context.Context) error {
	old, _, err := l.lock.Get(ctx)
	if err != nil {
		return err
	}
	if old.HolderIdentity != l.cfg.Identity {
		return nil
	}
	return l.lock.Update(ctx, resourcelock.LeaderElectionRecord{
		LeaseDurationSeconds: 1,
		AcquireTime:          old.AcquireTime,
		RenewTime:            metav1.NewTime(l.clock.Now()),
		LeaderTransitions:    old.LeaderTransitions,
	})
}

// Name and Check make the Lease a /healthz check ("shard-lease"): it fails once the Lease is lost, and while it is
// held but was last renewed longer ago than the renew deadline, so that a liveness probe restarts a replica that
// hangs instead of exiting.
func (l *ShardLease) Name() string { return "shard-lease" }

func (l *ShardLease) Check(*http.Request) error {
	err := l.renewals.Check()
	if errors.Is(err, leasehealth.ErrLeaseLost) {
		return errors.New("this replica lost its shard Lease and is exiting")
	}
	return err
}

// wait returns false when ctx ends before d has passed on the clock.
func (l *ShardLease) wait(ctx context.Context, d time.Duration) bool {
	timer := l.clock.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C():
		return true
	}
}

func leaseSeconds(d time.Duration) time.Duration { return d.Truncate(time.Second) }

// LiveShards returns the sorted names of the shards whose Lease names a holder and has not expired at now
// (renewTime + leaseDurationSeconds > now). The holder's renewTime is on the holder's clock and now on the
// caller's: clock skew between replicas must stay well below LeaseDuration - RenewDeadline.
func LiveShards(leases []*coordinationv1.Lease, now time.Time) []string {
	var live []string
	for _, lease := range leases {
		if expiry, ok := LeaseExpiry(lease); ok && expiry.After(now) {
			live = append(live, *lease.Spec.HolderIdentity)
		}
	}
	slices.Sort(live)
	return slices.Compact(live)
}

// LeaseExpiry is when a held Lease expires; false when it names no holder or lacks the times.
func LeaseExpiry(lease *coordinationv1.Lease) (time.Time, bool) {
	s := lease.Spec
	if s.HolderIdentity == nil || *s.HolderIdentity == "" || s.RenewTime == nil || s.LeaseDurationSeconds == nil {
		return time.Time{}, false
	}
	return s.RenewTime.Add(time.Duration(*s.LeaseDurationSeconds) * time.Second), true
}

// LeaseBounds are the timings a replica's shard Lease can carry, as tryAcquireOrRenew writes them: a
// leaseDurationSeconds of LeaseDuration in whole seconds (or 1, released), and a renewTime of the replica's clock at
// the renewal. A Lease outside them was not written by a replica that runs with the same flags: a forgery (a
// renewTime far ahead would keep a shard live that never runs its tenants, issue 42), or a replica misconfigured
// beyond the clock skew that sharding tolerates anyway. The sharder does not count such a shard as live, and does not
// delete its Lease either.
type LeaseBounds struct {
	// MaxDuration is the longest leaseDurationSeconds: --leader-elect-lease-duration, in whole seconds.
	MaxDuration time.Duration
	// MaxSkew is how far ahead of the sharder's clock a renewTime may be: --leader-elect-lease-duration minus
	// --leader-elect-renew-deadline, the margin a shard's clock must already stay well within (LiveShards).
	MaxSkew time.Duration
}

// NewLeaseBounds returns the bounds of Leases written with ShardLeaseConfig's LeaseDuration and RenewDeadline.
func NewLeaseBounds(leaseDuration, renewDeadline time.Duration) LeaseBounds {
	return LeaseBounds{MaxDuration: leaseSeconds(leaseDuration), MaxSkew: leaseDuration - renewDeadline}
}

// Admits reports whether the Lease's timings are within b at now. The zero LeaseBounds admits every Lease.
func (b LeaseBounds) Admits(lease *coordinationv1.Lease, now time.Time) bool {
	if b == (LeaseBounds{}) {
		return true
	}
	s := lease.Spec
	if s.LeaseDurationSeconds != nil && time.Duration(*s.LeaseDurationSeconds)*time.Second > b.MaxDuration {
		return false
	}
	return s.RenewTime == nil || !s.RenewTime.After(now.Add(b.MaxSkew))
}

// VersionReads remembers when each version of a shard Lease outside the LeaseBounds was first read, for
// LatestExpiry. The zero value is ready to use.
type VersionReads struct {
	mu sync.Mutex
	// first is, per Lease outside the bounds (namespace/name), the version last read and when it was first read.
	first map[string]versionRead
}

type versionRead struct {
	resourceVersion string
	at              time.Time
}

// LatestExpiry is when a shard Lease read by name expires at the latest, as a replica running with the flags of
// bounds could have written it, whether it is held (names a holder and has the times), and whether its timings are
// outside bounds. A Lease within bounds expires when it says. One outside them (a renewTime far ahead, a year-long
// duration: a forgery, or a replica whose clock or flags are off) is taken neither at its word nor as dead, which
// would move the tenants of a replica that still runs: its renewTime counts as at most MaxSkew after the first read
// of that version (it was written no later) and its duration as at most MaxDuration. Read again at that expiry, the
// same version is expired; a new version (a replica still renewing) is bounded afresh. Zero bounds take every Lease
// at its word.
func (r *VersionReads) LatestExpiry(bounds LeaseBounds, lease *coordinationv1.Lease, now time.Time) (expiry time.Time, held, outOfBounds bool) {
	expiry, held = LeaseExpiry(lease)
	key := lease.Namespace + "/" + lease.Name
	r.mu.Lock()
	defer r.mu.Unlock()
	if !held || bounds.Admits(lease, now) {
		delete(r.first, key)
		return expiry, held, false
	}
	read, ok := r.first[key]
	if !ok || read.resourceVersion != lease.ResourceVersion {
		read = versionRead{resourceVersion: lease.ResourceVersion, at: now}
		if r.first == nil {
			r.first = map[string]versionRead{}
		}
		r.first[key] = read
	}
	renewed := lease.Spec.RenewTime.Time
	if latest := read.at.Add(bounds.MaxSkew); renewed.After(latest) {
		renewed = latest
	}
	duration := min(time.Duration(*lease.Spec.LeaseDurationSeconds)*time.Second, bounds.MaxDuration)
	return renewed.Add(duration), true, true
}

// Forget drops what is remembered of the Lease namespace/name: it is gone, or not a shard Lease.
func (r *VersionReads) Forget(namespace, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.first, namespace+"/"+name)
}

// IsShardLease says whether a Lease read by the name of shard's Lease is one: labeled with the group, as every
// shard Lease is (ShardLease writes the label on every renewal) and as the lists select them. Any other Lease of
// that name was made by someone else and says nothing about the shard.
func IsShardLease(lease *coordinationv1.Lease, group, shard string) bool {
	return lease.Name == LeaseName(group, shard) && lease.Labels[ShardGroupLabel] == group
}
