//go:build integration

// Package providerconfig holds the integration tests of the multi-project framework: the manager (app.Run, in
// process, as the manifests' ServiceAccount) against a real kube-apiserver, with a probe controller per tenant that
// records what its filtered views show. They pin design invariants 1, 2, 4 and 5 on a real API server.
package providerconfig

import (
	"testing"

	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

var controlPlane *framework.ControlPlane

func TestMain(m *testing.M) {
	framework.Main(m, framework.Options{ControllerManager: true, InstallProjectManifests: true}, &controlPlane)
}
