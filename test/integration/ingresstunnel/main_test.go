//go:build integration

/*
Copyright The multiproject-controller-manager Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

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
