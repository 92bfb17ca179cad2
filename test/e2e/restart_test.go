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

package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestAPIServerRestartIsSurvived restarts kube-apiserver under a running leader: every connection drops and every
// watch ends, and the apiserver's watch cache starts afresh, so informers resuming from their last resourceVersion
// may be told it is too old (410 Gone) and relist. The manager must ride it out in the same process, keep its
// Lease (the renew deadline is longer than the restart) and converge changes made after the restart.
func TestAPIServerRestartIsSurvived(t *testing.T) {
	resetLease(t)
	gce := startFakeGCE(t)
	w := newWorkload(t, gce)
	le := leaderElection{leaseDuration: 90 * time.Second, renewDeadline: 60 * time.Second, retryPeriod: 500 * time.Millisecond}
	a := startManager(t, "a", managerKubeconfig(t), gce.Endpoint(), le)
	idA := a.identity()
	waitLeader(t, idA, 2*time.Minute)

	w.setService("svc-0", w.endpoints(0, 0, 3))
	ns := w.addNamespace("alpha")
	w.setIngress("ing-0", hosts(0, "a", "b")...)
	w.waitConverged("before the restart")

	restartedAt := time.Now()
	logBefore := a.logSize()
	if err := controlPlane.RestartAPIServer(t.Context()); err != nil {
		t.Fatalf("restarting kube-apiserver: %v", err)
	}
	t.Logf("kube-apiserver was down and back in %s", time.Since(restartedAt).Round(10*time.Millisecond))
	// Until it is ready, a starting kube-apiserver may refuse requests because its RBAC authorizer has not loaded
	// the roles yet: a refusal logged in that window is the restart, not the manifests' RBAC. Anything after
	// readiness still counts.
	a.allowForbidden(logBefore, a.logSize())

	// Changes of every kind after the restart reach the backends only if the informers re-established their watches.
	w.setService("svc-0", w.endpoints(0, 1, 2))
	w.setService("svc-1", w.endpoints(1, 0, 2))
	w.setOwner(ns, "beta")
	w.setIngress("ing-0", hosts(0, "a", "c")...)
	w.setIngress("ing-1", hosts(1, "a")...)
	w.waitConverged("after the restart")

	if !a.running() {
		t.Fatalf("the manager exited across the API server restart: %v\n%s", a.waitErr, a.logTail(40))
	}
	assertLeader(t, idA)
	if log := a.logTail(400); strings.Contains(log, "leader election lost") {
		t.Errorf("the manager lost its lease across the restart:\n%s", log)
	}
	w.teardown()
}
