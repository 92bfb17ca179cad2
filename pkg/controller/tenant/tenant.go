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

// Package tenant defines what a per-tenant controller is to the manager that runs it: the Controller it returns,
// the Context it is built from and the Factory that builds it. Controllers (neg, namespace-project,
// ingress-tunnel) provide a Factory; the manager owns everything else: informers, event broadcasters, the
// ProviderConfig's status and the tenant's lifecycle.
package tenant

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	gatewayclientset "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"

	"github.com/multiproject/multiproject-controller-manager/pkg/claims"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
	"github.com/multiproject/multiproject-controller-manager/pkg/tenancy"
	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
)

// Controller is one per-tenant controller instance.
type Controller interface {
	// Run blocks until ctx ends, then returns only after every goroutine it started is gone. Workers drain the
	// item they are on; queued items are dropped (the next leader or start lists them again).
	Run(ctx context.Context)
}

// Starter is a Controller that holds no goroutine while it waits for work: Start returns at once and calls done
// exactly once, when Run would have returned. The manager starts a Starter instead of running it on a goroutine of
// its own, so an idle tenant costs no goroutine. Run is then RunStarter(ctx, c).
type Starter interface {
	Controller
	Start(ctx context.Context, done func())
}

// RunStarter is the blocking form of Start: it returns once the controller has stopped.
func RunStarter(ctx context.Context, s Starter) {
	stopped := make(chan struct{})
	s.Start(ctx, func() { close(stopped) })
	<-stopped
}

// Informers hands a tenant's controller the informers it may use. Handlers added through either method are
// removed by the manager when the controller stops, so a controller cannot leak them.
type Informers interface {
	// Informer returns the tenant's filtered view of a shared informer: only objects owned by the tenant (its
	// label, or its namespace's label; unlabeled Nodes are shared). It offers what a client-go informer does
	// (handlers, indexer for listers, HasSynced), so a controller written against client-go runs on it unchanged.
	Informer(resource schema.GroupVersionResource) (cache.SharedIndexInformer, error)
	// Shared returns the unfiltered shared informer of a resource the tenant reads but does not own, such as
	// Rancher Projects in the tenant's cluster namespace or PangolinTunnels in its tunnel namespace. The
	// controller must filter what it handles. Run on it starts nothing. The shared informer of a resource that
	// tenants watch by key (Projects, PangolinTunnels) takes no handler: watch it through Context.Interest.
	Shared(resource schema.GroupVersionResource) (cache.SharedIndexInformer, error)
}

// InterestRegistrar is implemented by Informers that hand out Interests themselves; the manager's do, and close
// them when the controller stops.
type InterestRegistrar interface {
	Interest(resource schema.GroupVersionResource) (*tenancy.Interest, error)
}

// ConditionReporter sets the status of the controller's own condition on the tenant's ProviderConfig. The manager
// writes the status, only when it changes; reporting the same thing twice costs nothing.
type ConditionReporter interface {
	Report(status metav1.ConditionStatus, reason, message string)
}

// Options are process-wide settings of the per-tenant controllers, set by command-line flags.
type Options struct {
	// ClusterName identifies this Kubernetes cluster in the names and descriptions of cloud resources, so that two
	// clusters sharing a GCP project never touch each other's NEGs (--cluster-name).
	ClusterName string
	// ClusterUID is the identity of this cluster that two clusters never share (pkg/clusterid: the kube-system
	// Namespace's UID unless an operator recorded another); it enters every NEG name and ownership marker, and the
	// garbage sweep touches only NEGs that carry it. Resolved at start, not a flag.
	ClusterUID string
	// AppOwnerLabelKey is the Namespace label whose value names a Rancher Project (--app-owner-label-key).
	AppOwnerLabelKey string
	// GCEEndpoint overrides the Compute Engine API base URL, for tests and local runs (--gce-endpoint).
	GCEEndpoint string
	// GCEQPS and GCEBurst limit each tenant's Compute Engine calls (--gce-qps, --gce-burst).
	GCEQPS   float32
	GCEBurst int
	// NEGGCPeriod is how often each tenant's NEG pusher sweeps the tenant's project for NEGs that carry this
	// cluster's and tenant's ownership marker but that no Translation claims (--neg-gc-period); 0 disables it.
	NEGGCPeriod time.Duration
	// NEGReadinessTimeout is how long after a Pod's creation the NEG readiness reflector sets the condition
	// cloud.google.com/load-balancer-neg-ready True anyway (reason LoadBalancerNegTimeout), so that a broken health
	// check cannot block a rollout forever (--neg-readiness-timeout); 0 disables it.
	NEGReadinessTimeout time.Duration
	// NEGKeys are the names the neg controller reads and writes (--neg-annotation-key, --neg-status-annotation-key,
	// --neg-readiness-gate, --neg-previous-annotation-key), whole, as the flags set them: a tenant's translator and
	// readiness reflector read this one value. An empty key means ingress-gce's (negapi.Keys.OrDefaults).
	NEGKeys negapi.Keys
	// NEGEndpointBatchPeriod is the longest the NEG translator holds a Service's endpoint changes for the write in
	// flight to end, so that they make the next write together (--neg-endpoint-batch-period); 0 holds nothing.
	NEGEndpointBatchPeriod time.Duration
	// GCEUserAgent identifies this process in every Compute Engine call's User-Agent, so GCE audit logs (and the
	// fake GCE in tests) can tell which replica made a call.
	GCEUserAgent string
	// ClaimsNamespace, with --sharding, holds the claim records that make a host or custom NEG name held once
	// across the replicas (the --leader-elect-resource-namespace). Empty: one process runs every tenant, and
	// decides the claims in memory.
	ClaimsNamespace string
}

