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

package namespaceproject

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	rancherv3 "github.com/multiproject/api/rancher/management/v3"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/namespaceproject"
	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

// What docs/examples/rancher-management/project-reader.yaml sets up in the management cluster.
const (
	exampleCluster        = "c-abc12"
	readerNamespace       = "multiproject-downstream"
	readerServiceAccount  = "multiproject-c-abc12"
	credentialsNamespace  = "multiproject-gcp-credentials" // manifests/rbac: the manager may get Secrets there
	managementStartBudget = 3 * time.Minute
	// recoveryTimeout covers the informer's backoff after an outage (up to 30 s, jittered up to twice that).
	recoveryTimeout = 2 * time.Minute
)

// managementCluster is a second etcd + kube-apiserver standing in for Rancher's management ("local") cluster, with
// the Project CRD fixture; the package's control plane is the downstream cluster the manager runs in.
type managementCluster struct {
	t     *testing.T
	cp    *framework.ControlPlane
	admin mpclientset.Interface
}

func startManagementCluster(t *testing.T, ctx context.Context) *managementCluster {
	t.Helper()
	startCtx, cancel := context.WithTimeout(ctx, managementStartBudget)
	defer cancel()
	cp, err := framework.StartControlPlane(startCtx, framework.Options{
		ExtraManifestDirs: []string{"test/fixtures/crds"},
		Progress:          testLog{t},
	})
	if err != nil {
		t.Fatalf("starting the management cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stopping the management cluster: %v", err)
		}
	})
	admin, err := mpclientset.NewForConfig(cp.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	m := &managementCluster{t: t, cp: cp, admin: admin}
	// Rancher makes the namespace of each cluster it manages; Projects and the reader's Role live there.
	if _, err := cp.AdminClient().CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: exampleCluster}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return m
}

// applyExample applies the objects of the documented Role example whose kind keep accepts.
func (m *managementCluster) applyExample(ctx context.Context, keep func(kind string) bool) {
	m.t.Helper()
	f, err := os.Open(filepath.Join(m.cp.RepoRoot(), "docs", "examples", "rancher-management", "project-reader.yaml"))
	if err != nil {
		m.t.Fatal(err)
	}
	defer f.Close()
	objects, err := framework.DecodeManifests(f)
	if err != nil {
		m.t.Fatal(err)
	}
	var chosen []*unstructured.Unstructured
	for _, obj := range objects {
		if keep(obj.GetKind()) {
			chosen = append(chosen, obj)
		}
	}
	if err := framework.ApplyObjects(ctx, m.cp.AdminConfig(), chosen); err != nil {
		m.t.Fatalf("applying the example to the management cluster: %v", err)
	}
}

func (m *managementCluster) createProject(ctx context.Context, name, displayName string) {
	m.t.Helper()
	p := &rancherv3.Project{ObjectMeta: metav1.ObjectMeta{Namespace: exampleCluster, Name: name},
		Spec: rancherv3.ProjectSpec{DisplayName: displayName, ClusterName: exampleCluster}}
	if _, err := m.admin.ManagementV3().Projects(exampleCluster).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		m.t.Fatal(err)
	}
}

// kubeconfig returns a kubeconfig of the management cluster for the example's ServiceAccount, with a token from the
// TokenRequest API (what `kubectl create token` prints), or with token when it is not empty.
func (m *managementCluster) kubeconfig(ctx context.Context, token string) []byte {
	m.t.Helper()
	cfg, err := m.cp.ServiceAccountConfig(ctx, readerNamespace, readerServiceAccount)
	if err != nil {
		m.t.Fatal(err)
	}
	if token != "" {
		cfg.BearerToken = token
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["rancher"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["rancher"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["rancher"] = &clientcmdapi.Context{Cluster: "rancher", AuthInfo: "rancher"}
	kc.CurrentContext = "rancher"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		m.t.Fatal(err)
	}
	return data
}

// kubeconfigSecret stores a kubeconfig in the downstream cluster's credentials namespace, as an operator does, and
// returns the reference a ProviderConfig gives.
func (e *env) kubeconfigSecret(kubeconfig []byte) mpv1alpha1.SecretKeyReference {
	e.t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: credentialsNamespace, GenerateName: "rancher-management-"},
		Data: map[string][]byte{"kubeconfig": kubeconfig}}
	s, err := e.adminKube.CoreV1().Secrets(credentialsNamespace).Create(e.ctx, s, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = e.adminKube.CoreV1().Secrets(credentialsNamespace).Delete(ctx, s.Name, metav1.DeleteOptions{})
	})
	return mpv1alpha1.SecretKeyReference{Namespace: credentialsNamespace, Name: s.Name, Key: "kubeconfig"}
}

