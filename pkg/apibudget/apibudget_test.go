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

package apibudget

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	clocktesting "k8s.io/utils/clock/testing"
)

// newLimiter returns a Limiter on a fake clock: its waits end only when the test steps the clock.
func newLimiter(qps float32, burst int, tenantQPS float32, tenantBurst int) (*Limiter, *clocktesting.FakeClock) {
	c := clocktesting.NewFakeClock(time.Now())
	return New(Options{QPS: qps, Burst: burst, TenantQPS: tenantQPS, TenantBurst: tenantBurst, Clock: c}), c
}

// waitNow calls Wait and fails unless it returns nil at once (on a fake clock that does not move, a Wait that has
// to wait for a token never returns).
func waitNow(t *testing.T, l *Limiter, ctx context.Context, what string) {
	t.Helper()
	if err := l.Wait(ctx); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// waitLater starts Wait in a goroutine and returns the channel its result arrives on.
func waitLater(l *Limiter, ctx context.Context) <-chan error {
	done := make(chan error, 1)
	go func() { done <- l.Wait(ctx) }()
	return done
}

// waiters waits until n timers are pending on the fake clock: n Waits are blocked on a token.
func waiters(t *testing.T, c *clocktesting.FakeClock, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.Waiters() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d waits blocked, want %d", c.Waiters(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func blocked(done <-chan error) bool {
	select {
	case <-done:
		return false
	default:
		return true
	}
}

func result(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return")
		return nil
	}
}

func TestTenantShareIsEnforced(t *testing.T) {
	l, c := newLimiter(100, 100, 1, 2)
	a := WithTenant(context.Background(), "a")
	waitNow(t, l, a, "first of the tenant's burst")
	waitNow(t, l, a, "second of the tenant's burst")

	done := waitLater(l, a)
	waiters(t, c, 1)
	c.Step(999 * time.Millisecond)
	if !blocked(done) {
		t.Fatal("a request beyond the tenant's burst went out before its bucket refilled, while the client had 98 tokens")
	}
	c.Step(time.Millisecond)
	if err := result(t, done); err != nil {
		t.Fatal(err)
	}
}

func TestBusyTenantDoesNotDelayAnother(t *testing.T) {
	l, c := newLimiter(10, 10, 2, 2)
	a, b := WithTenant(context.Background(), "a"), WithTenant(context.Background(), "b")
	waitNow(t, l, a, "a's burst")
	waitNow(t, l, a, "a's burst")
	// Five more of a's requests wait for a's bucket, as its workers would under a flood of Services.
	var pending []<-chan error
	for range 5 {
		pending = append(pending, waitLater(l, a))
	}
	waiters(t, c, 5)

	// They hold no claim on the client's bucket: 8 of its 10 tokens are left, and b gets its burst at once.
	waitNow(t, l, b, "b beside a busy a")
	waitNow(t, l, b, "b beside a busy a")
	for i := range 6 {
		if !l.TryAccept() {
			t.Fatalf("the client's bucket had %d tokens left beside a's waiting requests, want 6", i)
		}
	}
	if l.TryAccept() {
		t.Fatal("the client's bucket had more tokens than its burst")
	}
	for _, done := range pending {
		if !blocked(done) {
			t.Fatal("a's request went out beyond its share")
		}
	}
	// Untagged requests (informers, Events) take only the client's bucket, now empty.
	untagged := waitLater(l, context.Background())
	waiters(t, c, 6)
	c.Step(100 * time.Millisecond)
	if err := result(t, untagged); err != nil {
		t.Fatal(err)
	}
}

// TestWithoutSharesOneTenantDelaysAnother is the contrast: with the per-tenant limit disabled, a's requests take
// the whole client and b waits behind them.
func TestWithoutSharesOneTenantDelaysAnother(t *testing.T) {
	l, c := newLimiter(10, 10, 0, 0)
	a, b := WithTenant(context.Background(), "a"), WithTenant(context.Background(), "b")
	for range 10 {
		waitNow(t, l, a, "a alone on the client")
	}
	done := waitLater(l, b)
	waiters(t, c, 1)
	if !blocked(done) {
		t.Fatal("b went out although a had spent the client's burst")
	}
	c.Step(100 * time.Millisecond)
	if err := result(t, done); err != nil {
		t.Fatal(err)
	}
	if l.Tenants() != 0 {
		t.Errorf("%d tenant buckets with the per-tenant limit disabled, want 0", l.Tenants())
	}
}

