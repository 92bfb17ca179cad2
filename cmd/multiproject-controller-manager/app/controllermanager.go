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
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/util/wait"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/flagz"
	"k8s.io/apiserver/pkg/server/healthz"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/rest"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/cli/globalflag"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/term"
	"k8s.io/component-base/version"
	"k8s.io/component-base/version/verflag"
	genericcontrollermanager "k8s.io/controller-manager/app"
	controllerhealthz "k8s.io/controller-manager/pkg/healthz"
	"k8s.io/klog/v2"

	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/config"
	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/names"
	"github.com/multiproject/multiproject-controller-manager/pkg/apibudget"
	"github.com/multiproject/multiproject-controller-manager/pkg/claims"
	"github.com/multiproject/multiproject-controller-manager/pkg/clusterid"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/providerconfig"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/registry"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/leadership"
	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
	"github.com/multiproject/multiproject-controller-manager/pkg/sharding"
	"github.com/multiproject/multiproject-controller-manager/pkg/sharding/sharder"

	// Registers the client-go (REST client, leader election) metrics with the legacy registry. The workqueue
	// metrics provider is pkg/metrics/workqueue, which pkg/metrics imports.
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
)

func init() {
	// The logging flags validate against these feature gates (contextual logging, JSON options).
	if err := logsapi.AddFeatureGates(utilfeature.DefaultMutableFeatureGate); err != nil {
		panic(err)
	}
	// The gates are Kubernetes' own, versioned by Kubernetes' releases. k8s.io/apiserver sets the gate's emulation
	// version from this binary's version, which is ours (v0.x), not Kubernetes': at "0.1" every gate would be
	// PreAlpha, so --feature-gates would refuse them all and the libraries' beta and GA features would be off.
	// Evaluate them at the Kubernetes release the libraries come from, as an unstamped build did.
	if err := utilfeature.DefaultMutableFeatureGate.SetEmulationVersion(utilversion.MustParse(version.DefaultKubeBinaryVersion)); err != nil {
		panic(err)
	}
}

// NewControllerManagerCommand returns the cobra command of the binary.
func NewControllerManagerCommand() *cobra.Command {
	descriptors := NewControllerDescriptors()
	o := NewOptions(descriptors)

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
			// The version and the program name are stamped into component-base's version and verflag packages by
			// hack/version.sh's ldflags, which the Makefile and the Dockerfile both use.
			verflag.PrintAndExitIfRequested()
			if err := logsapi.ValidateAndApply(o.Logs, o.FeatureGate); err != nil {
				return err
			}
			cliflag.PrintFlags(cmd.Flags())

			c, err := o.Config()
			if err != nil {
				return err
			}
			o.ApplyMetrics()
			// kubernetes_feature_enabled, one series per known gate, as kube-controller-manager exports.
			o.FeatureGate.AddMetrics()
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
	o.Flagz = flagz.NamedFlagSetsReader{FlagSets: fss}
	verflag.AddFlags(fss.FlagSet("global"))
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
// A lost lease returns at once (an error wrapping leadership.ErrLost): Run waits neither for the controllers,
// whose context is cancelled, nor for the secure server, so that the process exits while another replica may
// already be acting.
func Run(ctx context.Context, c config.CompletedConfig, descriptors *registry.Descriptors) (err error) {
	logger := klog.FromContext(ctx)
	logger.Info("Starting", "component", names.ComponentName, "version", version.Get().String())
	metrics.Register()
	apibudget.Register()

	c.EventBroadcaster.StartStructuredLogging(3)
	c.EventBroadcaster.StartRecordingToSink(c.EventSink)
	defer c.EventBroadcaster.Shutdown()

	enabledNames := reportEnabled(ctx, c.Controllers, descriptors)

	state := &processState{}
	replica, err := NewReplica(c)
	if err != nil {
		return err
	}
	if replica.Shard() != "" {
		// A sharded replica's series (its drains, its selector; the sharder's, which any replica of the group may
		// run); an unsharded one exports none of them.
		sharding.Register()
		sharder.Register()
	}
	var electionHealth *leadership.Health
	checks := []healthz.HealthChecker{}
	if c.LeaderElection.LeaderElect {
		// Fails /healthz once the lease is lost, and while this process leads but has not renewed the lease within
		// the renew deadline: a leader that hangs instead of exiting is restarted by its liveness probe.
		electionHealth = newLeaderElectionHealth(c)
		checks = append(checks, electionHealth)
	} else {
		state.leading.Store(true)
	}
	if lease := replica.Lease(); lease != nil {
		// Fails once the shard Lease is lost, and while it goes unrenewed past the renew deadline.
		checks = append(checks, lease)
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
			if !errors.Is(err, leadership.ErrLost) && !errors.Is(err, sharding.ErrShardLeaseLost) {
				<-listenerStoppedCh
				<-stoppedCh
			}
		}()
	}

	if replica.Shard() != "" {
		return runSharded(ctx, c, replica, descriptors, state, electionHealth)
	}
	run := func(ctx context.Context) error {
		return runControllers(ctx, c, replica, descriptors, state)
	}
	if !c.LeaderElection.LeaderElect {
		return run(ctx)
	}
	return leaderElectAndRun(ctx, c, electionHealth, state, run)
}

