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

package packaging

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

const (
	managerUser = "system:serviceaccount:kube-system:multiproject-controller-manager"
	shardGroup  = "multiproject-controller-manager"
)

// TestShardedOverlay: overlays/sharded is the base plus the sharding Role and its binding (the Lease-name policy that
// narrows their grant is the base's), with 3 replicas running --sharding=true and every argument of the base kept.
func TestShardedOverlay(t *testing.T) {
	base := kustomizeBuild(t, "manifests")
	sharded := kustomizeBuild(t, "overlays/sharded")
	baseKeys := map[string]bool{}
	for _, obj := range base {
		baseKeys[key(obj)] = true
	}
	var added []string
	for _, obj := range sharded {
		if !baseKeys[key(obj)] {
			added = append(added, obj.GetKind()+"/"+obj.GetName())
		}
	}
	slices.Sort(added)
	want := []string{"Role/multiproject-controller-manager:sharding", "RoleBinding/multiproject-controller-manager:sharding"}
	if len(sharded) != len(base)+len(want) || !slices.Equal(added, want) {
		t.Errorf("the overlay adds %v to the base's %d objects (%d in all), want exactly %v", added, len(base), len(sharded), want)
	}

	deployment := find(t, sharded, "Deployment", chartName)
	if replicas, _, _ := unstructured.NestedFieldNoCopy(deployment.Object, "spec", "replicas"); diffValue(3, replicas) != "" {
		t.Errorf("replicas = %v, want 3", replicas)
	}
	args := containerArgs(t, deployment)
	baseArgs := containerArgs(t, find(t, base, "Deployment", chartName))
	if !slices.Equal(args, append(baseArgs, "--sharding=true")) {
		t.Errorf("args = %v, want the base's %v and --sharding=true", args, baseArgs)
	}
}

// TestChartShardingRendersTheOverlay: sharding.enabled with 3 replicas renders exactly overlays/sharded; in another
// namespace, the sharding Role is there, and the Lease-name policy names the ServiceAccount and binds the Leases'
// namespace there.
func TestChartShardingRendersTheOverlay(t *testing.T) {
	values := map[string]any{"replicas": 3, "sharding": map[string]any{"enabled": true}}
	diffObjects(t, "kustomize build overlays/sharded", kustomizeBuild(t, "overlays/sharded"),
		"helm template (sharding.enabled)", mustHelmTemplate(t, defaultNamespace, values))

	objects := mustHelmTemplate(t, "multiproject-system", values)
	policy := find(t, objects, "ValidatingAdmissionPolicy", leaseNamesPolicy)
	if manager := policyVariable(t, policy, "manager"); manager != "'system:serviceaccount:multiproject-system:multiproject-controller-manager'" {
		t.Errorf("the Lease policy names the manager %s, want the release's ServiceAccount", manager)
	}
	binding := find(t, objects, "ValidatingAdmissionPolicyBinding", leaseNamesPolicy)
	if ns, _, _ := unstructured.NestedString(binding.Object, "spec", "matchResources", "namespaceSelector", "matchLabels", "kubernetes.io/metadata.name"); ns != "multiproject-system" {
		t.Errorf("the Lease policy binds namespace %q, want the release namespace", ns)
	}
	if role := find(t, objects, "Role", "multiproject-controller-manager:sharding"); role.GetNamespace() != "multiproject-system" {
		t.Errorf("the sharding Role is in %q, want the release namespace", role.GetNamespace())
	}
	if !slices.Contains(containerArgs(t, find(t, objects, "Deployment", chartName)), "--sharding=true") {
		t.Error("the Deployment does not run --sharding=true")
	}
	for _, obj := range mustHelmTemplate(t, defaultNamespace, nil) {
		if strings.Contains(obj.GetName(), "shard") {
			t.Errorf("sharding is off by default, but the chart renders %s %s", obj.GetKind(), obj.GetName())
		}
	}
}

// leaseNamesPolicy is manifests/admission/lease-names.yaml's policy, and its binding's name.
const leaseNamesPolicy = "multiproject-lease-names"

