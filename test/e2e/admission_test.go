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
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	rancherv3 "github.com/multiproject/api/rancher/management/v3"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/options"
	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

// tenantLabelsPolicy is the ValidatingAdmissionPolicy of manifests/admission/tenant-labels.yaml.
const tenantLabelsPolicy = "multiproject-tenant-labels"

// TestTenantLabelsAdmissionPolicy shows, on the real API server with manifests/admission applied by the framework,
// who may set a tenant. A namespace editor of tenant A (edit in A's namespace, plus a ClusterRole that lets it
// create and change Namespaces and Nodes and their status, so that RBAC is not what refuses it) cannot put a
// namespace into tenant B, relabel or unlabel A's namespace, set, change or remove its appOwner label, nor claim,
// move or release a Node, by the main resource or a status subresource, while its other label writes pass. The
// manager's ServiceAccount may write what the namespace-project controller writes, and is not exempt from the
// policy. The admin (system:masters, the ConfigMap's default group) may do all of it.
func TestTenantLabelsAdmissionPolicy(t *testing.T) {
	ctx := t.Context()
	admin := controlPlane.AdminClient()
	const (
		tenantKey   = mpv1alpha1.DefaultProviderConfigLabelKey
		appOwnerKey = options.DefaultAppOwnerLabelKey
		tenantA     = "admission-tenant-a"
		tenantB     = "admission-tenant-b"
	)

	nsA := controlPlane.CreateNamespace(t)
	if _, err := admin.CoreV1().Namespaces().Patch(ctx, nsA, types.MergePatchType, labelPatch(tenantKey, tenantA), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// The Node is named after the namespace, which is unique to this run of the test.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nsA}}
	if _, err := admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{}) })
	editor := namespaceEditor(t, nsA)
	manager, err := controlPlane.ManagerConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	asManager := kubernetes.NewForConfigOrDie(manager)

	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	labeledNamespace := func(key, value string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "admission-", Labels: map[string]string{key: value}}}
	}
	createNS := func(c kubernetes.Interface, ns *corev1.Namespace) error {
		_, err := c.CoreV1().Namespaces().Create(ctx, ns, dryRun)
		return err
	}
	patchNS := func(c kubernetes.Interface, patch []byte, subresources ...string) error {
		_, err := c.CoreV1().Namespaces().Patch(ctx, nsA, types.MergePatchType, patch, metav1.PatchOptions{}, subresources...)
		return err
	}
	patchNode := func(c kubernetes.Interface, patch []byte, subresources ...string) error {
		_, err := c.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, patch, metav1.PatchOptions{}, subresources...)
		return err
	}

	// The API server enforces a policy, its bindings and RBAC a moment after they are created: wait for the first
	// denial by each binding (dry runs, so that an attempt let through too early changes nothing). From then on
	// the API server has them all.
	waitDenied(t, "the editor creates a namespace of tenant B", tenantKey,
		func() error { return createNS(editor, labeledNamespace(tenantKey, tenantB)) })
	waitDenied(t, "the editor creates a namespace with an appOwner", appOwnerKey,
		func() error { return createNS(editor, labeledNamespace(appOwnerKey, "team-b")) })

	t.Run("the editor may not choose a tenant or a Project", func(t *testing.T) {
		for _, c := range []struct {
			what, label string
			err         error
		}{
			{"relabel A's namespace for tenant B", tenantKey, patchNS(editor, labelPatch(tenantKey, tenantB))},
			{"remove A's namespace's tenant label", tenantKey, patchNS(editor, labelPatch(tenantKey, ""))},
			{"relabel A's namespace through namespaces/status", tenantKey, patchNS(editor, labelPatch(tenantKey, tenantB), "status")},
			{"set an appOwner on A's namespace", appOwnerKey, patchNS(editor, labelPatch(appOwnerKey, "team-b"))},
			{"label a shared Node for tenant A", tenantKey, patchNode(editor, labelPatch(tenantKey, tenantA))},
		} {
			wantDenied(t, c.what, c.label, c.err)
		}
	})

	if err := patchNS(admin, labelPatch(appOwnerKey, "team-a")); err != nil {
		t.Fatalf("the admin sets an appOwner on A's namespace: %v", err)
	}
	if err := patchNode(admin, labelPatch(tenantKey, tenantA)); err != nil {
		t.Fatalf("the admin labels the Node for tenant A: %v", err)
	}
	t.Run("the editor may not change what an admin set", func(t *testing.T) {
		for _, c := range []struct {
			what, label string
			err         error
		}{
			{"change the appOwner of A's namespace", appOwnerKey, patchNS(editor, labelPatch(appOwnerKey, "team-b"))},
			{"remove the appOwner of A's namespace", appOwnerKey, patchNS(editor, labelPatch(appOwnerKey, ""))},
			{"move A's Node to tenant B", tenantKey, patchNode(editor, labelPatch(tenantKey, tenantB))},
			{"release A's Node", tenantKey, patchNode(editor, labelPatch(tenantKey, ""))},
			{"move A's Node to tenant B through nodes/status", tenantKey, patchNode(editor, labelPatch(tenantKey, tenantB), "status")},
		} {
			wantDenied(t, c.what, c.label, c.err)
		}
	})

	// So that the denials above are the policy's and only about the two labels: the same identity may do the rest,
	// on the same objects (a labeled Node's status is what a kubelet writes).
	t.Run("the editor's other writes pass", func(t *testing.T) {
		for what, err := range map[string]error{
			"create a namespace without a tenant":       createNS(editor, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "admission-"}}),
			"label A's namespace with another label":    patchNS(editor, labelPatch("team", "a")),
			"label A's Node with another label":         patchNode(editor, labelPatch("team", "a")),
			"label A's Node through nodes/status":       patchNode(editor, labelPatch("rack", "r1"), "status"),
			"annotate A's namespace through its status": patchNS(editor, []byte(`{"metadata":{"annotations":{"note":"x"}}}`), "status"),
		} {
			if err != nil {
				t.Errorf("%s: %v", what, err)
			}
		}
	})

	// What docs/security.md counts on besides the policy: edit grants nothing on the objects through which the
	// manager acts in a tenant's name (no aggregation labels in manifests/), nor on the tenants' keys.
	t.Run("RBAC keeps the editor off the manager's objects", func(t *testing.T) {
		for _, a := range []authorizationv1.ResourceAttributes{
			{Verb: "create", Group: "multiproject.io", Resource: "translations", Namespace: nsA},
			{Verb: "update", Group: "multiproject.io", Resource: "translations", Subresource: "status", Namespace: nsA},
			{Verb: "patch", Group: "multiproject.io", Resource: "providerconfigs"},
			{Verb: "get", Resource: "secrets", Namespace: "multiproject-gcp-credentials"},
		} {
			review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &a}}
			out, err := editor.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if out.Status.Allowed {
				t.Errorf("the editor may %s %s.%s/%s in %q", a.Verb, a.Resource, a.Group, a.Subresource, a.Namespace)
			}
		}
	})

	t.Run("the manager writes what it writes and no more", func(t *testing.T) {
		// The namespace-project controller's patch (pkg/controller/namespaceproject assignmentPatch): Rancher's
		// label and annotation on a namespace that carries both guarded labels.
		assign, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"labels":      map[string]string{rancherv3.ProjectIDLabelKey: "p-admission"},
			"annotations": map[string]string{rancherv3.ProjectIDAnnotationKey: "c-admission:p-admission"},
		}})
		if err != nil {
			t.Fatal(err)
		}
		if err := patchNS(asManager, assign); err != nil {
			t.Errorf("the manager assigns A's namespace to a Project: %v", err)
		}
		// It never changes a tenant, so it is not exempt: a stolen token of it cannot move a namespace either.
		wantDenied(t, "the manager relabels A's namespace", tenantKey, patchNS(asManager, labelPatch(tenantKey, tenantB)))
	})

	t.Run("the admin may do all of it", func(t *testing.T) {
		created, err := admin.CoreV1().Namespaces().Create(ctx, labeledNamespace(tenantKey, tenantB), metav1.CreateOptions{})
		if err != nil {
			t.Errorf("the admin creates a namespace of tenant B: %v", err)
		} else {
			t.Cleanup(func() {
				_ = admin.CoreV1().Namespaces().Delete(context.Background(), created.Name, metav1.DeleteOptions{})
			})
		}
		for _, c := range []struct {
			what string
			err  error
		}{
			{"relabel A's namespace for tenant B", patchNS(admin, labelPatch(tenantKey, tenantB))},
			{"change its appOwner", patchNS(admin, labelPatch(appOwnerKey, "team-b"))},
			{"remove its appOwner", patchNS(admin, labelPatch(appOwnerKey, ""))},
			{"remove its tenant label", patchNS(admin, labelPatch(tenantKey, ""))},
			{"move the Node to tenant B", patchNode(admin, labelPatch(tenantKey, tenantB), "status")},
			{"release the Node", patchNode(admin, labelPatch(tenantKey, ""))},
		} {
			if c.err != nil {
				t.Errorf("the admin may %s: %v", c.what, c.err)
			}
		}
	})
}