func TestForgetReleasesTheTenant(t *testing.T) {
	l, _ := newLimiter(100, 100, 1, 1)
	other, _ := newLimiter(100, 100, 1, 1)
	a, b := WithTenant(context.Background(), "a"), WithTenant(context.Background(), "b")
	waitNow(t, l, a, "a")
	waitNow(t, l, b, "b")
	waitNow(t, other, a, "a on another client")
	if l.Tenants() != 2 || other.Tenants() != 1 {
		t.Fatalf("tenant buckets = %d and %d, want 2 and 1", l.Tenants(), other.Tenants())
	}
	l.Forget("a")
	if l.Tenants() != 1 {
		t.Fatalf("tenant buckets after Forget = %d, want 1", l.Tenants())
	}
	// a's bucket was empty; a tenant created again under the name starts with a full one.
	waitNow(t, l, a, "a after Forget")

	// The package's Forget reaches every live Limiter.
	Forget("a")
	Forget("b")
	if l.Tenants() != 0 || other.Tenants() != 0 {
		t.Fatalf("tenant buckets after apibudget.Forget = %d and %d, want 0", l.Tenants(), other.Tenants())
	}
}

func TestWaitReturnsPromptlyWhenCancelled(t *testing.T) {
	l, c := newLimiter(100, 100, 1, 1)
	a := WithTenant(context.Background(), "a")
	waitNow(t, l, a, "a's burst")

	ctx, cancel := context.WithCancel(a)
	done := waitLater(l, ctx)
	waiters(t, c, 1)
	cancel() // the clock does not move: only the cancellation can end the wait
	if err := result(t, done); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait after cancel = %v, want context.Canceled", err)
	}
	// The cancelled request gave its token back: the next one waits one refill (1 s), not two.
	next := waitLater(l, a)
	waiters(t, c, 1)
	c.Step(time.Second)
	if err := result(t, next); err != nil {
		t.Fatal(err)
	}

	// A deadline that comes before the token would returns at once, without waiting for the deadline.
	ctx, cancel = context.WithDeadline(a, c.Now().Add(500*time.Millisecond))
	if err := l.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with a deadline before the token = %v, want context.DeadlineExceeded", err)
	}
	// A context already done returns at once too.
	cancel()
	if err := l.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatal("Wait on a done context returned nil")
	}
}

func TestAcceptAndTryAcceptUseTheClientBucket(t *testing.T) {
	l, c := newLimiter(1, 1, 1, 1)
	if l.QPS() != 1 {
		t.Errorf("QPS = %v", l.QPS())
	}
	if !l.TryAccept() || l.TryAccept() {
		t.Fatal("TryAccept does not take the client's single token")
	}
	done := make(chan struct{})
	go func() { l.Accept(); close(done) }()
	waiters(t, c, 1)
	c.Step(time.Second)
	<-done
}

func TestTenantWaitSeries(t *testing.T) {
	Register()
	l, c := newLimiter(100, 100, 1, 1)
	a := WithTenant(context.Background(), "series-a")
	waitNow(t, l, a, "a")
	done := waitLater(l, a)
	waiters(t, c, 1)
	c.Step(time.Second)
	if err := result(t, done); err != nil {
		t.Fatal(err)
	}
	count, sum := waitSeries(t, "series-a")
	if count != 2 || sum != 1 {
		t.Fatalf("wait series of a = %d requests, %v s, want 2 requests, 1 s", count, sum)
	}
	Forget("series-a")
	if count, _ := waitSeries(t, "series-a"); count != 0 {
		t.Fatal("a forgotten tenant keeps its wait series")
	}
}

// waitSeries returns the tenant's wait histogram's count and sum (0 without a series).
func waitSeries(t *testing.T, tenant string) (uint64, float64) {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "multiproject_api_budget_tenant_wait_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			if testutil.LabelsMatch(m, map[string]string{"provider_config": tenant}) {
				return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
			}
		}
	}
	return 0, 0
}
