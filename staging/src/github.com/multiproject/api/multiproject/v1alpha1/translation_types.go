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

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TranslationDeleterFinalizer is put on every Translation when it is created.
// Only the pusher removes it, and only after it has deleted every backend
// resource of the Translation, so a Translation (and with it the record of
// what exists in the cloud) cannot disappear before the cloud side does.
const TranslationDeleterFinalizer = "multiproject.io/deleter"

// TranslationOwnerUIDLabelKey is the label holding the UID of the object a
// Translation was made for. It exists because ownerReferences cannot be used
// in a label or field selector: listing a Service's Translations (to find the
// stale ones) is a label selection on this key.
const TranslationOwnerUIDLabelKey = "multiproject.io/owner-uid"

// TranslationGeneratedNEGNameAnnotationKey records, on a Translation whose
// NEGs carry a generated name (not one the user chose), that name. Every build
// keeps a generated name recorded here (and one declared by a build older than
// this annotation that it computes itself) for as long as the Translation
// declares it, whichever build computed it, so an upgrade or a rollback never
// renames a NEG: GCE cannot rename one, and load balancers reference it.
const TranslationGeneratedNEGNameAnnotationKey = "multiproject.io/generated-neg-name"

// TranslationNEGProjectAnnotationKey records, on a Translation that declares a
// custom NEG name (one the user chose), the GCP project its translator
// declared it in. A custom name is held once per GCP project, as GCE names a
// zonal NEG within its project and zone, and whoever decides who holds it
// reads the Translations of every tenant, which say nothing else of their
// project until the pusher has recorded one in the status. A Translation
// without it (made by an older build) holds its names in the projects its
// status lists.
const TranslationNEGProjectAnnotationKey = "multiproject.io/neg-project"

// TranslationNEGFixedZonesAnnotationKey records, on a Translation whose NEGs
// include zones fixed ahead (the Service's cloud.google.com/neg "zones", or
// the tenant's spec.gcp.zones), those zones, comma-separated and sorted, as
// its translator last declared them. A NEG of a zone without Nodes is kept
// (inactive) unless its zone is listed here and has left the fixed list: the
// translator reads it to tell a zone that lost its Nodes (kept) from one the
// user took off the list (deleted).
const TranslationNEGFixedZonesAnnotationKey = "multiproject.io/neg-fixed-zones"

// TranslationConditionSynced is the condition the pusher sets on a
// Translation: True when every backend resource matches the spec of
// metadata.generation == status.observedGeneration.
const TranslationConditionSynced = "Synced"

// BackendResourceKind names a type of backend (cloud) resource.
// +kubebuilder:validation:Enum=NetworkEndpointGroup
type BackendResourceKind string

const (
	// BackendResourceKindNetworkEndpointGroup is a GCE zonal network
	// endpoint group. Its parameters are in
	// BackendResource.NetworkEndpointGroup and BackendResource.Zone.
	BackendResourceKindNetworkEndpointGroup BackendResourceKind = "NetworkEndpointGroup"
)

// NetworkEndpointType is the GCE type of the endpoints of a NEG.
// +kubebuilder:validation:Enum=GCE_VM_IP_PORT;NON_GCP_PRIVATE_IP_PORT
type NetworkEndpointType string

const (
	// NetworkEndpointTypeGCEVMIPPort is an endpoint given by a VM instance,
	// an IP address of that VM (primary or alias) and a port.
	NetworkEndpointTypeGCEVMIPPort NetworkEndpointType = "GCE_VM_IP_PORT"
	// NetworkEndpointTypeNonGCPPrivateIPPort is a hybrid NEG's endpoint: an
	// IPv4 address outside Google Cloud, reached through hybrid connectivity,
	// and a port, with no instance. Its NEG takes no subnetwork. Added after
	// v1alpha1 was first released (docs/upgrade.md).
	NetworkEndpointTypeNonGCPPrivateIPPort NetworkEndpointType = "NON_GCP_PRIVATE_IP_PORT"
)

// BackendResourceState is the pusher's view of one backend resource.
// +kubebuilder:validation:Enum=Pending;Ready;Error;Deleting
type BackendResourceState string

