// Package tenant defines what a per-tenant controller is to the manager that runs it: the Controller it returns,
// the Context it is built from and the Factory that builds it. Controllers (neg, namespace-project,
// ingress-tunnel) provide a Factory; the manager owns everything else: informers, event broadcasters, the
// ProviderConfig's status and the tenant's lifecycle.
package tenant

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"
)

// Controller is one per-tenant controller instance.
type Controller interface {
	// Run blocks until ctx ends, then returns only after every goroutine it started is gone. Workers drain the
	// item they are on; queued items are dropped (the next leader or start lists them again).
	Run(ctx context.Context)
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
	// controller must filter what it handles. Run on it starts nothing.
	Shared(resource schema.GroupVersionResource) (cache.SharedIndexInformer, error)
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
	// AppOwnerLabelKey is the Namespace label whose value names a Rancher Project (--app-owner-label-key).
	AppOwnerLabelKey string
	// GCEEndpoint overrides the Compute Engine API base URL, for tests and local runs (--gce-endpoint).
	GCEEndpoint string
	// GCEQPS and GCEBurst limit each tenant's Compute Engine calls (--gce-qps, --gce-burst).
	GCEQPS   float32
	GCEBurst int
}

// Context is what a per-tenant controller is built from.
type Context struct {
	// ProviderConfig is the tenant, as it was when the controller was built. It must not be mutated. A spec
	// change of the controller's section restarts the controller with a new Context.
	ProviderConfig *mpv1alpha1.ProviderConfig
	// ProviderConfigLabelKey is the label that assigns objects to tenants; objects a controller creates carry it
	// with the ProviderConfig's name as value.
	ProviderConfigLabelKey string
	KubeClient             kubernetes.Interface
	MultiprojectClient     mpclientset.Interface
	Informers              Informers
	// EventRecorder records Events on users' objects through the tenant's own broadcaster, which the manager shuts
	// down when the tenant stops.
	EventRecorder record.EventRecorder
	// Condition reports the controller's condition on the ProviderConfig.
	Condition ConditionReporter
	Options   Options
	// Workers is the controller's --concurrent-<name>-syncs.
	Workers int
}

// Name returns the tenant's name.
func (c *Context) Name() string { return c.ProviderConfig.Name }

// Constructor builds a controller for one tenant. Informer handlers may be added here or in Run.
type Constructor func(ctx context.Context, c *Context) (Controller, error)

// Factory is what the manager knows of one kind of per-tenant controller.
type Factory struct {
	// ConditionType is the ProviderConfig status condition that reports this controller, e.g. NEGReady.
	ConditionType string
	// Section returns the part of the spec the controller is built from, or nil when the tenant does not configure
	// it (the controller is then not run): return a plain nil, not a typed nil pointer inside the interface. When
	// the section changes (semantic equality), the manager restarts the controller.
	Section func(spec *mpv1alpha1.ProviderConfigSpec) any
	// RequiredAPIs are resources the controller cannot run without, typically CRDs of another product (Rancher's
	// Projects). Until the cluster serves all of them the manager does not build the controller and reports
	// APINotServed in its condition; it starts the controller as soon as they appear.
	RequiredAPIs []schema.GroupVersionResource
	// New builds the controller.
	New Constructor
	// Pending, if set, reports what of the tenant would leak outside the cluster if the controller stopped now
	// (e.g. Translations whose NEGs are not deleted yet); "" means nothing. A ProviderConfig being deleted keeps its
	// finalizer, and this controller running, until Pending returns "".
	Pending func(ctx context.Context, c *Context) (string, error)
}
