package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/config"
)

// errLeaderElectionLost makes the process exit non-zero: another replica may already be acting, so this one must
// not go on, and the Deployment restarts it as a standby.
var errLeaderElectionLost = errors.New("leader election lost")

// leaderElectAndRun campaigns for the Lease and calls run on the leader's context. It returns nil after ctx ends
// (a graceful shutdown: run has returned and the Lease is released so a standby takes over at once), run's error if
// run fails (the Lease is released first), or errLeaderElectionLost.
func leaderElectAndRun(ctx context.Context, c config.CompletedConfig, watchdog *leaderelection.HealthzAdaptor, state *processState, run func(context.Context) error) error {
	logger := klog.FromContext(ctx)
	hostname, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("leader election identity: %w", err)
	}
	// The UUID keeps two processes on one host from sharing an identity.
	identity := hostname + "_" + string(uuid.NewUUID())

	lock, err := resourcelock.New(resourcelock.LeasesResourceLock,
		c.LeaderElection.ResourceNamespace, c.LeaderElection.ResourceName,
		c.LeaderElectionClient.CoreV1(), c.LeaderElectionClient.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: identity, EventRecorder: c.EventRecorder})
	if err != nil {
		return fmt.Errorf("leader election lock: %w", err)
	}

	// The election outlives ctx on purpose: on shutdown it is cancelled only after run has returned, because
	// ReleaseOnCancel must not hand the Lease over while our controllers still act.
	electionCtx, cancelElection := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelElection()

	var (
		mu       sync.Mutex
		leading  bool
		stopping bool
		runErr   error
		workDone = make(chan struct{})
	)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		Name:            c.LeaderElection.ResourceName,
		LeaseDuration:   c.LeaderElection.LeaseDuration.Duration,
		RenewDeadline:   c.LeaderElection.RenewDeadline.Duration,
		RetryPeriod:     c.LeaderElection.RetryPeriod.Duration,
		ReleaseOnCancel: true,
		WatchDog:        watchdog,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leaderCtx context.Context) {
				defer close(workDone)
				mu.Lock()
				if stopping {
					mu.Unlock()
					return
				}
				leading = true
				mu.Unlock()

				logger.Info("Started leading", "identity", identity)
				state.leading.Store(true)
				workCtx, cancelWork := context.WithCancel(leaderCtx)
				defer cancelWork()
				stopOnShutdown := context.AfterFunc(ctx, cancelWork)
				defer stopOnShutdown()

				err := run(workCtx)
				if err == nil && ctx.Err() == nil && leaderCtx.Err() == nil {
					err = errors.New("controllers stopped while still leading")
				}
				mu.Lock()
				runErr = err
				mu.Unlock()
				// Nothing the Lease protects runs any more: release it.
				cancelElection()
			},
			OnStoppedLeading: func() {
				state.leading.Store(false)
				logger.Info("Stopped leading", "identity", identity)
			},
			OnNewLeader: func(current string) {
				if current != identity {
					logger.Info("Another replica leads", "leader", current)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}

	go func() {
		select {
		case <-ctx.Done():
		case <-electionCtx.Done():
			return
		}
		mu.Lock()
		stopping = true
		wasLeading := leading
		mu.Unlock()
		if wasLeading {
			<-workDone
		}
		cancelElection()
	}()

	logger.Info("Campaigning for leadership", "lease", c.LeaderElection.ResourceNamespace+"/"+c.LeaderElection.ResourceName, "identity", identity)
	elector.Run(electionCtx)

	mu.Lock()
	defer mu.Unlock()
	switch {
	case runErr != nil:
		return runErr
	case ctx.Err() != nil:
		return nil
	default:
		return errLeaderElectionLost
	}
}
