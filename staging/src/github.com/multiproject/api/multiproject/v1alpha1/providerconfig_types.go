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

// DefaultProviderConfigLabelKey is the default key of the label that assigns
// an object, or every object of a namespace, to a tenant; its value is the
// name of the ProviderConfig. The manager can be told to use another key, so
// code should take the key from its configuration and use this only as the
// flag default.
const DefaultProviderConfigLabelKey = "multiproject.io/provider-config"

// ProviderConfigCleanupFinalizer is the finalizer the manager puts on every
// ProviderConfig before it starts the tenant's controllers. It is what lets
// the manager see a deletion (stop the tenant, clean up per policy) even when
// the object would otherwise vanish while the manager is down.
const ProviderConfigCleanupFinalizer = "multiproject.io/provider-config-cleanup"

// AbandonCloudResourcesAnnotation, set to "true" on a ProviderConfig, tells
// the manager to stop waiting for a cleanup that cannot finish (a GCP
// project already deleted, credentials revoked): what is left outside the
// cluster is abandoned, listed in an Event, and forgotten. It covers cloud
// resources only (objects in the cluster, such as PangolinResources, are
// always removed), and only the deletion, removed sections and NEG migration
// of the generation the manager first saw it at (status.abandon): a later
// spec change needs a new decision (remove the annotation, wait for
// status.abandon to go, set it again).
const AbandonCloudResourcesAnnotation = "multiproject.io/abandon-cloud-resources"

// SecretInUseFinalizerPrefix, followed by a ProviderConfig's name, is the
// finalizer the manager puts on a Secret that the tenant's controllers or
// their cleanup read credentials from (status.secretsInUse), so that deleting
// the Secret together with the tenant cannot take the credentials from the
// cleanup that still needs them. It is removed once the tenant no longer
// needs the Secret.
const SecretInUseFinalizerPrefix = "in-use.multiproject.io/"

// Condition types of ProviderConfigStatus.Conditions. Every per-tenant
// controller owns exactly one condition, so two controllers never fight over
// one; Ready summarizes them.
const (
	// ProviderConfigConditionReady is True when every controller that the
	// spec enables for this tenant is running and reports its own condition
	// True.
	ProviderConfigConditionReady = "Ready"
	// ProviderConfigConditionNEGReady belongs to the neg controller, which
	// runs when spec.gcp is set.
	ProviderConfigConditionNEGReady = "NEGReady"
	// ProviderConfigConditionNamespaceProjectReady belongs to the
	// namespace-project controller, which runs when spec.rancher is set.
	ProviderConfigConditionNamespaceProjectReady = "NamespaceProjectReady"
	// ProviderConfigConditionIngressTunnelReady belongs to the ingress-tunnel
	// controller, which runs when spec.pangolin is set.
	ProviderConfigConditionIngressTunnelReady = "IngressTunnelReady"
)

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=pc
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="GCP Project",type=string,JSONPath=`.spec.gcp.projectID`
// +kubebuilder:printcolumn:name="Rancher Cluster",type=string,JSONPath=`.spec.rancher.clusterID`
// +kubebuilder:printcolumn:name="Tunnel Namespace",type=string,JSONPath=`.spec.pangolin.tunnelNamespace`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Shard",type=string,JSONPath=`.status.shard`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="the name is used as a label value, so it must be at most 63 characters"

// ProviderConfig is one tenant of the cluster. For each ProviderConfig the
// manager runs the controllers whose spec section is present, and those
// controllers only see the objects labelled with this ProviderConfig's name
// (directly or through their namespace).
type ProviderConfig struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec says which backends this tenant uses and how to reach them.
	// +optional
	Spec ProviderConfigSpec `json:"spec,omitempty"`

	// Status is written by the manager and its controllers.
	// +optional
	Status ProviderConfigStatus `json:"status,omitempty"`
}

// ProviderConfigSpec holds one optional section per backend. An absent
// section means the controller for that backend does not run for this tenant.
type ProviderConfigSpec struct {
	// GCP enables the neg controller: NEGs for this tenant's Services are
	// kept in this GCP project.
	// +optional
	GCP *GCPConfig `json:"gcp,omitempty"`

	// Rancher enables the namespace-project controller: this tenant's
	// namespaces are assigned to Projects of this Rancher cluster.
	// +optional
	Rancher *RancherConfig `json:"rancher,omitempty"`

	// Pangolin enables the ingress-tunnel controller: this tenant's Ingresses
	// of the Pangolin classes are exposed through these tunnels.
	// +optional
	Pangolin *PangolinConfig `json:"pangolin,omitempty"`
}

