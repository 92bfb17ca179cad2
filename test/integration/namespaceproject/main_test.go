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
