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

// PangolinResourceFinalizer is the finalizer the pangolin-operator puts on
// every PangolinResource. It is listed here so that tests and cleanup code
// recognise it; our controllers never add or remove it.
const PangolinResourceFinalizer = "resource.pangolin.io/finalizer"

// ProtocolHTTP is the PangolinResourceSpec.Protocol of an HTTP resource. The
// operator's schema does not restrict the field, but HTTP resources are the
// only ones the ingress-tunnel controller writes.
const ProtocolHTTP = "http"

// TargetMethod is how Pangolin talks to a target.
// +kubebuilder:validation:Enum=http;https;tcp;udp
type TargetMethod string

// Values of TargetMethod.
const (
	TargetMethodHTTP  TargetMethod = "http"
	TargetMethodHTTPS TargetMethod = "https"
	TargetMethodTCP   TargetMethod = "tcp"
	TargetMethodUDP   TargetMethod = "udp"
)

// PathMatchType is how a target's path is matched against a request path.
// +kubebuilder:validation:Enum=exact;prefix;regex
type PathMatchType string

// Values of PathMatchType.
const (
	PathMatchTypeExact  PathMatchType = "exact"
	PathMatchTypePrefix PathMatchType = "prefix"
	PathMatchTypeRegex  PathMatchType = "regex"
)

// ResourceStatusValue is the operator's state of a PangolinResource, in
// PangolinResourceStatus.Status.
// +kubebuilder:validation:Enum=Creating;Ready;Error;Deleting;Waiting
type ResourceStatusValue string

// Values of ResourceStatusValue.
const (
	ResourceStatusCreating ResourceStatusValue = "Creating"
	ResourceStatusReady    ResourceStatusValue = "Ready"
	ResourceStatusError    ResourceStatusValue = "Error"
	ResourceStatusDeleting ResourceStatusValue = "Deleting"
	ResourceStatusWaiting  ResourceStatusValue = "Waiting"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=presource
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Resource ID",type=string,JSONPath=`.status.resourceId`
// +kubebuilder:printcolumn:name="Protocol",type=string,JSONPath=`.spec.protocol`
// +kubebuilder:printcolumn:name="Subdomain",type=string,JSONPath=`.spec.httpConfig.subdomain`
// +kubebuilder:printcolumn:name="Full Domain",type=string,JSONPath=`.status.fullDomain`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.url`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.status`
// +kubebuilder:printcolumn:name="Binding Mode",type=string,JSONPath=`.status.bindingMode`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// PangolinResource is one public Pangolin resource (for HTTP: one host name)
// and its targets, created by the operator through the tunnel's site.
type PangolinResource struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired Pangolin resource.
	// +optional
	Spec PangolinResourceSpec `json:"spec,omitempty"`

	// Status is written by the operator.
	// +optional
	Status PangolinResourceStatus `json:"status,omitempty"`
}

// PangolinResourceSpec is the desired Pangolin resource. The operator's
// schema requires none of its fields.
type PangolinResourceSpec struct {
	// TunnelRef names the PangolinTunnel whose site serves the resource.
	// The operator declares this as a plain struct; a pointer here keeps an
	// absent reference out of the JSON instead of sending an empty name.
	// +optional
	TunnelRef *TunnelReference `json:"tunnelRef,omitempty"`

	// SiteRef names the site directly; it takes precedence over TunnelRef.
	// +optional
	SiteRef *SiteReference `json:"siteRef,omitempty"`

	// Name is the resource's display name in Pangolin, used when the
	// operator creates it.
	// +optional
	Name string `json:"name,omitempty"`

	// Protocol of the resource, such as ProtocolHTTP.
	// +optional
	Protocol string `json:"protocol,omitempty"`

	// ResourceID binds to an existing Pangolin resource instead of creating
	// one.
	// +optional
	ResourceID string `json:"resourceId,omitempty"`

	// HTTPConfig configures an HTTP resource.
	// +optional
	HTTPConfig *HTTPConfig `json:"httpConfig,omitempty"`

	// ProxyConfig configures a TCP or UDP resource.
	// +optional
	ProxyConfig *ProxyConfig `json:"proxyConfig,omitempty"`

	// Targets are the backends requests are sent to, one per path.
	// +optional
	Targets []Target `json:"targets,omitempty"`

	// Enabled turns the resource on or off; the schema defaults it to true.
	// +optional
	// +kubebuilder:default=true
	Enabled *bool `json:"enabled,omitempty"`
}

