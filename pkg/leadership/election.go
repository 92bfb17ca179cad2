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

package leadership

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/multiproject/multiproject-controller-manager/pkg/leasehealth"
)

// ErrLost makes the process exit non-zero: another replica may already be acting, so this one must not go on, and
// the Deployment restarts it as a standby.
var ErrLost = errors.New("leader election lost")

// Config is one campaign for the leader-election Lease.
type Config struct {
	// Client writes the Lease: a client of its own, whose rate limit no tenant can spend.
	Client kubernetes.Interface
	// Namespace and Name are the Lease's; Identity is this process's name in it.
	Namespace, Name, Identity string
	// Recorder records the elector's Events on the Lease; optional.
	Recorder resourcelock.EventRecorder
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's elector's timings.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Role is the Role (and RoleBinding, of the same name) that grants the Lease: the error of a Lease the API
	// server keeps refusing names it.
	Role string
	// Leading, if not nil, is true while this process leads, until leadership is lost or the term ends.
	Leading *atomic.Bool
	// KeepLease, if not nil, says whether run's error means that something run started still acts: the Lease is
	// then left to expire rather than released to a standby.
	KeepLease func(runErr error) bool
}

// Run campaigns for the Lease and calls run on the leader's context. It returns nil after ctx ends (a graceful
// shutdown: run has returned and the Lease is released so a standby takes over at once), run's error if run fails
// (the Lease is released first, unless KeepLease says otherwise), or an error wrapping ErrLost.
//
// Leadership is lost when client-go's elector stops renewing on its own, or when no renewal has succeeded for the
// renew deadline plus one retry period. That is when the elector gives up too (its next round of attempts starts a
// retry period after the last success and has the renew deadline to succeed), but before it returns it tries to
// release the Lease, which takes up to another renew deadline against an API server that hangs; the watchdog does
// not wait for that. Either way Run returns at once: it cancels run's context and waits neither for run nor for the
// elector. From then on the lock refuses every write, so this process neither renews nor releases the Lease again;
// a standby takes over when the Lease expires, as after a kill. health is the check /healthz serves.
func Run(ctx context.Context, cfg Config, health *Health, run func(context.Context) error) error {
	e, err := newElection(ctx, cfg, health)
	if err != nil {
		return err
	}
	defer e.stop()
	defer e.cancelLost(nil)

	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            e.lock,
		Name:            cfg.Name,
		LeaseDuration:   cfg.LeaseDuration,
		RenewDeadline:   cfg.RenewDeadline,
		RetryPeriod:     cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leaderCtx context.Context) { e.lead(ctx, leaderCtx, run) },
			OnStoppedLeading: e.stoppedLeading,
			OnNewLeader:      e.newLeader,
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	go e.stopOnShutdown(ctx)

	e.logger.Info("Campaigning for leadership", "lease", cfg.Namespace+"/"+cfg.Name, "identity", cfg.Identity)
	electorDone := make(chan struct{})
	go func() {
		defer close(electorDone)
		elector.Run(e.stopped)
	}()
	select {
	case <-e.lost.Done():
		return context.Cause(e.lost)
	case <-electorDone:
	}
	return e.result()
}

// election is one campaign for the Lease: the state that client-go's elector callbacks, the renewal watchdog and
// the shutdown watcher share.
type election struct {
	logger klog.Logger
	cfg    Config
	lock   *electionLock
	health *Health
	// renewLimit is how long the watchdog lets a term go without a successful renewal.
	renewLimit time.Duration

	// stopped ends the election. It outlives the process's context on purpose: on shutdown it is cancelled only
	// after run has returned, because ReleaseOnCancel must not hand the Lease over while our controllers still act.
	stopped context.Context
	stop    context.CancelFunc
	// lost ends, with the reason as its cause, once leadership is lost.
	lost       context.Context
	cancelLost context.CancelCauseFunc
	lostOnce   sync.Once

	mu        sync.Mutex
	leading   bool // a term started (run was called)
	stopping  bool // ctx ended: no term may start any more
	endedByUs bool // we ended the election: ctx ended before a term, or run returned while we still led
	runErr    error
}

