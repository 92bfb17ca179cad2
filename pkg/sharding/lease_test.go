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
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/multiproject/multiproject-controller-manager/pkg/leasehealth"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	testLeaseDuration = 15 * time.Second
	testRenewDeadline = 10 * time.Second
	testRetryPeriod   = 2 * time.Second
)

// eventually polls cond until it holds; it synchronizes with goroutines that react to a fake clock step, it does
// not measure time.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

type leaseRig struct {
	client *fake.Clientset
	clock  *testingclock.FakeClock
	lease  *ShardLease
	lost   atomic.Pointer[error]
	lostAt atomic.Pointer[time.Time]
	done   chan error
	cancel context.CancelFunc
}

func newLeaseRig(t *testing.T, objects ...runtime.Object) *leaseRig {
	t.Helper()
	r := &leaseRig{client: fake.NewClientset(objects...), clock: testingclock.NewFakeClock(t0), done: make(chan error, 1)}
	var err error
	r.lease, err = NewShardLease(ShardLeaseConfig{
		Client: r.client.CoordinationV1(), Namespace: "kube-system", Group: "mp", Identity: "pod-a-x1",
		LeaseDuration: testLeaseDuration, RenewDeadline: testRenewDeadline, RetryPeriod: testRetryPeriod,
		Clock: r.clock,
		OnLost: func(err error) {
			now := r.clock.Now()
			r.lostAt.Store(&now)
			r.lost.Store(&err)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *leaseRig) run(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	t.Cleanup(cancel)
	go func() { r.done <- r.lease.Run(ctx) }()
}

func (r *leaseRig) get(t *testing.T) *coordinationv1.Lease {
	t.Helper()
	l, err := r.client.Tracker().Get(coordinationv1.SchemeGroupVersion.WithResource("leases"), "kube-system", "mp-pod-a-x1")
	if err != nil {
		t.Fatal(err)
	}
	return l.(*coordinationv1.Lease)
}

// step advances the clock once the lease's goroutines all wait on it (held: the watchdog and the renewal wait).
func (r *leaseRig) step(t *testing.T, waiters int, d time.Duration) {
	t.Helper()
	eventually(t, "the lease's timers", func() bool { return r.clock.Waiters() == waiters })
	r.clock.Step(d)
}

func (r *leaseRig) acquired(t *testing.T) {
	t.Helper()
	select {
	case <-r.lease.Acquired():
	case <-time.After(10 * time.Second):
		t.Fatal("the Lease was never acquired")
	}
}

func TestShardLeaseCreatesTheLabeledLeaseAndRenewsIt(t *testing.T) {
	r := newLeaseRig(t)
	r.run(t)
	r.acquired(t)
	l := r.get(t)
	if l.Labels[ShardGroupLabel] != "mp" || *l.Spec.HolderIdentity != "pod-a-x1" || *l.Spec.LeaseDurationSeconds != 15 ||
		!l.Spec.RenewTime.Time.Equal(t0) {
		t.Fatalf("created Lease: labels %v, spec %+v", l.Labels, l.Spec)
	}
	// Someone strips the group label: the next renewal puts it back.
	l.Labels = nil
	if err := r.client.Tracker().Update(coordinationv1.SchemeGroupVersion.WithResource("leases"), l, "kube-system"); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 10; i++ {
		r.step(t, 2, testRetryPeriod)
		want := t0.Add(time.Duration(i) * testRetryPeriod)
		eventually(t, "a renewal", func() bool { return r.get(t).Spec.RenewTime.Time.Equal(want) })
	}
	if l := r.get(t); l.Labels[ShardGroupLabel] != "mp" {
		t.Errorf("the renewal did not restore the group label: %v", l.Labels)
	}
	if live := LiveShards([]*coordinationv1.Lease{r.get(t)}, r.clock.Now()); len(live) != 1 || live[0] != "pod-a-x1" {
		t.Errorf("live shards: %v", live)
	}
	r.cancel()
	if err := <-r.done; err != nil || r.lost.Load() != nil {
		t.Errorf("Run after cancel: %v, lost: %v", err, r.lost.Load())
	}
}

// failAfterAcquire makes every Lease request fail (or hang) once set.
func failAfterAcquire(client *fake.Clientset, hang chan struct{}) *atomic.Bool {
	var failing atomic.Bool
	client.PrependReactor("*", "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
		if !failing.Load() {
			return false, nil, nil
		}
		if hang != nil {
			<-hang
		}
		return true, nil, errors.New("the API server is unreachable")
	})
	return &failing
}

func TestShardLeaseCallsOnLostAtTheRenewDeadlineBeforeTheLeaseExpires(t *testing.T) {
	for _, hangs := range []bool{false, true} {
		name := map[bool]string{false: "requests fail", true: "requests hang"}[hangs]
		t.Run(name, func(t *testing.T) {
			r := newLeaseRig(t)
			var hang chan struct{}
			if hangs {
				hang = make(chan struct{})
				defer close(hang)
			}
			failing := failAfterAcquire(r.client, hang)
			r.run(t)
			r.acquired(t)
			lastRenewal := r.get(t).Spec.RenewTime.Time
			failing.Store(true)
			// Four failed (or one hanging) renewals: the watchdog alone waits once a renewal hangs.
			waiters := 2
			for i := 0; i < 4; i++ {
				if hangs && i > 0 {
					waiters = 1
				}
				r.step(t, waiters, testRetryPeriod)
			}
			r.step(t, waiters, testRenewDeadline-4*testRetryPeriod-time.Millisecond)
			eventually(t, "the timers again", func() bool { return r.clock.Waiters() >= 1 })
			if r.lost.Load() != nil {
				t.Fatalf("OnLost before the renew deadline, at %s", r.lostAt.Load().Sub(lastRenewal))
			}
			if err := r.lease.Check(nil); err != nil {
				t.Errorf("the health check fails within the renew deadline: %v", err)
			}
			r.clock.Step(time.Millisecond)
			eventually(t, "OnLost", func() bool { return r.lost.Load() != nil })
			if err := r.lease.Check(nil); err == nil {
				t.Error("the health check passes after the Lease was lost")
			}
			if at := *r.lostAt.Load(); !at.Before(lastRenewal.Add(testLeaseDuration)) {
				t.Errorf("OnLost at %s, not before the Lease expires at %s", at, lastRenewal.Add(testLeaseDuration))
			}
			if err := <-r.done; !errors.Is(err, errLost) {
				t.Errorf("Run returned %v, want the loss", err)
			}
		})
	}
}

func TestShardLeaseIsLostAtOnceWhenTakenOrDeleted(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   func(*leaseRig, *testing.T)
	}{
		{"taken", func(r *leaseRig, t *testing.T) {
			l := r.get(t)
			l.Spec.HolderIdentity = ptr.To("someone-else")
			if err := r.client.Tracker().Update(coordinationv1.SchemeGroupVersion.WithResource("leases"), l, "kube-system"); err != nil {
				t.Fatal(err)
			}
		}},
		{"deleted", func(r *leaseRig, t *testing.T) {
			if err := r.client.Tracker().Delete(coordinationv1.SchemeGroupVersion.WithResource("leases"), "kube-system", "mp-pod-a-x1"); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newLeaseRig(t)
			r.run(t)
			r.acquired(t)
			tc.do(r, t)
			r.step(t, 2, testRetryPeriod)
			eventually(t, "OnLost", func() bool { return r.lost.Load() != nil })
			if at := r.lostAt.Load().Sub(t0); at != testRetryPeriod {
				t.Errorf("lost %s after the acquisition, want at the next renewal (%s)", at, testRetryPeriod)
			}
			if tc.name == "taken" && *r.get(t).Spec.HolderIdentity != "someone-else" {
				t.Error("the Lease was taken back")
			}
		})
	}
}

func TestShardLeaseWaitsForAnotherHolderToExpire(t *testing.T) {
	other := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "mp-pod-a-x1"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("someone-else"), LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime: &metav1.MicroTime{Time: t0}, LeaseTransitions: ptr.To[int32](3)},
	}
	r := newLeaseRig(t, other)
	r.run(t)
	r.step(t, 1, 14*time.Second)
	r.step(t, 1, testRetryPeriod) // t0+16s: the other holder's Lease expired at t0+15s
	r.acquired(t)
	l := r.get(t)
	if *l.Spec.HolderIdentity != "pod-a-x1" || *l.Spec.LeaseTransitions != 4 || l.Labels[ShardGroupLabel] != "mp" {
		t.Errorf("taken over Lease: labels %v, spec %+v", l.Labels, l.Spec)
	}
	if !l.Spec.RenewTime.Time.Equal(t0.Add(16 * time.Second)) {
		t.Errorf("acquired at %s, want only once the other holder's Lease expired", l.Spec.RenewTime.Time.Sub(t0))
	}
}

