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

// Package v1alpha1 is version v1alpha1 of the multiproject.io API group: the
// cluster-scoped ProviderConfig that defines a tenant, and the namespaced
// Translation that declares the cloud resources one Kubernetes object needs
// before any of them is created.
//
// The deepcopy functions and the generated client come from
// k8s.io/code-generator; the CRD schemas in manifests/crds come from the
// kubebuilder markers in this package (sigs.k8s.io/controller-tools). Run
// hack/update-codegen.sh after changing anything here.
//
// +k8s:deepcopy-gen=package
// +k8s:openapi-gen=true
// +groupName=multiproject.io
package v1alpha1
