//go:build integration

// Package controlplane holds the integration tests that prove the test control plane is the real thing: a real
// kube-apiserver validates and authorizes, a real garbage collector cascades deletes, and the project's CRDs
// install and enforce their schemas. If these fail, no other integration test result can be trusted.
package controlplane

import (
	"testing"

	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

var controlPlane *framework.ControlPlane

func TestMain(m *testing.M) {
	framework.Main(m, framework.Options{ControllerManager: true, InstallProjectManifests: true}, &controlPlane)
}
