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
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// shippedLeaderElection is the leader election of the shipped manifests (the flags' defaults).
var shippedLeaderElection = leaderElection{leaseDuration: 15 * time.Second, renewDeadline: 10 * time.Second, retryPeriod: 2 * time.Second}

// recoveryMargin is what the recovery bound allows beyond the lease duration, from the moment the failed component is
// back: the restarted process's start and cache sync, and the NEG changes queued meanwhile.
const recoveryMargin = 5 * time.Second

// TestRestartedLeaderResumesItsLease crashes the leader's container and then kube-apiserver under churn, with the
// shipped leader election and the identity the shipped manifests give (--leader-elect-identity from the Pod's name
// and UID, which survive a container restart). Each time the process is started again as the kubelet would, in the
// same Pod, with the same flags: it finds its own identity in the Lease and renews it at once, where a new identity
// would wait out the whole lease duration from its first read of the record. Every NEG is exact again within the
// lease duration plus recoveryMargin, measured from the moment the failed component is back.
func TestRestartedLeaderResumesItsLease(t *testing.T) {
	resetLease(t)
	gce := startFakeGCE(t)
	w := newWorkload(t, gce)
	le := shippedLeaderElection
	const identity = "multiproject-controller-manager-7d9f5c6b8-x2x4q_4f6c1e2a-5b7d-4e8f-9a0b-1c2d3e4f5a6b"
	kubeconfig := managerKubeconfig(t)
	start := func(name string) *manager {
		return startManager(t, name, kubeconfig, gce.Endpoint(), le, "--leader-elect-identity="+identity)
	}
	const services = 10
	churn := func(gen, from, to int) {
		for i := from; i < to; i++ {
			w.setService(fmt.Sprintf("svc-%d", i), w.endpoints(i, gen, 2))
		}
	}

	a := start("a")
	waitLeaseRenewed(t, identity, time.Time{}, 2*time.Minute)
	churn(0, 0, services)
	w.waitConverged("before the faults")

	// The leader's container is killed; endpoints change while it is down and right after it is back.
	a.signal(syscall.SIGKILL)
	_ = a.waitExit(time.Minute)
	churn(1, 0, services/2)
	back := time.Now()
	b := start("a-restart-1")
	churn(1, services/2, services)
	checkRecovery(t, w, identity, "the leader's container restarted", back, le)

	// kube-apiserver dies; the leader cannot renew and exits 1 once its renew deadline has passed (its Lease still
	// names it, never released); kube-apiserver comes back, and so does the container.
	stoppedAt := time.Now()
	if err := controlPlane.StopAPIServer(); err != nil {
		t.Fatalf("stopping kube-apiserver: %v", err)
	}
	apiServerDown := true
	t.Cleanup(func() {
		if apiServerDown {
			if err := controlPlane.StartAPIServer(context.Background()); err != nil {
				t.Errorf("starting kube-apiserver again: %v", err)
			}
		}
	})
	if err := b.waitExit(le.renewDeadline + le.retryPeriod + time.Minute); err == nil {
		t.Fatalf("the leader exited 0 when it lost its Lease to a dead kube-apiserver")
	}
	t.Logf("kube-apiserver down: the leader exited after %s", time.Since(stoppedAt).Round(100*time.Millisecond))
	if err := controlPlane.StartAPIServer(t.Context()); err != nil {
		t.Fatalf("starting kube-apiserver again: %v", err)
	}
	apiServerDown = false
	back = time.Now()
	t.Logf("kube-apiserver was down %s", back.Sub(stoppedAt).Round(100*time.Millisecond))
	c := start("a-restart-2")
	churn(2, 0, services)
	checkRecovery(t, w, identity, "kube-apiserver and the leader's container restarted", back, le)

	w.teardown()
	if !c.running() {
		t.Fatalf("the restarted manager exited: %v", c.waitErr)
	}
}

// checkRecovery waits until the restarted process holds the Lease and every NEG is exact again, logs both times from
// back (when the failed component was back), and fails unless the Lease was resumed well inside the lease duration
// (a new identity would wait it out whole) and everything converged within the lease duration plus recoveryMargin.
func checkRecovery(t *testing.T, w *workload, identity, what string, back time.Time, le leaderElection) {
	t.Helper()
	resumed := waitLeaseRenewed(t, identity, back, le.leaseDuration+2*time.Minute).Sub(back)
	w.waitConverged(what)
	exact := time.Since(back)
	t.Logf("%s: the Lease renewed by the same identity %s after it was back, every NEG exact after %s (lease duration %s)",
		what, resumed.Round(100*time.Millisecond), exact.Round(100*time.Millisecond), le.leaseDuration)
	if resumed >= le.leaseDuration/2 {
		t.Errorf("%s: the restarted process renewed its own Lease only %s after it was back: it waited out its predecessor's lease (%s)",
			what, resumed.Round(100*time.Millisecond), le.leaseDuration)
	}
	if bound := le.leaseDuration + recoveryMargin; exact > bound {
		t.Errorf("%s: every NEG exact only %s after it was back, more than the lease duration + %s = %s",
			what, exact.Round(100*time.Millisecond), recoveryMargin, bound)
	}
}

// waitLeaseRenewed waits until the Lease names identity with a renewal after since, and returns when it first did.
func waitLeaseRenewed(t testing.TB, identity string, since time.Time, timeout time.Duration) time.Time {
	t.Helper()
	var at time.Time
	leases := controlPlane.AdminClient().CoordinationV1().Leases(leaseNamespace)
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		lease, err := leases.Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil {
			return false, nil // not created yet, or the API server is still starting: the timeout bounds this
		}
		spec := lease.Spec
		if spec.HolderIdentity == nil || *spec.HolderIdentity != identity || spec.RenewTime == nil || !spec.RenewTime.After(since) {
			return false, nil
		}
		at = time.Now()
		return true, nil
	})
	if err != nil {
		holder, herr := leaseHolder(t.Context())
		t.Fatalf("the Lease was not renewed by %s after %s within %s (holder %q, %v)", identity, since.Format(time.RFC3339Nano), timeout, holder, herr)
	}
	return at
}
