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
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// leaderLossElection: short timings, so that a lost Lease shows within seconds.
var leaderLossElection = leaderElection{leaseDuration: 6 * time.Second, renewDeadline: 4 * time.Second, retryPeriod: 500 * time.Millisecond}

// leaderLossExitMargin: the leader must have exited within the renew deadline plus this of the fault. Its last
// renewal is at most a retry period before the fault, and it gives up a retry period after the renew deadline
// since then: about 4.5 s with leaderLossElection.
const leaderLossExitMargin = 2 * time.Second

// TestLeaderLossWhenAnotherIdentityTakesTheLease: the Lease is written to name another holder, freshly renewed, as
// a replica that believed the Lease expired would. The leader's renewals fail from then on; /healthz fails once its
// last renewal is older than the renew deadline, and the process exits 1 within the renew deadline + 2 s, without
// writing the Lease again.
func TestLeaderLossWhenAnotherIdentityTakesTheLease(t *testing.T) {
	resetLease(t)
	le := leaderLossElection
	m := startManager(t, "a", managerKubeconfig(t), startFakeGCE(t).Endpoint(), le)
	id := m.identity()
	waitLeader(t, id, 2*time.Minute)
	probe := probeHealth(t, m)

	const usurper = "e2e-usurper"
	leases := controlPlane.AdminClient().CoordinationV1().Leases(leaseNamespace)
	var takenAt time.Time
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		lease, err := leases.Get(t.Context(), leaseName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.NewMicroTime(time.Now())
		lease.Spec.HolderIdentity = ptr.To(usurper)
		lease.Spec.AcquireTime, lease.Spec.RenewTime = &now, &now
		// Long enough that the leader, seeing it, never thinks it expired and takes the Lease back.
		lease.Spec.LeaseDurationSeconds = ptr.To[int32](600)
		lease.Spec.LeaseTransitions = ptr.To(ptr.Deref(lease.Spec.LeaseTransitions, 0) + 1)
		_, err = leases.Update(t.Context(), lease, metav1.UpdateOptions{})
		takenAt = time.Now()
		return err
	}); err != nil {
		t.Fatalf("giving the Lease to %s: %v", usurper, err)
	}

	exitedAt := assertLostAndExited(t, m, probe, takenAt, "the Lease was taken")
	t.Logf("Lease taken by another identity: /healthz failed after %s, the process exited 1 after %s (renew deadline %s, retry period %s)",
		probe.firstFailure().Sub(takenAt).Round(10*time.Millisecond), exitedAt.Sub(takenAt).Round(10*time.Millisecond),
		le.renewDeadline, le.retryPeriod)
	if holder, err := leaseHolder(t.Context()); err != nil || holder != usurper {
		t.Errorf("the Lease names %q (%v) after the leader exited, want %s: the leader wrote it after losing it", holder, err, usurper)
	}
}

// TestLeaderLossWhenTheAPIServerHangs: kube-apiserver is paused (SIGSTOP) under a running leader: connections stay
// open and no request is answered, so renewals neither succeed nor fail until their deadline. /healthz fails once the
// last renewal is older than the renew deadline, and the process exits 1 within the renew deadline + 2 s of the
// pause: it waits neither for the controllers nor for the elector's release of the Lease, which would hang as
// well. Then kube-apiserver continues (SIGCONT) and the Lease still names the leader that exited: it released
// nothing.
//
// It pauses the one kube-apiserver of this package, which every test here uses; that is safe only because the
// tests of this package run one after another (none calls t.Parallel, as they share one Lease) and this test
// resumes it and waits for its readiness before returning, also when it fails. Other packages run their own
// control planes.
func TestLeaderLossWhenTheAPIServerHangs(t *testing.T) {
	resetLease(t)
	le := leaderLossElection
	m := startManager(t, "a", managerKubeconfig(t), startFakeGCE(t).Endpoint(), le)
	id := m.identity()
	waitLeader(t, id, 2*time.Minute)
	probe := probeHealth(t, m)

	pid := apiServerPID(t)
	var resumeOnce sync.Once
	resume := func() {
		resumeOnce.Do(func() {
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				t.Errorf("resuming kube-apiserver: %v", err)
			}
			waitAPIServerReady(t)
		})
	}
	// Registered after resetLease's and startManager's cleanups, so it runs before them.
	t.Cleanup(resume)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("pausing kube-apiserver: %v", err)
	}
	pausedAt := time.Now()

	exitedAt := assertLostAndExited(t, m, probe, pausedAt, "kube-apiserver was paused")
	resume()
	t.Logf("kube-apiserver paused: /healthz failed after %s, the process exited 1 after %s (renew deadline %s, retry period %s)",
		probe.firstFailure().Sub(pausedAt).Round(10*time.Millisecond), exitedAt.Sub(pausedAt).Round(10*time.Millisecond),
		le.renewDeadline, le.retryPeriod)
	if holder, err := leaseHolder(t.Context()); err != nil || holder != id {
		t.Errorf("the Lease names %q (%v) after the leader exited, want still %s: it must not release a Lease it lost", holder, err, id)
	}
}