// Context is what a per-tenant controller is built from.
type Context struct {
	// Controller is the controller's --controllers name; it labels the controller's sync metrics and queues.
	Controller string
	// ProviderConfig is the tenant, as it was when the controller was built. It must not be mutated. A spec
	// change of the controller's section restarts the controller with a new Context.
	ProviderConfig *mpv1alpha1.ProviderConfig
	// ProviderConfigLabelKey is the label that assigns objects to tenants; objects a controller creates carry it
	// with the ProviderConfig's name as value.
	ProviderConfigLabelKey string
	KubeClient             kubernetes.Interface
	MultiprojectClient     mpclientset.Interface
	Informers              Informers
	// EventRecorder records Events on users' objects, with the controller as their source, through the manager's
	// one Event broadcaster.
	EventRecorder record.EventRecorder
	// Condition reports the controller's condition on the ProviderConfig.
	Condition ConditionReporter
	// Claims are the names published once across every tenant of the run (hosts, custom NEG names), which the
	// command builds with the controller context; a controller joins it for the kinds of name it claims.
	Claims  *claims.Service
	Options Options
	// Workers is the controller's --concurrent-<name>-syncs.
	Workers int
	// CloudResourcesAbandoned reports, at the time of the call, whether the operator has abandoned the tenant's
	// cloud resources for the ProviderConfig's current generation (annotation
	// multiproject.io/abandon-cloud-resources=true, recorded in status.abandon at that generation): what a
	// controller cannot remove (a NEG in a project it can no longer reach) may then be given up. An annotation
	// recorded at an earlier generation covers nothing of this one. nil means never.
	CloudResourcesAbandoned func() bool
	// Stop, if set, fires when the controller's run is over, right after its context is cancelled: the controller
	// registers what must happen then with it (RunOptions.Stop, AfterStop) rather than with context.AfterFunc on
	// its context, which costs a map per context. nil: the context's end is the signal.
	Stop *worker.StopSignal
	// NamespacesRead reports whether the namespaced informers hold everything of every namespace they read (a shard
	// selector that newly holds a namespace is read by each informer in turn): nil when they read every namespace
	// from the start. A controller that acts on the absence of an object (no Service selects this Pod) waits for it.
	NamespacesRead func() bool
	// DrainGrace is how long the controller may go on finishing work after its context ends (a pusher's calls
	// under way). It is shorter than the manager's stop timeout, so a controller that honours it has returned
	// before the manager gives up waiting; zero means a default of the controller's choosing.
	DrainGrace time.Duration

	// GatewayClient reads Gateway API objects and writes their status (ingress-tunnel); nil when the process has
	// none.
	GatewayClient gatewayclientset.Interface
}

// Name returns the tenant's name.
func (c *Context) Name() string { return c.ProviderConfig.Name }

// Interest returns the controller's interest in the shared informer of a resource that tenants watch by key
// (Rancher Projects, PangolinTunnels; informerset.Resource.InterestKeys says how objects are keyed): an informer
// that reads as the shared one and whose handlers get only the events of the objects filed under the keys the
// controller adds to it. However many tenants watch, the shared informer carries one handler (a tenancy.Fanout),
// and an event costs O(the tenants interested in it), not O(tenants). The controller closes the Interest when it
// stops; the manager's Informers close it too.
func (c *Context) Interest(resource schema.GroupVersionResource) (*tenancy.Interest, error) {
	return InterestOf(c.Informers, resource)
}

// InterestOf is Context.Interest for a controller that takes its Interest when it starts and keeps only its
// Informers from the Context, not the whole Context.
func InterestOf(informers Informers, resource schema.GroupVersionResource) (*tenancy.Interest, error) {
	if r, ok := informers.(InterestRegistrar); ok {
		return r.Interest(resource)
	}
	// Informers without Interests of their own (a test's plain informers): the shared informer's Fanout, or one
	// for this Interest alone.
	inf, err := informers.Shared(resource)
	if err != nil {
		return nil, err
	}
	if f, ok := inf.(*tenancy.Fanout); ok {
		return f.Interest()
	}
	r, ok := informerset.LookupResource(resource)
	if !ok || r.InterestKeys == nil {
		return nil, fmt.Errorf("%s is not watched by key", resource)
	}
	return tenancy.NewInterest(inf, r.InterestKeys)
}

// Constructor builds a controller for one tenant. Informer handlers may be added here or in Run.
type Constructor func(ctx context.Context, c *Context) (Controller, error)

