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

package informerset

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	coordinationinformers "k8s.io/client-go/informers/coordination/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	networkinginformers "k8s.io/client-go/informers/networking/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclientset "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gatewayinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions/apis/v1"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	tunnelv1alpha1 "github.com/multiproject/api/pangolin/tunnel/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"
	managementinformers "github.com/multiproject/client-go/informers/externalversions/management/v3"
	mpinformers "github.com/multiproject/client-go/informers/externalversions/multiproject/v1alpha1"
	tunnelinformers "github.com/multiproject/client-go/informers/externalversions/tunnel/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/tenancy"
)

// Built-in resources the process watches.
var (
	Services       = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	EndpointSlices = schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}
	Nodes          = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	// Pods are read by the neg translator (the endpoints of Pods that wait only for the NEG readiness gate) and the
	// readiness reflector (which sets that gate's condition); both need only what TrimPod keeps.
	Pods = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	// Namespaces is the resource the Router is built on.
	Namespaces = tenancy.NamespacesResource
	Ingresses  = schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"}
	// ClaimRecords are the Leases that record, for the replicas that share the tenants (--sharding), who holds a
	// host or a custom NEG name (pkg/claims); only those of Clients.ClaimsNamespace labeled
	// ClaimRecordLabel are watched, and only when that namespace is set (Resource.Sharded).
	ClaimRecords = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
)

// ClaimRecordLabel marks a Lease as a claim record (claims.KindLabel).
const ClaimRecordLabel = "multiproject.io/claim-kind"

// CRD-backed resources: our own (ProviderConfigs, Translations) are installed with the manifests, the others come
// with Rancher and the pangolin-operator.
var (
	ProviderConfigs   = schema.GroupVersionResource{Group: "multiproject.io", Version: "v1alpha1", Resource: "providerconfigs"}
	Translations      = schema.GroupVersionResource{Group: "multiproject.io", Version: "v1alpha1", Resource: "translations"}
	Projects          = schema.GroupVersionResource{Group: "management.cattle.io", Version: "v3", Resource: "projects"}
	PangolinTunnels   = schema.GroupVersionResource{Group: "tunnel.pangolin.io", Version: "v1alpha1", Resource: "pangolintunnels"}
	PangolinResources = schema.GroupVersionResource{Group: "tunnel.pangolin.io", Version: "v1alpha1", Resource: "pangolinresources"}
)

// Gateway API resources (gateway.networking.k8s.io/v1), read by the ingress-tunnel controller where the cluster
// serves them: each is optional, and read through Clients.Gateway.
var (
	GatewayClasses  = gatewayv1.SchemeGroupVersion.WithResource("gatewayclasses")
	Gateways        = gatewayv1.SchemeGroupVersion.WithResource("gateways")
	HTTPRoutes      = gatewayv1.SchemeGroupVersion.WithResource("httproutes")
	ReferenceGrants = gatewayv1.SchemeGroupVersion.WithResource("referencegrants")
)

// NotRouted is the Scope of a resource that tenants read unfiltered, through Informers.Shared.
const NotRouted tenancy.Scope = 0

// Clients are what the informers of Resources list and watch with.
type Clients struct {
	Kube kubernetes.Interface
	// Multiproject serves the CRD-backed resources.
	Multiproject mpclientset.Interface
	// ProviderConfigSelector, if not empty, is the label selector of the ProviderConfigs informer: a sharded
	// replica watches only the tenants assigned to its shard.
	ProviderConfigSelector string
	// Gateway serves the Gateway API resources; nil: none of them is watched (Resource.GatewayAPI).
	Gateway gatewayclientset.Interface
	// ClaimsNamespace is the namespace of the claim records; empty: the process is the only one that runs
	// tenants, and watches none (Resource.Sharded).
	ClaimsNamespace string
	// Scope, if set, is the shard selector the informers of the tenancy.Namespaced and tenancy.ManagerWritten
	// resources list and watch with (--sharded-watch): a sharded replica receives only the namespaces its tenants
	// need (for ManagerWritten ones, also the namespaces that hold what its tenants wrote there before the namespace
	// moved to another tenant: sharding.Coverage).
	Scope *ShardScope
}

