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

package controlplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

// eventuallyTimeout bounds waits for controllers (garbage collector, RBAC authorizer cache) to act.
const eventuallyTimeout = time.Minute

func TestAPIServerRejectsALabelValueWithAColon(t *testing.T) {
	namespace := controlPlane.CreateNamespace(t)
	configMaps := controlPlane.AdminClient().CoreV1().ConfigMaps(namespace)

	// Rancher writes project IDs as "c-abc:p-xyz"; that is not a valid label value, and fake clientsets accept it.
	invalid := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "invalid", Labels: map[string]string{"project": "c-abc:p-xyz"}}}
	_, err := configMaps.Create(t.Context(), invalid, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "c-abc:p-xyz") {
		t.Fatalf("creating a ConfigMap labelled project=c-abc:p-xyz: got error %v, want Invalid naming the value", err)
	}

	// The same object with a valid value is accepted, so the rejection above was about the value.
	valid := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "valid", Labels: map[string]string{"project": "c-abc.p-xyz"}}}
	if _, err := configMaps.Create(t.Context(), valid, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a ConfigMap labelled project=c-abc.p-xyz: %v", err)
	}
}

func TestServiceAccountIsForbiddenUntilARoleAllowsIt(t *testing.T) {
	ctx := t.Context()
	namespace := controlPlane.CreateNamespace(t)
	admin := controlPlane.AdminClient()
	account := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader"}}
	if _, err := admin.CoreV1().ServiceAccounts(namespace).Create(ctx, account, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg, err := controlPlane.ServiceAccountConfig(ctx, namespace, account.Name)
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)

	// Authenticated as the ServiceAccount (the token works) ...
	review, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview with the ServiceAccount's token: %v", err)
	}
	wantUser := fmt.Sprintf("system:serviceaccount:%s:%s", namespace, account.Name)
	if got := review.Status.UserInfo.Username; got != wantUser {
		t.Fatalf("authenticated as %q, want %q", got, wantUser)
	}

	// ... but not authorized: RBAC grants a ServiceAccount nothing by default.
	_, err = client.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("listing ConfigMaps without a role: got error %v, want Forbidden", err)
	}

	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "configmap-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list"}}},
	}
	if _, err := admin.RbacV1().Roles(namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "configmap-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: account.Name}},
	}
	if _, err := admin.RbacV1().RoleBindings(namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The authorizer reads roles from an informer cache, so the grant takes effect shortly after, not at once.
	var lastErr error
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, eventuallyTimeout, true, func(ctx context.Context) (bool, error) {
		_, lastErr = client.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{})
		return lastErr == nil, nil
	})
	if err != nil {
		t.Fatalf("listing ConfigMaps after binding a role that allows it: %v (last error: %v)", err, lastErr)
	}
}

func TestDeletingAnOwnerDeletesItsDependentThroughTheGarbageCollector(t *testing.T) {
	ctx := t.Context()
	namespace := controlPlane.CreateNamespace(t)
	configMaps := controlPlane.AdminClient().CoreV1().ConfigMaps(namespace)

	owner, err := configMaps.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ownerRef := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}
	dependent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dependent", OwnerReferences: []metav1.OwnerReference{ownerRef}}}
	if _, err := configMaps.Create(ctx, dependent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bystander := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bystander"}}
	if _, err := configMaps.Create(ctx, bystander, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Background propagation: the API server deletes the owner at once and leaves the dependent to the garbage
	// collector, which is exactly the part of kube-controller-manager this checks.
	background := metav1.DeletePropagationBackground
	if err := configMaps.Delete(ctx, owner.Name, metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, eventuallyTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := configMaps.Get(ctx, dependent.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		t.Fatalf("waiting for the garbage collector to delete the dependent of a deleted owner: %v", err)
	}
	if _, err := configMaps.Get(ctx, bystander.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("a ConfigMap without an owner reference should survive: %v", err)
	}
}

func TestAdminKubeconfigReachesTheAPIServer(t *testing.T) {
	cfg, err := clientcmd.BuildConfigFromFlags("", controlPlane.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	review, err := client.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("using %s: %v", controlPlane.KubeconfigPath(), err)
	}
	if groups := review.Status.UserInfo.Groups; !slices.Contains(groups, "system:masters") {
		t.Errorf("the admin kubeconfig's user is in groups %v, want system:masters among them", groups)
	}
}

func TestApplyManifestDirInstallsACRDWhoseSchemaIsEnforced(t *testing.T) {
	ctx := t.Context()
	objects, err := controlPlane.ApplyManifestDir(ctx, filepath.Join(cwd(t), "testdata", "crds"))
	if err != nil {
		t.Fatal(err)
	}
	if len(objects) != 1 {
		t.Fatalf("applied %d objects from testdata/crds, want the one Widget CRD", len(objects))
	}
	namespace := controlPlane.CreateNamespace(t)
	widgets := dynamicClient(t).Resource(schema.GroupVersionResource{
		Group: "controlplane.integration.multiproject.io", Version: "v1", Resource: "widgets",
	}).Namespace(namespace)

	newWidget := func(name string, size any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "controlplane.integration.multiproject.io/v1",
			"kind":       "Widget",
			"metadata":   map[string]any{"name": name},
			"spec":       map[string]any{"size": size},
		}}
	}
	if _, err := widgets.Create(ctx, newWidget("valid", int64(3)), metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a Widget that matches the schema: %v", err)
	}
	for name, size := range map[string]any{"wrong-type": "big", "below-minimum": int64(0)} {
		_, err := widgets.Create(ctx, newWidget(name, size), metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) {
			t.Errorf("creating a Widget with spec.size=%v: got error %v, want Invalid", size, err)
		}
	}

	// Applying the same directory again is a no-op, not a conflict: local-up and several test packages reapply.
	if _, err := controlPlane.ApplyManifestDir(ctx, filepath.Join(cwd(t), "testdata", "crds")); err != nil {
		t.Errorf("applying testdata/crds a second time: %v", err)
	}
}

