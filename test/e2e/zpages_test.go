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
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/util/wait"
	flagzv1beta1 "k8s.io/apiserver/pkg/server/flagz/api/v1beta1"
	statuszv1beta1 "k8s.io/apiserver/pkg/server/statusz/api/v1beta1"
	"k8s.io/client-go/rest"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
)

// debugReaderRole is manifests/rbac/debug-reader.yaml's ClusterRole, for the operators who debug the manager.
const debugReaderRole = "multiproject-controller-manager:debug-reader"

// TestBuiltBinaryServesFlagzAndStatusz: the built binary serves /flagz (its flags, with the values it runs with)
// and /statusz (its name, the version stamped into it, the paths it serves) on the secure port, as
// kube-controller-manager does, authorized like /metrics: the administrator and an operator bound to the
// debug-reader ClusterRole read them (and pprof), the manager's own ServiceAccount, which holds no such grant, is
// refused. With --feature-gates=ComponentFlagz=false,ComponentStatusz=false they are not served.
func TestBuiltBinaryServesFlagzAndStatusz(t *testing.T) {
	out, err := exec.Command(filepath.Join(controlPlane.RepoRoot(), "hack", "version.sh"), "--version").Output()
	if err != nil {
		t.Fatalf("hack/version.sh --version: %v", err)
	}
	stamped := version.MustParse(strings.TrimSpace(string(out))).String()

	resetLease(t)
	gce := fakegce.New(fakegce.Options{})
	gce.Start()
	t.Cleanup(gce.Close)
	le := leaderElection{leaseDuration: 15 * time.Second, renewDeadline: 10 * time.Second, retryPeriod: time.Second}
	m := startManager(t, "a", managerKubeconfig(t), gce.Endpoint(), le)

	admin := adminHTTPClient(t)
	defer admin.CloseIdleConnections()
	var flags flagzv1beta1.Flagz
	getZPage(t, admin, m, "/flagz", "Flagz", http.StatusOK, &flags)
	for name, want := range map[string]string{
		"leader-elect-resource-name": leaseName,
		"secure-port":                strconv.Itoa(m.port),
		"cluster-name":               "e2e",
		"controllers":                "[*]",
	} {
		if got := flags.Flags[name]; got != want {
			t.Errorf("/flagz %s = %q, want %q", name, got, want)
		}
	}
	var status statuszv1beta1.Statusz
	getZPage(t, admin, m, "/statusz", "Statusz", http.StatusOK, &status)
	if status.Name != "multiproject-controller-manager" || status.BinaryVersion != stamped || status.UptimeSeconds < 0 {
		t.Errorf("/statusz = name %q, binary version %q, uptime %ds; want multiproject-controller-manager, %q",
			status.Name, status.BinaryVersion, status.UptimeSeconds, stamped)
	}
	for _, p := range []string{"/flagz", "/metrics", "/readyz"} {
		if !slices.Contains(status.Paths, p) {
			t.Errorf("/statusz paths %v lack %s", status.Paths, p)
		}
	}
	// Without an Accept header both answer in text, for a human at a terminal.
	for _, p := range []string{"/flagz", "/statusz"} {
		code, body := getAs(t, admin, m, p, "")
		if code != http.StatusOK || !strings.Contains(body, "multiproject-controller-manager "+strings.TrimPrefix(p, "/")) {
			t.Errorf("text %s = %d %.200q", p, code, body)
		}
	}

	managerCfg, err := controlPlane.ManagerConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	self := httpClientFor(t, managerCfg)
	for _, p := range []string{"/flagz", "/statusz"} {
		if code, _ := getAs(t, self, m, p, ""); code != http.StatusForbidden {
			t.Errorf("the manager's ServiceAccount reads %s: %d, want 403", p, code)
		}
	}

	operator := httpClientFor(t, boundOperator(t, debugReaderRole))
	// The binding reaches the API server's authorizer, and the manager's cache of denials, after a moment.
	err = wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		code, _ := getAs(t, operator, m, "/flagz", "")
		return code == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("an operator bound to %s never read /flagz: %v", debugReaderRole, err)
	}
	for p, want := range map[string]int{"/statusz": http.StatusOK, "/debug/pprof/": http.StatusOK, "/debug/pprof/goroutine?debug=1": http.StatusOK, "/metrics": http.StatusForbidden} {
		if code, _ := getAs(t, operator, m, p, ""); code != want {
			t.Errorf("an operator bound to %s reads %s: %d, want %d", debugReaderRole, p, code, want)
		}
	}

	// A standby serves its secure port too.
	off := startManager(t, "b", managerKubeconfig(t), gce.Endpoint(), le, "--feature-gates=ComponentFlagz=false,ComponentStatusz=false")
	for _, p := range []string{"/flagz", "/statusz"} {
		if code, _ := getAs(t, admin, off, p, ""); code != http.StatusNotFound {
			t.Errorf("%s with its gate off = %d, want 404", p, code)
		}
	}
}

// getZPage reads a zpage as JSON of its v1beta1 kind (config.k8s.io) and decodes it into obj.
func getZPage(t *testing.T, client *http.Client, m *manager, path, kind string, wantCode int, obj any) {
	t.Helper()
	code, body := getAs(t, client, m, path, "application/json;g=config.k8s.io;v=v1beta1;as="+kind)
	if code != wantCode {
		t.Fatalf("%s = %d %.300q, want %d", path, code, body, wantCode)
	}
	if err := json.Unmarshal([]byte(body), obj); err != nil {
		t.Fatalf("%s: %v\n%.300s", path, err, body)
	}
}

// getAs GETs path on the manager's secure port with client, and an Accept header unless accept is empty.
func getAs(t *testing.T, client *http.Client, m *manager, path, accept string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d%s", m.port, path), nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(body)
}

// httpClientFor calls the managers' secure port with cfg's credentials (the managers serve a self-signed
// certificate).
func httpClientFor(t *testing.T, cfg *rest.Config) *http.Client {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.TLSClientConfig = rest.TLSClientConfig{Insecure: true}
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.CloseIdleConnections)
	return client
}

// boundOperator is a ServiceAccount of a namespace of the test's own, bound to the ClusterRole role, and its config.
func boundOperator(t *testing.T, role string) *rest.Config {
	t.Helper()
	ctx := t.Context()
	adminClient := controlPlane.AdminClient()
	ns := controlPlane.CreateNamespace(t)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "operator", Namespace: ns}}
	if _, err := adminClient.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "zpages-operator-" + ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: ns}},
	}
	if _, err := adminClient.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = adminClient.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	cfg, err := controlPlane.ServiceAccountConfig(ctx, ns, sa.Name)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
