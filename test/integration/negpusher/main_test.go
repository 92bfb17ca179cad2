//go:build integration

// Package negpusher holds the integration tests of the neg pusher: Translations created directly (as the neg
// translator would) in a real kube-apiserver, the pusher running as the manager's ServiceAccount with the RBAC from
// manifests/rbac, on the tenant's real filtered informer view, and the fake GCE over HTTP through the real
// compute/v1 client.
package negpusher

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
