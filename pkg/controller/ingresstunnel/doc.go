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

// Package ingresstunnel owns the ingress-tunnel controller: for one tenant, it exposes the Ingresses of the
// Pangolin ingress classes through Pangolin tunnels. For every host of such an Ingress it writes one
// tunnel.pangolin.io PangolinResource, owned by the Ingress and labeled with the tenant, which the pangolin-operator
// pushes to the Pangolin API; it deletes the PangolinResources of hosts the Ingress no longer has, and all of them
// when the Ingress stops being managed. Garbage collection removes them with their Ingress. The hosts the operator
// reports published (the resources' status) are listed in the Ingress's status.loadBalancer (status.go), and the
// errors it reports become Warning Events on the Ingress. A host the tenant may not publish (its
// spec.pangolin.allowedHostnames, allowedhosts.go) gets a Warning, no PangolinResource, and claims nothing.
//
// Where the cluster serves Gateway API, the HTTPRoutes attached to Gateways of the controller's GatewayClasses
// (ControllerName) in the tenant's namespaces are published the same way, one PangolinResource per host owned by
// the route, with the hosts claimed beside the Ingresses' (gateway.go, route.go); the Gateways, their listeners and
// the routes get the statuses Gateway API tools read.
//
// The host parser (host.go) splits a host into Pangolin's subdomain and domain with the public suffix list. What the
// controller decides, the annotations it reads and the Events it records are described in docs/ingress-tunnel.md.
package ingresstunnel
