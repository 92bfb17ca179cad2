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

// Package app owns the multiproject-controller-manager command: flags to config, serving of health and metrics,
// leader election, and the start of the shared informers and of every tenant's controllers on the leader's context.
package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/cli/globalflag"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/term"
	"k8s.io/component-base/version"
	genericcontrollermanager "k8s.io/controller-manager/app"
	controllerhealthz "k8s.io/controller-manager/pkg/healthz"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	managementinformers "github.com/multiproject/client-go/informers/externalversions/management/v3"
	mpinformers "github.com/multiproject/client-go/informers/externalversions/multiproject/v1alpha1"
	tunnelinformers "github.com/multiproject/client-go/informers/externalversions/tunnel/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/config"
	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/names"
	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/options"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/providerconfig"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/registry"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
	"github.com/multiproject/multiproject-controller-manager/pkg/tenancy"

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
// A lost lease returns at once (an error wrapping errLeaderElectionLost): Run waits neither for the controllers,
// whose context is cancelled, nor for the secure server, so that the process exits while another replica may
// already be acting.
func Run(ctx context.Context, c config.CompletedConfig, descriptors *registry.Registry[tenant.Factory]) (err error) {
	logger := klog.FromContext(ctx)
	logger.Info("Starting", "component", names.ComponentName, "version", version.Get().String())
	metrics.Register()

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
	var electionHealth *leaderElectionHealth
	checks := []healthz.HealthChecker{}
	if c.LeaderElection.LeaderElect {
		// Fails /healthz once the lease is lost, and while this process leads but has not renewed the lease within
		// the renew deadline: a leader that hangs instead of exiting is restarted by its liveness probe.
		electionHealth = newLeaderElectionHealth(clock.RealClock{}, c.LeaderElection.RenewDeadline.Duration)
		checks = append(checks, electionHealth)
	} else {
		state.leading.Store(true)
	}
	for _, name := range enabledNames {
		checks = append(checks, controllerhealthz.NamedPingChecker(name))
	}

	if c.SecureServing != nil {
		handler := genericcontrollermanager.BuildHandlerChain(newServingMux(c, controllerhealthz.NewMutableHealthzHandler(checks...), state), &c.Authorization, &c.Authentication)
		// The server stops when Run returns, whatever ends it; Run waits for that except after a lost lease.
		serveCtx, stopServing := context.WithCancel(ctx)
		stoppedCh, listenerStoppedCh, serveErr := c.SecureServing.Serve(handler, 0, serveCtx.Done())
		if serveErr != nil {
			stopServing()
			return fmt.Errorf("serving: %w", serveErr)
		}
		defer func() {
			stopServing()
			if !errors.Is(err, errLeaderElectionLost) {
				<-listenerStoppedCh
				<-stoppedCh
			}
		}()
	}

	run := func(ctx context.Context) error {
		return runControllers(ctx, c, descriptors, state)
	}
	if !c.LeaderElection.LeaderElect {
		return run(ctx)
	}
	return leaderElectAndRun(ctx, c, electionHealth, state, run)
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
// runs the ProviderConfig controller, which starts every tenant's controllers, until ctx ends.
func runControllers(ctx context.Context, c config.CompletedConfig, descriptors *registry.Registry[tenant.Factory], state *processState) error {
	logger := klog.FromContext(ctx)
	defer state.synced.Store(false)

	set, err := informerset.New(informerset.Config{
		Client:       c.Client,
		ResyncPeriod: c.ResyncPeriod,
		Indexers:     tenancy.Indexers(c.ProviderConfigLabelKey),
	})
	if err != nil {
		return err
	}
	providerConfigs := mpinformers.NewProviderConfigInformer(c.MultiprojectClient, c.ResyncPeriod, cache.Indexers{})
	if err := set.Add(informerset.ProviderConfigs, providerConfigs); err != nil {
		return err
	}
	for gvr, newInformer := range optionalInformers(c) {
		if err := set.AddOptional(gvr, newInformer); err != nil {
			return err
		}
	}
	// The router reports, on the object, a tenant label it ignores because the object's namespace names another
	// tenant (design invariant 4); the process-wide recorder does not block, so it is safe on the dispatch path.
	router, err := tenancy.NewRouterWithOptions(c.ProviderConfigLabelKey, set.Informer(informerset.Namespaces),
		tenancy.RouterOptions{Recorder: c.EventRecorder})
	if err != nil {
		return err
	}
	defer func() { _ = router.Close() }()
	for _, r := range []struct {
		gvr   schema.GroupVersionResource
		scope tenancy.Scope
	}{
		{informerset.Services, tenancy.Namespaced},
		{informerset.EndpointSlices, tenancy.Namespaced},
		{informerset.Ingresses, tenancy.Namespaced},
		{informerset.Nodes, tenancy.ClusterScoped},
	} {
		if err := router.AddResource(r.gvr, set.Informer(r.gvr), r.scope); err != nil {
			return err
		}
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

	apis := newServedAPIs()
	cfg := providerconfig.ManagerConfig{
		KubeClient:         c.Client,
		MultiprojectClient: c.MultiprojectClient,
		Router:             router,
		Shared: func(gvr schema.GroupVersionResource) (cache.SharedIndexInformer, bool) {
			if inf := set.Informer(gvr); inf != nil {
				return inf, true
			}
			if !apis.served(gvr) {
				return nil, false
			}
			inf, _, _ := set.Optional(gvr)
			return inf, inf != nil
		},
		APIServed:   apis.served,
		LabelKey:    c.ProviderConfigLabelKey,
		Options:     c.TenantControllers,
		EventSink:   c.EventSink,
		StopTimeout: c.ShutdownTimeout,
	}
	enabled := sets.New[string]()
	for _, d := range descriptors.Enabled(c.Controllers) {
		enabled.Insert(d.Name)
		cfg.Enabled = append(cfg.Enabled, providerconfig.NamedFactory{Name: d.Name, Workers: c.ConcurrentSyncs[d.Name], Factory: d.Constructor})
	}
	for _, name := range descriptors.KnownControllers() {
		if d, _ := descriptors.Get(name); !enabled.Has(name) {
			cfg.Disabled = append(cfg.Disabled, providerconfig.NamedFactory{Name: d.Name, Factory: d.Constructor})
		}
	}
	_, pcController := providerconfig.NewManagerAndController(cfg, c.MultiprojectClient, providerConfigs, c.EventRecorder)

	// An optional API that appears later is routed to the tenants once its informer has synced, and every tenant
	// is looked at again, so that controllers waiting for it start.
	var wg sync.WaitGroup
	defer wg.Wait()
	for gvr := range optionalInformers(c) {
		wg.Go(func() {
			if err := awaitOptional(ctx, set, router, gvr); err != nil {
				if ctx.Err() == nil {
					logger.Error(err, "Optional API could not be routed to tenants", "resource", gvr.String())
				}
				return
			}
			apis.add(gvr)
			pcController.EnqueueAll()
		})
	}
	return pcController.Run(ctx, c.ProviderConfigWorkers)
}

// optionalInformers builds the informers of CRD-backed APIs. Our own Translation CRD is optional too: a cluster
// without it runs every controller but neg.
func optionalInformers(c config.CompletedConfig) map[schema.GroupVersionResource]informerset.NewInformerFunc {
	client := c.MultiprojectClient
	indexers := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	return map[schema.GroupVersionResource]informerset.NewInformerFunc{
		informerset.Translations: func(resync time.Duration) cache.SharedIndexInformer {
			return mpinformers.NewTranslationInformer(client, metav1.NamespaceAll, resync, indexers)
		},
		informerset.Projects: func(resync time.Duration) cache.SharedIndexInformer {
			return managementinformers.NewProjectInformer(client, metav1.NamespaceAll, resync, indexers)
		},
		informerset.PangolinTunnels: func(resync time.Duration) cache.SharedIndexInformer {
			return tunnelinformers.NewPangolinTunnelInformer(client, metav1.NamespaceAll, resync, indexers)
		},
		informerset.PangolinResources: func(resync time.Duration) cache.SharedIndexInformer {
			return tunnelinformers.NewPangolinResourceInformer(client, metav1.NamespaceAll, resync, indexers)
		},
	}
}

// routedOptionals are the optional resources that tenants own, so they get filtered views; the others (Projects,
// PangolinTunnels) are read through Informers.Shared. Both are written only by the manager, labeled with the tenant
// whose controller wrote them, and that label decides (tenancy.ManagerWritten): a Translation left in a namespace
// that moved to another tenant stays with the tenant whose pusher must delete its NEGs in that tenant's project.
var routedOptionals = map[schema.GroupVersionResource]tenancy.Scope{
	informerset.Translations:      tenancy.ManagerWritten,
	informerset.PangolinResources: tenancy.ManagerWritten,
}

// awaitOptional waits until the optional API is served and its informer synced, then routes it if tenants own it.
func awaitOptional(ctx context.Context, set *informerset.Set, router *tenancy.Router, gvr schema.GroupVersionResource) error {
	_, started, _ := set.Optional(gvr)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-started:
	}
	inf, _, _ := set.Optional(gvr)
	if !cache.WaitForNamedCacheSyncWithContext(ctx, inf.HasSynced) {
		return ctx.Err()
	}
	if scope, routed := routedOptionals[gvr]; routed {
		return router.AddResource(gvr, inf, scope)
	}
	return nil
}

// servedAPIs records the optional APIs whose informers are synced and routed.
type servedAPIs struct {
	mu  sync.RWMutex
	set sets.Set[schema.GroupVersionResource]
}

func newServedAPIs() *servedAPIs { return &servedAPIs{set: sets.New[schema.GroupVersionResource]()} }

func (s *servedAPIs) add(gvr schema.GroupVersionResource) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.set.Insert(gvr)
}

// served is true for the core APIs and for optional ones once added.
func (s *servedAPIs) served(gvr schema.GroupVersionResource) bool {
	switch gvr {
	case informerset.Services, informerset.EndpointSlices, informerset.Nodes, informerset.Namespaces, informerset.Ingresses, informerset.ProviderConfigs:
		return true
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.set.Has(gvr)
}
