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
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

// The Lease the manifests' Role lets the ServiceAccount get and update (manifests/rbac/leader-election.yaml); a
// Lease of another name would be forbidden, so every test uses this one, one test at a time.
const (
	leaseNamespace = "kube-system"
	leaseName      = "multiproject-controller-manager"
)

// leaderElection is a manager's --leader-elect-* durations.
type leaderElection struct {
	leaseDuration, renewDeadline, retryPeriod time.Duration
}

var (
	buildOnce   sync.Once
	buildErr    error
	managerPath string
)

// managerBinary builds ./cmd/multiproject-controller-manager once per test run, into the control plane's directory
// (removed with it, kept when tests fail), with the version stamped as `make build` stamps it (hack/version.sh).
func managerBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		managerPath = filepath.Join(controlPlane.Dir(), "bin", "multiproject-controller-manager")
		ldflags, err := exec.Command(filepath.Join(controlPlane.RepoRoot(), "hack", "version.sh")).Output()
		if err != nil {
			buildErr = fmt.Errorf("hack/version.sh: %w", err)
			return
		}
		// With hack/release.sh's flags (static, -trimpath): the binary under test is built as the one a release
		// ships, and the compile is the one test/packaging's release build then finds in Go's build cache.
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", strings.TrimSpace(string(ldflags)), "-o", managerPath,
			"./cmd/multiproject-controller-manager")
		cmd.Dir, cmd.Env = controlPlane.RepoRoot(), append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/multiproject-controller-manager: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return managerPath
}

// starter forks every manager from one goroutine locked to one OS thread that never exits: Pdeathsig fires when
// the forking thread exits (golang/go#27505), so a manager forked from an arbitrary thread could be killed in the
// middle of a test; forked from this one, it dies with the test binary and not before.
var starter = sync.OnceValue(func() chan func() {
	requests := make(chan func())
	go func() {
		runtime.LockOSThread()
		for f := range requests {
			f()
		}
	}()
	return requests
})

func startLocked(cmd *exec.Cmd) error {
	result := make(chan error, 1)
	starter() <- func() { result <- cmd.Start() }
	return <-result
}

// manager is one multiproject-controller-manager process, the leader of its own process group.
type manager struct {
	t       testing.TB
	name    string
	cmd     *exec.Cmd
	logPath string
	port    int
	exited  chan struct{}
	waitErr error // valid once exited is closed

	// forbiddenAllowed are byte ranges of the log in which "forbidden" is expected: a kube-apiserver that is
	// starting serves requests before its RBAC authorizer has loaded the roles, and refuses them meanwhile.
	forbiddenAllowed [][2]int64
	// forbiddenMessages are refusals that are not RBAC's, allowed anywhere in the log (allowForbiddenMessage).
	forbiddenMessages []string
}

// logSize is the current length of the manager's log, to mark a range of it.
func (m *manager) logSize() int64 {
	info, err := os.Stat(m.logPath)
	if err != nil {
		m.t.Fatalf("manager %s's log: %v", m.name, err)
	}
	return info.Size()
}

// allowForbidden exempts the log written between the offsets from checkNoForbidden.
func (m *manager) allowForbidden(from, to int64) {
	m.forbiddenAllowed = append(m.forbiddenAllowed, [2]int64{from, to})
}

// allowForbiddenMessage exempts the log lines containing message from checkNoForbidden: a refusal the API server
// answers with "forbidden" that no RBAC rule causes.
func (m *manager) allowForbiddenMessage(message string) {
	m.forbiddenMessages = append(m.forbiddenMessages, message)
}

// managerKubeconfig writes a kubeconfig for the manifests' ServiceAccount kube-system/multiproject-controller-manager
// (a TokenRequest token), so the binary runs with exactly the permissions of manifests/rbac.
func managerKubeconfig(t testing.TB) string {
	t.Helper()
	cfg, err := controlPlane.ManagerConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "manager.kubeconfig")
	if err := framework.WriteKubeconfig(path, cfg); err != nil {
		t.Fatal(err)
	}
	return path
}