func TestShardLeaseReleaseMakesTheShardDeadAtOnce(t *testing.T) {
	r := newLeaseRig(t)
	r.run(t)
	r.acquired(t)
	r.cancel()
	if err := <-r.done; err != nil {
		t.Fatal(err)
	}
	if live := LiveShards([]*coordinationv1.Lease{r.get(t)}, r.clock.Now()); len(live) != 1 {
		t.Fatalf("before the release: live %v", live)
	}
	if err := r.lease.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if live := LiveShards([]*coordinationv1.Lease{r.get(t)}, r.clock.Now()); len(live) != 0 {
		t.Errorf("after the release: live %v, want none", live)
	}
}

func TestNewShardLeaseRefusesUnsafeTimings(t *testing.T) {
	base := ShardLeaseConfig{Client: fake.NewClientset().CoordinationV1(), Namespace: "ns", Group: "mp", Identity: "a",
		OnLost: func(error) {}}
	for _, tc := range []struct {
		lease, renew, retry time.Duration
		ok                  bool
	}{
		{15 * time.Second, 10 * time.Second, 2 * time.Second, true},
		{10 * time.Second, 10 * time.Second, 2 * time.Second, false},
		{10500 * time.Millisecond, 10200 * time.Millisecond, 2 * time.Second, false}, // 10 whole seconds recorded
		{15 * time.Second, 2 * time.Second, 2 * time.Second, false},
	} {
		cfg := base
		cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod = tc.lease, tc.renew, tc.retry
		if _, err := NewShardLease(cfg); (err == nil) != tc.ok {
			t.Errorf("%s/%s/%s: err %v, want ok=%v", tc.lease, tc.renew, tc.retry, err, tc.ok)
		}
	}
	cfg := base
	cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod = 15*time.Second, 10*time.Second, 2*time.Second
	cfg.Identity = "Pod_A"
	if _, err := NewShardLease(cfg); err == nil {
		t.Error("an identity that is no label value was accepted")
	}
}

