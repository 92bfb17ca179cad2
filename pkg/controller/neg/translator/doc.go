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

// Package translator owns the Kubernetes half of the per-tenant `neg` controller.
//
// The translator reads the tenant's Services that carry the `cloud.google.com/neg` annotation, their
// EndpointSlices and the tenant's Nodes, and declares what GCE must hold in Translation objects: one Translation per
// exposed Service port, owned by the Service, listing one zonal NEG per zone of the tenant's Nodes with the complete
// set of ready endpoints in that zone. It writes the `cloud.google.com/neg-status` annotation back on the Service.
// It never calls GCE: the pusher (package pusher) is the only writer to Compute Engine. docs/neg.md describes the
// flow end to end.
package translator