// Factory is what the manager knows of one kind of per-tenant controller.
type Factory struct {
	// ConditionType is the ProviderConfig status condition that reports this controller, e.g. NEGReady.
	ConditionType string
	// Section returns the part of the spec the controller is built from, or nil when the tenant does not configure
	// it (the controller is then not run); SectionOf builds it. When the section changes (semantic equality), the
	// manager restarts the controller.
	Section func(spec *mpv1alpha1.ProviderConfigSpec) any
	// RequiredAPIs returns the resources the controller cannot run without for a tenant's spec, typically CRDs of
	// another product (Rancher's Projects, unless the tenant reads them from Rancher's management cluster); nil
	// means none. Until the cluster serves all of them the manager does not build the controller and reports
	// APINotServed in its condition; it starts the controller as soon as they appear. APIs builds a constant one.
	RequiredAPIs func(spec *mpv1alpha1.ProviderConfigSpec) []schema.GroupVersionResource
	// OptionalAPIs are resources the controller reads when the cluster serves all of them as it is built, and runs
	// without otherwise (Gateway API for ingress-tunnel). The manager restarts a controller built before they were
	// all served once they are, so CRDs installed later are read without a restart of the process.
	OptionalAPIs []schema.GroupVersionResource
	// New builds the controller.
	New Constructor
	// Pending, if set, reports what of the tenant is left outside the cluster for the controller's cleanup to
	// remove (e.g. Translations whose NEGs are not deleted yet); "" means nothing. It is given the Context of the
	// running cleanup, or a Context built only to look (no controller running) when cleanup cannot run.
	Pending func(ctx context.Context, c *Context) (string, error)
	// Cleanup, if set, builds the controller's cleanup: a Controller that removes what this controller made outside
	// the cluster for a tenant that no longer configures it (the ProviderConfig is being deleted, or the section
	// was removed). The manager runs it in place of the controller, whether or not the controller ran in this
	// process before, until Pending reports nothing left. When the spec no longer holds the section, the Context's
	// ProviderConfig carries the section the tenant last ran with (status.appliedSpec). Cleanup requires Pending
	// and CopySection.
	Cleanup Constructor
	// Abandon, if set, is called instead of Cleanup once an operator abandons the tenant's cloud resources
	// (annotation multiproject.io/abandon-cloud-resources=true): it releases the in-cluster records that would
	// otherwise wait for them forever and returns a description of what is abandoned, for an Event. A controller
	// without Abandon makes nothing outside the cluster: the annotation does not stop its cleanup, which runs
	// until Pending reports nothing left.
	Abandon func(ctx context.Context, c *Context) (string, error)
	// Secrets, if set, returns the Secrets the controller, or its cleanup, reads credentials from for a tenant
	// with this spec. The manager keeps each from being deleted (a finalizer) while the tenant configures it or
	// its cleanup may still need it, so that deleting a tenant together with its Secret cannot wedge the
	// cleanup.
	Secrets func(spec *mpv1alpha1.ProviderConfigSpec) []mpv1alpha1.SecretReference
	// CopySection copies the controller's section from src to dst; a section src lacks is cleared in dst
	// (CopySectionOf builds it). The manager uses it to record the section in status.appliedSpec before the
	// controller starts, and to hand a
	// cleanup the recorded section once the spec no longer has it.
	CopySection func(dst, src *mpv1alpha1.ProviderConfigSpec)
}

// Cleans reports whether the controller has a cleanup the manager must run when the tenant stops configuring it.
func (f Factory) Cleans() bool { return f.Cleanup != nil && f.Pending != nil && f.CopySection != nil }

// SectionOf returns a Factory.Section for the spec section field points to: the section, or a plain nil when the
// tenant does not configure it (a typed nil pointer inside an interface is not nil, and would start the
// controller).
func SectionOf[T any](field func(*mpv1alpha1.ProviderConfigSpec) **T) func(*mpv1alpha1.ProviderConfigSpec) any {
	return func(spec *mpv1alpha1.ProviderConfigSpec) any {
		if section := *field(spec); section != nil {
			return section
		}
		return nil
	}
}

// CopySectionOf returns a Factory.CopySection for the spec section field points to: a deep copy of src's, or nil.
func CopySectionOf[T any, P interface {
	*T
	DeepCopy() *T
}](field func(*mpv1alpha1.ProviderConfigSpec) *P) func(dst, src *mpv1alpha1.ProviderConfigSpec) {
	return func(dst, src *mpv1alpha1.ProviderConfigSpec) {
		var copied P
		if section := *field(src); section != nil {
			copied = section.DeepCopy()
		}
		*field(dst) = copied
	}
}

// APIs returns a Factory.RequiredAPIs that requires the same resources of every tenant.
func APIs(resources ...schema.GroupVersionResource) func(*mpv1alpha1.ProviderConfigSpec) []schema.GroupVersionResource {
	return func(*mpv1alpha1.ProviderConfigSpec) []schema.GroupVersionResource { return resources }
}