// TestProjectCRDsAreInstalledAndEnforceTheirSchemas checks manifests/crds, which TestMain installed.
func TestProjectCRDsAreInstalledAndEnforceTheirSchemas(t *testing.T) {
	crdDir := filepath.Join(controlPlane.RepoRoot(), framework.ProjectCRDDir)
	if _, err := os.Stat(crdDir); os.IsNotExist(err) {
		t.Skipf("%s does not exist yet; this test checks the project's CRDs once they are written", framework.ProjectCRDDir)
	}
	objects, err := framework.ReadManifestDir(crdDir)
	if err != nil {
		t.Fatal(err)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, obj := range objects {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, crd); err != nil {
			t.Fatalf("%s in %s is not a CustomResourceDefinition: %v", obj.GetName(), framework.ProjectCRDDir, err)
		}
		crds = append(crds, crd)
	}

	t.Run("ProviderConfig is cluster-scoped in multiproject.io", func(t *testing.T) {
		for _, crd := range crds {
			if crd.Spec.Group == "multiproject.io" && crd.Spec.Names.Kind == "ProviderConfig" {
				if crd.Spec.Scope != apiextensionsv1.ClusterScoped {
					t.Errorf("ProviderConfig has scope %s, want Cluster", crd.Spec.Scope)
				}
				return
			}
		}
		t.Errorf("%s has no ProviderConfig CRD in group multiproject.io", framework.ProjectCRDDir)
	})

	namespace := controlPlane.CreateNamespace(t)
	for _, crd := range crds {
		for _, version := range crd.Spec.Versions {
			if !version.Served {
				continue
			}
			t.Run(crd.Spec.Names.Kind+"/"+version.Name+" rejects a spec that is not an object", func(t *testing.T) {
				resource := dynamicClient(t).Resource(schema.GroupVersionResource{
					Group: crd.Spec.Group, Version: version.Name, Resource: crd.Spec.Names.Plural,
				})
				obj := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": crd.Spec.Group + "/" + version.Name,
					"kind":       crd.Spec.Names.Kind,
					"metadata":   map[string]any{"name": "schema-invalid"},
					"spec":       "not-an-object",
				}}
				var err error
				if crd.Spec.Scope == apiextensionsv1.NamespaceScoped {
					_, err = resource.Namespace(namespace).Create(t.Context(), obj, metav1.CreateOptions{})
				} else {
					_, err = resource.Create(t.Context(), obj, metav1.CreateOptions{})
				}
				if !apierrors.IsInvalid(err) {
					t.Errorf("creating a %s whose spec is a string: got error %v, want Invalid", crd.Spec.Names.Kind, err)
				}
			})
		}
	}
}

// TestManagerServiceAccountFromTheRBACManifestsCanAuthenticate checks manifests/rbac, which TestMain installed:
// the manager's identity exists and gets tokens, as the end-to-end tests and hack/local-up.sh need.
func TestManagerServiceAccountFromTheRBACManifestsCanAuthenticate(t *testing.T) {
	if _, err := os.Stat(filepath.Join(controlPlane.RepoRoot(), framework.ProjectRBACDir)); os.IsNotExist(err) {
		t.Skipf("%s does not exist yet; this test checks the manager's ServiceAccount once it is written", framework.ProjectRBACDir)
	}
	cfg, err := controlPlane.ManagerConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	review, err := kubernetes.NewForConfigOrDie(cfg).AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("system:serviceaccount:%s:%s", framework.ManagerServiceAccountNamespace, framework.ManagerServiceAccountName)
	if got := review.Status.UserInfo.Username; got != want {
		t.Errorf("authenticated as %q, want %q", got, want)
	}
}

func dynamicClient(t *testing.T) dynamic.Interface {
	t.Helper()
	client, err := dynamic.NewForConfig(controlPlane.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	return client
}

func cwd(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// Components with a secure port (the manager, kube-controller-manager) authenticate callers by delegating to the API
// server and read its client CAs from this ConfigMap; without them they log errors forever.
func TestAPIServerPublishesItsClientCAsForDelegatedAuthentication(t *testing.T) {
	configMap, err := controlPlane.AdminClient().CoreV1().ConfigMaps("kube-system").Get(t.Context(), "extension-apiserver-authentication", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"client-ca-file", "requestheader-client-ca-file"} {
		if !strings.Contains(configMap.Data[key], "BEGIN CERTIFICATE") {
			t.Errorf("kube-system/extension-apiserver-authentication has no certificate under %q", key)
		}
	}
}