const (
	// BackendResourceStatePending means the resource has not been created or
	// updated to the current spec yet.
	BackendResourceStatePending BackendResourceState = "Pending"
	// BackendResourceStateReady means the resource exists and matches the
	// spec.
	BackendResourceStateReady BackendResourceState = "Ready"
	// BackendResourceStateError means the last attempt failed; see
	// BackendResourceStatus.LastError. The pusher retries with backoff.
	BackendResourceStateError BackendResourceState = "Error"
	// BackendResourceStateDeleting means the Translation is being deleted and
	// the resource has not been deleted in the backend yet.
	BackendResourceStateDeleting BackendResourceState = "Deleting"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=tr
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Owner Kind",type=string,JSONPath=`.metadata.ownerReferences[0].kind`
// +kubebuilder:printcolumn:name="Owner",type=string,JSONPath=`.metadata.ownerReferences[0].name`
// +kubebuilder:printcolumn:name="NEG",type=string,JSONPath=`.spec.resources[0].name`,priority=1
// +kubebuilder:printcolumn:name="Active",type=integer,JSONPath=`.status.activeResources`
// +kubebuilder:printcolumn:name="Inactive",type=integer,JSONPath=`.status.inactiveResources`
// +kubebuilder:printcolumn:name="Endpoints",type=integer,JSONPath=`.status.endpointCount`
// +kubebuilder:printcolumn:name="Synced",type=string,JSONPath=`.status.conditions[?(@.type=="Synced")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Translation declares, before they exist, the backend resources that one
// Kubernetes object needs (for the neg controller: the NEGs, one per zone, of
// one Service port). Controllers write Translations; the pusher is the only
// writer to the backend and reports back in the status.
//
// A Translation carries an ownerReference to that object (so garbage
// collection deletes it with its owner), the tenant label
// (DefaultProviderConfigLabelKey, or the key the manager is configured with),
// the TranslationOwnerUIDLabelKey label, and the TranslationDeleterFinalizer.
type Translation struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired backend state.
	// +optional
	Spec TranslationSpec `json:"spec,omitempty"`

	// Status is written by the pusher.
	// +optional
	Status TranslationStatus `json:"status,omitempty"`
}

// TranslationSpec is the ordered list of backend resources of a Translation.
type TranslationSpec struct {
	// Resources are created in this order and deleted in the reverse order,
	// so a resource may depend on any resource before it. A resource is
	// identified by kind, zone and name; an entry must not be changed into
	// another resource, and a backend resource belongs to one Translation
	// only.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	Resources []BackendResource `json:"resources,omitempty"`
}

// BackendResource is one resource in the backend. Kind says which of the
// type-specific fields is used.
// +kubebuilder:validation:XValidation:rule="self.kind != 'NetworkEndpointGroup' || (has(self.networkEndpointGroup) && has(self.zone))",message="a NetworkEndpointGroup needs zone and networkEndpointGroup"
type BackendResource struct {
	// Kind is the type of the backend resource.
	// +required
	Kind BackendResourceKind `json:"kind"`

	// Name is the resource's name in the backend. GCE names are RFC 1035
	// labels: a lowercase letter, then lowercase letters, digits and hyphens,
	// at most 63 characters, not ending with a hyphen.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// Zone is the zone of a zonal resource, such as "europe-west1-b".
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Zone string `json:"zone,omitempty"`

	// Description is written to the backend resource as is. It carries the
	// marker by which the pusher proves that it created a resource before it
	// changes or deletes it.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Description string `json:"description,omitempty"`

	// NetworkEndpointGroup holds the parameters of a resource of kind
	// NetworkEndpointGroup.
	// +optional
	NetworkEndpointGroup *NetworkEndpointGroupParameters `json:"networkEndpointGroup,omitempty"`
}

// NetworkEndpointGroupParameters describes a zonal GCE NEG and the endpoints
// it should contain.
type NetworkEndpointGroupParameters struct {
	// NetworkEndpointType is the NEG's endpoint type. Empty means
	// GCE_VM_IP_PORT. There is deliberately
	// no schema default: a value filled in by the server would make every
	// comparison with a controller's desired spec look like a change.
	// +optional
	NetworkEndpointType NetworkEndpointType `json:"networkEndpointType,omitempty"`

	// Network is the VPC network of the NEG, as a name or resource URL.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Network string `json:"network"`

	// Subnetwork is the subnetwork of the NEG, as a name or resource URL.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Subnetwork string `json:"subnetwork,omitempty"`

	// Port is the NEG's default port: the port of endpoints that do not give
	// one (GCE's defaultPort).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`

	// Endpoints is the complete desired set of endpoints of this NEG. The
	// pusher attaches what is missing and detaches what is not listed.
	// +optional
	// +listType=atomic
	Endpoints []NetworkEndpoint `json:"endpoints,omitempty"`

	// BackendServices are the backend services this NEG is to be a backend
	// of, each allowed by the tenant's ProviderConfig. The pusher adds the
	// NEG to each and removes it from those it added it to that are no
	// longer listed (status.resources[].backendServices), before it deletes
	// the NEG. Added after v1alpha1 was first released: a build that does
	// not know it leaves it as it is (docs/upgrade.md).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	BackendServices []BackendServiceMembership `json:"backendServices,omitempty"`
}

