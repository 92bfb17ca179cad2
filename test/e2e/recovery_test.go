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

// TestRestartedLeaderResumesItsLease crashes the leader's container, then kube-apiserver, then etcd, under churn, with
// the shipped leader election and the identity the shipped manifests give (--leader-elect-identity from the Pod's
// name and UID, which survive a container restart). Each time the process is started again as the kubelet would, in the
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
	now := time.Now()
	b := start("a-restart-1")
	churn(1, services/2, services)
	checkRecovery(t, w, identity, "the leader's container restarted", outage{back: now, served: now}, le)

	// kube-apiserver dies; the leader cannot renew and exits 1 once its renew deadline has passed (its Lease still
	// names it, never released); kube-apiserver comes back, and so does the container.
	o := downUntilTheLeaderExits(t, b, le, "kube-apiserver", controlPlane.StopAPIServer, controlPlane.StartAPIServer)
	c := start("a-restart-2")
	churn(2, 0, services)
	checkRecovery(t, w, identity, "kube-apiserver and the leader's container restarted", o, le)

	// etcd dies: kube-apiserver still answers, but cannot read or write the Lease, and the leader exits as above.
	// kube-apiserver reconnects to etcd on its own once it is back, and that wait counts into the recovery.
	o = downUntilTheLeaderExits(t, c, le, "etcd", controlPlane.StopEtcd, controlPlane.StartEtcd)
	d := start("a-restart-3")
	churn(3, 0, services)
	checkRecovery(t, w, identity, "etcd and the leader's container restarted", o, le)

	w.teardown()
	if !d.running() {
		t.Fatalf("the restarted manager exited: %v", d.waitErr)
	}
}

// outage is when a failed component was back, and when kube-apiserver was ready to serve again after it: later than
// back only after etcd was down, since kube-apiserver reconnects to it on its own, with backoff.
type outage struct{ back, served time.Time }

// downUntilTheLeaderExits stops a control-plane component (a crash: SIGKILL), waits until the leader, unable to renew
// its Lease, exits 1 once its renew deadline has passed, and starts the component again. It returns when the
// component was back and when kube-apiserver was ready again. If the test fails before that, the component is started
// again for the tests after it.
func downUntilTheLeaderExits(t *testing.T, leader *manager, le leaderElection, component string, stop func() error, start func(context.Context) error) outage {
	t.Helper()
	stoppedAt := time.Now()
	if err := stop(); err != nil {
		t.Fatalf("stopping %s: %v", component, err)
	}
	down := true
	t.Cleanup(func() {
		if down {
			if err := start(context.Background()); err != nil {
				t.Errorf("starting %s again: %v", component, err)
			}
		}
	})
	if err := leader.waitExit(le.renewDeadline + le.retryPeriod + time.Minute); err == nil {
		t.Fatalf("the leader exited 0 when it lost its Lease to a dead %s", component)
	}
	t.Logf("%s down: the leader exited after %s", component, time.Since(stoppedAt).Round(100*time.Millisecond))
	if err := start(t.Context()); err != nil {
		t.Fatalf("starting %s again: %v", component, err)
	}
	down = false
	back := time.Now()
	if err := controlPlane.WaitAPIServerReady(t.Context()); err != nil {
		t.Fatalf("kube-apiserver not ready after %s's return: %v", component, err)
	}
	o := outage{back: back, served: time.Now()}
	t.Logf("%s was down %s; kube-apiserver ready %s after it was back", component,
		back.Sub(stoppedAt).Round(100*time.Millisecond), o.served.Sub(back).Round(100*time.Millisecond))
	return o
}

// checkRecovery waits until the restarted process holds the Lease and every NEG is exact again, and fails unless the
// Lease was resumed well inside the lease duration of kube-apiserver serving again (a new identity would wait it out
// whole from its first read of the record) and everything converged within the lease duration plus recoveryMargin of
// the failed component being back.
func checkRecovery(t *testing.T, w *workload, identity, what string, o outage, le leaderElection) {
	t.Helper()
	resumed := waitLeaseRenewed(t, identity, o.served, le.leaseDuration+2*time.Minute).Sub(o.served)
	w.waitConverged(what)
	exact := time.Since(o.back)
	t.Logf("%s: the Lease renewed by the same identity %s after kube-apiserver served again, every NEG exact %s after the component was back (lease duration %s)",
		what, resumed.Round(100*time.Millisecond), exact.Round(100*time.Millisecond), le.leaseDuration)
	if resumed >= le.leaseDuration/2 {
		t.Errorf("%s: the restarted process renewed its own Lease only %s after kube-apiserver served again: it waited out its predecessor's lease (%s)",
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
