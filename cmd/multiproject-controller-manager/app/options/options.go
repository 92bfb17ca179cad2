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
// flag sections, their validation and their conversion into a config.Config.
package options

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation"
	apiserveroptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	cliflag "k8s.io/component-base/cli/flag"
	componentbaseconfig "k8s.io/component-base/config"
	componentbaseoptions "k8s.io/component-base/config/options"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/version"
	cmoptions "k8s.io/controller-manager/options"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"

	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/config"
	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/names"
	"github.com/multiproject/multiproject-controller-manager/pkg/apibudget"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/providerconfig"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
)

const (
	// DefaultSecurePort serves /healthz, /readyz, /livez, /metrics and pprof over HTTPS.
	DefaultSecurePort = 10270
	// DefaultAppOwnerLabelKey is the Namespace label whose value names the Rancher Project to join.
	DefaultAppOwnerLabelKey = "appOwner"
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

	Master     string
	Kubeconfig string

	// TenantControllers are the settings shared by every tenant's controllers (cluster name, app-owner label,
	// Compute Engine endpoint and rate limit).
	TenantControllers tenant.Options

	// Sharding makes every replica active, each running the tenants of its own shard; ShardGroup names the
	// replicas that share the tenants.
	Sharding   bool
	ShardGroup string

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
		TenantControllers: tenant.Options{
			ClusterName:      "default",
			AppOwnerLabelKey: DefaultAppOwnerLabelKey,
			GCEQPS:           10,
			NEGGCPeriod:      2 * time.Minute,
			GCEBurst:         20,
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

	shfs := fss.FlagSet("sharding")
	shfs.BoolVar(&o.Sharding, "sharding", o.Sharding, "Divide the tenants among every replica instead of running them all on the leader. Each replica holds a shard Lease <shard-group>-<shard> in --leader-elect-resource-namespace, renewed with the --leader-elect-* timings, and runs the ProviderConfigs labeled multiproject.io/shard=<shard>; the elected replica assigns them. Requires --leader-elect.")
	shfs.StringVar(&o.ShardGroup, "shard-group", o.ShardGroup, "Name of the group of replicas that share the tenants with --sharding: the label multiproject.io/shard-group on their shard Leases. Without --sharding, the elected replica does not start a tenant that a live shard of this group may still run. A DNS label.")

	pcfs := fss.FlagSet("provider-config controller")
	pcfs.Int32Var(&o.ProviderConfigWorkers, "concurrent-provider-config-syncs", o.ProviderConfigWorkers, "Number of ProviderConfigs that are started, stopped or updated concurrently. Larger means a faster start with many tenants, at more load.")
	tcfs := fss.FlagSet("tenant controllers")
	tcfs.StringVar(&o.TenantControllers.ClusterName, "cluster-name", o.TenantControllers.ClusterName, "Name of this Kubernetes cluster, written into the names and descriptions of the cloud resources it creates so that clusters sharing a cloud project never touch each other's resources. A DNS label of at most 20 characters.")
	tcfs.StringVar(&o.TenantControllers.AppOwnerLabelKey, "app-owner-label-key", o.TenantControllers.AppOwnerLabelKey, "Namespace label whose value is the display name of the Rancher Project the namespace joins (namespace-project controller).")
	tcfs.StringVar(&o.TenantControllers.GCEEndpoint, "gce-endpoint", o.TenantControllers.GCEEndpoint, "Base URL of the Compute Engine API, e.g. http://127.0.0.1:8089/compute/v1/ for a fake GCE. Empty means Google's.")
	tcfs.Float32Var(&o.TenantControllers.GCEQPS, "gce-qps", o.TenantControllers.GCEQPS, "Compute Engine calls per second allowed to each tenant (client-side token bucket).")
	tcfs.DurationVar(&o.TenantControllers.NEGGCPeriod, "neg-gc-period", o.TenantControllers.NEGGCPeriod, "How often each tenant's NEGs are swept: a NEG in the tenant's project that carries this cluster's and tenant's ownership marker, but that no Translation claims over two sweeps, is deleted. 0 disables the sweep.")
	tcfs.IntVar(&o.TenantControllers.GCEBurst, "gce-burst", o.TenantControllers.GCEBurst, "Burst of Compute Engine calls allowed to each tenant.")
	for _, c := range o.catalog.Info() {
		fs := fss.FlagSet(c.Name + " controller")
		fs.Int32Var(o.ConcurrentSyncs[c.Name], "concurrent-"+c.Name+"-syncs", *o.ConcurrentSyncs[c.Name],
			fmt.Sprintf("Number of objects each tenant's %s controller syncs concurrently.", c.Name))
	}

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

// Validate returns every problem with the options, each naming its flag.
func (o *Options) Validate() error {
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
	if o.ClientConnection.QPS <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps must be greater than 0, got %v", o.ClientConnection.QPS))
	}
	if o.ClientConnection.Burst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-burst must be at least 1, got %d", o.ClientConnection.Burst))
	}
	if tenantQPS, tenantBurst := o.tenantBudget(); tenantQPS > o.ClientConnection.QPS {
		errs = append(errs, fmt.Errorf("--kube-api-qps-per-tenant (%v) must not exceed --kube-api-qps (%v)", tenantQPS, o.ClientConnection.QPS))
	} else if tenantQPS > 0 && (tenantBurst < 1 || tenantBurst > int(o.ClientConnection.Burst)) {
		errs = append(errs, fmt.Errorf("--kube-api-burst-per-tenant (%d) must be at least 1 and at most --kube-api-burst (%d)", tenantBurst, o.ClientConnection.Burst))
	}
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
	tc := o.TenantControllers
	if msgs := validation.IsDNS1123Label(tc.ClusterName); len(msgs) > 0 || len(tc.ClusterName) > 20 {
		errs = append(errs, fmt.Errorf("--cluster-name %q must be a DNS label of at most 20 characters", tc.ClusterName))
	}
	for _, msg := range validation.IsQualifiedName(tc.AppOwnerLabelKey) {
		errs = append(errs, fmt.Errorf("--app-owner-label-key %q is not a valid label key: %s", tc.AppOwnerLabelKey, msg))
	}
	if tc.GCEEndpoint != "" {
		if u, err := url.Parse(tc.GCEEndpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("--gce-endpoint %q must be an http or https URL", tc.GCEEndpoint))
		}
	}
	if tc.NEGGCPeriod < 0 {
		errs = append(errs, fmt.Errorf("--neg-gc-period must not be negative, got %s", tc.NEGGCPeriod))
	}
	if tc.GCEQPS <= 0 {
		errs = append(errs, fmt.Errorf("--gce-qps must be greater than 0, got %v", tc.GCEQPS))
	}
	if tc.GCEBurst < 1 {
		errs = append(errs, fmt.Errorf("--gce-burst must be at least 1, got %d", tc.GCEBurst))
	}
	errs = append(errs, ValidateLeaderElection(&o.LeaderElection)...)
	if o.Sharding && !o.LeaderElection.LeaderElect {
		errs = append(errs, errors.New("--sharding requires --leader-elect: the elected replica assigns the tenants to shards"))
	}
	// Unsharded, the group still names the shard Leases whose tenants the elected replica leaves alone.
	if msgs := validation.IsDNS1123Label(o.ShardGroup); len(msgs) > 0 || len(o.ShardGroup) > maxShardGroupLength {
		errs = append(errs, fmt.Errorf("--shard-group %q must be a DNS label of at most %d characters", o.ShardGroup, maxShardGroupLength))
	}
	errs = append(errs, o.Debugging.Validate()...)
	errs = append(errs, o.SecureServing.Validate()...)
	errs = append(errs, o.Authentication.Validate()...)
	errs = append(errs, o.Authorization.Validate()...)
	errs = append(errs, o.Metrics.Validate()...)
	return utilerrors.NewAggregate(errs)
}