// BalancingMode is how a backend service spreads load over a NEG backend.
// +kubebuilder:validation:Enum=RATE;CONNECTION
type BalancingMode string

const (
	// BalancingModeRate: requests per second per endpoint
	// (maxRatePerEndpoint), for Application Load Balancers.
	BalancingModeRate BalancingMode = "RATE"
	// BalancingModeConnection: connections per endpoint
	// (maxConnectionsPerEndpoint), for proxy Network Load Balancers.
	BalancingModeConnection BalancingMode = "CONNECTION"
)

// BackendServiceMembership is one backend service a NEG joins, and the
// backend's balancing settings there.
// +kubebuilder:validation:XValidation:rule="self.balancingMode != 'RATE' || has(self.maxRatePerEndpoint)",message="RATE needs maxRatePerEndpoint"
// +kubebuilder:validation:XValidation:rule="self.balancingMode != 'CONNECTION' || has(self.maxConnectionsPerEndpoint)",message="CONNECTION needs maxConnectionsPerEndpoint"
type BackendServiceMembership struct {
	// Name is the backend service's name, in the NEG's project.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// Region is the region of a regional backend service; empty means a
	// global one.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]+-[a-z]+[0-9]{1,2}$`
	Region string `json:"region,omitempty"`

	// BalancingMode is RATE or CONNECTION.
	// +required
	BalancingMode BalancingMode `json:"balancingMode"`

	// MaxRatePerEndpoint is the target requests per second per endpoint,
	// for RATE.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxRatePerEndpoint int32 `json:"maxRatePerEndpoint,omitempty"`

	// MaxConnectionsPerEndpoint is the target connections per endpoint, for
	// CONNECTION.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxConnectionsPerEndpoint int32 `json:"maxConnectionsPerEndpoint,omitempty"`

	// CapacityScaler scales the backend's capacity, as a decimal from "0"
	// (drained) to "1"; empty means 1. A string, not a float, so that the
	// value written is the value read.
	// +optional
	// +kubebuilder:validation:MaxLength=8
	// +kubebuilder:validation:Pattern=`^(0(\.[0-9]{1,3})?|1(\.0{1,3})?)$`
	CapacityScaler string `json:"capacityScaler,omitempty"`
}

// NetworkEndpoint is one endpoint of a NEG: for container-native load
// balancing, one Pod.
type NetworkEndpoint struct {
	// Instance is the name of the VM, in the NEG's zone, that has IPAddress:
	// required in a GCE_VM_IP_PORT NEG, absent in a NON_GCP_PRIVATE_IP_PORT
	// one. It was required before the hybrid type came: a build from before
	// it reads an endpoint without it only in a Translation it leaves alone
	// (docs/upgrade.md).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Instance string `json:"instance,omitempty"`

	// IPAddress is the endpoint's IPv4 address (a pod IP for container-native
	// load balancing).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=45
	IPAddress string `json:"ipAddress"`

	// Ipv6Address is the endpoint's IPv6 address, set for a Pod of a
	// dual-stack Service: GCE's ipv6Address, named as compute/v1 names it (the
	// API naming rule wants that spelling of an "ipv6" JSON name). The two
	// addresses are one endpoint: GCE attaches and detaches them together.
	// Added after v1alpha1 was first released: a build that does not know it
	// leaves it as it is until it replaces the spec (docs/upgrade.md).
	// +optional
	// +kubebuilder:validation:MaxLength=45
	Ipv6Address string `json:"ipv6Address,omitempty"`

	// Pod is the name of the Pod, in the Translation's namespace, whose
	// addresses these are (the EndpointSlice endpoint's targetRef). The NEG
	// readiness gate matches a Pod to its endpoint by it, not by IP, so a new
	// Pod that reuses an address still listed for an old one is not taken for
	// it. Empty for an endpoint without a Pod, and in Translations written by
	// builds from before the field, which match by IP.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Pod string `json:"pod,omitempty"`

	// Port is the endpoint's port; zero means the NEG's default port.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`
}

// BackendResourceLifecycle says whether a backend resource serves, is kept
// without serving, or is on its way out: the state of a NEG as ingress-gce's
// svcneg status gives it (ACTIVE, INACTIVE, TO_BE_DELETED). It is a field of
// its own, beside State, so that a build whose CRD knows only State's values
// reads every status this build writes.
// +kubebuilder:validation:Enum=Active;Inactive;AwaitingDeletion
type BackendResourceLifecycle string

