// Package neg owns the Kubernetes half of the per-tenant `neg` controller and the composition of both halves.
//
// The translator reads the tenant's Services that carry the `cloud.google.com/neg` annotation, their
// EndpointSlices and the tenant's Nodes, and declares what GCE must hold in Translation objects: one Translation per
// exposed Service port, owned by the Service, listing one zonal NEG per zone of the tenant's Nodes with the complete
// set of ready endpoints in that zone. It writes the `cloud.google.com/neg-status` annotation back on the Service.
// It never calls GCE: the pusher (package pusher) is the only writer to Compute Engine. Descriptor runs both for a
// tenant. docs/neg.md describes the flow end to end.
package neg
