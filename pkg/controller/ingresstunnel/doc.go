// Package ingresstunnel owns the ingress-tunnel controller: for one tenant, it exposes the Ingresses of the
// Pangolin ingress classes through Pangolin tunnels. For every host of such an Ingress it writes one
// tunnel.pangolin.io PangolinResource, owned by the Ingress and labeled with the tenant, which the pangolin-operator
// pushes to the Pangolin API; it deletes the PangolinResources of hosts the Ingress no longer has, and all of them
// when the Ingress stops being managed. Garbage collection removes them with their Ingress.
//
// The host parser (host.go) splits a host into Pangolin's subdomain and domain with the public suffix list. What the
// controller decides, the annotations it reads and the Events it records are described in docs/ingress-tunnel.md.
package ingresstunnel
