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

// Package options owns the command line of multiproject-controller-manager: the defaulted options, their named
// flag sections, their validation and their conversion into a config.Config. As in kube-controller-manager, each
// group of options has a file of its own (flags, validation, what it sets in the config): clients.go (the API
// server clients and their budgets), leaderelection.go, sharding.go (and the process's identity), serving.go and
// tenantcontrollers.go; options.go holds the Options and puts the groups together.
package options

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/server/flagz"
	apiserveroptions "k8s.io/apiserver/pkg/server/options"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	cliflag "k8s.io/component-base/cli/flag"
	componentbaseconfig "k8s.io/component-base/config"
	componentbaseoptions "k8s.io/component-base/config/options"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/metrics"
	cmoptions "k8s.io/controller-manager/options"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/config"
	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/names"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/providerconfig"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

const (
	// DefaultSecurePort serves /healthz, /readyz, /livez, /metrics and pprof over HTTPS.
	DefaultSecurePort = 10270
	// DefaultAppOwnerLabelKey is the Namespace label whose value names the Rancher Project to join.
	DefaultAppOwnerLabelKey = "appOwner"
	// DefaultNEGEndpointBatchPeriod is the ceiling of the neg translator's group commit: a Service's endpoint changes
	// wait at most this long for its write in flight, and only while one is (or the API server pushes back).
	DefaultNEGEndpointBatchPeriod = time.Second
	// DefaultLeaseName is the Lease that leader election holds in kube-system.
	DefaultLeaseName = names.ComponentName
)

// ControllerInfo is what the options need to know of one registered per-tenant controller.
type ControllerInfo struct {
	Name                   string
	DefaultConcurrentSyncs int
}

// ControllerCatalog is the registry as seen by the command line: names, aliases and defaults.
type ControllerCatalog interface {
	KnownControllers() []string
	DisabledByDefault() []string
	Canonicalize(controllers []string) ([]string, error)
	Info() []ControllerInfo
}

// Options holds every flag of the command.
type Options struct {
	Controllers            []string
	ConcurrentSyncs        map[string]*int32
	ProviderConfigWorkers  int32
	ProviderConfigLabelKey string
	ResyncPeriod           metav1.Duration
	ShutdownTimeout        metav1.Duration
	CacheSyncTimeout       metav1.Duration
	ClientConnection       componentbaseconfig.ClientConnectionConfiguration
	LeaderElection         componentbaseconfig.LeaderElectionConfiguration
	// LeaderElectionIdentity names this process in the leader-election Lease; empty means "<host>_<uuid>".
	LeaderElectionIdentity string

	// KubeAPIQPSPerTenant and KubeAPIBurstPerTenant size each tenant's share of the client-side budget; negative
	// means a quarter of ClientConnection's (apibudget.DefaultTenantShare), and a QPS of 0 no per-tenant limit.
	KubeAPIQPSPerTenant   float32
	KubeAPIBurstPerTenant int32

	Debugging      *cmoptions.DebuggingOptions
	SecureServing  *apiserveroptions.SecureServingOptions
	Authentication *apiserveroptions.DelegatingAuthenticationOptions
	Authorization  *apiserveroptions.DelegatingAuthorizationOptions
	Metrics        *metrics.Options
	Logs           *logsapi.LoggingConfiguration

	// FeatureGate is what --feature-gates sets and what the logging options (LoggingAlphaOptions,
	// LoggingBetaOptions, ContextualLogging) and the serving code are checked against: the process-wide gate of
	// k8s.io/apiserver, as in kube-controller-manager. Tests may give a gate of their own.
	FeatureGate featuregate.MutableVersionedFeatureGate

	Master     string
	Kubeconfig string

	// TenantControllers are the settings shared by every tenant's controllers (cluster name, app-owner label,
	// Compute Engine endpoint and rate limit).
	TenantControllers tenant.Options

	// Sharding makes every replica active, each running the tenants of its own shard; ShardGroup names the
	// replicas that share the tenants.
	Sharding   bool
	ShardGroup string
	// ShardedWatch makes a sharded replica's namespaced informers read only its tenants' namespaces, through the API
	// server's shard selectors (KEP-5866, alpha).
	ShardedWatch bool

	// Flagz reads the command's flags for /flagz; the command sets it once its flag sets exist.
	Flagz flagz.Reader

	catalog ControllerCatalog
}

