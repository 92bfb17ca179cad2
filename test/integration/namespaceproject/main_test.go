//go:build integration

// Package namespaceproject holds the integration tests and benchmark of the namespace-project controller: a real
// kube-apiserver with the Rancher Project CRD fixture, the controller running as the manager's ServiceAccount with
// the RBAC from manifests/rbac, on tenants' real filtered Namespace views from pkg/tenancy.
package namespaceproject

import (
	"testing"

	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

var controlPlane *framework.ControlPlane

func TestMain(m *testing.M) {
	metrics.Register()
	framework.Main(m, framework.Options{
		// The namespace controller, so the tests' namespaces (a thousand in the benchmark) really go away.
		ControllerManager:       true,
		InstallProjectManifests: true,
		ExtraManifestDirs:       []string{"test/fixtures/crds"},
	}, &controlPlane)
}