func TestLiveShards(t *testing.T) {
	lease := func(holder *string, renew *time.Time, seconds *int32) *coordinationv1.Lease {
		l := &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: holder, LeaseDurationSeconds: seconds}}
		if renew != nil {
			l.Spec.RenewTime = &metav1.MicroTime{Time: *renew}
		}
		return l
	}
	now := t0.Add(time.Minute)
	fresh, stale, edge := now.Add(-14*time.Second), now.Add(-16*time.Second), now.Add(-15*time.Second)
	got := LiveShards([]*coordinationv1.Lease{
		lease(ptr.To("b"), &fresh, ptr.To[int32](15)),
		lease(ptr.To("a"), &fresh, ptr.To[int32](15)),
		lease(ptr.To("a"), &fresh, ptr.To[int32](15)), // the same holder twice counts once
		lease(ptr.To("stale"), &stale, ptr.To[int32](15)),
		lease(ptr.To("edge"), &edge, ptr.To[int32](15)), // expires exactly now: dead
		lease(ptr.To(""), &fresh, ptr.To[int32](15)),    // released
		lease(nil, &fresh, ptr.To[int32](15)),
		lease(ptr.To("no-renew"), nil, ptr.To[int32](15)),
		lease(ptr.To("no-duration"), &fresh, nil),
	}, now)
	if len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Errorf("live shards: %v, want [a b]", got)
	}
}

// TestShardLeaseRefusedForALeaseDurationIsLostNamingTheRole: RBAC that does not grant the shard Lease (the sharded
// Role missing, or in another namespace than --leader-elect-resource-namespace) makes every get a 403. A moment of
// refusals is retried (a starting kube-apiserver refuses until its authorizer is ready); refusals for a whole lease
// duration call OnLost with an error that names the Role and the namespace.
func TestShardLeaseRefusedForALeaseDurationIsLostNamingTheRole(t *testing.T) {
	r := newLeaseRig(t)
	var refuse atomic.Bool
	refuse.Store(true)
	r.client.PrependReactor("get", "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
		if refuse.Load() {
			return true, nil, apierrors.NewForbidden(coordinationv1.Resource("leases"), "mp-pod-a-x1", errors.New("RBAC: access denied"))
		}
		return false, nil, nil
	})
	r.run(t)
	// Refused for less than a lease duration, then granted: acquired, nothing lost.
	r.step(t, 1, testRetryPeriod)
	r.step(t, 1, testLeaseDuration-testRetryPeriod-time.Second)
	// The attempt at t0+14s, refused, is made before the loop waits again.
	eventually(t, "the attempt at t0+14s", func() bool { return r.clock.Waiters() == 1 })
	refuse.Store(false)
	r.step(t, 1, testRetryPeriod)
	r.acquired(t)
	if lost := r.lost.Load(); lost != nil {
		t.Fatalf("lost after refusals shorter than a lease duration: %v", *lost)
	}

	r2 := newLeaseRig(t)
	r2.client.PrependReactor("get", "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(coordinationv1.Resource("leases"), "mp-pod-a-x1", errors.New("RBAC: access denied"))
	})
	r2.run(t)
	// Refused at t0, t0+2s, ... t0+16s: the first refusal a lease duration after the first.
	for range int(testLeaseDuration/testRetryPeriod) + 1 {
		r2.step(t, 1, testRetryPeriod)
	}
	var err error
	select {
	case err = <-r2.done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run kept retrying a Lease refused for a lease duration")
	}
	lost := r2.lost.Load()
	if lost == nil || !errors.Is(*lost, leasehealth.ErrLeaseRefused) || !errors.Is(err, leasehealth.ErrLeaseRefused) {
		t.Fatalf("Run returned %v, OnLost got %v; want leasehealth.ErrLeaseRefused for both", err, lost)
	}
	for _, want := range []string{"multiproject-controller-manager:sharding", `namespace "kube-system"`, "mp-pod-a-x1", "RBAC: access denied"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
}