// Resource is one resource the process watches with a shared informer.
type Resource struct {
	GVR schema.GroupVersionResource
	// Optional: a CRD the cluster may not serve (yet). Its informer starts once discovery shows it, and it never
	// blocks the others. A resource that is not optional must be served for the caches to sync.
	Optional bool
	// CRD: served by a CustomResourceDefinition, read through Clients.Multiproject (Clients.Gateway for GatewayAPI).
	CRD bool
	// GatewayAPI: a Gateway API resource (CRD too), read through Clients.Gateway instead.
	GatewayAPI bool
	// Scope is how the Router hands the resource's objects to tenants, or NotRouted.
	Scope tenancy.Scope
	// InterestKeys, for a NotRouted resource that tenants' controllers watch, files each object under the keys a
	// controller registers interest in: the shared informer then carries one tenancy.Fanout, which hands an event
	// only to the tenants interested in it, and takes no handler of its own (Routing.Shared returns the Fanout).
	InterestKeys tenancy.KeyFunc
	// Sharded: watched only by replicas that share the tenants with others (Config.ClaimsNamespace set); Shared
	// has no informer of it otherwise.
	Sharded bool
	// Trim, if set, drops from each object, before it is cached, fields that no controller reads (managedFields go
	// from every object). See trim.go for what may go.
	Trim func(obj any)
	// NewInformer builds the informer; it is called once per Set.
	NewInformer func(c Clients, resync time.Duration) cache.SharedIndexInformer
}