// startManager starts the binary as the ServiceAccount, with the fake GCE, leader election le, a secure port of its
// own and extraArgs after the others. Its log goes to a file in the control plane's directory (kept when a test
// fails). When the test ends the process group is killed, the log is checked for "forbidden", and on failure its
// tail is printed.
func startManager(t testing.TB, name, kubeconfig, gceEndpoint string, le leaderElection, extraArgs ...string) *manager {
	t.Helper()
	return startManagerBinary(t, managerBinary(t), name, kubeconfig, gceEndpoint, le, extraArgs...)
}

// startManagerBinary is startManager with another build of the manager (a benchmark's baseline).
func startManagerBinary(t testing.TB, binary, name, kubeconfig, gceEndpoint string, le leaderElection, extraArgs ...string) *manager {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	m := &manager{
		t:       t,
		name:    name,
		logPath: filepath.Join(controlPlane.Dir(), fmt.Sprintf("%s-%s.log", strings.ReplaceAll(t.Name(), "/", "_"), name)),
		port:    port,
		exited:  make(chan struct{}),
	}
	logFile, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	m.cmd = exec.Command(binary,
		"--kubeconfig="+kubeconfig,
		"--controllers=*",
		"--leader-elect=true",
		"--leader-elect-resource-namespace="+leaseNamespace,
		"--leader-elect-resource-name="+leaseName,
		"--leader-elect-lease-duration="+le.leaseDuration.String(),
		"--leader-elect-renew-deadline="+le.renewDeadline.String(),
		"--leader-elect-retry-period="+le.retryPeriod.String(),
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port),
		"--gce-endpoint="+gceEndpoint,
		"--gce-qps=200", "--gce-burst=400",
		"--kube-api-qps=100", "--kube-api-burst=200",
		"--cluster-name=e2e",
		// The default --kube-api-content-type (protobuf) stays: the CRD clients must speak JSON regardless, and
		// these tests are what pins it.
		"--v=2",
	)
	m.cmd.Args = append(m.cmd.Args, extraArgs...)
	m.cmd.Stdout, m.cmd.Stderr = logFile, logFile
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := startLocked(m.cmd); err != nil {
		_ = logFile.Close()
		t.Fatalf("starting manager %s: %v", name, err)
	}
	go func() {
		m.waitErr = m.cmd.Wait()
		_ = logFile.Close()
		close(m.exited)
	}()
	t.Cleanup(func() {
		m.signal(syscall.SIGKILL)
		<-m.exited
		m.checkNoForbidden()
		if t.Failed() {
			t.Logf("last lines of manager %s's log %s:\n%s", name, m.logPath, m.logTail(60))
		}
	})
	m.waitHealthy()
	return m
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// signal sends sig to the manager's whole process group.
func (m *manager) signal(sig syscall.Signal) {
	if err := syscall.Kill(-m.cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		m.t.Errorf("sending %v to manager %s: %v", sig, m.name, err)
	}
}

func (m *manager) running() bool {
	select {
	case <-m.exited:
		return false
	default:
		return true
	}
}

// waitExit waits until the process has exited and returns its exit error.
func (m *manager) waitExit(timeout time.Duration) error {
	m.t.Helper()
	select {
	case <-m.exited:
		return m.waitErr
	case <-time.After(timeout):
		m.t.Fatalf("manager %s did not exit within %s", m.name, timeout)
		return nil
	}
}

