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

// Package namespaceproject owns the namespace-project controller: for one tenant, it puts each of the tenant's
// Namespaces that carries the app-owner label (default `appOwner`) into the Rancher Project of that display name in
// the tenant's Rancher cluster (ProviderConfig spec.rancher.clusterID).
//
// It matches spec.displayName case-insensitively, and also the project-name labels Rancher users set
// (project.cattle.io/name, cattle.io/projectName, field.cattle.io/projectName), only among the Projects in the
// namespace named by the cluster ID; two matches are an error (Event AmbiguousProject), none waits for such a
// Project to appear (Event ProjectNotFound). It assigns with one patch that sets Rancher's annotation
// field.cattle.io/projectId=<cluster>:<project> (the source of truth), the label field.cattle.io/projectId=<project>
// and its own record of the assignment, so it can tell its assignments from those made by people or by Rancher: it
// moves only its own, and leaves anyone else's alone with an Event.
//
// Rancher keeps the Projects in its management cluster. A manager running there reads them through the shared
// informer; one running in a downstream cluster reads them there, through the kubeconfig Secret that
// spec.rancher.managementClusterKubeconfigSecretRef names, with an informer and a client of the tenant's own
// (remote.go). While that cluster cannot be read nothing is decided, and the condition says why (RancherUnreachable,
// RancherForbidden, CredentialsUnavailable). docs/namespace-project.md describes the decisions, Events, condition,
// RBAC and measurements.
package namespaceproject