// assertLostAndExited waits for the manager to exit and checks that it exited 1 within the renew deadline plus
// leaderLossExitMargin of faultAt, after /healthz had failed, and that it logged why. It returns when it exited.
func assertLostAndExited(t *testing.T, m *manager, probe *healthProbe, faultAt time.Time, fault string) time.Time {
	t.Helper()
	le := leaderLossElection
	err := m.waitExit(le.leaseDuration + time.Minute)
	exitedAt := time.Now()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 {
		t.Fatalf("after %s the manager exited with %v, want exit status 1; log:\n%s", fault, err, m.logTail(40))
	}
	if d, bound := exitedAt.Sub(faultAt), le.renewDeadline+leaderLossExitMargin; d > bound {
		t.Errorf("the manager exited %s after %s, more than the renew deadline + %s = %s", d, fault, leaderLossExitMargin, bound)
	}
	<-probe.done
	if probe.firstFailure().IsZero() {
		t.Errorf("/healthz never failed between %s and the exit", fault)
	} else if got := probe.failureBody(); !strings.Contains(got, "leader-election failed") {
		t.Errorf("/healthz failed with %q, want the leader-election check named", got)
	}
	if log := m.logTail(100); !strings.Contains(log, "leader election lost") {
		t.Errorf("the manager's log does not say \"leader election lost\":\n%s", log)
	}
	return exitedAt
}

// healthProbe polls a manager's /healthz every 50 ms until the process exits and keeps the first failure.
type healthProbe struct {
	done chan struct{} // closed when the probe stopped

	mu        sync.Mutex
	failedAt  time.Time
	failedMsg string
}

func (p *healthProbe) firstFailure() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failedAt
}

func (p *healthProbe) failureBody() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failedMsg
}

// probeHealth starts polling m's /healthz on its secure port, as waitHealthy does. Only answers count: a request
// that fails (the process exiting) is not a failure of /healthz.
func probeHealth(t *testing.T, m *manager) *healthProbe {
	p := &healthProbe{done: make(chan struct{})}
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a throwaway self-signed certificate
	}}
	url := fmt.Sprintf("https://127.0.0.1:%d/healthz?verbose", m.port)
	go func() {
		defer close(p.done)
		defer client.CloseIdleConnections()
		_ = wait.PollUntilContextCancel(t.Context(), 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			if !m.running() {
				return true, nil
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return false, err
			}
			resp, err := client.Do(req)
			if err != nil {
				return false, nil
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				p.mu.Lock()
				defer p.mu.Unlock()
				p.failedAt, p.failedMsg = time.Now(), fmt.Sprintf("%s: %s", resp.Status, body)
				return true, nil
			}
			return false, nil
		})
	}()
	return p
}

// apiServerPID finds the process of this package's kube-apiserver: the framework names its directory in the
// command line (--cert-dir), and RestartAPIServer may have replaced the process it started first.
func apiServerPID(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	want := "--cert-dir=" + controlPlane.Dir()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue // gone meanwhile
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if filepath.Base(args[0]) == "kube-apiserver" && slices.Contains(args, want) {
			pids = append(pids, pid)
		}
	}
	if len(pids) != 1 {
		t.Fatalf("found kube-apiserver processes %v with %s, want exactly one", pids, want)
	}
	return pids[0]
}

// waitAPIServerReady waits until kube-apiserver answers /readyz with ok.
func waitAPIServerReady(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var last error
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		requestCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		body, err := controlPlane.AdminClient().Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(requestCtx)
		if err == nil && string(body) != "ok" {
			err = fmt.Errorf("/readyz answered %q", body)
		}
		last = err
		return err == nil, nil
	}); err != nil {
		t.Errorf("kube-apiserver not ready after it was resumed: %v (last: %v)", err, last)
	}
}
