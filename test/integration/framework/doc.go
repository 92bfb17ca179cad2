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

// Package framework owns the real control plane that this project's integration tests (and hack/local-up.sh) run
// against: an etcd with a throwaway data directory, a kube-apiserver with RBAC authorization and ServiceAccount
// tokens, and optionally a kube-controller-manager that runs the garbage collector and the namespace controller (and
// whatever more controllers a package asks for, such as deployment, replicaset and endpointslice). It finds or builds the binaries (hack/build-controlplane.sh), starts them on free loopback ports,
// waits until each one is ready, installs the project's manifests, hands out clients and isolated namespaces,
// and stops every process it started, also when a test fails or panics.
//
// A test package uses it from TestMain:
//
//	var controlPlane *framework.ControlPlane
//
//	func TestMain(m *testing.M) {
//		framework.Main(m, framework.Options{ControllerManager: true}, &controlPlane)
//	}
//
// Every test starts from NewEnv: a context that ends with the test, admin clients for its fixtures, clients of the
// manager's ServiceAccount, and a fake GCE if it asks for one. The manager itself is the binary's, run in process:
// its config comes from app.NewOptions and Options.Config (ManagerProcessConfig, with a test's values where the
// binary has flags), and RunManager runs app.Run on it, as the providerconfig tests do. Controller tests use
// StartManager, which runs the same process's controller context (app.CreateControllerContext and
// app.StartControllers: the shared informers, the tenancy Router and the real ProviderConfig controller with its
// ControllersManager) as a shard of its own, for which the test plays the sharder: it creates a ProviderConfig
// (Manager.Create) and says when the tenant runs (Tenant.Start labels it for the shard) and when it no longer does
// (Tenant.Stop removes the label, and the controllers stop without cleanup).
//
// There are no real Nodes and no kubelet: StartKubelet plays the kubelet of a test's fake Nodes, so that Pods bound
// to them become Running and Ready (and go away when deleted) as on a cluster.
//
// The package itself has no build tag so that `go vet ./...` checks it; the integration tests that use it carry
// the `integration` build tag, which keeps `go test ./...` a fast unit run.
package framework