// TestProjectsFromTheManagementCluster: the seed's example with its Project in Rancher's management cluster, a second
// API server, read through the documented Role as the example's ServiceAccount; the kubeconfig Secret is read by the
// manager's ServiceAccount under manifests/rbac. While the management cluster is down the condition says
// RancherUnreachable with the error and nothing is assigned or moved, also for changes made meanwhile; once it is
// back the controller converges.
func TestProjectsFromTheManagementCluster(t *testing.T) {
	e := newEnv(t, envOptions{})
	mgmt := startManagementCluster(t, e.ctx)
	mgmt.applyExample(e.ctx, func(string) bool { return true })
	mgmt.createProject(e.ctx, "p-devops", "DevOps")
	mgmt.createProject(e.ctx, "p-ops", "Ops")
	ref := e.kubeconfigSecret(mgmt.kubeconfig(e.ctx, ""))

	a := e.newRemoteTenant(exampleCluster, ref)
	ns := e.createNamespace("my-app-", a.name, "DevOps", nil)
	a.start()
	got := e.waitAssigned(ns.Name, exampleCluster+":p-devops")
	if got.Labels[rancherv3.ProjectIDLabelKey] != "p-devops" || got.Annotations[namespaceproject.AssignedAppOwnerAnnotationKey] != "DevOps" {
		t.Errorf("assignment: labels %v, annotations %v", got.Labels, got.Annotations)
	}
	host := mgmt.cp.AdminConfig().Host
	a.waitCondition(metav1.ConditionTrue, namespaceproject.ConditionReasonRunning, host, 30*time.Second)
	// The Project came from the management cluster: the downstream cluster has none in that namespace.
	if local, err := e.admin.ManagementV3().Projects(exampleCluster).List(e.ctx, metav1.ListOptions{}); err != nil || len(local.Items) > 0 {
		t.Fatalf("Projects of %s in the downstream cluster: %v, %v", exampleCluster, local, err)
	}

	// Down: reported, and nothing changes, neither the relabeled namespace nor a new one.
	if err := mgmt.cp.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	c := a.waitCondition(metav1.ConditionFalse, namespaceproject.ConditionReasonRancherUnreachable, "connection refused", time.Minute)
	if !strings.Contains(c.Message, host) {
		t.Errorf("RancherUnreachable message %q does not name the server %s", c.Message, host)
	}
	before := a.syncs()
	e.updateNamespace(ns.Name, func(ns *corev1.Namespace) { ns.Labels[appOwnerKey] = "Ops" })
	later := e.createNamespace("later-", a.name, "DevOps", nil)
	// Each event is one sync, which returns without a decision: after two, both namespaces were looked at.
	e.waitFor("the controller to sync both namespaces while the management cluster is down", 30*time.Second, func() (bool, error) {
		return a.syncs() >= before+2, nil
	})
	if got := e.namespace(ns.Name).Annotations[rancherv3.ProjectIDAnnotationKey]; got != exampleCluster+":p-devops" {
		t.Errorf("moved to %q while the management cluster was down", got)
	}
	if got := e.namespace(later.Name).Annotations[rancherv3.ProjectIDAnnotationKey]; got != "" {
		t.Errorf("assigned to %q while the management cluster was down", got)
	}
	if n := len(e.events(later.Name, namespaceproject.ReasonProjectNotFound)); n > 0 {
		t.Errorf("%d ProjectNotFound Events while the management cluster was down: an unread Project is not a missing one", n)
	}

	// Back: converges.
	if err := mgmt.cp.StartAPIServer(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.waitAssignedWithin(ns.Name, exampleCluster+":p-ops", recoveryTimeout)
	e.waitAssignedWithin(later.Name, exampleCluster+":p-devops", recoveryTimeout)
	a.waitCondition(metav1.ConditionTrue, namespaceproject.ConditionReasonRunning, host, 30*time.Second)
}

// TestRefusedByTheManagementCluster: a user without the documented RoleBinding (403), and a token the management
// cluster does not know (401), give RancherForbidden and no assignment; once the RoleBinding exists the first
// tenant converges without a restart.
func TestRefusedByTheManagementCluster(t *testing.T) {
	e := newEnv(t, envOptions{})
	mgmt := startManagementCluster(t, e.ctx)
	mgmt.applyExample(e.ctx, func(kind string) bool { return kind != "RoleBinding" })
	mgmt.createProject(e.ctx, "p-devops", "DevOps")

	forbidden := e.newRemoteTenant(exampleCluster, e.kubeconfigSecret(mgmt.kubeconfig(e.ctx, "")))
	unknown := e.newRemoteTenant(exampleCluster, e.kubeconfigSecret(mgmt.kubeconfig(e.ctx, "not-a-token")))
	ns := e.createNamespace("my-app-", forbidden.name, "DevOps", nil)
	forbidden.start()
	unknown.start()

	c := forbidden.waitCondition(metav1.ConditionFalse, namespaceproject.ConditionReasonRancherForbidden, "forbidden", time.Minute)
	for _, want := range []string{readerServiceAccount, "namespace " + exampleCluster} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("RancherForbidden message %q lacks %q", c.Message, want)
		}
	}
	unknown.waitCondition(metav1.ConditionFalse, namespaceproject.ConditionReasonRancherForbidden, "Unauthorized", time.Minute)
	e.waitFor("the namespace's sync", 30*time.Second, func() (bool, error) { return forbidden.syncs() >= 1, nil })
	if got := e.namespace(ns.Name).Annotations[rancherv3.ProjectIDAnnotationKey]; got != "" {
		t.Errorf("assigned to %q while refused", got)
	}
	if n := len(e.events(ns.Name, namespaceproject.ReasonProjectNotFound)); n > 0 {
		t.Errorf("%d ProjectNotFound Events while refused", n)
	}

	mgmt.applyExample(e.ctx, func(kind string) bool { return kind == "RoleBinding" })
	e.waitAssignedWithin(ns.Name, exampleCluster+":p-devops", recoveryTimeout)
	forbidden.waitCondition(metav1.ConditionTrue, namespaceproject.ConditionReasonRunning, "", 30*time.Second)
}

// testLog sends the management cluster's startup lines to the test log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
