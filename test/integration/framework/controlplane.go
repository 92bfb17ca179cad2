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

package framework

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// Options says which parts of the control plane a test package needs.
type Options struct {
	// ControllerManager also runs kube-controller-manager with only its garbagecollector and namespace controllers,
	// for tests that rely on owner-reference cascades or on namespaces really going away. Startup then waits until
	// both controllers have been seen doing their job.
	ControllerManager bool

	// ExtraControllers are more kube-controller-manager controllers to run beside those two (ControllerManager must
	// be set), e.g. "deployment", "replicaset" and "endpointslice" for a test that rolls out a Deployment and plays
	// the kubelet itself (StartKubelet). They are not probed at startup: a test waits for what they do anyway.
	ExtraControllers []string

	// InstallProjectManifests applies manifests/crds (waiting until every CRD is Established), manifests/rbac and
	// manifests/admission once the API server is ready. A directory that does not exist yet is skipped.
	InstallProjectManifests bool

	// ExtraManifestDirs are applied after the project manifests, e.g. "test/fixtures/crds" for third-party CRDs.
	// Relative paths are relative to the repository root. Unlike the project manifests they must exist.
	ExtraManifestDirs []string

	// APIServerFlags are appended to kube-apiserver's command line, after the framework's own (a flag given twice
	// takes the later value), e.g. "--feature-gates=ShardedListAndWatch=true" for a test of an alpha API. A restart
	// (RestartAPIServer) keeps them.
	APIServerFlags []string

	// Progress receives one line per startup step (and the build script's output); nil means os.Stderr.
	Progress io.Writer

	// AuditPolicy turns kube-apiserver's audit log on with this policy file (relative to the repository root),
	// e.g. "test/fixtures/audit/policy.yaml"; empty means no audit log. The log is ControlPlane.AuditLogPath, one
	// JSON event per line, appended to across RestartAPIServer.
	AuditPolicy string

	// AfterTests, if set, runs in Main after the package's tests and before the control plane stops (its audit
	// log and data are still there). passed says whether every test passed; an error fails the package.
	AfterTests func(cp *ControlPlane, passed bool) error
}

// ControlPlane is a running etcd + kube-apiserver (+ kube-controller-manager). Use it from one test package; every
// test isolates itself with CreateNamespace.
type ControlPlane struct {
	repoRoot       string
	dir            string
	kubeconfigPath string
	adminConfig    *rest.Config
	adminClient    kubernetes.Interface
	progress       io.Writer

	starter           *processStarter
	etcd              restartable
	apiServer         restartable
	controllerManager *process

	// auditPolicy is Options.AuditPolicy as an absolute path, or empty.
	auditPolicy string

	stopOnce sync.Once
	stopErr  error
}

const (
	// readinessTimeout bounds each wait for a component; a loaded 2-core machine makes kube-apiserver take ~10 s.
	readinessTimeout = 2 * time.Minute
	pollInterval     = 100 * time.Millisecond
	// portRaceAttempts: free ports are found by binding port 0 and closing it, so another test package starting
	// at the same moment can take the port before our component binds it. Such a start is retried.
	portRaceAttempts = 3

	adminUser = "integration-admin"
	// serviceClusterIPRange is required by kube-apiserver; nothing routes to it on loopback.
	serviceClusterIPRange = "10.0.0.0/24"
	serviceAccountIssuer  = "https://kubernetes.default.svc.cluster.local"
)