// NewOptions returns the defaulted options for the controllers in catalog.
func NewOptions(catalog ControllerCatalog) *Options {
	o := &Options{
		Controllers:            []string{"*"},
		ConcurrentSyncs:        map[string]*int32{},
		ProviderConfigWorkers:  5,
		ProviderConfigLabelKey: mpv1alpha1.DefaultProviderConfigLabelKey,
		ResyncPeriod:           metav1.Duration{Duration: 10 * time.Minute},
		ShutdownTimeout:        metav1.Duration{Duration: 30 * time.Second},
		CacheSyncTimeout:       metav1.Duration{Duration: 2 * time.Minute},
		ClientConnection: componentbaseconfig.ClientConnectionConfiguration{
			ContentType: "application/vnd.kubernetes.protobuf",
			QPS:         20,
			Burst:       30,
		},
		KubeAPIQPSPerTenant:   -1,
		KubeAPIBurstPerTenant: -1,
		LeaderElection: componentbaseconfig.LeaderElectionConfiguration{
			LeaderElect:       true,
			LeaseDuration:     metav1.Duration{Duration: 15 * time.Second},
			RenewDeadline:     metav1.Duration{Duration: 10 * time.Second},
			RetryPeriod:       metav1.Duration{Duration: 2 * time.Second},
			ResourceLock:      "leases",
			ResourceName:      DefaultLeaseName,
			ResourceNamespace: metav1.NamespaceSystem,
		},
		Debugging:      cmoptions.RecommendedDebuggingOptions(),
		SecureServing:  apiserveroptions.NewSecureServingOptions(),
		Authentication: apiserveroptions.NewDelegatingAuthenticationOptions(),
		Authorization:  apiserveroptions.NewDelegatingAuthorizationOptions(),
		Metrics:        metrics.NewOptions(),
		Logs:           logsapi.NewLoggingConfiguration(),
		FeatureGate:    utilfeature.DefaultMutableFeatureGate,
		TenantControllers: tenant.Options{
			ClusterName:            "default",
			AppOwnerLabelKey:       DefaultAppOwnerLabelKey,
			GCEQPS:                 10,
			NEGGCPeriod:            2 * time.Minute,
			NEGReadinessTimeout:    10 * time.Minute,
			NEGEndpointBatchPeriod: DefaultNEGEndpointBatchPeriod,
			NEGKeys:                negapi.DefaultKeys(),
			GCEBurst:               20,
		},
		ShardGroup: names.ComponentName,
		catalog:    catalog,
	}
	for _, c := range catalog.Info() {
		workers := int32(c.DefaultConcurrentSyncs)
		o.ConcurrentSyncs[c.Name] = &workers
	}
	o.SecureServing.BindPort = DefaultSecurePort
	o.SecureServing.ServerCert.PairName = names.ComponentName
	// Keep the self-signed certificate in memory: the container's root filesystem is read-only.
	o.SecureServing.ServerCert.CertDirectory = ""
	// Serving must work without a kubeconfig for delegated auth (e.g. when run against a local control plane
	// without one): then only the always-allowed health paths answer.
	o.Authentication.RemoteKubeConfigFileOptional = true
	o.Authorization.RemoteKubeConfigFileOptional = true
	return o
}