// TunnelReference names a PangolinTunnel.
type TunnelReference struct {
	// Name of the PangolinTunnel.
	// +required
	Name string `json:"name"`

	// Namespace of the PangolinTunnel; empty means the namespace of the
	// PangolinResource.
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// SiteReference names a Pangolin site by numeric ID or by nice ID; the
// numeric ID wins when both are set.
type SiteReference struct {
	// SiteID is the site's numeric ID.
	// +optional
	// +kubebuilder:validation:Format=""
	SiteID *int64 `json:"siteId,omitempty"`

	// NiceID is the site's human-readable ID.
	// +optional
	NiceID string `json:"niceId,omitempty"`
}

// HTTPConfig configures an HTTP resource: the host name is
// "<subdomain>.<domain>".
type HTTPConfig struct {
	// Subdomain is the host name's part left of the domain. It may not be
	// empty, so an apex host cannot be expressed.
	// +required
	// +kubebuilder:validation:MinLength=1
	Subdomain string `json:"subdomain"`

	// DomainID selects the domain by its Pangolin ID.
	// +optional
	DomainID string `json:"domainId,omitempty"`

	// DomainName selects the domain by name; the operator resolves it to an
	// ID. With neither DomainID nor DomainName the organization's default
	// domain is used.
	// +optional
	DomainName string `json:"domainName,omitempty"`

	// SSO turns on Pangolin's SSO for the resource. Always serialized, as in
	// the operator's type, so false is sent explicitly.
	// +optional
	SSO bool `json:"sso"`

	// BlockAccess blocks access until the user has authenticated; it only
	// has an effect with SSO. Always serialized, as in the operator's type.
	// +optional
	BlockAccess bool `json:"blockAccess"`
}

// ProxyConfig configures a TCP or UDP resource.
type ProxyConfig struct {
	// ProxyPort is the public port.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	ProxyPort int32 `json:"proxyPort"`

	// EnableProxy turns the proxy on; the schema defaults it to true.
	// +optional
	// +kubebuilder:default=true
	EnableProxy *bool `json:"enableProxy,omitempty"`
}

// Target is one backend of a resource.
type Target struct {
	// IP is the target's IP address or host name, such as
	// "<service>.<namespace>.svc.cluster.local".
	// +required
	IP string `json:"ip"`

	// Port is the target's port.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`

	// Method is the protocol used to reach the target; the schema defaults
	// it to http.
	// +optional
	// +kubebuilder:default=http
	Method TargetMethod `json:"method,omitempty"`

	// Path is the request path this target serves, such as "/api".
	// +optional
	Path string `json:"path,omitempty"`

	// PathMatchType is how Path is matched.
	// +optional
	PathMatchType PathMatchType `json:"pathMatchType,omitempty"`

	// Priority orders path matching, higher first; the schema defaults it
	// to 100.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +kubebuilder:default=100
	Priority int32 `json:"priority,omitempty"`
}

// PangolinResourceStatus is what the operator last did with the resource.
type PangolinResourceStatus struct {
	// ResourceID is the resource's ID in Pangolin.
	// +optional
	ResourceID string `json:"resourceId,omitempty"`
	// TargetID is deprecated by the operator in favour of TargetIDs.
	// +optional
	TargetID string `json:"targetId,omitempty"`
	// TargetIDs are the IDs of the resource's targets in Pangolin.
	// +optional
	TargetIDs []string `json:"targetIds,omitempty"`
	// ResolvedDomainID is the domain ID that spec.httpConfig.domainName
	// resolved to.
	// +optional
	ResolvedDomainID string `json:"resolvedDomainId,omitempty"`
	// FullDomain is the host name the resource is served on.
	// +optional
	FullDomain string `json:"fullDomain,omitempty"`
	// BindingMode is "Created" or "Bound".
	// +optional
	BindingMode string `json:"bindingMode,omitempty"`
	// Status is the operator's state of the resource.
	// +optional
	Status ResourceStatusValue `json:"status,omitempty"`
	// URL is the public URL of an HTTP resource.
	// +optional
	URL string `json:"url,omitempty"`
	// ProxyEndpoint is the public endpoint of a TCP or UDP resource.
	// +optional
	ProxyEndpoint string `json:"proxyEndpoint,omitempty"`
	// Conditions are the operator's observations.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the generation the operator last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// SSOEnabled says whether SSO is on in Pangolin.
	// +optional
	SSOEnabled bool `json:"ssoEnabled,omitempty"`
	// BlockAccessEnabled says whether access is blocked until the user has
	// authenticated.
	// +optional
	BlockAccessEnabled bool `json:"blockAccessEnabled,omitempty"`
	// TargetCount is the number of targets configured in Pangolin.
	// +optional
	// +kubebuilder:validation:Format=""
	TargetCount int64 `json:"targetCount,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// PangolinResourceList is a list of PangolinResources.
type PangolinResourceList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []PangolinResource `json:"items"`
}