// GCPConfig locates the tenant's GCP project and VPC, and says which type of NEG the tenant's Services get.
// +kubebuilder:validation:XValidation:rule="!has(self.networkEndpointType) || self.networkEndpointType != 'NON_GCP_PRIVATE_IP_PORT' || !has(self.subnetwork) || size(self.subnetwork) == 0",message="spec.gcp.subnetwork must be empty when spec.gcp.networkEndpointType is NON_GCP_PRIVATE_IP_PORT: GCE takes no subnetwork for a hybrid NEG",fieldPath=".subnetwork",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.networkEndpointType) || self.networkEndpointType != 'NON_GCP_PRIVATE_IP_PORT' || has(self.defaultNEGZone) || (has(self.zoneMapping) && size(self.zoneMapping) > 0)",message="spec.gcp.networkEndpointType NON_GCP_PRIVATE_IP_PORT needs spec.gcp.zoneMapping or spec.gcp.defaultNEGZone: without either, no Node has a GCE zone for its endpoints",fieldPath=".zoneMapping",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="(has(self.networkEndpointType) && self.networkEndpointType == 'NON_GCP_PRIVATE_IP_PORT') || (!has(self.defaultNEGZone) && !has(self.zoneMapping))",message="spec.gcp.zoneMapping and spec.gcp.defaultNEGZone apply only to spec.gcp.networkEndpointType NON_GCP_PRIVATE_IP_PORT: a GCE_VM_IP_PORT NEG is in its Nodes' own zones",fieldPath=".zoneMapping",reason=FieldValueForbidden
type GCPConfig struct {
	// ProjectID is the GCP project ID (not its number or display name): 6 to
	// 30 lowercase letters, digits and hyphens, starting with a letter and
	// not ending with a hyphen. Legacy domain-scoped IDs ("example.com:p")
	// are not accepted.
	// +required
	// +kubebuilder:validation:MinLength=6
	// +kubebuilder:validation:MaxLength=30
	// +kubebuilder:validation:Pattern=`^[a-z][-a-z0-9]{4,28}[a-z0-9]$`
	ProjectID string `json:"projectID"`

	// ProjectNumber is the numeric ID of the same project. Some GCE
	// resources (and IAM) refer to the project by number; zero means unknown.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ProjectNumber int64 `json:"projectNumber,omitempty"`

	// Network is the VPC network the tenant's NEGs attach to, as a name or a
	// resource URL in the project.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Network string `json:"network"`

	// Subnetwork is the subnetwork of Network the NEGs use, as a name or a
	// resource URL. Empty means the network's default for the zone.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Subnetwork string `json:"subnetwork,omitempty"`

	// Zones are the tenant's GCE zones, such as "europe-west1-b": the zones
	// where each NEG Service of the tenant has its NEGs from the start, in
	// addition to the zones of the tenant's Nodes, so that a backend service
	// can name them before any Pod runs. A Service's cloud.google.com/neg
	// annotation may give its own list instead ("zones"), where "*" means
	// this one. Added after v1alpha1 was first released: a build that does
	// not know it ignores it (docs/upgrade.md).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	Zones []GCEZone `json:"zones,omitempty"`

	// NetworkEndpointType is the type of the tenant's NEGs: GCE_VM_IP_PORT (the default) when the tenant's Nodes are
	// GCE VMs of the project, NON_GCP_PRIVATE_IP_PORT (hybrid NEGs) when they are not (on premises, another cloud)
	// and Google Cloud reaches their Pods through hybrid connectivity: an endpoint is then a Pod's IPv4 address and
	// port, without an instance, in the GCE zone ZoneMapping or DefaultNEGZone gives its Node. Changing it gives
	// each Service new NEGs beside the old ones, which are deleted once the new ones are synced (docs/neg.md).
	// Added after v1alpha1 was first released: a build that does not know it ignores it (docs/upgrade.md).
	// Empty means GCE_VM_IP_PORT; there is no schema default, so that a
	// ProviderConfig reads the same on every CRD version.
	// +optional
	NetworkEndpointType NetworkEndpointType `json:"networkEndpointType,omitempty"`

	// ZoneMapping maps the zone names of the tenant's Nodes (their topology.kubernetes.io/zone label) to the GCE
	// zones of their hybrid NEGs, as k8s-hybrid-neg-controller's --zone-mapping does. Only with
	// NetworkEndpointType NON_GCP_PRIVATE_IP_PORT.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 63 && k.matches('^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$'))",message="keys must be Node zone names: label values of at most 63 characters"
	ZoneMapping map[string]GCEZone `json:"zoneMapping,omitempty"`

	// DefaultNEGZone is the GCE zone of the hybrid NEG endpoints of Nodes without a zone, or whose zone
	// ZoneMapping does not map (k8s-hybrid-neg-controller's --default-neg-zone). Empty: such Nodes' endpoints are
	// left out, with a Warning on the Service. Only with NetworkEndpointType NON_GCP_PRIVATE_IP_PORT.
	// +optional
	DefaultNEGZone GCEZone `json:"defaultNEGZone,omitempty"`

	// BackendServices are the backend services of the project that the
	// tenant's Services may ask to join (a Service's
	// multiproject.io/neg-backend-services annotation): the pusher adds the
	// Service's NEGs to them and removes them again. None by default: a
	// backend service not listed is never written. Added after v1alpha1 was
	// first released: a build that does not know it ignores it
	// (docs/upgrade.md).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	BackendServices []AllowedBackendService `json:"backendServices,omitempty"`

	// CredentialsSecretRef points at a Secret key holding a service-account
	// JSON key for the project. Absent means the manager's own credentials
	// (for example workload identity) are used.
	// +optional
	CredentialsSecretRef *SecretKeyReference `json:"credentialsSecretRef,omitempty"`
}