// Flags returns the flags in named sections, in the order --help prints them.
func (o *Options) Flags() cliflag.NamedFlagSets {
	fss := cliflag.NamedFlagSets{}

	generic := fss.FlagSet("generic")
	generic.StringSliceVar(&o.Controllers, "controllers", o.Controllers, fmt.Sprintf(""+
		"A list of per-tenant controllers to enable. '*' enables all on-by-default controllers, 'foo' enables the "+
		"controller named 'foo', '-foo' disables the controller named 'foo'.\nAll controllers: %s\n"+
		"Disabled-by-default controllers: %s",
		strings.Join(o.catalog.KnownControllers(), ", "), strings.Join(o.catalog.DisabledByDefault(), ", ")))
	generic.Float32Var(&o.ClientConnection.QPS, "kube-api-qps", o.ClientConnection.QPS, "QPS to use while talking with the Kubernetes API server.")
	generic.Int32Var(&o.ClientConnection.Burst, "kube-api-burst", o.ClientConnection.Burst, "Burst to use while talking with the Kubernetes API server.")
	generic.Float32Var(&o.KubeAPIQPSPerTenant, "kube-api-qps-per-tenant", o.KubeAPIQPSPerTenant, "QPS each tenant's controllers may use of --kube-api-qps, so that one tenant's burst of writes leaves the rest to the others. Negative means a quarter of --kube-api-qps; 0 disables the per-tenant limit. At most --kube-api-qps.")
	generic.Int32Var(&o.KubeAPIBurstPerTenant, "kube-api-burst-per-tenant", o.KubeAPIBurstPerTenant, "Burst each tenant's controllers may use of --kube-api-burst. Negative means a quarter of --kube-api-burst, rounded up. At most --kube-api-burst.")
	generic.StringVar(&o.ClientConnection.ContentType, "kube-api-content-type", o.ClientConnection.ContentType, "Content type of requests sent to the API server.")
	generic.DurationVar(&o.ResyncPeriod.Duration, "resync-period", o.ResyncPeriod.Duration, "How often the shared informers resync, re-queueing every object. A converged cluster makes no writes on a resync. 0 disables resync.")
	generic.StringVar(&o.ProviderConfigLabelKey, "provider-config-name-label-key", o.ProviderConfigLabelKey, "Label whose value names the ProviderConfig (tenant) that a namespace and every object in it, or a Node, belongs to. On other namespaced objects it is ignored.")
	generic.DurationVar(&o.CacheSyncTimeout.Duration, "cache-sync-timeout", o.CacheSyncTimeout.Duration, "How long to wait for the shared informer caches to sync after becoming leader before giving up with an error.")
	generic.DurationVar(&o.ShutdownTimeout.Duration, "controller-shutdown-timeout", o.ShutdownTimeout.Duration, "How long to wait on shutdown for controllers to drain their queues before exiting anyway.")
	componentbaseoptions.BindLeaderElectionFlags(&o.LeaderElection, generic)
	o.addLeaderElectionIdentityFlag(generic)
	// Lists the known gates in --help; the alpha logging flags below work once their gate is on.
	o.FeatureGate.AddFlag(generic)
	hideGatesFromHelp(generic)

	o.addShardingFlags(fss.FlagSet("sharding"))

	pcfs := fss.FlagSet("provider-config controller")
	pcfs.Int32Var(&o.ProviderConfigWorkers, "concurrent-provider-config-syncs", o.ProviderConfigWorkers, "Number of ProviderConfigs that are started, stopped or updated concurrently. Larger means a faster start with many tenants, at more load.")
	o.addTenantControllerFlags(fss.FlagSet("tenant controllers"))
	for _, c := range o.catalog.Info() {
		fs := fss.FlagSet(c.Name + " controller")
		fs.Int32Var(o.ConcurrentSyncs[c.Name], "concurrent-"+c.Name+"-syncs", *o.ConcurrentSyncs[c.Name],
			fmt.Sprintf("Number of objects each tenant's %s controller syncs concurrently.", c.Name))
	}
	o.addNEGControllerFlags(fss.FlagSet(names.NEGController + " controller"))

	o.Debugging.AddFlags(fss.FlagSet("debugging"))
	o.SecureServing.AddFlags(fss.FlagSet("secure serving"))
	o.Authentication.AddFlags(fss.FlagSet("authentication"))
	o.Authorization.AddFlags(fss.FlagSet("authorization"))
	o.Metrics.AddFlags(fss.FlagSet("metrics"))
	logsapi.AddFlags(o.Logs, fss.FlagSet("logs"))

	misc := fss.FlagSet("misc")
	misc.StringVar(&o.Master, "master", o.Master, "The address of the Kubernetes API server (overrides any value in kubeconfig).")
	misc.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Path to a kubeconfig file with authorization and API server location. Empty means the in-cluster config of the Pod's ServiceAccount.")
	return fss
}

// ApplyMetrics applies the metrics flags to component-base's process-wide metrics settings. It does what
// metrics.Options.Apply does, except that without --allow-metric-labels or --allow-metric-labels-manifest it leaves
// the allow-list alone: Apply then reads the manifest anyway and logs the error "The manifest file is empty,
// ignoring." on every clean start, an error-level line that means nothing.
func (o *Options) ApplyMetrics() {
	m := o.Metrics
	if len(m.ShowHiddenMetricsForVersion) > 0 {
		metrics.SetShowHidden()
	}
	metrics.SetDisabledMetrics(m.DisabledMetrics)
	switch {
	case len(m.AllowListMapping) > 0:
		metrics.SetLabelAllowList(m.AllowListMapping)
	case m.AllowListMappingManifest != "":
		metrics.SetLabelAllowListFromManifest(m.AllowListMappingManifest)
	}
}