// StartControlPlane finds or builds the binaries, starts the components in a new temporary directory and waits
// until they are ready. On error nothing is left running. The caller must call Stop.
func StartControlPlane(ctx context.Context, opts Options) (_ *ControlPlane, err error) {
	progress := opts.Progress
	if progress == nil {
		progress = os.Stderr
	}
	if len(opts.ExtraControllers) > 0 && !opts.ControllerManager {
		return nil, errors.New("the ExtraControllers option needs ControllerManager")
	}
	repoRoot, err := FindRepoRoot()
	if err != nil {
		return nil, err
	}
	binaries := []string{etcdBinary, apiServerBinary}
	if opts.ControllerManager {
		binaries = append(binaries, controllerManagerBinary)
	}
	binDir, err := findBinaries(repoRoot, binaries, progress)
	if err != nil {
		return nil, fmt.Errorf("the integration tests need %v: %w", binaries, err)
	}

	started := time.Now()
	dir, err := os.MkdirTemp("", "multiproject-controlplane-")
	if err != nil {
		return nil, err
	}
	cp := &ControlPlane{
		repoRoot:       repoRoot,
		dir:            dir,
		kubeconfigPath: filepath.Join(dir, "admin.kubeconfig"),
		progress:       progress,
		starter:        newProcessStarter(),
		etcd:           restartable{name: "etcd"},
		apiServer:      restartable{name: "kube-apiserver"},
	}
	defer func() {
		if err != nil {
			// Keep the directory: its logs say why startup failed.
			err = errors.Join(err, cp.stop(true))
		}
	}()
	fmt.Fprintf(progress, "framework: starting the control plane from %s in %s\n", binDir, dir)

	creds, err := writeCredentials(dir)
	if err != nil {
		return nil, fmt.Errorf("writing control-plane credentials: %w", err)
	}
	etcdURL, err := cp.startEtcd(ctx, filepath.Join(binDir, etcdBinary))
	if err != nil {
		return nil, err
	}
	if opts.AuditPolicy != "" {
		cp.auditPolicy = filepath.Join(repoRoot, opts.AuditPolicy)
		if _, err := os.Stat(cp.auditPolicy); err != nil {
			return nil, fmt.Errorf("the audit policy: %w", err)
		}
	}
	if err := cp.startAPIServer(ctx, filepath.Join(binDir, apiServerBinary), etcdURL, creds, opts.APIServerFlags); err != nil {
		return nil, err
	}
	if err := WriteKubeconfig(cp.kubeconfigPath, cp.adminConfig); err != nil {
		return nil, err
	}
	if opts.ControllerManager {
		binary := filepath.Join(binDir, controllerManagerBinary)
		if err := cp.startControllerManager(ctx, binary, opts.ExtraControllers); err != nil {
			return nil, err
		}
	}
	if opts.InstallProjectManifests {
		if err := cp.InstallProjectManifests(ctx); err != nil {
			return nil, err
		}
	}
	for _, manifestDir := range opts.ExtraManifestDirs {
		if _, err := cp.ApplyManifestDir(ctx, manifestDir); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(progress, "framework: control plane ready in %s; admin kubeconfig %s\n",
		time.Since(started).Round(100*time.Millisecond), cp.kubeconfigPath)
	return cp, nil
}

// credentials are the files kube-apiserver needs, plus what a client needs to trust and authenticate to it.
type credentials struct {
	servingCertFile, servingKeyFile string
	servingCertPEM                  []byte // self-signed CA + serving cert; clients trust it as their CA bundle
	clientCAFile                    string
	requestHeaderCAFile             string
	serviceAccountKeyFile           string
	tokenAuthFile                   string
	adminToken                      string
}

func writeCredentials(dir string) (*credentials, error) {
	c := &credentials{
		servingCertFile:       filepath.Join(dir, "apiserver.crt"),
		servingKeyFile:        filepath.Join(dir, "apiserver.key"),
		serviceAccountKeyFile: filepath.Join(dir, "service-account.key"),
		tokenAuthFile:         filepath.Join(dir, "tokens.csv"),
		clientCAFile:          filepath.Join(dir, "client-ca.crt"),
		requestHeaderCAFile:   filepath.Join(dir, "front-proxy-ca.crt"),
	}
	// Our own serving certificate (rather than the one kube-apiserver would generate in --cert-dir) so that clients
	// verify TLS instead of skipping verification, and so that it is valid for 127.0.0.1, where we connect.
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", nil, []string{"localhost"})
	if err != nil {
		return nil, err
	}
	c.servingCertPEM = certPEM
	// Client CAs, as every real cluster has. Nobody gets a certificate from them: they exist because kube-apiserver
	// publishes them in the kube-system/extension-apiserver-authentication ConfigMap, and components that delegate
	// authentication to the API server (the manager's secure port, like kube-controller-manager's) read that
	// ConfigMap and log errors about every CA bundle it lacks.
	clientCAPEM, err := newCAPEM("integration-client-ca")
	if err != nil {
		return nil, err
	}
	requestHeaderCAPEM, err := newCAPEM("integration-front-proxy-ca")
	if err != nil {
		return nil, err
	}
	// One RSA key both signs ServiceAccount tokens and (through its public half) verifies them.
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	saKeyPEM, err := keyutil.MarshalPrivateKeyToPEM(saKey)
	if err != nil {
		return nil, err
	}
	token := make([]byte, 32)
	if _, err := rand.Read(token); err != nil {
		return nil, err
	}
	c.adminToken = hex.EncodeToString(token)
	// Static token file format: token,user,uid,"group1,group2". system:masters bypasses RBAC, like a cluster admin.
	tokens := fmt.Sprintf("%s,%s,%s,\"system:masters\"\n", c.adminToken, adminUser, adminUser)

	for path, data := range map[string][]byte{
		c.servingCertFile:       certPEM,
		c.servingKeyFile:        keyPEM,
		c.serviceAccountKeyFile: saKeyPEM,
		c.tokenAuthFile:         []byte(tokens),
		c.clientCAFile:          clientCAPEM,
		c.requestHeaderCAFile:   requestHeaderCAPEM,
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// newCAPEM returns a new self-signed CA certificate, PEM-encoded; its key is thrown away.
func newCAPEM(commonName string) ([]byte, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	ca, err := certutil.NewSelfSignedCACert(certutil.Config{CommonName: commonName}, key)
	if err != nil {
		return nil, err
	}
	return certutil.EncodeCertificates(ca)
}

func (cp *ControlPlane) startEtcd(ctx context.Context, binary string) (string, error) {
	var clientURL string
	_, err := cp.startRetryingPortRaces(ctx, "etcd", func() (*process, error) {
		ports, err := freePorts(2)
		if err != nil {
			return nil, err
		}
		clientURL = "http://127.0.0.1:" + strconv.Itoa(ports[0])
		peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
		dataDir, err := os.MkdirTemp(cp.dir, "etcd-data-")
		if err != nil {
			return nil, err
		}
		args := []string{
			"--name=default",
			"--data-dir=" + dataDir,
			"--listen-client-urls=" + clientURL,
			"--advertise-client-urls=" + clientURL,
			"--listen-peer-urls=" + peerURL,
			"--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=default=" + peerURL,
			// The data is thrown away after the run, so durability buys nothing and fsync costs a lot on CI disks.
			"--unsafe-no-fsync",
		}
		p, err := startProcess(cp.starter, "etcd", binary, filepath.Join(cp.dir, "etcd.log"), args)
		if err != nil {
			return nil, err
		}
		ready := func(ctx context.Context) error { return httpOK(ctx, clientURL+"/readyz") }
		cp.etcd.started(p, binary, args, ready)
		return p, waitReady(ctx, p, ready)
	})
	return clientURL, err
}

func (cp *ControlPlane) startAPIServer(ctx context.Context, binary, etcdURL string, creds *credentials, extraFlags []string) error {
	_, err := cp.startRetryingPortRaces(ctx, "kube-apiserver", func() (*process, error) {
		ports, err := freePorts(1)
		if err != nil {
			return nil, err
		}
		cp.adminConfig = &rest.Config{
			Host:            "https://127.0.0.1:" + strconv.Itoa(ports[0]),
			BearerToken:     creds.adminToken,
			TLSClientConfig: rest.TLSClientConfig{CAData: creds.servingCertPEM},
			// Tests create many objects quickly; client-side throttling would only slow them down.
			QPS:   100,
			Burst: 200,
		}
		if cp.adminClient, err = kubernetes.NewForConfig(cp.adminConfig); err != nil {
			return nil, err
		}
		args := []string{
			"--etcd-servers=" + etcdURL,
			"--bind-address=127.0.0.1",
			// Advertise loopback, so startup does not depend on the host having a routable interface. The endpoint
			// reconciler refuses a loopback address, and nothing here needs the "kubernetes" Service's endpoints.
			"--advertise-address=127.0.0.1",
			"--endpoint-reconciler-type=none",
			"--secure-port=" + strconv.Itoa(ports[0]),
			"--tls-cert-file=" + creds.servingCertFile,
			"--tls-private-key-file=" + creds.servingKeyFile,
			"--cert-dir=" + cp.dir, // unused with the files above, but keeps it from defaulting to /var/run/kubernetes
			"--token-auth-file=" + creds.tokenAuthFile,
			"--client-ca-file=" + creds.clientCAFile,
			// The aggregation layer's front-proxy settings, with kubeadm's values.
			"--requestheader-client-ca-file=" + creds.requestHeaderCAFile,
			"--requestheader-allowed-names=front-proxy-client",
			"--requestheader-username-headers=X-Remote-User",
			"--requestheader-group-headers=X-Remote-Group",
			"--requestheader-extra-headers-prefix=X-Remote-Extra-",
			"--authorization-mode=RBAC",
			"--service-account-issuer=" + serviceAccountIssuer,
			"--service-account-key-file=" + creds.serviceAccountKeyFile,
			"--service-account-signing-key-file=" + creds.serviceAccountKeyFile,
			"--service-cluster-ip-range=" + serviceClusterIPRange,
			// The ServiceAccount admission plugin rejects Pods until the namespace's "default" ServiceAccount exists,
			// which needs the serviceaccount controller we do not run. Nothing here runs Pods, but fixtures may
			// create them as plain objects. ServiceAccounts and TokenRequest work without the plugin.
			"--disable-admission-plugins=ServiceAccount",
			// Setting blockOwnerDeletion in an owner reference then needs update on the owner's finalizers, as on
			// the distributions that enable it: the manifests grant it, and this proves the grant is enough.
			"--enable-admission-plugins=OwnerReferencesPermissionEnforcement",
		}
		if cp.auditPolicy != "" {
			// The log backend's default mode is blocking: an event is on disk when its request has completed.
			args = append(args, "--audit-policy-file="+cp.auditPolicy, "--audit-log-path="+cp.AuditLogPath())
		}
		args = append(args, extraFlags...)
		p, err := startProcess(cp.starter, "kube-apiserver", binary, filepath.Join(cp.dir, "kube-apiserver.log"), args)
		if err != nil {
			return nil, err
		}
		cp.apiServer.started(p, binary, args, cp.apiServerReady)
		return p, waitReady(ctx, p, cp.apiServerReady)
	})
	return err
}

func (cp *ControlPlane) apiServerReady(ctx context.Context) error {
	body, err := cp.adminClient.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return err
	}
	if string(body) != "ok" {
		return fmt.Errorf("/readyz answered %q", body)
	}
	return nil
}

// APIServerPID is the process ID of the running kube-apiserver, for a benchmark that reads its CPU from the
// kernel's accounting (/proc/<pid>/stat) without asking the API server for it.
func (cp *ControlPlane) APIServerPID() int {
	return cp.apiServer.current().cmd.Process.Pid
}

// EtcdPID is the process ID of etcd, for a benchmark that reads its CPU as APIServerPID's reader does.
func (cp *ControlPlane) EtcdPID() int {
	return cp.etcd.current().cmd.Process.Pid
}

// RestartAPIServer kills kube-apiserver (SIGKILL, as a crash or an OOM kill would; a graceful stop waits for long
// watches and is no kinder to clients) and starts it again with the same flags, on the same port and against the
// same etcd, then waits until it is ready. To its clients this is what a control-plane restart looks like:
// connections drop, every watch ends, the watch cache starts afresh, and the same URL answers again with the same
// data. Each start logs to its own file (kube-apiserver.log, kube-apiserver-2.log, ...).
func (cp *ControlPlane) RestartAPIServer(ctx context.Context) error {
	if err := cp.StopAPIServer(); err != nil {
		return err
	}
	return cp.StartAPIServer(ctx)
}

// StopAPIServer kills kube-apiserver as RestartAPIServer does, and leaves it stopped (etcd keeps running) until
// StartAPIServer: to its clients the server is unreachable (connections refused) for as long as a test wants, as a
// Rancher management cluster that is down is to a downstream cluster. Stopping a stopped server does nothing.
func (cp *ControlPlane) StopAPIServer() error {
	return cp.apiServer.kill()
}

// StartAPIServer starts kube-apiserver again after StopAPIServer, with the same flags, on the same port and against
// the same etcd, and waits until it is ready. Each start logs to its own file (kube-apiserver-2.log, ...).
func (cp *ControlPlane) StartAPIServer(ctx context.Context) error {
	return cp.apiServer.restart(ctx, cp)
}

// WaitAPIServerReady waits until kube-apiserver's /readyz, whose checks include etcd, answers ok: after StartEtcd,
// kube-apiserver reconnects on its own, with backoff.
func (cp *ControlPlane) WaitAPIServerReady(ctx context.Context) error {
	return waitReady(ctx, cp.apiServer.current(), cp.apiServerReady)
}

// StopEtcd kills etcd (SIGKILL, as a crash would) and leaves it stopped until StartEtcd. kube-apiserver keeps
// running: it answers, but every request that needs storage fails or times out, and its readiness check fails.
// Stopping a stopped etcd does nothing.
func (cp *ControlPlane) StopEtcd() error {
	return cp.etcd.kill()
}

// StartEtcd starts etcd again after StopEtcd, with the same flags, ports and data directory (what it had written
// is kept), and waits until etcd itself is ready. kube-apiserver reconnects on its own: how long that takes is part
// of what a recovery measured from here includes. Each start logs to its own file (etcd-2.log, ...).
func (cp *ControlPlane) StartEtcd(ctx context.Context) error {
	return cp.etcd.restart(ctx, cp)
}

// startRetryingPortRaces runs attempt (pick ports, start, wait for readiness) again when the component lost a
// port to someone else between our probe and its bind.
func (cp *ControlPlane) startRetryingPortRaces(ctx context.Context, name string, attempt func() (*process, error)) (*process, error) {
	fmt.Fprintf(cp.progress, "framework: starting %s\n", name)
	for i := 1; ; i++ {
		p, err := attempt()
		if err == nil {
			return p, nil
		}
		if p == nil {
			return nil, err
		}
		lostPortRace := p.logContains("address already in use")
		if stopErr := p.stop(); stopErr != nil {
			return p, errors.Join(err, stopErr)
		}
		if !lostPortRace || i == portRaceAttempts {
			return p, err
		}
		fmt.Fprintf(cp.progress, "framework: %s lost a port to another process; retrying with new ports\n", name)
	}
}

// waitReady polls ready until it succeeds, the process exits, or readinessTimeout passes, and then reports the
// last reason it was not ready.
func waitReady(ctx context.Context, p *process, ready func(context.Context) error) error {
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, pollInterval, readinessTimeout, true, func(ctx context.Context) (bool, error) {
		if err := p.exitedEarly(); err != nil {
			return false, err
		}
		requestCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		lastErr = ready(requestCtx)
		return lastErr == nil, nil
	})
	if err != nil && lastErr != nil && p.exitedEarly() == nil {
		return fmt.Errorf("%s not ready: %w (last: %v); log %s", p.name, err, lastErr, p.logPath)
	}
	return err
}

func httpOK(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %d: %s", url, resp.StatusCode, body)
	}
	return nil
}