// tenantBudget returns the per-tenant QPS and burst, the defaults resolved against --kube-api-qps/burst.
func (o *Options) tenantBudget() (float32, int) {
	qps, burst := apibudget.DefaultTenantShare(o.ClientConnection.QPS, int(o.ClientConnection.Burst))
	if o.KubeAPIQPSPerTenant >= 0 {
		qps = o.KubeAPIQPSPerTenant
	}
	if o.KubeAPIBurstPerTenant >= 0 {
		burst = int(o.KubeAPIBurstPerTenant)
	}
	return qps, burst
}

// ValidateLeaderElection checks what client-go's leader elector would otherwise reject with a panic, and names the
// flags involved.
func ValidateLeaderElection(le *componentbaseconfig.LeaderElectionConfiguration) []error {
	if !le.LeaderElect {
		return nil
	}
	var errs []error
	lease, renew, retry := le.LeaseDuration.Duration, le.RenewDeadline.Duration, le.RetryPeriod.Duration
	if lease <= 0 || renew <= 0 || retry <= 0 {
		errs = append(errs, fmt.Errorf("--leader-elect-lease-duration (%s), --leader-elect-renew-deadline (%s) and --leader-elect-retry-period (%s) must all be positive", lease, renew, retry))
	} else {
		if lease <= renew {
			errs = append(errs, fmt.Errorf("--leader-elect-lease-duration (%s) must be greater than --leader-elect-renew-deadline (%s)", lease, renew))
		}
		if float64(renew) <= 1.2*float64(retry) {
			errs = append(errs, fmt.Errorf("--leader-elect-renew-deadline (%s) must be greater than 1.2 × --leader-elect-retry-period (%s)", renew, retry))
		}
	}
	if le.ResourceLock != "leases" {
		errs = append(errs, fmt.Errorf("--leader-elect-resource-lock must be %q, got %q", "leases", le.ResourceLock))
	}
	for _, msg := range validation.IsDNS1123Subdomain(le.ResourceName) {
		errs = append(errs, fmt.Errorf("--leader-elect-resource-name %q: %s", le.ResourceName, msg))
	}
	for _, msg := range validation.IsDNS1123Label(le.ResourceNamespace) {
		errs = append(errs, fmt.Errorf("--leader-elect-resource-namespace %q: %s", le.ResourceNamespace, msg))
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
	kubeconfig, err := clientcmd.BuildConfigFromFlags(o.Master, o.Kubeconfig)
	if err != nil {
		if o.Kubeconfig == "" && o.Master == "" {
			return nil, fmt.Errorf("no --kubeconfig given and not running in a cluster: %w", err)
		}
		return nil, fmt.Errorf("--kubeconfig %q: %w", o.Kubeconfig, err)
	}
	kubeconfig.ContentType = o.ClientConnection.ContentType
	kubeconfig.QPS = o.ClientConnection.QPS
	kubeconfig.Burst = int(o.ClientConnection.Burst)

	// Each of the two shared clients has its own budget, as each had its own token bucket before tenants had
	// shares; every tenant's share is taken from it first. The budget goes on copies of kubeconfig so that the
	// leader-election client, copied from kubeconfig below, keeps a bucket no controller can spend.
	tenantQPS, tenantBurst := o.tenantBudget()
	budget := apibudget.Options{QPS: o.ClientConnection.QPS, Burst: int(o.ClientConnection.Burst), TenantQPS: tenantQPS, TenantBurst: tenantBurst}
	kubeClientConfig := restclient.CopyConfig(kubeconfig)
	kubeClientConfig.RateLimiter = apibudget.New(budget)
	client, err := kubernetes.NewForConfig(restclient.AddUserAgent(kubeClientConfig, names.ComponentName))
	if err != nil {
		return nil, err
	}
	// Custom resources have no protobuf encoding: their clients speak JSON whatever --kube-api-content-type says,
	// as kube-controller-manager's dynamic clients do.
	crdConfig := restclient.CopyConfig(kubeconfig)
	crdConfig.RateLimiter = apibudget.New(budget)
	crdConfig.ContentType = "application/json"
	crdConfig.AcceptContentTypes = "application/json"
	mpClient, err := mpclientset.NewForConfig(restclient.AddUserAgent(crdConfig, names.ComponentName))
	if err != nil {
		return nil, err
	}
	// Leader election gets its own client so that a busy controller cannot starve lease renewal of QPS, and, as in
	// kube-controller-manager, a request timeout of the renew deadline, so one hung call cannot outlive the deadline.
	leaderElectionConfig := restclient.CopyConfig(kubeconfig)
	leaderElectionConfig.Timeout = o.LeaderElection.RenewDeadline.Duration
	leaderElectionClient, err := kubernetes.NewForConfig(restclient.AddUserAgent(leaderElectionConfig, "leader-election"))
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
		Kubeconfig:             kubeconfig,
		Client:                 client,
		MultiprojectClient:     mpClient,
		LeaderElectionClient:   leaderElectionClient,
		TenantControllers:      o.TenantControllers,
	}
	if err := o.applyIdentity(c); err != nil {
		return nil, err
	}
	for name, workers := range o.ConcurrentSyncs {
		c.ConcurrentSyncs[name] = int(*workers)
	}
	if err := o.Debugging.ApplyTo(&c.Debugging); err != nil {
		return nil, err
	}
	if err := o.applyServing(c); err != nil {
		return nil, err
	}
	c.EventBroadcaster = record.NewBroadcaster()
	c.EventRecorder = c.EventBroadcaster.NewRecorder(providerconfig.Scheme, corev1.EventSource{Component: names.ComponentName})
	c.EventSink = &typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")}
	return c, nil
}

