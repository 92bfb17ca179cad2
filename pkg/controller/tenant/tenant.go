// Package tenant defines what a per-tenant controller is to the manager that runs it: the Controller it returns,
// the Context it is built from and the Constructor that builds it. Controllers (neg, namespace-project,
// ingress-tunnel) implement Constructor; the manager owns everything else.
package tenant

import (
	"context"

	"k8s.io/client-go/kubernetes"
)

// Controller is one per-tenant controller instance.
type Controller interface {
	// Name is the controller's canonical name, as in --controllers.
	Name() string
	// Run blocks until ctx ends, then returns only after every goroutine it started is gone.
	Run(ctx context.Context)
}

// Context is what a per-tenant controller is built from.
type Context struct {
	// ProviderConfigName names the tenant.
	ProviderConfigName string
	// KubeClient talks to the cluster's API server.
	KubeClient kubernetes.Interface
	// Workers is the controller's --concurrent-<name>-syncs.
	Workers int
}

// Constructor builds a controller for one tenant. It returns (nil, nil) when the tenant does not configure the
// controller (for example a ProviderConfig without a gcp section for neg).
type Constructor func(ctx context.Context, c *Context) (Controller, error)
