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