// policyVariable is the expression of the policy's variable name.
func policyVariable(t *testing.T, policy *unstructured.Unstructured, name string) string {
	t.Helper()
	variables, _, _ := unstructured.NestedSlice(policy.Object, "spec", "variables")
	for _, v := range variables {
		if v := v.(map[string]any); v["name"] == name {
			expression, _ := v["expression"].(string)
			return expression
		}
	}
	t.Fatalf("the policy %s has no variable %s", policy.GetName(), name)
	return ""
}

func containerArgs(t *testing.T, deployment *unstructured.Unstructured) []string {
	t.Helper()
	containers, _, _ := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "containers")
	if len(containers) == 0 {
		t.Fatal("the Deployment has no container")
	}
	args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	return args
}

// TestShardLeasePolicyKeepsTheManagerToItsOwnLeases applies the sharded RBAC and the Lease-name policy for real
// and acts as the manager's ServiceAccount: RBAC lets it write every Lease of kube-system, the policy only its
// leader-election Lease, its group's labeled shard Leases and labeled claim records.
func TestShardLeasePolicyKeepsTheManagerToItsOwnLeases(t *testing.T) {
	ctx := t.Context()
	admin := controlPlane.AdminClient()
	var installed []*unstructured.Unstructured
	for _, path := range []string{"manifests/rbac/leader-election.yaml", "overlays/sharded/rbac.yaml", "manifests/admission/lease-names.yaml"} {
		installed = append(installed, readPaths(t, path)...)
	}
	for _, obj := range installed {
		createForReal(t, obj)
	}
	t.Cleanup(func() {
		for _, obj := range installed {
			deleteForReal(t, obj)
		}
	})

	impersonated := rest.CopyConfig(controlPlane.AdminConfig())
	impersonated.Impersonate = rest.ImpersonationConfig{UserName: managerUser, Groups: []string{"system:serviceaccounts", "system:authenticated"}}
	manager := kubernetes.NewForConfigOrDie(impersonated).CoordinationV1().Leases("kube-system")
	lease := func(name string, labels map[string]string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", Labels: labels},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("someone")}}
	}
	groupLabel := map[string]string{"multiproject.io/shard-group": shardGroup}
	claimLabel := map[string]string{"multiproject.io/claim-kind": "ingress"}

	// A policy takes effect once the API server has loaded it: wait for its first denial.
	foreign := lease("kube-scheduler", nil)
	var err error
	if waitErr := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err = manager.Create(ctx, foreign, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil, nil
	}); waitErr != nil {
		t.Fatalf("the manager may create a Lease named kube-scheduler: the policy never denied it")
	}
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "writes only its leader-election Lease") {
		t.Fatalf("creating kube-system/kube-scheduler: %v, want the policy's denial", err)
	}

	shardName := shardGroup + "-shard-a"
	denied := map[string]func() error{
		"a shard Lease without the group label": func() error {
			_, err := manager.Create(ctx, lease(shardGroup+"-shard-b", nil), metav1.CreateOptions{})
			return err
		},
		"a labeled Lease of another name": func() error {
			_, err := manager.Create(ctx, lease("kube-controller-manager", groupLabel), metav1.CreateOptions{})
			return err
		},
		"another component's Lease": func() error {
			other, err := admin.CoordinationV1().Leases("kube-system").Create(ctx, lease("other-component", nil), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = admin.CoordinationV1().Leases("kube-system").Delete(context.Background(), other.Name, metav1.DeleteOptions{})
			})
			other.Spec.HolderIdentity = ptr.To("multiproject")
			if _, err = manager.Update(ctx, other, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
				return err
			}
			return manager.Delete(ctx, other.Name, metav1.DeleteOptions{})
		},
		"a claim record without the claim label": func() error {
			_, err := manager.Create(ctx, lease("multiproject-claim-ingress-0123", nil), metav1.CreateOptions{})
			return err
		},
		"a claim-labeled Lease of another name": func() error {
			_, err := manager.Create(ctx, lease("kube-controller-manager", claimLabel), metav1.CreateOptions{})
			return err
		},
		"adopting a Lease as a claim record by labeling it": func() error {
			other, err := admin.CoordinationV1().Leases("kube-system").Create(ctx, lease("multiproject-claim-unlabeled", nil), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = admin.CoordinationV1().Leases("kube-system").Delete(context.Background(), other.Name, metav1.DeleteOptions{})
			})
			other.Labels = claimLabel
			_, err = manager.Update(ctx, other, metav1.UpdateOptions{})
			return err
		},
		"adopting a Lease by labeling it": func() error {
			other, err := admin.CoordinationV1().Leases("kube-system").Create(ctx, lease(shardGroup+"-unlabeled", nil), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = admin.CoordinationV1().Leases("kube-system").Delete(context.Background(), other.Name, metav1.DeleteOptions{})
			})
			other.Labels = groupLabel
			_, err = manager.Update(ctx, other, metav1.UpdateOptions{})
			return err
		},
	}
	for what, do := range denied {
		if err := do(); !apierrors.IsForbidden(err) {
			t.Errorf("%s: %v, want Forbidden", what, err)
		}
	}

	// What the manager does: its shard Lease (created, renewed, released) and the leader-election Lease.
	own, err := manager.Create(ctx, lease(shardName, groupLabel), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating its shard Lease: %v", err)
	}
	t.Cleanup(func() {
		_ = admin.CoordinationV1().Leases("kube-system").Delete(context.Background(), shardName, metav1.DeleteOptions{})
	})
	own.Spec.HolderIdentity = nil
	if _, err := manager.Update(ctx, own, metav1.UpdateOptions{}); err != nil {
		t.Errorf("releasing its shard Lease: %v", err)
	}
	if err := manager.Delete(ctx, shardName, metav1.DeleteOptions{}); err != nil {
		t.Errorf("deleting a dead shard's Lease: %v", err)
	}
	leader, err := manager.Create(ctx, lease(shardGroup, nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the leader-election Lease: %v", err)
	}
	t.Cleanup(func() {
		_ = admin.CoordinationV1().Leases("kube-system").Delete(context.Background(), shardGroup, metav1.DeleteOptions{})
	})
	leader.Spec.HolderIdentity = ptr.To("me")
	if _, err := manager.Update(ctx, leader, metav1.UpdateOptions{}); err != nil {
		t.Errorf("renewing the leader-election Lease: %v", err)
	}
	// A claim record: created, taken over, released.
	record, err := manager.Create(ctx, lease("multiproject-claim-ingress-0123", claimLabel), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating a claim record: %v", err)
	}
	t.Cleanup(func() {
		_ = admin.CoordinationV1().Leases("kube-system").Delete(context.Background(), record.Name, metav1.DeleteOptions{})
	})
	record.Spec.HolderIdentity = ptr.To("another claimant")
	if _, err := manager.Update(ctx, record, metav1.UpdateOptions{}); err != nil {
		t.Errorf("taking a claim record over: %v", err)
	}
	if err := manager.Delete(ctx, record.Name, metav1.DeleteOptions{}); err != nil {
		t.Errorf("releasing a claim record: %v", err)
	}
	// And the admission policy binds only the manager: an administrator still writes any Lease.
	if _, err := admin.CoordinationV1().Leases("kube-system").Create(ctx, foreign, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("an administrator creating kube-system/kube-scheduler: %v", err)
	}
}

// createForReal applies obj (not a dry run); deleteForReal removes it.
func createForReal(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	client, mapper := dynamicClient(t)
	if err := serverSideApply(t.Context(), client, mapper, obj, false); err != nil {
		t.Fatalf("applying %s: %v", key(obj), err)
	}
}

func deleteForReal(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	client, mapper := dynamicClient(t)
	resource, err := resourceFor(client, mapper, obj)
	if err == nil {
		err = resource.Delete(context.Background(), obj.GetName(), metav1.DeleteOptions{})
	}
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting %s: %v", key(obj), err)
	}
}