// reportEnabled logs which per-tenant controllers --controllers (canonical, in controllers) enables and exports how
// many on multiproject_controllers_enabled. None keeps kube-controller-manager's meaning, but is said at Warning level:
// the process would otherwise lead and pass its probes while no tenant's controllers run.
func reportEnabled(ctx context.Context, controllers []string, descriptors *registry.Descriptors) []string {
	enabled := descriptors.Enabled(controllers)
	names := make([]string, 0, len(enabled))
	for _, d := range enabled {
		names = append(names, d.Name)
	}
	metrics.ControllersEnabled.Set(float64(len(names)))
	if len(names) == 0 {
		// klog's Warning: a logr logger has no level between Info and Error.
		klog.Warningf("--controllers=%s enables no per-tenant controller: this process runs no tenant's controllers "+
			"(known: %s; '*' enables all)", strings.Join(controllers, ","), strings.Join(descriptors.KnownControllers(), ", "))
		return names
	}
	klog.FromContext(ctx).Info("Per-tenant controllers enabled", "controllers", names)
	return names
}

// newServingMux serves /healthz (liveness: leader election and controllers), /readyz (the process does its job:
// a standby is ready, a leader once its caches synced), /livez, /metrics, /flagz, /statusz and, with --profiling,
// pprof.
func newServingMux(c config.CompletedConfig, healthzHandler http.Handler, state *processState) http.Handler {
	mux := genericcontrollermanager.NewBaseHandler(&c.Debugging, healthzHandler)
	healthz.InstallReadyzHandler(mux, healthz.NamedCheck("informer-sync", func(*http.Request) error {
		if state.leading.Load() && !state.synced.Load() {
			return fmt.Errorf("leading, but the shared informer caches have not synced")
		}
		return nil
	}))
	healthz.InstallLivezHandler(mux, healthz.PingHealthz)
	installZPages(mux, c.FeatureGate, c.Flagz)
	return mux
}

// runControllers runs on the leader's context, one leadership term: it builds the controller context and starts
// the controllers on it until ctx ends.
func runControllers(ctx context.Context, c config.CompletedConfig, replica *sharding.Replica, descriptors *registry.Descriptors,
	state *processState) error {
	cc, err := CreateControllerContext(ctx, c, replica)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	return StartControllers(ctx, cc, descriptors, &state.synced)
}

// ControllerContext is what the controllers of one leadership term share, as in kube-controller-manager.
type ControllerContext struct {
	// ComponentConfig is the process's completed configuration.
	ComponentConfig config.CompletedConfig
	// Informers holds the shared informers of informerset.Resources (Informers.Set), the Router that splits them
	// between tenants (Informers.Router), and which optional APIs are served (Informers.Served).
	Informers *informerset.Routing
	// Replica is this process's part in dividing the tenants among replicas: with --sharding its ProviderConfigs
	// informer holds only the tenants assigned to its shard, it runs only those it owns, and it gives up those the
	// sharder drains; without, under leader election, it leaves alone the tenants a live shard may still run.
	Replica *sharding.Replica
	// Claims are the hosts and custom NEG names held once across every tenant of the term (and, with --sharding,
	// across replicas through claim records); every tenant's controller joins it, and StartControllers closes it
	// once they have all stopped.
	Claims *claims.Service
}