const (
	// BackendResourceLifecycleActive: the spec lists endpoints for the
	// resource.
	BackendResourceLifecycleActive BackendResourceLifecycle = "Active"
	// BackendResourceLifecycleInactive: the spec keeps the resource without
	// endpoints (a NEG of a zone that lost its Nodes, or fixed ahead in a zone
	// where nothing runs yet). It keeps its GCE id and fills again when
	// endpoints come back.
	BackendResourceLifecycleInactive BackendResourceLifecycle = "Inactive"
	// BackendResourceLifecycleAwaitingDeletion: the spec no longer lists the
	// resource, or the Translation is being deleted; the pusher deletes it.
	BackendResourceLifecycleAwaitingDeletion BackendResourceLifecycle = "AwaitingDeletion"
)

// TranslationStatus is what the pusher last did with a Translation.
type TranslationStatus struct {
	// ObservedGeneration is the metadata.generation the pusher last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Resources has one entry per spec.resources entry the pusher has seen,
	// in the same order.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	Resources []BackendResourceStatus `json:"resources,omitempty"`

	// ActiveResources counts the entries of Resources that are Active, for
	// kubectl get.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ActiveResources int32 `json:"activeResources,omitempty"`

	// InactiveResources counts the entries of Resources that are Inactive.
	// +optional
	// +kubebuilder:validation:Minimum=0
	InactiveResources int32 `json:"inactiveResources,omitempty"`

	// EndpointCount is the sum of the endpoint counts of Resources.
	// +optional
	// +kubebuilder:validation:Minimum=0
	EndpointCount int32 `json:"endpointCount,omitempty"`

	// Conditions holds the Synced condition.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// BackendResourceStatus is the state of one backend resource.
type BackendResourceStatus struct {
	// Kind of the resource, as in the spec.
	// +optional
	Kind BackendResourceKind `json:"kind,omitempty"`

	// Name of the resource, as in the spec.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// Zone of the resource, as in the spec.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Zone string `json:"zone,omitempty"`

	// Project is the GCP project the resource was created in (or is being
	// created in). A resource whose project, network or subnetwork differs
	// from what the spec and the tenant now ask for is a different resource:
	// the pusher creates the new one, then deletes this one.
	// +optional
	// +kubebuilder:validation:MaxLength=30
	Project string `json:"project,omitempty"`

	// Network of the resource when it was created (a NEG's VPC network).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Network string `json:"network,omitempty"`

	// Subnetwork of the resource when it was created.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Subnetwork string `json:"subnetwork,omitempty"`

	// Description is the ownership marker the resource was created with, so
	// that it can be proven ours and deleted after it left the spec.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Description string `json:"description,omitempty"`

	// ID is the resource's numeric id in GCE, as a decimal string (GCE ids
	// are unsigned 64-bit numbers), once the pusher has seen the resource.
	// The same NEG keeps its id while it is inactive; a NEG made anew gets
	// another one.
	// +optional
	// +kubebuilder:validation:MaxLength=20
	// +kubebuilder:validation:Pattern=`^[0-9]+$`
	ID string `json:"id,omitempty"`

	// SelfLink is the resource's URL in GCE, as a backend service's
	// backends[].group names a NEG.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	SelfLink string `json:"selfLink,omitempty"`

	// BackendServices are the URLs of the backend services the pusher has
	// made this NEG a backend of and not removed it from since, so that a
	// later build, a restart or the sweep removes exactly those before the
	// NEG is deleted. Added after v1alpha1 was first released.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	BackendServices []string `json:"backendServices,omitempty"`

	// State is the pusher's view of the resource.
	// +required
	State BackendResourceState `json:"state"`

	// Lifecycle says whether the resource serves (Active), is kept without
	// endpoints (Inactive) or is to be deleted (AwaitingDeletion). Empty in a
	// status written by a build from before the field.
	// +optional
	Lifecycle BackendResourceLifecycle `json:"lifecycle,omitempty"`

	// EndpointCount is the number of endpoints the resource had after the
	// pusher's last successful sync (for a NEG).
	// +optional
	// +kubebuilder:validation:Minimum=0
	EndpointCount int32 `json:"endpointCount,omitempty"`

	// LastError is the message of the last failed backend call, empty after
	// a success.
	// +optional
	// +kubebuilder:validation:MaxLength=32768
	LastError string `json:"lastError,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// TranslationList is a list of Translations.
type TranslationList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Translation `json:"items"`
}