// waitHealthy waits until /healthz answers ok on the secure port (served with delegated authentication, so this
// also shows that the ServiceAccount may read what that needs).
func (m *manager) waitHealthy() {
	m.t.Helper()
	// The serving certificate is self-signed and generated at startup; the test only needs the answer.
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a throwaway self-signed certificate
	}}
	defer client.CloseIdleConnections()
	url := fmt.Sprintf("https://127.0.0.1:%d/healthz", m.port)
	var last string
	err := wait.PollUntilContextTimeout(m.t.Context(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if !m.running() {
			return false, fmt.Errorf("exited (%v)", m.waitErr)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		defer resp.Body.Close()
		last = resp.Status
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		m.t.Fatalf("manager %s not healthy on %s: %v (last: %s); log:\n%s", m.name, url, err, last, m.logTail(40))
	}
}

var identityLine = regexp.MustCompile(`"Campaigning for leadership".*identity="([^"]+)"`)

// identity is the manager's leader-election identity (hostname_uuid), from its log line "Campaigning for
// leadership"; both processes of a test run on one host, so only the UUID tells them apart.
func (m *manager) identity() string {
	m.t.Helper()
	var id string
	err := wait.PollUntilContextTimeout(m.t.Context(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		data, err := os.ReadFile(m.logPath)
		if err != nil {
			return false, err
		}
		if match := identityLine.FindSubmatch(data); match != nil {
			id = string(match[1])
			return true, nil
		}
		return !m.running(), nil
	})
	if err != nil || id == "" {
		m.t.Fatalf("manager %s logged no leader-election identity (%v); log:\n%s", m.name, err, m.logTail(40))
	}
	return id
}

// checkNoForbidden fails the test if the manager's log mentions "forbidden" in any case: with the manifests' RBAC
// the manager must never be refused anything it tries.
func (m *manager) checkNoForbidden() {
	data, err := os.ReadFile(m.logPath)
	if err != nil {
		m.t.Errorf("reading manager %s's log: %v", m.name, err)
		return
	}
	var hits []string
	var offset int64
	for _, line := range strings.Split(string(data), "\n") {
		start := offset
		offset += int64(len(line)) + 1
		if !strings.Contains(strings.ToLower(line), "forbidden") {
			continue
		}
		allowed := false
		for _, r := range m.forbiddenAllowed {
			allowed = allowed || (start >= r[0] && start < r[1])
		}
		for _, message := range m.forbiddenMessages {
			allowed = allowed || strings.Contains(line, message)
		}
		if !allowed {
			hits = append(hits, line)
		}
	}
	if len(hits) > 0 {
		m.t.Errorf("manager %s's log has %d line(s) with \"forbidden\" (RBAC of manifests/ too narrow?):\n%s",
			m.name, len(hits), strings.Join(hits[:min(len(hits), 20)], "\n"))
	}
}

func (m *manager) logTail(lines int) string {
	data, err := os.ReadFile(m.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read the log: %v)", err)
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

// leaseHolder returns the Lease's holderIdentity, "" when the Lease does not exist or is released.
func leaseHolder(ctx context.Context) (string, error) {
	lease, err := controlPlane.AdminClient().CoordinationV1().Leases(leaseNamespace).Get(ctx, leaseName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if lease.Spec.HolderIdentity == nil {
		return "", nil
	}
	return *lease.Spec.HolderIdentity, nil
}

// resetLease deletes the Lease now and when the test ends, so no test waits for a lease an earlier one left.
func resetLease(t testing.TB) {
	t.Helper()
	deleteNowAndAtEnd(t, "the Lease", func(ctx context.Context) error {
		return controlPlane.AdminClient().CoordinationV1().Leases(leaseNamespace).Delete(ctx, leaseName, metav1.DeleteOptions{})
	})
}

// deleteNowAndAtEnd runs del now (failing the test if it fails) and again when the test ends; NotFound is no error.
func deleteNowAndAtEnd(t testing.TB, what string, del func(ctx context.Context) error) {
	t.Helper()
	run := func(ctx context.Context) error {
		if err := del(ctx); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	}
	if err := run(t.Context()); err != nil {
		t.Fatalf("deleting %s: %v", what, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := run(ctx); err != nil {
			t.Errorf("deleting %s: %v", what, err)
		}
	})
}

// watchTakeover polls the Lease from now on, every 50 ms, and sends the moment it first names identity; it gives
// up (sending nothing) after timeout. Polling from the moment of the kill measures the takeover without counting
// whatever the test does meanwhile.
func watchTakeover(t testing.TB, identity string, timeout time.Duration) <-chan time.Time {
	seen := make(chan time.Time, 1)
	go func() {
		_ = wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			holder, err := leaseHolder(ctx)
			if err == nil && holder == identity {
				seen <- time.Now()
				return true, nil
			}
			return false, nil // an error: the API server is busy; the timeout bounds this
		})
	}()
	return seen
}

// waitLeader waits until the Lease names identity and returns when it first did.
func waitLeader(t testing.TB, identity string, timeout time.Duration) time.Time {
	t.Helper()
	select {
	case at := <-watchTakeover(t, identity, timeout):
		return at
	case <-time.After(timeout + 5*time.Second):
		holder, err := leaseHolder(t.Context())
		t.Fatalf("the Lease did not name %s within %s (holder %q, %v)", identity, timeout, holder, err)
		return time.Time{}
	}
}