// AllowedBackendService names one backend service of the tenant's project,
// global or regional, that the tenant's Services may join.
type AllowedBackendService struct {
	// Name is the backend service's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// Region is the region of a regional backend service, such as
	// "europe-west1"; empty means a global one.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]+-[a-z]+[0-9]{1,2}$`
	Region string `json:"region,omitempty"`

	// Namespaces limits which of the tenant's namespaces may join it; empty
	// means all of them.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	Namespaces []string `json:"namespaces,omitempty"`
}

// GCEZone is the name of a GCE zone: a region and a zone letter, such as
// "europe-west1-b".
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^[a-z]+-[a-z]+[0-9]{1,2}-[a-z][a-z0-9]*$`
type GCEZone string

// SecretKeyReference names one key of one Secret. The namespace is explicit
// because a ProviderConfig is cluster-scoped and has no namespace of its own.
type SecretKeyReference struct {
	// Namespace of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace"`

	// Name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// Key within the Secret's data.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key"`
}

// RancherConfig locates the tenant's Rancher cluster.
type RancherConfig struct {
	// ClusterID is the Rancher cluster ID ("local", "c-xxxxx", "c-m-xxxxxxxx").
	// Rancher keeps a cluster's Projects in the namespace named by this ID in
	// the management cluster, so it must be a valid namespace name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	ClusterID string `json:"clusterID"`

	// ManagementClusterKubeconfigSecretRef points at a Secret key holding a kubeconfig for Rancher's management
	// ("local") cluster. Set it when the manager runs in a downstream cluster, which cannot read Rancher's
	// Projects: the controller then lists and watches the Projects of namespace ClusterID there. Absent means
	// this cluster's own API server serves the Projects (the manager runs in the management cluster). The
	// kubeconfig must carry its credentials inline (a token or client certificate data); one that names files
	// or runs commands (exec, auth-provider) is refused. The Secret is read again periodically, so a rotated
	// kubeconfig is used without a restart.
	// +optional
	ManagementClusterKubeconfigSecretRef *SecretKeyReference `json:"managementClusterKubeconfigSecretRef,omitempty"`
}

