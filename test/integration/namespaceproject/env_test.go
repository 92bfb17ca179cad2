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
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	rancherv3 "github.com/multiproject/api/rancher/management/v3"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"

	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/names"
	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/options"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/providerconfig"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

const (
	labelKey    = mpv1alpha1.DefaultProviderConfigLabelKey
	appOwnerKey = "appOwner"
)

// env is one test's (or the benchmark's) world: admin clients, the manager's client, and the production Manager
// running the tenants' controllers on the shared informers.
type env struct {
	t         testing.TB
	ctx       context.Context
	adminKube kubernetes.Interface
	admin     mpclientset.Interface
	kube      kubernetes.Interface // the manager's ServiceAccount
	manager   *framework.Manager
}

type envOptions struct {
	// qps and burst of the manager's client; 0 means the manager's defaults (--kube-api-qps=20, --kube-api-burst=30).
	qps   float32
	burst int
}

// newEnv builds what the manager would have for these tests: the shared Namespace and Project informers on the
// manager's identity, indexed for tenancy and started once, a tenancy Router over the Namespaces, and the Manager
// with the namespace-project controller enabled.
func newEnv(t testing.TB, opts envOptions) *env {
	t.Helper()
	// The manager's defaults (--kube-api-qps=20, --kube-api-burst=30) unless the options say otherwise.
	envOpts := framework.EnvOptions{QPS: 20, Burst: 30}
	if opts.qps > 0 {
		envOpts.QPS, envOpts.Burst = opts.qps, opts.burst
	}
	if _, ok := t.(*testing.B); ok {
		// A benchmark prints what it logs: keep the controllers' per-namespace lines (V(2)) out of its output.
		envOpts.Logger = klog.Background()
	}
	fw := controlPlane.NewEnv(t, envOpts)
	e := &env{t: t, ctx: fw.Ctx, adminKube: fw.AdminKube, admin: fw.Admin, kube: fw.Kube}
	e.manager = framework.StartManager(t, fw, framework.ManagerOptions{
		Controllers: []providerconfig.NamedFactory{framework.Enable(framework.Descriptor(names.NamespaceProjectController), 0)},
		Served:      []schema.GroupVersionResource{informerset.Projects},
		Flags: func(o *options.Options) {
			o.ClientConnection.QPS, o.ClientConnection.Burst = envOpts.QPS, int32(envOpts.Burst)
			o.TenantControllers.AppOwnerLabelKey = appOwnerKey
		},
	})
	return e
}

// tenantRun is one tenant, a ProviderConfig whose controller the Manager runs.
type tenantRun struct {
	e         *env
	name      string
	clusterID string
	tenant    *framework.Tenant
}

// newTenant makes a tenant with a random name whose Rancher cluster is clusterID.
func (e *env) newTenant(clusterID string, workers int) *tenantRun {
	e.t.Helper()
	return e.newNamedTenant("tenant-"+utilrand.String(6), clusterID, workers)
}

// newNamedTenant creates the ProviderConfig name with spec.rancher.clusterID; its controller runs workers workers.
func (e *env) newNamedTenant(name, clusterID string, workers int) *tenantRun {
	e.t.Helper()
	pc := &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: mpv1alpha1.ProviderConfigSpec{Rancher: &mpv1alpha1.RancherConfig{ClusterID: clusterID}}}
	return &tenantRun{e: e, name: name, clusterID: clusterID, tenant: e.manager.Create(pc, framework.TenantOptions{Workers: workers})}
}

// newRemoteTenant creates a tenant with a random name whose Rancher cluster's Projects are read from the management
// cluster that the kubeconfig Secret ref names; its controller runs one worker.
func (e *env) newRemoteTenant(clusterID string, ref mpv1alpha1.SecretKeyReference) *tenantRun {
	e.t.Helper()
	name := "tenant-" + utilrand.String(6)
	pc := &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: mpv1alpha1.ProviderConfigSpec{Rancher: &mpv1alpha1.RancherConfig{ClusterID: clusterID, ManagementClusterKubeconfigSecretRef: &ref}}}
	return &tenantRun{e: e, name: name, clusterID: clusterID, tenant: e.manager.Create(pc, framework.TenantOptions{Workers: 1})}
}

// start runs a new controller (an empty queue, as after a restart of the manager).
func (tr *tenantRun) start() {
	tr.e.t.Helper()
	tr.tenant.Start()
}

// stop ends the controller and waits for Run to return; a no-op when it is not running.
func (tr *tenantRun) stop() { tr.tenant.Stop() }

// waitRunning waits until the controller reported its condition True.
func (tr *tenantRun) waitRunning() {
	tr.e.t.Helper()
	tr.e.waitFor("tenant "+tr.name+" to report Running", 30*time.Second, func() (bool, error) {
		c, ok := tr.tenant.Condition(mpv1alpha1.ProviderConfigConditionNamespaceProjectReady)
		return ok && c.Status == metav1.ConditionTrue && c.Reason == "Running", nil
	})
}

// waitCondition waits up to timeout until the tenant's NamespaceProjectReady has status and reason and a message
// containing substr, and returns it.
func (tr *tenantRun) waitCondition(status metav1.ConditionStatus, reason, substr string, timeout time.Duration) metav1.Condition {
	tr.e.t.Helper()
	var c metav1.Condition
	tr.e.waitFor(fmt.Sprintf("tenant %s's condition %s/%s with %q", tr.name, status, reason, substr), timeout, func() (bool, error) {
		var ok bool
		c, ok = tr.tenant.Condition(mpv1alpha1.ProviderConfigConditionNamespaceProjectReady)
		return ok && c.Status == status && c.Reason == reason && strings.Contains(c.Message, substr), nil
	})
	return c
}

