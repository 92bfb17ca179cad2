//go:build integration

// Package neg holds the integration tests and the benchmark of the whole neg controller: the translator and the
// pusher together (neg.New), as the manager's ServiceAccount with the RBAC from manifests/rbac, on tenants' real
// filtered informer views (pkg/tenancy), against a real kube-apiserver and kube-controller-manager's garbage
// collector, with the fake GCE over HTTP through the real compute/v1 client.
package neg

import (
	"testing"

	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

var controlPlane *framework.ControlPlane

func TestMain(m *testing.M) {
	metrics.Register()
	framework.Main(m, framework.Options{ControllerManager: true, InstallProjectManifests: true}, &controlPlane)
}