// freePorts asks the kernel for n distinct free loopback ports. The listeners stay open until all n are chosen so
// that the kernel cannot hand out the same port twice.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Stop stops kube-controller-manager, kube-apiserver and etcd, in that order so that no component logs errors about
// one that is already gone, and removes the temporary directory. Calling it again does nothing.
func (cp *ControlPlane) Stop() error { return cp.stop(false) }

// stop is Stop with the choice to keep the directory (data and logs), for a run whose tests failed.
func (cp *ControlPlane) stop(keepDir bool) error {
	cp.stopOnce.Do(func() {
		var errs []error
		for _, p := range []*process{cp.controllerManager, cp.apiServer.current(), cp.etcd.current()} {
			if p != nil {
				errs = append(errs, p.stop())
			}
		}
		cp.starter.close()
		if keepDir {
			fmt.Fprintf(cp.progress, "framework: control-plane logs kept in %s\n", cp.dir)
		} else {
			errs = append(errs, os.RemoveAll(cp.dir))
		}
		cp.stopErr = errors.Join(errs...)
	})
	return cp.stopErr
}

// Wait blocks until ctx is done (and returns nil) or until a component exits on its own (and returns why, with the
// end of its log), for programs like hack/local-up.sh's runner that keep the control plane up until interrupted.
func (cp *ControlPlane) Wait(ctx context.Context) error {
	exited := make(chan *process, 3)
	for _, p := range []*process{cp.etcd.current(), cp.apiServer.current(), cp.controllerManager} {
		if p == nil {
			continue
		}
		go func() {
			select {
			case <-p.exited:
				exited <- p
			case <-ctx.Done():
			}
		}()
	}
	select {
	case <-ctx.Done():
		return nil
	case p := <-exited:
		return fmt.Errorf("%s exited (%v); last lines of %s:\n%s", p.name, p.waitErr, p.logPath, p.logTail(40))
	}
}