// maxShardGroupLength keeps the group a label value with room to spare in the Lease name "<group>-<shard>".
const maxShardGroupLength = 63

// maxShardHostLength is how much of the host name a shard name keeps, before "-" and a 5-character suffix: a
// shard name is a label value of at most 63 characters. A Pod's host name is its name, which fits.
const maxShardHostLength = 57

// applyIdentity names this process: "<host>_<uuid>" in the leader-election Lease, and with --sharding a shard name
// "<host>-<suffix>" that is a label value. Every Compute Engine call carries the name that says which replica made
// it (the shard, or the process), in its User-Agent.
func (o *Options) applyIdentity(c *config.Config) error {
	hostname, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("this process's identity: %w", err)
	}
	c.Identity = Identity(hostname)
	agent := c.Identity
	c.Sharding = config.Sharding{Group: o.ShardGroup}
	if o.Sharding {
		c.Sharding = config.Sharding{Enabled: true, Group: o.ShardGroup, Shard: ShardName(hostname, utilrand.String(5))}
		agent = c.Sharding.Shard
		// Replicas that share the tenants decide who holds a host or NEG name through claim records, beside the
		// shard Leases.
		c.TenantControllers.ClaimsNamespace = o.LeaderElection.ResourceNamespace
	}
	c.TenantControllers.GCEUserAgent = names.ComponentName + "/" + version.Get().GitVersion + " (" + agent + ")"
	return nil
}

