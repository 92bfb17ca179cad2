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
