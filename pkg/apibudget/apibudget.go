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

// Package apibudget owns the manager's client-side budget of API server requests and how it is shared between
// tenants: a Limiter, set as rest.Config.RateLimiter on a shared client, holds the client's token bucket
// (--kube-api-qps/--kube-api-burst) and one smaller bucket per tenant (--kube-api-qps-per-tenant,
// --kube-api-burst-per-tenant), so that one tenant's burst of writes cannot spend the budget every other tenant
// needs. The tenant of a request is the one its context names (WithTenant): the Manager puts it into the context
// every tenant controller runs with, and client-go hands the request's context to RateLimiter.Wait.
//
// It also owns the metric of the time requests wait for their tenant's bucket, and the forgetting of a tenant
// (buckets and series) when it is gone.
package apibudget

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"weak"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
)

type tenantKey struct{}

// WithTenant returns a context whose API requests are charged to the tenant's bucket before the shared one.
func WithTenant(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, tenantKey{}, name)
}

// TenantFrom returns the tenant WithTenant put into ctx.
func TenantFrom(ctx context.Context) (string, bool) {
	name, ok := ctx.Value(tenantKey{}).(string)
	return name, ok && name != ""
}

// Options are the sizes of a Limiter's buckets.
type Options struct {
	// QPS and Burst size the bucket every request of the client takes a token from.
	QPS   float32
	Burst int
	// TenantQPS and TenantBurst size each tenant's bucket. TenantQPS 0 disables the per-tenant limit: every
	// request then takes from the shared bucket only.
	TenantQPS   float32
	TenantBurst int
	// Clock is for tests; nil means the real clock.
	Clock clock.Clock
}

// DefaultTenantShare returns the per-tenant bucket used when none is configured: a quarter of the shared one
// (burst rounded up), so that at least four tenants must be busy at once to exhaust the client.
func DefaultTenantShare(qps float32, burst int) (float32, int) {
	return qps / 4, max(1, int(math.Ceil(float64(burst)/4)))
}

// Limiter is a flowcontrol.RateLimiter for a client shared by every tenant. A request whose context names a
// tenant takes a token from the tenant's bucket first, then one from the shared bucket; any other request (the
// informers' lists and watches, the ProviderConfig controller's writes, Events) from the shared bucket only.
//
// The tenant's bucket comes first so that a tenant throttled by its own bucket holds no claim on the shared one
// meanwhile: what it cannot use yet stays available to the other tenants. Each bucket is a token bucket from
// golang.org/x/time/rate (the one client-go's NewTokenBucketRateLimiter wraps), used through reservations so that
// the waits run on the Limiter's clock and a cancelled wait gives its token back.
type Limiter struct {
	opts   Options
	clock  clock.Clock
	shared *rate.Limiter

	mu      sync.Mutex
	tenants map[string]*rate.Limiter
}

var _ flowcontrol.RateLimiter = (*Limiter)(nil)

// New returns a Limiter with full buckets. Tenant buckets are made on a tenant's first request and dropped by
// Forget.
func New(opts Options) *Limiter {
	c := opts.Clock
	if c == nil {
		c = clock.RealClock{}
	}
	l := &Limiter{opts: opts, clock: c, shared: rate.NewLimiter(rate.Limit(opts.QPS), opts.Burst), tenants: map[string]*rate.Limiter{}}
	register(l)
	return l
}

// Wait returns nil once the request may be sent: after a token of its tenant's bucket (if ctx names a tenant),
// then one of the shared bucket. It returns an error at once when ctx ends first or when its deadline comes
// before the token would, and then gives back the token it was waiting for.
func (l *Limiter) Wait(ctx context.Context) error {
	if name, ok := TenantFrom(ctx); ok && l.opts.TenantQPS > 0 {
		start := l.clock.Now()
		err := l.wait(ctx, l.tenant(name))
		observeWait(name, l.clock.Since(start))
		if err != nil {
			return err
		}
	}
	return l.wait(ctx, l.shared)
}

// errWouldExceedDeadline wraps context.DeadlineExceeded so that client-go reports it as the caller's deadline,
// not as a limiter failure.
var errWouldExceedDeadline = fmt.Errorf("client-side API budget: the wait would exceed the context deadline: %w", context.DeadlineExceeded)

func (l *Limiter) wait(ctx context.Context, bucket *rate.Limiter) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := l.clock.Now()
	r := bucket.ReserveN(now, 1)
	if !r.OK() {
		return errors.New("client-side API budget: burst is 0, no request can ever be sent")
	}
	delay := r.DelayFrom(now)
	if delay <= 0 {
		return nil
	}
	if deadline, ok := ctx.Deadline(); ok && deadline.Before(now.Add(delay)) {
		r.CancelAt(now)
		return errWouldExceedDeadline
	}
	t := l.clock.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		// Give the token back, so that a cancelled request does not delay the ones after it.
		r.CancelAt(l.clock.Now())
		return ctx.Err()
	}
}

// tenant returns the tenant's bucket, made full on first use.
func (l *Limiter) tenant(name string) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.tenants[name]
	if !ok {
		b = rate.NewLimiter(rate.Limit(l.opts.TenantQPS), l.opts.TenantBurst)
		l.tenants[name] = b
	}
	return b
}

// Forget drops the tenant's bucket. A request of the tenant still waiting keeps the bucket it has; the next one
// starts a full bucket.
func (l *Limiter) Forget(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.tenants, name)
}

// Tenants returns how many tenant buckets the Limiter holds.
func (l *Limiter) Tenants() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.tenants)
}

// Accept waits for a token of the shared bucket: it has no context, so no tenant.
func (l *Limiter) Accept() { _ = l.wait(context.Background(), l.shared) }

// TryAccept takes a token of the shared bucket if one is there now.
func (l *Limiter) TryAccept() bool { return l.shared.AllowN(l.clock.Now(), 1) }

// QPS returns the shared bucket's rate.
func (l *Limiter) QPS() float32 { return l.opts.QPS }

// Stop does nothing: the Limiter has no goroutine.
func (l *Limiter) Stop() {}

// limiters are the live Limiters, so that the ProviderConfig controller, which knows when a tenant is gone but
// not which clients the process built, can forget the tenant in all of them. Weak, so that a Limiter no client
// uses any more (tests make many) is collected.
var (
	limitersMu sync.Mutex
	limiters   []weak.Pointer[Limiter]
)

func register(l *Limiter) {
	limitersMu.Lock()
	defer limitersMu.Unlock()
	limiters = append(limiters, weak.Make(l))
}

// Forget drops the tenant's buckets in every Limiter and its wait series; the ProviderConfig controller calls it
// when the tenant's ProviderConfig is gone.
func Forget(name string) {
	limitersMu.Lock()
	live := limiters[:0]
	var forget []*Limiter
	for _, p := range limiters {
		if l := p.Value(); l != nil {
			live = append(live, p)
			forget = append(forget, l)
		}
	}
	clear(limiters[len(live):])
	limiters = live
	limitersMu.Unlock()
	for _, l := range forget {
		l.Forget(name)
	}
	forgetSeries(name)
}

// Options returns the sizes of the Limiter's buckets.
func (l *Limiter) Options() Options { return l.opts }
