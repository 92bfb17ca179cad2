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

package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/config"
	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/options"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/providerconfig"
	"github.com/multiproject/multiproject-controller-manager/pkg/sharding"
)

// leaderElectionRole is the Role (and RoleBinding) of manifests/rbac/leader-election.yaml that grants the Lease.
const leaderElectionRole = "multiproject-controller-manager:leader-election"

// errLeaderElectionLost makes the process exit non-zero: another replica may already be acting, so this one must
// not go on, and the Deployment restarts it as a standby.
var errLeaderElectionLost = errors.New("leader election lost")

// leaderElectAndRun campaigns for the Lease and calls run on the leader's context. It returns nil after ctx ends
// (a graceful shutdown: run has returned and the Lease is released so a standby takes over at once), run's error if
// run fails (the Lease is released first), or an error wrapping errLeaderElectionLost.
//
// Leadership is lost when client-go's elector stops renewing on its own, or when no renewal has succeeded for the
// renew deadline plus one retry period. That is when the elector gives up too (its next round of attempts starts a
// retry period after the last success and has the renew deadline to succeed), but before it returns it tries to
// release the Lease, which takes up to another renew deadline against an API server that hangs; the watchdog does
// not wait for that. Either way leaderElectAndRun returns at once: it cancels run's context and waits neither for
// run nor for the elector. From then on the lock refuses every write, so this process neither renews nor releases
// the Lease again; a standby takes over when the Lease expires, as after a kill.
func leaderElectAndRun(ctx context.Context, c config.CompletedConfig, health *leaderElectionHealth, state *processState, run func(context.Context) error) error {
	e, err := newElection(ctx, c, health, state)
	if err != nil {
		return err
	}
	defer e.stop()
	defer e.cancelLost(nil)

	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            e.lock,
		Name:            c.LeaderElection.ResourceName,
		LeaseDuration:   c.LeaderElection.LeaseDuration.Duration,
		RenewDeadline:   c.LeaderElection.RenewDeadline.Duration,
		RetryPeriod:     c.LeaderElection.RetryPeriod.Duration,
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

	e.logger.Info("Campaigning for leadership", "lease", c.LeaderElection.ResourceNamespace+"/"+c.LeaderElection.ResourceName, "identity", e.identity)
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
	logger   klog.Logger
	identity string
	lock     *electionLock
	health   *leaderElectionHealth
	state    *processState
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

func newElection(ctx context.Context, c config.CompletedConfig, health *leaderElectionHealth, state *processState) (*election, error) {
	identity := c.Identity
	if identity == "" {
		hostname, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("leader election identity: %w", err)
		}
		identity = options.Identity(hostname)
	}
	inner, err := resourcelock.New(resourcelock.LeasesResourceLock,
		c.LeaderElection.ResourceNamespace, c.LeaderElection.ResourceName,
		c.LeaderElectionClient.CoreV1(), c.LeaderElectionClient.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: identity, EventRecorder: c.EventRecorder})
	if err != nil {
		return nil, fmt.Errorf("leader election lock: %w", err)
	}
	lock := &electionLock{Interface: inner, renewed: health.renewed,
		// A starting kube-apiserver refuses requests until its RBAC authorizer has loaded the roles, and a
		// leader's renewals may be refused so for a moment: only refusals for a whole renew deadline count.
		refusals: &sharding.RefusalTracker{Clock: health.clock, Limit: c.LeaderElection.RenewDeadline.Duration},
	}
	e := &election{
		logger:     klog.FromContext(ctx),
		identity:   identity,
		lock:       lock,
		health:     health,
		state:      state,
		renewLimit: c.LeaderElection.RenewDeadline.Duration + c.LeaderElection.RetryPeriod.Duration,
	}
	e.stopped, e.stop = context.WithCancel(context.WithoutCancel(ctx))
	e.lost, e.cancelLost = context.WithCancelCause(context.Background())
	lock.refused = func(verb string, err error) {
		e.loseLeadership(sharding.LeaseRefusedError(verb, c.LeaderElection.ResourceNamespace, c.LeaderElection.ResourceName,
			leaderElectionRole, err))
	}
	return e, nil
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

	e.logger.Info("Started leading", "identity", e.identity)
	e.state.leading.Store(true)
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
	if errors.Is(err, providerconfig.ErrControllersStillRunning) {
		// A tenant's controller outlived the stop timeout and acts until the process exits: the Lease must expire
		// rather than be handed over.
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
	e.state.leading.Store(false)
	e.health.setLeading(false)
	e.logger.Info("Stopped leading", "identity", e.identity)
}

func (e *election) newLeader(current string) {
	if current != e.identity {
		e.logger.Info("Another replica leads", "leader", current)
	}
}

