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
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestChartLeaseRBACFollowsLeaderElectionValues: leaderElection.resourceName and resourceNamespace set the flags and
// move the RBAC with them, so that the manager is never refused its own Lease: the leader-election Role names the
// Lease and sits with its RoleBinding in the Lease's namespace, as do the cluster-id Role (its ConfigMap lives beside
// the Lease) and, sharded, the shard Leases' Role and its binding; the Lease-name policy names the Lease and binds
// its namespace, sharded or not. The ServiceAccount stays in the release namespace.
func TestChartLeaseRBACFollowsLeaderElectionValues(t *testing.T) {
	const (
		releaseNS = "multiproject-system"
		leaseNS   = "leases-here"
		lease     = "mpcm-prod"
	)
	objects := mustHelmTemplate(t, releaseNS, map[string]any{
		"leaderElection": map[string]any{"resourceName": lease, "resourceNamespace": leaseNS},
		"sharding":       map[string]any{"enabled": true},
	})

	args := containerArgs(t, find(t, objects, "Deployment", chartName))
	for _, want := range []string{"--leader-elect-resource-namespace=" + leaseNS, "--leader-elect-resource-name=" + lease} {
		if !slices.Contains(args, want) {
			t.Errorf("the Deployment's args %q lack %s", args, want)
		}
	}
	for _, o := range []struct{ kind, name string }{
		{"Role", "multiproject-controller-manager:leader-election"},
		{"RoleBinding", "multiproject-controller-manager:leader-election"},
		{"Role", "multiproject-controller-manager:cluster-id"},
		{"RoleBinding", "multiproject-controller-manager:cluster-id"},
		{"Role", "multiproject-controller-manager:sharding"},
		{"RoleBinding", "multiproject-controller-manager:sharding"},
	} {
		obj := find(t, objects, o.kind, o.name)
		if obj.GetNamespace() != leaseNS {
			t.Errorf("%s %s is in %q, want the Lease's namespace %q", o.kind, o.name, obj.GetNamespace(), leaseNS)
		}
		subjects, _, _ := unstructured.NestedSlice(obj.Object, "subjects")
		for _, s := range subjects {
			if ns := s.(map[string]any)["namespace"]; ns != releaseNS {
				t.Errorf("%s %s binds a ServiceAccount in %v, want the release namespace %q", o.kind, o.name, ns, releaseNS)
			}
		}
	}
	role := find(t, objects, "Role", "multiproject-controller-manager:leader-election")
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	var named []any
	for _, r := range rules {
		if names, ok := r.(map[string]any)["resourceNames"]; ok {
			named = append(named, names.([]any)...)
		}
	}
	if !slices.Equal(named, []any{lease}) {
		t.Errorf("the leader-election Role's resourceNames are %v, want [%s]", named, lease)
	}

	unsharded := mustHelmTemplate(t, releaseNS, map[string]any{
		"leaderElection": map[string]any{"resourceName": lease, "resourceNamespace": leaseNS},
	})
	for name, objects := range map[string][]*unstructured.Unstructured{"sharded": objects, "unsharded": unsharded} {
		policy := find(t, objects, "ValidatingAdmissionPolicy", leaseNamesPolicy)
		if leaderLease := policyVariable(t, policy, "leaderLease"); leaderLease != "'"+lease+"'" {
			t.Errorf("%s: the Lease-name policy's leaderLease is %s, want '%s'", name, leaderLease, lease)
		}
		binding := find(t, objects, "ValidatingAdmissionPolicyBinding", leaseNamesPolicy)
		if ns, _, _ := unstructured.NestedString(binding.Object, "spec", "matchResources", "namespaceSelector", "matchLabels", "kubernetes.io/metadata.name"); ns != leaseNS {
			t.Errorf("%s: the Lease-name policy binds namespace %q, want the Lease's %q", name, ns, leaseNS)
		}
	}

	// The defaults change nothing: the release namespace, and no --leader-elect-resource-name.
	defaults := mustHelmTemplate(t, releaseNS, nil)
	if role := find(t, defaults, "Role", "multiproject-controller-manager:leader-election"); role.GetNamespace() != releaseNS {
		t.Errorf("by default the leader-election Role is in %q, want the release namespace", role.GetNamespace())
	}
	for _, arg := range containerArgs(t, find(t, defaults, "Deployment", chartName)) {
		if arg == "--leader-elect-resource-name=multiproject-controller-manager" {
			t.Error("the default Lease name is passed as a flag")
		}
	}
}

// TestManagerIdentitySurvivesAContainerRestart: the chart and the kustomize base (and its sharded overlay) name the
// manager in the Lease by its Pod's name and UID, taken from the downward API, so that a restarted container resumes
// its own Lease at once and no two Pods share a name (docs/operations.md).
func TestManagerIdentitySurvivesAContainerRestart(t *testing.T) {
	const identityArg = "--leader-elect-identity=$(POD_NAME)_$(POD_UID)"
	for name, objects := range map[string][]*unstructured.Unstructured{
		"helm template":                    mustHelmTemplate(t, defaultNamespace, nil),
		"helm template, sharded":           mustHelmTemplate(t, defaultNamespace, map[string]any{"sharding": map[string]any{"enabled": true}}),
		"kustomize build manifests":        kustomizeBuild(t, "manifests"),
		"kustomize build overlays/sharded": kustomizeBuild(t, "overlays/sharded"),
	} {
		_, container := managerPod(t, objects)
		args, _, _ := unstructured.NestedStringSlice(container, "args")
		if !slices.Contains(args, identityArg) {
			t.Errorf("%s: the manager's args %q lack %s", name, args, identityArg)
		}
		fields := map[string]string{}
		env, _, _ := unstructured.NestedSlice(container, "env")
		for _, e := range env {
			e := e.(map[string]any)
			if path, ok, _ := unstructured.NestedString(e, "valueFrom", "fieldRef", "fieldPath"); ok {
				fields[e["name"].(string)] = path
			}
		}
		if fields["POD_NAME"] != "metadata.name" || fields["POD_UID"] != "metadata.uid" {
			t.Errorf("%s: POD_NAME and POD_UID come from %v, want metadata.name and metadata.uid", name, fields)
		}
	}
}
