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

// Package e2e holds the end-to-end production-readiness tests of multiproject-controller-manager: the built binary
// (./cmd/multiproject-controller-manager), run as separate processes with the ServiceAccount and RBAC from
// manifests/, against a real etcd, kube-apiserver and kube-controller-manager (garbage collector, namespace,
// deployment, replicaset and endpointslice controllers) from test/integration/framework, with a stand-in kubelet
// for the Pods of fake Nodes and an in-process fake GCE (pkg/gce/fakegce) over HTTP.
//
// What they show:
//   - leader failover: the leader SIGKILLed while its controllers have work in flight; the standby takes over
//     within the lease duration plus a margin and converges, with no GCE NEG, PangolinResource or namespace
//     assignment duplicated, lost or left behind (TestLeaderFailoverOnSIGKILL);
//   - graceful handover: SIGTERM releases the Lease and the standby takes over at once, long before the lease
//     would expire (TestLeaderHandoverOnSIGTERM);
//   - least privilege: no "forbidden" in any manager log (checked for every process these tests start),
//     SubjectAccessReviews pin what the ServiceAccount may and may not do, and manifests/ applies cleanly with a
//     server-side dry run (TestLeastPrivilege, TestManifestsServerSideDryRun);
//   - every grant used: the API server's audit log records the ServiceAccount's requests, and once the whole
//     package has run, hack/tools/rbacaudit fails it if the manifests grant a verb no test used and no comment in
//     the manifest explains (rbacAudit);
//   - NEG readiness gates: a Deployment rolled out behind a NEG Service never leaves the NEG without serving Pods
//     when its Pods declare the gate, and the window without it is measured (TestNEGReadinessGate).
//
// The tests run one after another: leader election uses the one Lease (kube-system/multiproject-controller-manager)
// that the manifests' Role lets the ServiceAccount use, so every test deletes it before and after itself.
package e2e

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

var controlPlane *framework.ControlPlane

func TestMain(m *testing.M) {
	framework.Main(m, framework.Options{
		// The garbage collector removes Translations and PangolinResources with their owners, and namespaces
		// really go away.
		ControllerManager: true,
		// Deployments roll out, and selector Services get EndpointSlices, from the Pods the stand-in kubelet runs.
		ExtraControllers:        []string{"deployment", "replicaset", "endpointslice"},
		InstallProjectManifests: true,
		// Rancher Projects, PangolinTunnels and PangolinResources.
		ExtraManifestDirs: []string{"test/fixtures/crds"},
		// The ServiceAccount's requests, for rbacAudit.
		AuditPolicy: "test/fixtures/audit/policy.yaml",
		AfterTests:  rbacAudit,
		// Server-side sharded list and watch (KEP-5866, alpha) for the shards run with --sharded-watch. It changes
		// only requests that carry a shard selector, which no other test's process sends.
		// The framework's /24 of Service IPs holds 254 Services; BenchmarkShardedReplicas makes one per tenant for
		// 300 tenants and more.
		APIServerFlags: []string{"--feature-gates=ShardedListAndWatch=true", "--service-cluster-ip-range=10.0.0.0/16"},
	}, &controlPlane)
}

// rbacAudit compares what manifests/rbac and overlays/sharded/rbac.yaml grant the manager's ServiceAccount with what
// it requested in these tests (the audit log), and prints the report: granted and used, unused with the reason its
// manifest gives, unused without one. It fails the package on a grant unused without a reason, but only when every
// test ran and passed: a run of a few tests (-run) uses a few grants.
func rbacAudit(cp *framework.ControlPlane, passed bool) error {
	cmd := exec.Command("go", "run", "./hack/tools/rbacaudit", "-audit-log", cp.AuditLogPath(),
		"manifests/rbac", "overlays/sharded/rbac.yaml")
	cmd.Dir = cp.RepoRoot()
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	err := cmd.Run()
	whole := flag.Lookup("test.run").Value.String() == "" && flag.Lookup("test.skip").Value.String() == ""
	switch {
	case err == nil:
		return nil
	case !whole || !passed:
		fmt.Fprintf(os.Stderr, "rbacaudit: %v (not failing: only the whole package, passing, proves a grant unused)\n", err)
		return nil
	default:
		return fmt.Errorf("rbacaudit: %w", err)
	}
}