// namespaceEditor returns a client for a new ServiceAccount of namespace ns that holds the built-in edit ClusterRole
// there, and, cluster-wide, what it takes to create and change Namespaces and Nodes (and their status), so that
// RBAC lets through every request the admission policy is meant to refuse. The cluster-wide grant is removed when
// the test ends.
func namespaceEditor(t *testing.T, ns string) kubernetes.Interface {
	t.Helper()
	ctx := t.Context()
	admin := controlPlane.AdminClient()
	const name = "editor"
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}}
	edit := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   subjects,
	}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, edit, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Named after the namespace, which is unique to this run of the test.
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-label-writer"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""},
			Resources: []string{"namespaces", "namespaces/status", "nodes", "nodes/status"},
			Verbs:     []string{"get", "create", "update", "patch"},
		}},
	}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   subjects,
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	cfg, err := controlPlane.ServiceAccountConfig(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(cfg)
}

// labelPatch is a JSON merge patch that sets the label key to value, or removes it when value is empty.
func labelPatch(key, value string) []byte {
	var v any
	if value != "" {
		v = value
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{key: v}}})
	if err != nil {
		panic(err) // strings always marshal
	}
	return patch
}

// isPolicyDenial reports whether err is the tenant-labels policy refusing a change of label.
func isPolicyDenial(err error, label string) bool {
	return apierrors.IsForbidden(err) &&
		strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+tenantLabelsPolicy+"'") &&
		strings.Contains(err.Error(), "the label "+label+" ")
}

