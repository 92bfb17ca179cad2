// Package framework owns the real control plane that this project's integration tests (and hack/local-up.sh) run
// against: an etcd with a throwaway data directory, a kube-apiserver with RBAC authorization and ServiceAccount
// tokens, and optionally a kube-controller-manager that runs only the garbage collector and the namespace
// controller. It finds or builds the binaries (hack/build-controlplane.sh), starts them on free loopback ports,
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
// The package itself has no build tag so that `go vet ./...` checks it; the integration tests that use it carry
// the `integration` build tag, which keeps `go test ./...` a fast unit run.
package framework
