//go:build integration

// Package ingresstunnel holds the integration tests and the benchmark of the ingress-tunnel controller: the
// controller runs as the manager's ServiceAccount with the RBAC from manifests/rbac, on real tenancy views of
// shared informers, against a real kube-apiserver that serves the Pangolin CRDs from test/fixtures/crds, with
// kube-controller-manager's garbage collector collecting the PangolinResources of deleted Ingresses.
package ingresstunnel

import (
	"testing"

	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

var controlPlane *framework.ControlPlane

func TestMain(m *testing.M) {
	metrics.Register()
	framework.Main(m, framework.Options{
		ControllerManager:       true,
		InstallProjectManifests: true,
		ExtraManifestDirs:       []string{"test/fixtures/crds"},
	}, &controlPlane)
}