func wantDenied(t *testing.T, what, label string, err error) {
	t.Helper()
	if !isPolicyDenial(err, label) {
		t.Errorf("%s: got %v, want the %s policy's denial naming the label %s", what, err, tenantLabelsPolicy, label)
	}
}

// waitDenied retries attempt until the policy denies it. Until then the attempt may be refused by RBAC (whose
// caches also lag) or let through; any other error fails the test.
func waitDenied(t *testing.T, what, label string, attempt func() error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		last = attempt()
		switch {
		case isPolicyDenial(last, label):
			return true, nil
		case last == nil || apierrors.IsForbidden(last):
			return false, nil
		default:
			return false, last
		}
	})
	if err != nil {
		t.Fatalf("%s: never denied by the policy: %v (last: %v)", what, err, last)
	}
}

// TestAdmissionPolicyLabelKeys keeps the label keys that manifests/admission names (each twice: in the policy's CEL
// and in its binding's objectSelector) in step with the defaults of --provider-config-name-label-key and
// --app-owner-label-key. A cluster that runs the manager with other keys must edit the same places
// (docs/security.md).
func TestAdmissionPolicyLabelKeys(t *testing.T) {
	objects, err := framework.ReadManifestDir(filepath.Join(controlPlane.RepoRoot(), framework.ProjectAdmissionDir))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"tenantKey":   mpv1alpha1.DefaultProviderConfigLabelKey,
		"appOwnerKey": options.DefaultAppOwnerLabelKey,
	}
	wantSelector := map[string]string{
		tenantLabelsPolicy + ".tenant":    mpv1alpha1.DefaultProviderConfigLabelKey,
		tenantLabelsPolicy + ".app-owner": options.DefaultAppOwnerLabelKey,
	}
	seen := 0
	for _, obj := range objects {
		switch obj.GetKind() {
		case "ValidatingAdmissionPolicy":
			variables, _, _ := unstructured.NestedSlice(obj.Object, "spec", "variables")
			for _, v := range variables {
				v, _ := v.(map[string]any)
				name, _ := v["name"].(string)
				if key, ok := want[name]; ok {
					seen++
					if got := v["expression"]; got != "'"+key+"'" {
						t.Errorf("policy %s: variable %s is %v, want '%s'", obj.GetName(), name, got, key)
					}
				}
			}
		case "ValidatingAdmissionPolicyBinding":
			if policy, _, _ := unstructured.NestedString(obj.Object, "spec", "policyName"); policy != tenantLabelsPolicy {
				continue // the other policies guard no tenant label
			}
			key, ok := wantSelector[obj.GetName()]
			if !ok {
				t.Errorf("binding %s: not checked by this test", obj.GetName())
				continue
			}
			seen++
			exprs, _, _ := unstructured.NestedSlice(obj.Object, "spec", "matchResources", "objectSelector", "matchExpressions")
			var only map[string]any
			if len(exprs) == 1 {
				only, _ = exprs[0].(map[string]any)
			}
			if only["key"] != key || only["operator"] != "Exists" {
				t.Errorf("binding %s: objectSelector %v, want %s Exists", obj.GetName(), exprs, key)
			}
		}
	}
	if seen != len(want)+len(wantSelector) {
		t.Errorf("found %d of the %d places that name a label key in %s", seen, len(want)+len(wantSelector), framework.ProjectAdmissionDir)
	}
}