// CreateControllerContext prepares a term on its context: it resolves the cluster's identity
// (ResolveClusterIdentity) and the replica's shard scope (sharding.Replica.ResolveScope), which both ask the API
// server, then builds the shared informers, the tenancy Router over them (scoped to the replica's shard) and the
// claims. It fails at once when ctx ends. Nothing runs until StartControllers, which closes what it built.
func CreateControllerContext(ctx context.Context, c config.CompletedConfig, replica *sharding.Replica) (*ControllerContext, error) {
	c, err := ResolveClusterIdentity(ctx, c)
	if err != nil {
		return nil, err
	}
	scope := replica.ResolveScope(ctx)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The router reports, on the object, a tenant label it ignores because the object's namespace names another
	// tenant (design invariant 4); the process-wide recorder does not block, so it is safe on the dispatch path.
	informers, err := informerset.NewRouting(informerset.RoutingConfig{
		Config: informerset.Config{Client: c.Client, MultiprojectClient: c.MultiprojectClient, GatewayClient: c.GatewayClient,
			ResyncPeriod:           c.ResyncPeriod,
			ProviderConfigSelector: replica.ProviderConfigSelector(), ClaimsNamespace: c.TenantControllers.ClaimsNamespace,
			Scope: scope},
		LabelKey: c.ProviderConfigLabelKey,
		Recorder: c.EventRecorder,
	})
	if err != nil {
		return nil, err
	}
	return &ControllerContext{ComponentConfig: c, Informers: informers, Replica: replica,
		Claims: newClaims(c, informers, scope)}, nil
}

// newClaims builds the term's claims over the shared informers; with --sharding they hold across replicas through
// the claim records of c.TenantControllers.ClaimsNamespace, and with a shard scope (--sharded-watch) whose selector
// the API server honours, the informers of the objects that publish names read only this replica's namespaces. It
// starts nothing: a registry watches from the first controller that joins it.
func newClaims(c config.CompletedConfig, informers *informerset.Routing, scope *informerset.ShardScope) *claims.Service {
	cfg := claims.ServiceConfig{Informers: informers.Shared}
	if records := informers.Set.Informer(informerset.ClaimRecords); records != nil {
		cfg.Records = &claims.RecordsConfig{Client: c.Client, Namespace: c.TenantControllers.ClaimsNamespace, Informer: records}
		if scope != nil {
			cfg.Records.PartialHoldings = func() bool { return !scope.Ignored() }
		}
	}
	return claims.NewService(cfg)
}

// StartControllers starts the shared informers on ctx, waits for their caches, then builds the ProviderConfig
// controller with the replica's part of the term and runs both, which starts every tenant's enabled controllers,
// until ctx ends. Once every one of them has stopped it closes the claims and the informers of cc (a controller
// context serves one term), and returns what failed, closing included. synced, if not nil, is true from the moment
// the caches have synced until StartControllers returns (for /readyz).
func StartControllers(ctx context.Context, cc *ControllerContext, descriptors *registry.Descriptors, synced *atomic.Bool) (err error) {
	// The claims live as long as the controllers of this term: every one of them has stopped when
	// startControllers returns. Then the tenancy's handlers go from the shared informers.
	defer func() {
		err = errors.Join(err, cc.Claims.Close(), cc.Informers.Close())
	}()
	return startControllers(ctx, cc, descriptors, synced)
}

func startControllers(ctx context.Context, cc *ControllerContext, descriptors *registry.Descriptors, synced *atomic.Bool) error {
	logger := klog.FromContext(ctx)
	c := cc.ComponentConfig
	if err := cc.Informers.Set.Start(ctx); err != nil {
		return err
	}
	if err := cc.Informers.Set.WaitForCacheSync(ctx, c.CacheSyncTimeout); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if synced != nil {
		synced.Store(true)
		defer synced.Store(false)
	}
	logger.Info("Shared informer caches synced")

	pcInformer := cc.Informers.Set.Informer(informerset.ProviderConfigs)
	term := cc.Replica.NewTerm(sharding.TermInformers{ProviderConfigs: pcInformer,
		Namespaces: cc.Informers.Set.Informer(informerset.Namespaces), LabelKey: cc.Informers.Router.LabelKey()})
	_, pcController := providerconfig.NewManagerAndController(managerConfig(cc, descriptors), c.MultiprojectClient,
		pcInformer, c.EventRecorder, ownership(cc.Replica.Shard(), term))

	// An optional API that appears later is routed to the tenants once its informer has synced, and every tenant
	// is looked at again, so that controllers waiting for it start.
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		cc.Informers.RouteOptionals(ctx, func(schema.GroupVersionResource) { pcController.EnqueueAll() })
	})
	if err := term.Start(ctx, &wg, pcController); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	return pcController.Run(ctx, c.ProviderConfigWorkers)
}

