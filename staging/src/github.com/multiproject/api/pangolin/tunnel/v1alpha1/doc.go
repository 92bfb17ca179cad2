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

// Package v1alpha1 mirrors the pangolin-operator's tunnel.pangolin.io/v1alpha1
// API kinds that the ingress-tunnel controller uses: PangolinTunnel, which it
// reads, and PangolinResource, which it writes.
//
// The pangolin-operator owns this API. These types exist so that our
// controllers get typed clients, listers and informers, and so that tests can
// serve the kinds from CRDs in test/fixtures/crds. JSON names, required
// fields, lengths, ranges, enums and defaults follow the operator's CRD
// schema exactly, because a PangolinResource we write must be accepted by the
// operator's real CRD; see docs/api.md for the few places where the Go types
// differ (pointers where the operator uses plain structs). Never install the
// fixture CRDs in a cluster that runs the operator.
//
// +k8s:deepcopy-gen=package
// +k8s:openapi-gen=true
// +groupName=tunnel.pangolin.io
package v1alpha1