// Identity is a process's name in the leader-election Lease: "<host>_<uuid>". The UUID keeps two processes on one
// host from sharing it.
func Identity(hostname string) string { return hostname + "_" + string(uuid.NewUUID()) }

// ShardName makes a shard name from a host name and a random suffix: lower case, at most 63 characters, a label
// value and a DNS label. A restarted process draws a new suffix, so a shard name is never reused.
func ShardName(hostname, suffix string) string {
	host := strings.ToLower(hostname)
	host = strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' {
			return r
		}
		return '-'
	}, host)
	if len(host) > maxShardHostLength {
		host = host[:maxShardHostLength]
	}
	host = strings.Trim(host, "-")
	if host == "" {
		return "shard-" + suffix
	}
	return host + "-" + suffix
}

// applyServing sets up the secure port with authentication and authorization delegated to the API server, as
// kube-controller-manager does: /healthz, /readyz and /livez answer anyone; /metrics and pprof need RBAC.
func (o *Options) applyServing(c *config.Config) error {
	if o.SecureServing.BindPort == 0 {
		return nil
	}
	if err := o.SecureServing.MaybeDefaultWithSelfSignedCerts("localhost", nil, []net.IP{net.ParseIP("127.0.0.1")}); err != nil {
		return fmt.Errorf("self-signed serving certificate: %w", err)
	}
	// Delegated auth talks to the same API server as the controllers unless told otherwise.
	if o.Authentication.RemoteKubeConfigFile == "" {
		o.Authentication.RemoteKubeConfigFile = o.Kubeconfig
	}
	if o.Authorization.RemoteKubeConfigFile == "" {
		o.Authorization.RemoteKubeConfigFile = o.Kubeconfig
	}
	if err := o.SecureServing.ApplyTo(&c.SecureServing); err != nil {
		return fmt.Errorf("secure serving: %w", err)
	}
	if err := o.Authentication.ApplyTo(&c.Authentication, c.SecureServing, nil); err != nil {
		return fmt.Errorf("delegated authentication: %w", err)
	}
	if err := o.Authorization.ApplyTo(&c.Authorization); err != nil {
		return fmt.Errorf("delegated authorization: %w", err)
	}
	if c.SecureServing == nil {
		return errors.New("secure serving: no listener")
	}
	return nil
}
