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

// TunnelStatusReady is the value of PangolinTunnelStatus.Status once the
// operator has a working site for the tunnel. The operator's readiness field
// is status.status, not a phase or a condition.
const TunnelStatusReady = "Ready"

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=ptunnel
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Site ID",type=integer,JSONPath=`.status.siteId`
// +kubebuilder:printcolumn:name="Nice ID",type=string,JSONPath=`.status.niceId`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.status`
// +kubebuilder:printcolumn:name="Binding Mode",type=string,JSONPath=`.status.bindingMode`
// +kubebuilder:printcolumn:name="Online",type=boolean,JSONPath=`.status.online`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// PangolinTunnel is a Pangolin site (a Newt or WireGuard tunnel into the
// cluster) managed by the pangolin-operator. PangolinResources name the
// tunnel their traffic goes through.
type PangolinTunnel struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the tunnel's configuration.
	// +optional
	Spec PangolinTunnelSpec `json:"spec,omitempty"`

	// Status is written by the operator.
	// +optional
	Status PangolinTunnelStatus `json:"status,omitempty"`
}

// PangolinTunnelSpec is the desired tunnel. It either creates a new site
// (siteName, siteType) or binds to an existing one (siteId or niceId).
type PangolinTunnelSpec struct {
	// OrganizationRef names the PangolinOrganization the site belongs to.
	// +required
	OrganizationRef OrganizationReference `json:"organizationRef"`

	// SiteName is the name of a site to create.
	// +optional
	SiteName string `json:"siteName,omitempty"`

	// SiteType is the type of a site to create (newt, wireguard or local);
	// the organization's default applies when empty.
	// +optional
	SiteType string `json:"siteType,omitempty"`

	// SiteID binds the tunnel to an existing site by its numeric ID.
	// +optional
	// +kubebuilder:validation:Format=""
	SiteID *int64 `json:"siteId,omitempty"`

	// NiceID binds the tunnel to an existing site by its human-readable ID.
	// +optional
	NiceID string `json:"niceId,omitempty"`

	// NewtClient configures the Newt client Deployment, overriding the
	// organization's defaults.
	// +optional
	NewtClient *NewtClientConfig `json:"newtClient,omitempty"`

	// Config is free-form configuration passed through to the site.
	// +optional
	Config map[string]string `json:"config,omitempty"`
}

// OrganizationReference names a PangolinOrganization.
type OrganizationReference struct {
	// Name of the PangolinOrganization.
	// +required
	Name string `json:"name"`
}

// NewtClientConfig configures the Newt client the operator deploys for a
// site.
type NewtClientConfig struct {
	// Enabled deploys the Newt client.
	// +optional
	Enabled bool `json:"enabled,omitempty"`
	// Replicas of the Newt client Deployment.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// Image of the Newt client.
	// +optional
	Image string `json:"image,omitempty"`
}

// PangolinTunnelStatus is what the operator last learned about the site.
type PangolinTunnelStatus struct {
	// SiteID is the site's numeric ID in Pangolin.
	// +optional
	// +kubebuilder:validation:Format=""
	SiteID int64 `json:"siteId,omitempty"`
	// NiceID is the site's human-readable ID in Pangolin.
	// +optional
	NiceID string `json:"niceId,omitempty"`
	// SiteName is the site's name in Pangolin.
	// +optional
	SiteName string `json:"siteName,omitempty"`
	// SiteType is the site's type in Pangolin.
	// +optional
	SiteType string `json:"siteType,omitempty"`
	// Online says whether the site is connected.
	// +optional
	Online bool `json:"online,omitempty"`
	// Subnet is the site's subnet.
	// +optional
	Subnet string `json:"subnet,omitempty"`
	// Address is the site's address.
	// +optional
	Address string `json:"address,omitempty"`
	// Endpoint is the site's endpoint.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
	// NewtID is the ID of the site's Newt client.
	// +optional
	NewtID string `json:"newtId,omitempty"`
	// NewtSecretRef names the Secret with the Newt client's credentials.
	// +optional
	NewtSecretRef string `json:"newtSecretRef,omitempty"`
	// ReadyReplicas of the Newt client Deployment.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// BindingMode is "Created" or "Bound".
	// +optional
	BindingMode string `json:"bindingMode,omitempty"`
	// Status is the tunnel's state; TunnelStatusReady when usable.
	// +optional
	Status string `json:"status,omitempty"`
	// Conditions are the operator's observations.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the generation the operator last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// PangolinTunnelList is a list of PangolinTunnels.
type PangolinTunnelList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []PangolinTunnel `json:"items"`
}