// loseLeadership stops every write to the Lease, fails the health check and ends run's context, once.
func (e *election) loseLeadership(reason error) {
	e.lostOnce.Do(func() {
		e.lock.refuseWrites()
		e.health.setLost()
		e.state.leading.Store(false)
		e.logger.Error(reason, "Leader election lost; stopping at once", "identity", e.identity)
		e.cancelLost(fmt.Errorf("%w: %w", errLeaderElectionLost, reason))
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

// result is what leaderElectAndRun returns once the elector has returned.
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

// electionLock is the Lease lock as client-go's elector sees it. It tells health about every successful write that
// names this process (the acquisition and each renewal), and it refuses the writes this process must not make: any
// write once leadership is lost, and a release (a write naming no holder) before run has returned. The elector
// releases the Lease both on cancel and after it fails to renew, and in the second case it does so before it
// cancels the leader's context; without this guard a standby could act while our controllers still run.
//
// It also watches for a Lease that RBAC does not grant: client-go's elector logs a refused get or create and retries
// forever, so a manager whose Role does not follow --leader-elect-resource-name or --leader-elect-resource-namespace
// would wait as a standby for good. Once refusals last the renew deadline, refused ends the election with an error
// naming the Role to fix (sharding.LeaseRefusedError).
type electionLock struct {
	resourcelock.Interface
	renewed func()

	// refusals and refused are optional (tests build the lock without them).
	refusals *sharding.RefusalTracker
	refused  func(verb string, err error)

	lost           atomic.Bool
	releaseAllowed atomic.Bool
}

var errLeaseWriteRefused = errors.New("this process no longer writes the Lease")

func (l *electionLock) refuseWrites() { l.lost.Store(true) }
func (l *electionLock) allowRelease() { l.releaseAllowed.Store(true) }

func (l *electionLock) mayWrite(record resourcelock.LeaderElectionRecord) error {
	switch {
	case l.lost.Load():
		return fmt.Errorf("%w: leadership was lost", errLeaseWriteRefused)
	case record.HolderIdentity != l.Identity() && !l.releaseAllowed.Load():
		return fmt.Errorf("%w: not releasing it while the controllers may still run", errLeaseWriteRefused)
	}
	return nil
}

// observe tells refused about a Lease that RBAC keeps refusing.
func (l *electionLock) observe(verb string, err error) {
	if l.refusals != nil && l.refusals.Observe(err) && l.refused != nil {
		l.refused(verb, err)
	}
}

func (l *electionLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	record, raw, err := l.Interface.Get(ctx)
	l.observe("get", err)
	return record, raw, err
}

func (l *electionLock) Create(ctx context.Context, record resourcelock.LeaderElectionRecord) error {
	if err := l.mayWrite(record); err != nil {
		return err
	}
	err := l.Interface.Create(ctx, record)
	l.observe("create", err)
	if err == nil && record.HolderIdentity == l.Identity() {
		l.renewed()
	}
	return err
}

func (l *electionLock) Update(ctx context.Context, record resourcelock.LeaderElectionRecord) error {
	if err := l.mayWrite(record); err != nil {
		return err
	}
	err := l.Interface.Update(ctx, record)
	l.observe("update", err)
	if err == nil && record.HolderIdentity == l.Identity() {
		l.renewed()
	}
	return err
}

// leaderElectionHealth is the "leader-election" check of /healthz. It fails once this process has lost its
// leadership (until it exits), and while it leads but last renewed the Lease longer ago than the renew deadline:
// client-go's elector gives up one retry period later, so a liveness probe sees an API server (or an elector) that
// hangs before the process exits, and restarts a process that fails to exit. The renewals are tracked as the shard
// Lease's are.
type leaderElectionHealth struct {
	clock    clock.Clock
	renewals *sharding.RenewalTracker
}

func newLeaderElectionHealth(clk clock.Clock, renewDeadline time.Duration) *leaderElectionHealth {
	return &leaderElectionHealth{clock: clk, renewals: sharding.NewRenewalTracker(clk, renewDeadline)}
}

func (h *leaderElectionHealth) Name() string { return "leader-election" }

func (h *leaderElectionHealth) Check(*http.Request) error {
	err := h.renewals.Check()
	switch {
	case errors.Is(err, sharding.ErrLeaseLost):
		return errors.New("this process lost its leadership and is exiting")
	case err != nil:
		return fmt.Errorf("leading, but %w", err)
	}
	return nil
}

// renewed records a successful acquisition or renewal of the Lease, now.
func (h *leaderElectionHealth) renewed() { h.renewals.Renewed(h.clock.Now()) }

func (h *leaderElectionHealth) setLeading(leading bool) { h.renewals.SetHeld(leading) }

func (h *leaderElectionHealth) setLost() { h.renewals.SetLost() }