// Resources is every resource the process watches, and how each reaches the tenants. Everything that builds
// shared informers or routes them (New, NewRouting, and through them the manager and the integration tests) reads
// it.
var Resources = []Resource{
	{GVR: Services, Trim: DropLastApplied, Scope: tenancy.Namespaced,
		NewInformer: func(c Clients, resync time.Duration) cache.SharedIndexInformer {
			if c.Scope != nil {
				return c.Scope.NewInformer(Services, listWatchOf(c.Kube.CoreV1().Services(metav1.NamespaceAll)), &corev1.Service{}, resync, namespaceIndex())
			}
			return coreinformers.NewServiceInformer(c.Kube, metav1.NamespaceAll, resync, namespaceIndex())
		}},
	{GVR: EndpointSlices, Trim: DropLastApplied, Scope: tenancy.Namespaced,
		NewInformer: func(c Clients, resync time.Duration) cache.SharedIndexInformer {
			if c.Scope != nil {
				return c.Scope.NewInformer(EndpointSlices, listWatchOf(c.Kube.DiscoveryV1().EndpointSlices(metav1.NamespaceAll)),
					&discoveryv1.EndpointSlice{}, resync, EndpointSliceIndexers())
			}
			return discoveryinformers.NewEndpointSliceInformer(c.Kube, metav1.NamespaceAll, resync, EndpointSliceIndexers())
		}},
	// A Pod belongs to its namespace's tenant. Pods are the cluster's most numerous and most often updated objects,
	// so each is cached as TrimPod leaves it; their conditions are written with patches of pods/status, never with an
	// Update of a cached copy.
	{GVR: Pods, Trim: TrimPod, Scope: tenancy.Namespaced,
		NewInformer: func(c Clients, resync time.Duration) cache.SharedIndexInformer {
			if c.Scope != nil {
				return c.Scope.NewInformer(Pods, listWatchOf(c.Kube.CoreV1().Pods(metav1.NamespaceAll)), &corev1.Pod{}, resync, namespaceIndex())
			}
			return coreinformers.NewPodInformer(c.Kube, metav1.NamespaceAll, resync, namespaceIndex())
		}},
	{GVR: Ingresses, Scope: tenancy.Namespaced,
		NewInformer: func(c Clients, resync time.Duration) cache.SharedIndexInformer {
			if c.Scope != nil {
				return c.Scope.NewInformer(Ingresses, listWatchOf(c.Kube.NetworkingV1().Ingresses(metav1.NamespaceAll)),
					&networkingv1.Ingress{}, resync, namespaceIndex())
			}
			return networkinginformers.NewIngressInformer(c.Kube, metav1.NamespaceAll, resync, namespaceIndex())
		}},
	// An unlabeled Node is every tenant's.
	{GVR: Nodes, Trim: TrimNode, Scope: tenancy.ClusterScoped,
		NewInformer: func(c Clients, resync time.Duration) cache.SharedIndexInformer {
			return coreinformers.NewNodeInformer(c.Kube, resync, namespaceIndex())
		}},
	// The Router is built on this informer and routes it itself, each Namespace by its own label.
	{GVR: Namespaces, Trim: DropLastApplied, Scope: NotRouted,
		NewInformer: func(c Clients, resync time.Duration) cache.SharedIndexInformer {
			return coreinformers.NewNamespaceInformer(c.Kube, resync, namespaceIndex())
		}},
	// Claim records: every replica reads every tenant's, whoever runs the tenant.
	{GVR: ClaimRecords, Scope: NotRouted, Sharded: true,
		NewInformer: func(c Clients, resync time.Duration) cache.SharedIndexInformer {
			return coordinationinformers.NewFilteredLeaseInformer(c.Kube, c.ClaimsNamespace, resync, namespaceIndex(),
				func(o *metav1.ListOptions) { o.LabelSelector = ClaimRecordLabel })
		}},
	// The tenants themselves, read by the ProviderConfig controller.
	{GVR: ProviderConfigs, CRD: true, Trim: DropLastApplied, Scope: NotRouted,
		NewInformer: func(c Clients, resync time.Duration) cache.SharedIndexInformer {
			return mpinformers.NewFilteredProviderConfigInformer(c.Multiproject, resync, cache.Indexers{},
				func(o *metav1.ListOptions) { o.LabelSelector = c.ProviderConfigSelector })
		}},
	// Ingresses (their status), Translations and PangolinResources are written back with Updates of cached copies, so
	// they are cached whole (but for managedFields).
	// Translations and PangolinResources are written only by the manager, labeled with the tenant whose controller
	// wrote them, and that label decides: one left in a namespace that moved to another tenant stays with the tenant
	// whose identity must undo its side effects. Our own Translation CRD is optional too: a cluster without it runs
	// every controller but neg.
	{GVR: Translations, Optional: true, CRD: true, Scope: tenancy.ManagerWritten,
		NewInformer: func(c Clients, resync time.Duration) cache.SharedIndexInformer {
			if c.Scope != nil {
				return c.Scope.NewCustomResourceInformer(Translations, listWatchOf(c.Multiproject.MultiprojectV1alpha1().Translations(metav1.NamespaceAll)),
					&mpv1alpha1.Translation{}, resync, TranslationIndexers())
			}
			return mpinformers.NewTranslationInformer(c.Multiproject, metav1.NamespaceAll, resync, TranslationIndexers())
		}},
	{GVR: PangolinResources, Optional: true, CRD: true, Scope: tenancy.ManagerWritten,
		NewInformer: func(c Clients, resync time.Duration) cache.SharedIndexInformer {
			if c.Scope != nil {
				return c.Scope.NewCustomResourceInformer(PangolinResources, listWatchOf(c.Multiproject.TunnelV1alpha1().PangolinResources(metav1.NamespaceAll)),
					&tunnelv1alpha1.PangolinResource{}, resync, namespaceIndex())
			}
			return tunnelinformers.NewPangolinResourceInformer(c.Multiproject, metav1.NamespaceAll, resync, namespaceIndex())
		}},
	// Rancher Projects and PangolinTunnels belong to no tenant: a tenant's configuration (its Rancher cluster, its
	// tunnel namespace) and its objects (a Namespace's app owner, an Ingress's tunnel) name the ones it uses, and
	// those are its interest keys.
	{GVR: Projects, Trim: DropLastApplied, Optional: true, CRD: true, Scope: NotRouted, InterestKeys: ProjectKeys,
		NewInformer: func(c Clients, resync time.Duration) cache.SharedIndexInformer {
			return managementinformers.NewProjectInformer(c.Multiproject, metav1.NamespaceAll, resync, namespaceIndex())
		}},
	{GVR: PangolinTunnels, Trim: DropLastApplied, Optional: true, CRD: true, Scope: NotRouted, InterestKeys: ObjectKeys,
		NewInformer: func(c Clients, resync time.Duration) cache.SharedIndexInformer {
			return tunnelinformers.NewPangolinTunnelInformer(c.Multiproject, metav1.NamespaceAll, resync, namespaceIndex())
		}},
	// Gateway API: a GatewayClass is the cluster's, read by every tenant; a Gateway, an HTTPRoute and a
	// ReferenceGrant belong to their namespace's tenant (invariant 4). Gateways and HTTPRoutes get their status
	// written back with Updates of cached copies, so they are cached whole (but for managedFields).
	{GVR: GatewayClasses, Trim: DropLastApplied, Optional: true, CRD: true, GatewayAPI: true, Scope: NotRouted,
		NewInformer: func(c Clients, resync time.Duration) cache.SharedIndexInformer {
			return gatewayinformers.NewGatewayClassInformer(c.Gateway, resync, namespaceIndex())
		}},
	{GVR: Gateways, Optional: true, CRD: true, GatewayAPI: true, Scope: tenancy.Namespaced,
		NewInformer: func(c Clients, resync time.Duration) cache.SharedIndexInformer {
			if c.Scope != nil {
				return c.Scope.NewCustomResourceInformer(Gateways, listWatchOf(c.Gateway.GatewayV1().Gateways(metav1.NamespaceAll)),
					&gatewayv1.Gateway{}, resync, namespaceIndex())
			}
			return gatewayinformers.NewGatewayInformer(c.Gateway, metav1.NamespaceAll, resync, namespaceIndex())
		}},
	{GVR: HTTPRoutes, Optional: true, CRD: true, GatewayAPI: true, Scope: tenancy.Namespaced,
		NewInformer: func(c Clients, resync time.Duration) cache.SharedIndexInformer {
			if c.Scope != nil {
				return c.Scope.NewCustomResourceInformer(HTTPRoutes, listWatchOf(c.Gateway.GatewayV1().HTTPRoutes(metav1.NamespaceAll)),
					&gatewayv1.HTTPRoute{}, resync, namespaceIndex())
			}
			return gatewayinformers.NewHTTPRouteInformer(c.Gateway, metav1.NamespaceAll, resync, namespaceIndex())
		}},
	{GVR: ReferenceGrants, Trim: DropLastApplied, Optional: true, CRD: true, GatewayAPI: true, Scope: tenancy.Namespaced,
		NewInformer: func(c Clients, resync time.Duration) cache.SharedIndexInformer {
			if c.Scope != nil {
				return c.Scope.NewCustomResourceInformer(ReferenceGrants, listWatchOf(c.Gateway.GatewayV1().ReferenceGrants(metav1.NamespaceAll)),
					&gatewayv1.ReferenceGrant{}, resync, namespaceIndex())
			}
			return gatewayinformers.NewReferenceGrantInformer(c.Gateway, metav1.NamespaceAll, resync, namespaceIndex())
		}},
}

// LookupResource returns the entry of Resources for gvr.
func LookupResource(gvr schema.GroupVersionResource) (Resource, bool) {
	for _, r := range Resources {
		if r.GVR == gvr {
			return r, true
		}
	}
	return Resource{}, false
}

// namespaceIndex is the index client-go's informer factory gives every informer it builds.
func namespaceIndex() cache.Indexers {
	return cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
}
