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
	framework.Main(m, framework.Options{ControllerManager: true, InstallProjectManifests: true,
		// The Rancher and Pangolin CRDs, which the real controllers of BenchmarkIdleTenantsAndRestart require.
		ExtraManifestDirs: []string{"test/fixtures/crds"}}, &controlPlane)
}
