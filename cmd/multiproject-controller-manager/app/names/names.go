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

// Package names holds the canonical names of the component and of its per-tenant controllers. A controller, once
// released, keeps its name forever; a rename keeps the old name as an alias in its descriptor.
package names

const (
	// ComponentName is the binary, its user agent, its event source and its default Lease.
	ComponentName = "multiproject-controller-manager"

	// NEGController keeps GCE zonal network endpoint groups in step with Services.
	NEGController = "neg"
	// NamespaceProjectController assigns tenant namespaces to Rancher projects.
	NamespaceProjectController = "namespace-project"
	// IngressTunnelController writes PangolinResources for Pangolin-class Ingresses.
	IngressTunnelController = "ingress-tunnel"
)
