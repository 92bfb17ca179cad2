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

// Package v3 mirrors the part of Rancher's management.cattle.io/v3 API that
// the namespace-project controller reads: the Project kind.
//
// Rancher owns this API; these types exist so that our controllers get typed
// clients, listers and informers, and so that tests can serve the kind from a
// CRD in test/fixtures/crds. Field names and JSON tags follow Rancher's own
// types (pkg/apis/management.cattle.io/v3 in rancher/rancher); fields we do
// not use, such as resource quotas, are left out and are ignored when
// decoding. Never install the fixture CRD in a cluster that runs Rancher.
//
// +k8s:deepcopy-gen=package
// +k8s:openapi-gen=true
// +groupName=management.cattle.io
package v3