func newElection(ctx context.Context, cfg Config, health *Health) (*election, error) {
	if cfg.Identity == "" {
		return nil, errors.New("leader election: no identity")
	}
	inner, err := resourcelock.New(resourcelock.LeasesResourceLock, cfg.Namespace, cfg.Name,
		cfg.Client.CoreV1(), cfg.Client.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: cfg.Identity, EventRecorder: cfg.Recorder})
	if err != nil {
		return nil, fmt.Errorf("leader election lock: %w", err)
	}
	lock := &electionLock{Interface: inner, renewed: health.renewed,
		// A starting kube-apiserver refuses requests until its RBAC authorizer has loaded the roles, and a
		// leader's renewals may be refused so for a moment: only refusals for a whole renew deadline count.
		refusals: &leasehealth.RefusalTracker{Clock: health.clock, Limit: cfg.RenewDeadline},
	}
	e := &election{
		logger:     klog.FromContext(ctx),
		cfg:        cfg,
		lock:       lock,
		health:     health,
		renewLimit: cfg.RenewDeadline + cfg.RetryPeriod,
	}
	e.stopped, e.stop = context.WithCancel(context.WithoutCancel(ctx))
	e.lost, e.cancelLost = context.WithCancelCause(context.Background())
	lock.refused = func(verb string, err error) {
		e.loseLeadership(leasehealth.LeaseRefusedError(verb, cfg.Namespace, cfg.Name, cfg.Role, err))
	}
	return e, nil
}

func (e *election) setLeading(leading bool) {
	if e.cfg.Leading != nil {
		e.cfg.Leading.Store(leading)
	}
}

// lead is a term: it runs run until ctx (the process's) ends, the elector stops, or leadership is lost, and then
// lets the Lease be released and ends the election.
func (e *election) lead(ctx, leaderCtx context.Context, run func(context.Context) error) {
	e.mu.Lock()
	if e.stopping {
		e.mu.Unlock()
		return
	}
	e.leading = true
	e.mu.Unlock()

	e.logger.Info("Started leading", "identity", e.cfg.Identity)
	e.setLeading(true)
	e.health.setLeading(true)
	// leaderCtx ends when the elector stops, and with stopped, which we cancel only after run.
	go e.watchRenewals(leaderCtx)

	workCtx, cancelWork := context.WithCancel(leaderCtx)
	defer cancelWork()
	defer context.AfterFunc(ctx, cancelWork)()
	defer context.AfterFunc(e.lost, cancelWork)()

	err := run(workCtx)
	e.mu.Lock()
	if leaderCtx.Err() == nil && e.lost.Err() == nil {
		if err == nil && ctx.Err() == nil {
			err = errors.New("controllers stopped while still leading")
		}
		e.runErr = err
		e.endedByUs = true
	}
	e.mu.Unlock()
	if err != nil && e.cfg.KeepLease != nil && e.cfg.KeepLease(err) {
		// Something run started outlived it and acts until the process exits: the Lease must expire rather than
		// be handed over.
		e.logger.Error(err, "Not releasing the Lease; a standby takes over when it expires")
		e.stop()
		return
	}
	// Nothing the Lease protects runs any more: the Lease may be released.
	e.lock.allowRelease()
	e.stop()
}

// watchRenewals loses leadership once no renewal has succeeded for renewLimit, until leaderCtx ends.
func (e *election) watchRenewals(leaderCtx context.Context) {
	if e.health.renewals.WaitOverdue(leaderCtx, e.renewLimit) {
		e.loseLeadership(fmt.Errorf("no successful renewal of the Lease for %s (renew deadline + retry period)", e.renewLimit))
	}
}

func (e *election) stoppedLeading() {
	e.setLeading(false)
	e.health.setLeading(false)
	e.logger.Info("Stopped leading", "identity", e.cfg.Identity)
}

func (e *election) newLeader(current string) {
	if current != e.cfg.Identity {
		e.logger.Info("Another replica leads", "leader", current)
	}
}

// loseLeadership stops every write to the Lease, fails the health check and ends run's context, once.
func (e *election) loseLeadership(reason error) {
	e.lostOnce.Do(func() {
		e.lock.refuseWrites()
		e.health.setLost()
		e.setLeading(false)
		e.logger.Error(reason, "Leader election lost; stopping at once", "identity", e.cfg.Identity)
		e.cancelLost(fmt.Errorf("%w: %w", ErrLost, reason))
	})
}

// stopOnShutdown waits for ctx (the process's) to end. A term that runs then ends when run returns (run's context
// ends with ctx); without a term, the election ends now.
func (e *election) stopOnShutdown(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-e.stopped.Done():
		return
	}
	e.mu.Lock()
	e.stopping = true
	wasLeading := e.leading
	if !wasLeading {
		e.endedByUs = true
	}
	e.mu.Unlock()
	if !wasLeading {
		e.lock.allowRelease()
		e.stop()
	}
}

// result is what Run returns once the elector has returned.
func (e *election) result() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case !e.endedByUs:
		// The elector returns on its own only after it failed to renew.
		e.loseLeadership(errors.New("the elector stopped renewing the Lease"))
		return context.Cause(e.lost)
	case e.runErr != nil:
		return e.runErr
	default:
		return nil
	}
}