// ownership is which tenants the ProviderConfig controller of shard ("" unsharded) runs, heeding the term's parts.
func ownership(shard string, term *sharding.Term) providerconfig.Ownership {
	own := providerconfig.Ownership{Shard: shard}
	// Only set parts: a nil pointer in an interface would be a part that is there.
	if term.Holders != nil {
		own.Holders = term.Holders
	}
	if term.Coverage != nil {
		own.Coverage = term.Coverage
	}
	return own
}

// ResolveClusterIdentity returns c with the cluster's identity (TenantControllers.ClusterUID) filled in, unless it
// is set already: CreateControllerContext's first step, on the term's context, since no tenant may start without
// it (it is in every NEG name and marker). It fails only when ctx ends.
func ResolveClusterIdentity(ctx context.Context, c config.CompletedConfig) (config.CompletedConfig, error) {
	if c.TenantControllers.ClusterUID != "" {
		return c, nil
	}
	uid, err := resolveClusterUID(ctx, c)
	if err != nil {
		return c, err
	}
	return c.WithClusterUID(uid), nil
}

// resolveClusterUID reads (or, the first time, records) the cluster's identity in the cloud (pkg/clusterid), retrying
// with backoff while the API server cannot answer or the ConfigMap is invalid. It fails only when ctx ends.
func resolveClusterUID(ctx context.Context, c config.CompletedConfig) (string, error) {
	logger := klog.FromContext(ctx)
	namespace := c.LeaderElection.ResourceNamespace
	if namespace == "" {
		// A config built without the options' defaults (tests that run the command in process).
		namespace = metav1.NamespaceSystem
	}
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: 30 * time.Second}
	var uid string
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		var err error
		if uid, err = clusterid.Resolve(ctx, c.Client, namespace); err != nil {
			logger.Error(err, "Cannot resolve the cluster's identity; no tenant starts until it is known", "configMap", namespace+"/"+clusterid.ConfigMapName)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return "", err
	}
	logger.Info("Cluster identity", "clusterName", c.TenantControllers.ClusterName, "clusterUID", uid, "configMap", namespace+"/"+clusterid.ConfigMapName)
	return uid, nil
}

// managerConfig tells the ProviderConfig manager where tenants' informers come from and which controllers
// --controllers enables; a tenant that configures a disabled one is told so.
func managerConfig(cc *ControllerContext, descriptors *registry.Descriptors) providerconfig.ManagerConfig {
	c := cc.ComponentConfig
	cfg := providerconfig.ManagerConfig{
		KubeClient:         c.Client,
		MultiprojectClient: c.MultiprojectClient,
		GatewayClient:      c.GatewayClient,
		Router:             cc.Informers.Router,
		Shared:             cc.Informers.Shared,
		Claims:             cc.Claims,
		APIServed:          cc.Informers.Served,
		LabelKey:           c.ProviderConfigLabelKey,
		Options:            c.TenantControllers,
		EventSink:          c.EventSink,
		StopTimeout:        c.ShutdownTimeout,
	}
	if scope := cc.Replica.Scope(); scope != nil {
		cfg.NamespacesRead = scope.ListedCurrent
	}
	enabled := descriptors.Enabled(c.Controllers)
	for _, d := range enabled {
		cfg.Enabled = append(cfg.Enabled, providerconfig.NamedFactory{Name: d.Name, Workers: c.ConcurrentSyncs[d.Name], Factory: d.Factory})
	}
	for _, name := range descriptors.KnownControllers() {
		if d, _ := descriptors.Get(name); !slices.Contains(enabled, d) {
			cfg.Disabled = append(cfg.Disabled, providerconfig.NamedFactory{Name: d.Name, Factory: d.Factory})
		}
	}
	return cfg
}
