// Package app owns the multiproject-controller-manager command: flags to config, serving of health and metrics,
// leader election, and the start of the shared informers and of every tenant's controllers on the leader's context.
package app

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/cli/globalflag"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/term"
	"k8s.io/component-base/version"
	genericcontrollermanager "k8s.io/controller-manager/app"
	controllerhealthz "k8s.io/controller-manager/pkg/healthz"
	"k8s.io/klog/v2"

	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/config"
	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/names"
	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/options"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/registry"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"

	// Registers the client-go (REST client, leader election) and workqueue metrics with the legacy registry. The
	// workqueue provider must be set before any queue is created.
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	_ "k8s.io/component-base/metrics/prometheus/workqueue"
)

func init() {
	// The logging flags validate against these feature gates (contextual logging, JSON options).
	if err := logsapi.AddFeatureGates(utilfeature.DefaultMutableFeatureGate); err != nil {
		panic(err)
	}
}

// NewControllerManagerCommand returns the cobra command of the binary.
func NewControllerManagerCommand() *cobra.Command {
	descriptors := NewControllerDescriptors()
	o := options.NewOptions(catalog{descriptors})
	var printVersion bool

	cmd := &cobra.Command{
		Use: names.ComponentName,
		Long: `multiproject-controller-manager runs, for every tenant of a shared cluster (a cluster-scoped
ProviderConfig), that tenant's own controllers on filtered views of one shared informer cache:
neg (GCE network endpoint groups), namespace-project (Rancher project assignment) and
ingress-tunnel (Pangolin resources for Ingresses). It runs under leader election.`,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			// Deprecation warnings of the API server are for humans at a terminal, not for a controller's log.
			rest.SetDefaultWarningHandler(rest.NoWarnings{})
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if printVersion {
				// The version is stamped by the Makefile's ldflags into component-base's version package.
				fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", names.ComponentName, version.Get())
				return nil
			}
			if err := logsapi.ValidateAndApply(o.Logs, utilfeature.DefaultFeatureGate); err != nil {
				return err
			}
			cliflag.PrintFlags(cmd.Flags())

			c, err := o.Config()
			if err != nil {
				return err
			}
			o.Metrics.Apply()
			return Run(genericapiserver.SetupSignalContext(), c.Complete(), descriptors)
		},
		Args: func(cmd *cobra.Command, args []string) error {
			for _, arg := range args {
				if len(arg) > 0 {
					return fmt.Errorf("%q does not take any arguments, got %q", cmd.CommandPath(), args)
				}
			}
			return nil
		},
	}

	fss := o.Flags()
	fss.FlagSet("global").BoolVar(&printVersion, "version", false, "Print version information and quit.")
	globalflag.AddGlobalFlags(fss.FlagSet("global"), cmd.Name(), logs.SkipLoggingConfigurationFlags())
	for _, f := range fss.FlagSets {
		cmd.Flags().AddFlagSet(f)
	}
	cols, _, _ := term.TerminalSize(cmd.OutOrStdout())
	cliflag.SetUsageAndHelpFunc(cmd, fss, cols)
	return cmd
}

// processState is what the health endpoints report about the run.
type processState struct {
	// leading is true while this process holds the lease (always true without leader election).
	leading atomic.Bool
	// synced is true once the shared informer caches have synced in the current term.
	synced atomic.Bool
}

// Run serves health and metrics and runs the controllers, under leader election unless it is disabled. It returns
// when ctx ends (nil) or when something fatal happens: the lease is lost, the caches do not sync, serving fails.
func Run(ctx context.Context, c config.CompletedConfig, descriptors *registry.Registry[tenant.Factory]) error {
	logger := klog.FromContext(ctx)
	logger.Info("Starting", "component", names.ComponentName, "version", version.Get().String())

	c.EventBroadcaster.StartStructuredLogging(3)
	c.EventBroadcaster.StartRecordingToSink(c.EventSink)
	defer c.EventBroadcaster.Shutdown()

	enabled := descriptors.Enabled(c.Controllers)
	enabledNames := make([]string, 0, len(enabled))
	for _, d := range enabled {
		enabledNames = append(enabledNames, d.Name)
	}
	logger.Info("Per-tenant controllers enabled", "controllers", enabledNames)

	state := &processState{}
	var electionChecker *leaderelection.HealthzAdaptor
	checks := []healthz.HealthChecker{}
	if c.LeaderElection.LeaderElect {
		// Fails /healthz when this process believes it leads but has not renewed the lease for 20s past its
		// expiry: a hung leader is restarted by its liveness probe.
		electionChecker = leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
		checks = append(checks, electionChecker)
	} else {
		state.leading.Store(true)
	}
	for _, name := range enabledNames {
		checks = append(checks, controllerhealthz.NamedPingChecker(name))
	}

	if c.SecureServing != nil {
		handler := genericcontrollermanager.BuildHandlerChain(newServingMux(c, controllerhealthz.NewMutableHealthzHandler(checks...), state), &c.Authorization, &c.Authentication)
		stoppedCh, listenerStoppedCh, err := c.SecureServing.Serve(handler, 0, ctx.Done())
		if err != nil {
			return fmt.Errorf("serving: %w", err)
		}
		defer func() { <-listenerStoppedCh; <-stoppedCh }()
	}

	run := func(ctx context.Context) error {
		return runControllers(ctx, c, state)
	}
	if !c.LeaderElection.LeaderElect {
		return run(ctx)
	}
	return leaderElectAndRun(ctx, c, electionChecker, state, run)
}

// newServingMux serves /healthz (liveness: leader election and controllers), /readyz (the process does its job:
// a standby is ready, a leader once its caches synced), /livez, /metrics and, with --profiling, pprof.
func newServingMux(c config.CompletedConfig, healthzHandler http.Handler, state *processState) http.Handler {
	mux := genericcontrollermanager.NewBaseHandler(&c.Debugging, healthzHandler)
	healthz.InstallReadyzHandler(mux, healthz.NamedCheck("informer-sync", func(*http.Request) error {
		if state.leading.Load() && !state.synced.Load() {
			return fmt.Errorf("leading, but the shared informer caches have not synced")
		}
		return nil
	}))
	healthz.InstallLivezHandler(mux, healthz.PingHealthz)
	return mux
}

// runControllers runs on the leader's context: it starts the shared informers once, waits for their caches, then
// runs until ctx ends.
func runControllers(ctx context.Context, c config.CompletedConfig, state *processState) error {
	logger := klog.FromContext(ctx)
	defer state.synced.Store(false)

	set, err := informerset.New(informerset.Config{Client: c.Client, ResyncPeriod: c.ResyncPeriod})
	if err != nil {
		return err
	}
	if err := set.Start(ctx); err != nil {
		return err
	}
	if err := set.WaitForCacheSync(ctx, c.CacheSyncTimeout); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	state.synced.Store(true)
	logger.Info("Shared informer caches synced")

	<-ctx.Done()
	logger.Info("Stopping controllers")
	return nil
}