// Validate returns every problem with the options, each naming its flag.
func (o *Options) Validate() error {
	errs := o.validateGeneric()
	errs = append(errs, o.validateTenantControllers()...)
	errs = append(errs, o.validateNEGController()...)
	errs = append(errs, ValidateLeaderElection(&o.LeaderElection)...)
	errs = append(errs, validateLeaderElectionIdentity(o.LeaderElectionIdentity)...)
	errs = append(errs, o.validateSharding()...)
	errs = append(errs, o.Debugging.Validate()...)
	errs = append(errs, o.SecureServing.Validate()...)
	errs = append(errs, o.Authentication.Validate()...)
	errs = append(errs, o.Authorization.Validate()...)
	errs = append(errs, o.Metrics.Validate()...)
	return utilerrors.NewAggregate(errs)
}

// validateGeneric checks the flags of the generic section (leader election aside) and the ProviderConfig
// controller's.
func (o *Options) validateGeneric() []error {
	var errs []error
	if _, err := o.catalog.Canonicalize(o.Controllers); err != nil {
		errs = append(errs, err)
	}
	for name, workers := range o.ConcurrentSyncs {
		if *workers < 1 {
			errs = append(errs, fmt.Errorf("--concurrent-%s-syncs must be at least 1, got %d", name, *workers))
		}
	}
	if o.ProviderConfigWorkers < 1 {
		errs = append(errs, fmt.Errorf("--concurrent-provider-config-syncs must be at least 1, got %d", o.ProviderConfigWorkers))
	}
	errs = append(errs, o.validateClientConnection()...)
	if o.ResyncPeriod.Duration < 0 {
		errs = append(errs, fmt.Errorf("--resync-period must not be negative, got %s", o.ResyncPeriod.Duration))
	}
	if o.CacheSyncTimeout.Duration <= 0 {
		errs = append(errs, fmt.Errorf("--cache-sync-timeout must be positive, got %s", o.CacheSyncTimeout.Duration))
	}
	if o.ShutdownTimeout.Duration < 0 {
		errs = append(errs, fmt.Errorf("--controller-shutdown-timeout must not be negative, got %s", o.ShutdownTimeout.Duration))
	}
	for _, msg := range validation.IsQualifiedName(o.ProviderConfigLabelKey) {
		errs = append(errs, fmt.Errorf("--provider-config-name-label-key %q is not a valid label key: %s", o.ProviderConfigLabelKey, msg))
	}
	return errs
}

// Config validates the options and builds the runtime configuration: clients, serving, event recording.
func (o *Options) Config() (*config.Config, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	controllers, err := o.catalog.Canonicalize(o.Controllers)
	if err != nil {
		return nil, err
	}
	c := &config.Config{
		Controllers:            controllers,
		ConcurrentSyncs:        map[string]int{},
		ProviderConfigWorkers:  int(o.ProviderConfigWorkers),
		ProviderConfigLabelKey: o.ProviderConfigLabelKey,
		ResyncPeriod:           o.ResyncPeriod.Duration,
		ShutdownTimeout:        o.ShutdownTimeout.Duration,
		CacheSyncTimeout:       o.CacheSyncTimeout.Duration,
		LeaderElection:         o.LeaderElection,
		TenantControllers:      o.TenantControllers,
		Flagz:                  o.Flagz,
		FeatureGate:            o.FeatureGate,
	}
	for name, workers := range o.ConcurrentSyncs {
		c.ConcurrentSyncs[name] = int(*workers)
	}
	if err := o.applyClients(c); err != nil {
		return nil, err
	}
	if err := o.applyIdentity(c); err != nil {
		return nil, err
	}
	if err := o.Debugging.ApplyTo(&c.Debugging); err != nil {
		return nil, err
	}
	if err := o.applyServing(c); err != nil {
		return nil, err
	}
	c.EventBroadcaster = record.NewBroadcaster()
	c.EventRecorder = c.EventBroadcaster.NewRecorder(providerconfig.Scheme, corev1.EventSource{Component: names.ComponentName})
	c.EventSink = &typedcorev1.EventSinkImpl{Interface: c.Client.CoreV1().Events("")}
	return c, nil
}