// syncs returns how many syncs of the tenant's controller succeeded (multiproject_controller_syncs_total).
func (tr *tenantRun) syncs() float64 {
	tr.e.t.Helper()
	v, _ := metrics.Syncs.Value(tr.name, names.NamespaceProjectController, "success")
	return v
}

// applyDemo applies a file of docs/examples as make local-up does (server-side, as the admin) and deletes its
// Namespaces when the test ends.
func (e *env) applyDemo(file string) {
	e.t.Helper()
	f, err := os.Open(filepath.Join(controlPlane.RepoRoot(), "docs", "examples", file))
	if err != nil {
		e.t.Fatal(err)
	}
	defer f.Close()
	objects, err := framework.DecodeManifests(f)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := framework.ApplyObjects(e.ctx, controlPlane.AdminConfig(), objects); err != nil {
		e.t.Fatalf("applying %s: %v", file, err)
	}
	for _, obj := range objects {
		if obj.GetKind() == "Namespace" {
			e.t.Cleanup(func() { e.deleteNamespace(obj.GetName()) })
		}
	}
}

// clusterNamespace creates the namespace that holds a Rancher cluster's Projects and returns its name, the cluster ID.
func (e *env) clusterNamespace() string {
	e.t.Helper()
	return controlPlane.CreateNamespace(e.t)
}

// createNamespace creates a Namespace (a generated name when name ends in "-") owned by tenant, labeled with the
// app owner unless it is empty, and deletes it when the test ends.
func (e *env) createNamespace(name, tenantName, owner string, annotations map[string]string) *corev1.Namespace {
	e.t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{}, Annotations: annotations}}
	if name[len(name)-1] == '-' {
		ns.GenerateName = name
	} else {
		ns.Name = name
	}
	if tenantName != "" {
		ns.Labels[labelKey] = tenantName
	}
	if owner != "" {
		ns.Labels[appOwnerKey] = owner
	}
	out, err := e.adminKube.CoreV1().Namespaces().Create(e.ctx, ns, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("creating namespace %s: %v", name, err)
	}
	e.t.Cleanup(func() { e.deleteNamespace(out.Name) })
	return out
}

func (e *env) deleteNamespace(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.adminKube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		e.t.Errorf("deleting namespace %s: %v", name, err)
	}
}

// createProject creates a Rancher Project as Rancher would: in the cluster's namespace, clusterName equal to it.
func (e *env) createProject(clusterID, name, displayName string) *rancherv3.Project {
	e.t.Helper()
	p := &rancherv3.Project{ObjectMeta: metav1.ObjectMeta{Namespace: clusterID, Name: name},
		Spec: rancherv3.ProjectSpec{DisplayName: displayName, ClusterName: clusterID}}
	out, err := e.admin.ManagementV3().Projects(clusterID).Create(e.ctx, p, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("creating Project %s/%s: %v", clusterID, name, err)
	}
	return out
}

func (e *env) namespace(name string) *corev1.Namespace {
	e.t.Helper()
	ns, err := e.adminKube.CoreV1().Namespaces().Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return ns
}

// updateNamespace changes a namespace as a person would, retrying on conflicts with the controller's writes.
func (e *env) updateNamespace(name string, change func(*corev1.Namespace)) {
	e.t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		ns, err := e.adminKube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		change(ns)
		_, err = e.adminKube.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		e.t.Fatalf("updating namespace %s: %v", name, err)
	}
}

// waitAssigned waits until Rancher's annotation on the namespace is want ("<cluster>:<project>") and returns it.
func (e *env) waitAssigned(name, want string) *corev1.Namespace {
	e.t.Helper()
	return e.waitAssignedWithin(name, want, 30*time.Second)
}

func (e *env) waitAssignedWithin(name, want string, timeout time.Duration) *corev1.Namespace {
	e.t.Helper()
	var ns *corev1.Namespace
	e.waitFor(fmt.Sprintf("namespace %s in Project %s", name, want), timeout, func() (bool, error) {
		ns = e.namespace(name)
		return ns.Annotations[rancherv3.ProjectIDAnnotationKey] == want, nil
	})
	return ns
}

// events returns the Events about a Namespace with reason, as stored in the API server. Events about cluster-scoped
// objects go to the default namespace.
func (e *env) events(name, reason string) []corev1.Event {
	e.t.Helper()
	list, err := e.adminKube.CoreV1().Events(metav1.NamespaceDefault).List(e.ctx, metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.kind": "Namespace", "involvedObject.name": name, "reason": reason}.String()})
	if err != nil {
		e.t.Fatal(err)
	}
	return list.Items
}

// waitEvent waits for an Event about the namespace with reason and returns it.
func (e *env) waitEvent(name, reason string) corev1.Event {
	e.t.Helper()
	var out corev1.Event
	e.waitFor(fmt.Sprintf("Event %s on namespace %s", reason, name), 30*time.Second, func() (bool, error) {
		list := e.events(name, reason)
		if len(list) == 0 {
			return false, nil
		}
		out = list[len(list)-1]
		return true, nil
	})
	return out
}

func (e *env) waitFor(what string, timeout time.Duration, cond func() (bool, error)) {
	e.t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond()
	})
	if err != nil {
		e.t.Fatalf("waiting for %s: %v", what, err)
	}
}
