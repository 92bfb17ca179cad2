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

package v3

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Keys Rancher uses to record which Project a namespace belongs to.
const (
	// ProjectIDAnnotationKey is the namespace annotation that is Rancher's
	// source of truth for project membership. Its value is
	// "<clusterID>:<projectID>", that is
	// "<Project.metadata.namespace>:<Project.metadata.name>". Rancher's
	// webhook rejects a value without the cluster part, and checks that the
	// writer may "manage-namespaces" on that project.
	ProjectIDAnnotationKey = "field.cattle.io/projectId"
	// ProjectIDLabelKey is the namespace label Rancher derives from the
	// annotation. Its value is the project ID alone (label values may not
	// contain ':'). Setting only the label does not move a namespace.
	ProjectIDLabelKey = "field.cattle.io/projectId"
	// DefaultProjectLabelKey marks a cluster's Default project.
	DefaultProjectLabelKey = "authz.management.cattle.io/default-project"
	// SystemProjectLabelKey marks a cluster's System project.
	SystemProjectLabelKey = "authz.management.cattle.io/system-project"
)

// +genclient
// +genclient:noStatus
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced
// +kubebuilder:printcolumn:name="BACKINGNAMESPACE",type=string,JSONPath=`.status.backingNamespace`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`

// Project is a Rancher project: a group of namespaces of one cluster. Its
// namespace (in the management cluster) is the cluster ID, such as "local"
// or "c-xxxxx", and its name is the project ID, such as "p-xxxxx". Rancher
// does not keep spec.displayName unique, so a lookup by display name can
// find several Projects. Rancher serves no status subresource for Projects.
type Project struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the project's configuration.
	// +optional
	Spec ProjectSpec `json:"spec,omitempty"`

	// Status is written by Rancher.
	// +optional
	Status ProjectStatus `json:"status,omitempty"`
}

// ProjectSpec holds the fields of Rancher's ProjectSpec that we read.
type ProjectSpec struct {
	// DisplayName is the human-readable name of the project.
	// +required
	DisplayName string `json:"displayName"`

	// Description is a human-readable description of the project.
	// +optional
	Description string `json:"description,omitempty"`

	// ClusterName is the ID of the cluster the project belongs to. Rancher's
	// webhook requires it to equal metadata.namespace and makes it
	// immutable.
	// +required
	ClusterName string `json:"clusterName"`
}

// ProjectStatus holds the fields of Rancher's ProjectStatus that we read.
type ProjectStatus struct {
	// Conditions are Rancher's observations of the project.
	// +optional
	Conditions []ProjectCondition `json:"conditions,omitempty"`

	// BackingNamespace is the namespace, in the management cluster, that
	// holds the project's resources ("<clusterName>-<name>"). Set by
	// Rancher's webhook; immutable once set.
	// +optional
	BackingNamespace string `json:"backingNamespace,omitempty"`
}

// ProjectCondition is one of Rancher's conditions on a Project. Rancher
// stores its times as strings, not as metav1.Time.
type ProjectCondition struct {
	// Type of the condition.
	// +required
	Type string `json:"type"`
	// Status of the condition: True, False or Unknown.
	// +required
	Status string `json:"status"`
	// LastUpdateTime is when the condition was last updated.
	// +optional
	LastUpdateTime string `json:"lastUpdateTime,omitempty"`
	// LastTransitionTime is when the status last changed.
	// +optional
	LastTransitionTime string `json:"lastTransitionTime,omitempty"`
	// Reason is a machine-readable reason for the last transition.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message is a human-readable explanation of the last transition.
	// +optional
	Message string `json:"message,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// ProjectList is a list of Projects.
type ProjectList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Project `json:"items"`
}