// PangolinConfig says which PangolinTunnels carry the tenant's Ingresses and
// the defaults of the PangolinResources written for them.
type PangolinConfig struct {
	// TunnelNamespace is the namespace of the tenant's PangolinTunnels. Tunnel
	// names are looked up only there, so two tenants may use the same tunnel
	// name without ambiguity.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	TunnelNamespace string `json:"tunnelNamespace"`

	// DefaultTunnel is the tunnel of Ingresses of the class "pangolin" that
	// do not name a tunnel themselves.
	// +optional
	DefaultTunnel TunnelName `json:"defaultTunnel,omitempty"`

	// TunnelsByClassSuffix maps the suffix s of an ingress class
	// "pangolin-<s>" to the tunnel that carries Ingresses of that class. A
	// class whose suffix is not in the map uses DefaultTunnel. Keys must be
	// possible suffixes of an IngressClass name (a DNS subdomain of at most
	// 253 characters, 9 of them "pangolin-").
	// +optional
	// +kubebuilder:validation:MaxProperties=256
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 244 && k.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'))",message="keys must be ingress-class suffixes: lowercase DNS subdomains of at most 244 characters"
	TunnelsByClassSuffix map[string]TunnelName `json:"tunnelsByClassSuffix,omitempty"`

	// SSODefault is the sso setting of a PangolinResource when the Ingress
	// has no sso annotation.
	// +optional
	SSODefault bool `json:"ssoDefault,omitempty"`

	// BlockAccessDefault is the blockAccess setting of a PangolinResource
	// when the Ingress has no block-access annotation.
	// +optional
	BlockAccessDefault bool `json:"blockAccessDefault,omitempty"`

	// AllowedHostnames are the hosts the tenant may publish. An Ingress host
	// (the name it is published under, after the subdomain annotation) that
	// none of them allows gets no PangolinResource and claims nothing, so it
	// never keeps another tenant from a host. Empty allows every host.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	AllowedHostnames []AllowedHostname `json:"allowedHostnames,omitempty"`
}

// AllowedHostname is a host a tenant may publish: an exact name
// ("shop.example.com"), or "*." followed by a name ("*.team-a.example.com"),
// which allows every name below that one, at any depth, but not the name
// itself. Both are lowercase DNS names of at least two labels. There is no
// regular expression form: see docs/ingress-tunnel.md.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=253
// +kubebuilder:validation:XValidation:rule="self.matches('^([*][.])?[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?([.][a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)+$')",messageExpression="'allowed hostname ' + self + ' is neither a lowercase DNS name of at least two labels (shop.example.com) nor *. followed by one (*.team-a.example.com)'"
type AllowedHostname string

// TunnelName is the name of a PangolinTunnel object (a DNS subdomain).
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=253
// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
type TunnelName string

// ProviderConfigStatus is what the manager last observed of the tenant.
type ProviderConfigStatus struct {
	// ObservedGeneration is the metadata.generation of the spec the running
	// controllers were started with. It advances only once every controller
	// the spec configures runs from that generation's spec.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// AppliedSpec records, for the controllers that make things outside the
	// cluster (neg), the spec section they were last started with. It is
	// written before such a controller starts, and a section stays here after
	// it is removed from the spec, or the ProviderConfig is deleted, until the
	// controller's cleanup has finished: the cleanup reaches the project and
	// credentials that the old section named.
	// +optional
	AppliedSpec *ProviderConfigSpec `json:"appliedSpec,omitempty"`

	// Abandon records the operator's decision to abandon the tenant's cloud
	// resources (annotation AbandonCloudResourcesAnnotation) as the manager
	// first saw it; absent while the annotation is not set.
	// +optional
	Abandon *AbandonDecision `json:"abandon,omitempty"`

	// SecretsInUse lists the Secrets the tenant's controllers or their
	// cleanup read credentials from, each of which carries the finalizer
	// SecretInUseFinalizerPrefix + the ProviderConfig's name. A Secret is
	// listed here before the finalizer is added, and removed from the list
	// once the finalizer is gone.
	// +optional
	// +listType=atomic
	SecretsInUse []SecretReference `json:"secretsInUse,omitempty"`

	// Shard names the replica (shard) that runs this tenant when the manager
	// runs with --sharding; empty otherwise. The sharder assigns it with the
	// label multiproject.io/shard; the shard writes it here before it starts
	// the tenant, and clears it once it has stopped a tenant it no longer
	// owns. While it names a live shard, the tenant is that shard's even
	// without the label: no other replica starts it.
	// +optional
	Shard string `json:"shard,omitempty"`

	// Conditions holds Ready and one condition per controller; see the
	// ProviderConfigCondition* constants.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// AbandonDecision is the scope of an abandon annotation, as the manager
// recorded it.
type AbandonDecision struct {
	// Generation is the metadata.generation at which the manager first saw
	// the annotation. The decision covers the deletion, the removed spec
	// sections and the NEG migration of this generation only.
	// +required
	Generation int64 `json:"generation"`
}

// SecretReference names one Secret.
type SecretReference struct {
	// Namespace of the Secret.
	// +required
	Namespace string `json:"namespace"`

	// Name of the Secret.
	// +required
	Name string `json:"name"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// ProviderConfigList is a list of ProviderConfigs.
type ProviderConfigList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []ProviderConfig `json:"items"`
}
