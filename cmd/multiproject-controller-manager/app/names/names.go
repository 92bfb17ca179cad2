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
