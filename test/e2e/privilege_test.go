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
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/multiproject/multiproject-controller-manager/pkg/clusterid"
	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

// access is one SubjectAccessReview: verb on group/resource[/subresource] (named name) in namespace.
type access struct {
	verb, group, resource, subresource, namespace, name string
}

func (a access) String() string {
	r := a.resource
	if a.subresource != "" {
		r += "/" + a.subresource
	}
	if a.group != "" {
		r += "." + a.group
	}
	if a.name != "" {
		r += " " + a.name
	}
	where := "cluster-wide"
	if a.namespace != "" {
		where = "in " + a.namespace
	}
	return fmt.Sprintf("%s %s %s", a.verb, r, where)
}

// TestLeastPrivilege pins, with SubjectAccessReviews for the manager's ServiceAccount as manifests/rbac binds it,
// what it needs (so a manifest change cannot break a controller unnoticed) and what it must never be able to do:
// read Secrets beyond the one namespace of GCP keys, enumerate Secrets at all, create or delete users' objects,
// write ProviderConfig specs, write another Lease, or escalate through RBAC. The running binary's side of least
// privilege is that no manager log of these tests says "forbidden" (checked for every process they start).
func TestLeastPrivilege(t *testing.T) {
	const (
		credentialsNS = "multiproject-gcp-credentials" // manifests/rbac/neg-pusher.yaml
		someNS        = "some-tenant-namespace"
	)
	user := fmt.Sprintf("system:serviceaccount:%s:%s", framework.ManagerServiceAccountNamespace, framework.ManagerServiceAccountName)
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + framework.ManagerServiceAccountNamespace, "system:authenticated"}

	allowed := []access{
		// Shared informers.
		{verb: "list", resource: "services"}, {verb: "watch", resource: "services"},
		{verb: "list", resource: "nodes"}, {verb: "watch", resource: "namespaces"},
		{verb: "list", group: "discovery.k8s.io", resource: "endpointslices"},
		{verb: "list", resource: "pods"}, {verb: "watch", resource: "pods"},
		{verb: "watch", group: "networking.k8s.io", resource: "ingresses"},
		// ingress-tunnel lists the published hosts in the Ingress's status.
		{verb: "update", group: "networking.k8s.io", resource: "ingresses", subresource: "status", namespace: someNS},
		{verb: "list", group: "multiproject.io", resource: "providerconfigs"},
		{verb: "watch", group: "multiproject.io", resource: "translations"},
		{verb: "list", group: "management.cattle.io", resource: "projects"},
		{verb: "watch", group: "tunnel.pangolin.io", resource: "pangolintunnels"},
		{verb: "list", group: "tunnel.pangolin.io", resource: "pangolinresources"},
		// ProviderConfig controller: finalizer by patch, status.
		{verb: "patch", group: "multiproject.io", resource: "providerconfigs"},
		{verb: "patch", group: "multiproject.io", resource: "providerconfigs", subresource: "status"},
		// Events.
		{verb: "create", resource: "events", namespace: someNS}, {verb: "patch", resource: "events", namespace: someNS},
		// Live gets past the cache.
		{verb: "get", resource: "services", namespace: someNS},
		{verb: "get", group: "networking.k8s.io", resource: "ingresses", namespace: someNS},
		{verb: "get", group: "tunnel.pangolin.io", resource: "pangolinresources", namespace: someNS},
		{verb: "get", group: "multiproject.io", resource: "providerconfigs", name: "tenant-a"},
		{verb: "get", group: "multiproject.io", resource: "translations", namespace: someNS},
		{verb: "get", resource: "namespaces", name: someNS},
		// neg translator and pusher.
		{verb: "patch", resource: "services", namespace: someNS},
		{verb: "create", group: "multiproject.io", resource: "translations", namespace: someNS},
		{verb: "update", group: "multiproject.io", resource: "translations", namespace: someNS},
		{verb: "patch", group: "multiproject.io", resource: "translations", namespace: someNS},
		{verb: "delete", group: "multiproject.io", resource: "translations", namespace: someNS},
		{verb: "update", group: "multiproject.io", resource: "translations", subresource: "status", namespace: someNS},
		// The NEG readiness reflector: the gate's condition.
		{verb: "patch", resource: "pods", subresource: "status", namespace: someNS},
		{verb: "get", resource: "secrets", namespace: credentialsNS, name: "tenant-a-key"},
		// The in-use finalizer on a tenant's key (the ProviderConfig controller).
		{verb: "patch", resource: "secrets", namespace: credentialsNS, name: "tenant-a-key"},
		// namespace-project.
		{verb: "patch", resource: "namespaces", name: someNS},
		{verb: "manage-namespaces", group: "management.cattle.io", resource: "projects", namespace: "c-abcde", name: "p-xyz"},
		// ingress-tunnel.
		{verb: "create", group: "tunnel.pangolin.io", resource: "pangolinresources", namespace: someNS},
		{verb: "update", group: "tunnel.pangolin.io", resource: "pangolinresources", namespace: someNS},
		{verb: "delete", group: "tunnel.pangolin.io", resource: "pangolinresources", namespace: someNS},
		// Leader election on its own Lease.
		{verb: "get", group: "coordination.k8s.io", resource: "leases", namespace: leaseNamespace, name: leaseName},
		{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: leaseNamespace, name: leaseName},
		{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: leaseNamespace},
		// The cluster's identity: its ConfigMap, seeded from the kube-system Namespace's UID.
		{verb: "get", resource: "configmaps", namespace: "kube-system", name: clusterid.ConfigMapName},
		{verb: "create", resource: "configmaps", namespace: "kube-system"},
		{verb: "get", resource: "namespaces", name: clusterid.SeedNamespace},
		// Reading the shard Leases (docs/sharding.md): every Lease of kube-system, since RBAC cannot select by label.
		{verb: "list", group: "coordination.k8s.io", resource: "leases", namespace: leaseNamespace},
		{verb: "watch", group: "coordination.k8s.io", resource: "leases", namespace: leaseNamespace},
		{verb: "get", group: "coordination.k8s.io", resource: "leases", namespace: leaseNamespace, name: "kube-controller-manager"},
		// Delegated authentication and authorization of the secure port.
		{verb: "create", group: "authentication.k8s.io", resource: "tokenreviews"},
		{verb: "create", group: "authorization.k8s.io", resource: "subjectaccessreviews"},
		{verb: "get", resource: "configmaps", namespace: "kube-system", name: "extension-apiserver-authentication"},
	}
	denied := []access{
		// What the code never asks for (hack/tools/rbacaudit: no test requested it): reads only from the cache,
		// no Event API but core/v1's, no update of an Event, a ProviderConfig's status or a Translation's status
		// patch, no patch of the Lease.
		{verb: "get", resource: "pods", namespace: someNS},
		{verb: "get", resource: "nodes", name: "node-1"},
		{verb: "get", group: "discovery.k8s.io", resource: "endpointslices", namespace: someNS},
		{verb: "get", group: "management.cattle.io", resource: "projects", namespace: "c-abcde", name: "p-xyz"},
		{verb: "get", group: "tunnel.pangolin.io", resource: "pangolintunnels", namespace: someNS, name: "main"},
		{verb: "create", group: "events.k8s.io", resource: "events", namespace: someNS},
		{verb: "update", resource: "events", namespace: someNS},
		{verb: "update", group: "multiproject.io", resource: "providerconfigs", subresource: "status"},
		{verb: "patch", group: "multiproject.io", resource: "translations", subresource: "status", namespace: someNS},
		{verb: "patch", group: "coordination.k8s.io", resource: "leases", namespace: leaseNamespace, name: leaseName},
		// Secrets: never enumerated, never read outside the credentials namespace.
		{verb: "get", resource: "secrets", namespace: someNS, name: "tenant-a-key"},
		{verb: "list", resource: "secrets", namespace: someNS},
		{verb: "list", resource: "secrets", namespace: credentialsNS},
		{verb: "watch", resource: "secrets", namespace: credentialsNS},
		{verb: "list", resource: "secrets"},
		{verb: "get", resource: "secrets", namespace: "kube-system", name: "tenant-a-key"},
		{verb: "create", resource: "secrets", namespace: credentialsNS},
		{verb: "update", resource: "secrets", namespace: credentialsNS, name: "tenant-a-key"},
		{verb: "patch", resource: "secrets", namespace: someNS, name: "tenant-a-key"},
		{verb: "delete", resource: "secrets", namespace: credentialsNS, name: "tenant-a-key"},
		// Users' objects: read and annotated, never created, replaced or deleted.
		{verb: "create", resource: "services", namespace: someNS},
		{verb: "delete", resource: "services", namespace: someNS},
		{verb: "update", resource: "services", namespace: someNS},
		{verb: "create", group: "networking.k8s.io", resource: "ingresses", namespace: someNS},
		{verb: "delete", group: "networking.k8s.io", resource: "ingresses", namespace: someNS},
		{verb: "patch", group: "networking.k8s.io", resource: "ingresses", namespace: someNS},
		{verb: "update", group: "networking.k8s.io", resource: "ingresses", namespace: someNS},
		{verb: "patch", group: "networking.k8s.io", resource: "ingresses", subresource: "status", namespace: someNS},
		{verb: "create", resource: "namespaces"},
		{verb: "delete", resource: "namespaces", name: someNS},
		{verb: "update", resource: "namespaces", name: someNS},
		{verb: "create", group: "discovery.k8s.io", resource: "endpointslices", namespace: someNS},
		{verb: "patch", resource: "nodes", name: "node-1"},
		{verb: "create", resource: "pods", namespace: someNS},
		{verb: "delete", resource: "pods", namespace: someNS},
		// A Pod's status is patched (one condition), never replaced; the Pod itself is never written.
		{verb: "update", resource: "pods", subresource: "status", namespace: someNS},
		{verb: "patch", resource: "pods", namespace: someNS},
		{verb: "update", resource: "pods", namespace: someNS},
		{verb: "create", resource: "pods", subresource: "eviction", namespace: someNS},
		{verb: "update", group: "apps", resource: "deployments", namespace: someNS},
		{verb: "patch", group: "apps", resource: "deployments", namespace: "kube-system"},
		{verb: "get", resource: "configmaps", namespace: someNS, name: "extension-apiserver-authentication"},
		{verb: "list", resource: "configmaps", namespace: "kube-system"},
		// The identity is never changed by the manager; other ConfigMaps are not its to read or make.
		{verb: "update", resource: "configmaps", namespace: "kube-system", name: clusterid.ConfigMapName},
		{verb: "delete", resource: "configmaps", namespace: "kube-system", name: clusterid.ConfigMapName},
		{verb: "get", resource: "configmaps", namespace: "kube-system", name: "kube-proxy"},
		{verb: "create", resource: "configmaps", namespace: someNS},
		// ProviderConfigs: the tenants' spec is the admins'; only the finalizer (patch) and the status.
		{verb: "update", group: "multiproject.io", resource: "providerconfigs"},
		{verb: "create", group: "multiproject.io", resource: "providerconfigs"},
		{verb: "delete", group: "multiproject.io", resource: "providerconfigs"},
		{verb: "deletecollection", group: "multiproject.io", resource: "translations", namespace: someNS},
		// Third-party objects it only reads.
		{verb: "create", group: "management.cattle.io", resource: "projects", namespace: "c-abcde"},
		{verb: "update", group: "management.cattle.io", resource: "projects", namespace: "c-abcde", name: "p-xyz"},
		{verb: "delete", group: "management.cattle.io", resource: "projects", namespace: "c-abcde", name: "p-xyz"},
		{verb: "create", group: "tunnel.pangolin.io", resource: "pangolintunnels", namespace: someNS},
		{verb: "update", group: "tunnel.pangolin.io", resource: "pangolintunnels", namespace: someNS, name: "main"},
		{verb: "update", group: "tunnel.pangolin.io", resource: "pangolinresources", subresource: "status", namespace: someNS},
		// Other Leases, and its own anywhere but kube-system.
		{verb: "list", group: "coordination.k8s.io", resource: "leases", namespace: someNS},
		{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: leaseNamespace, name: "kube-scheduler"},
		{verb: "delete", group: "coordination.k8s.io", resource: "leases", namespace: leaseNamespace, name: leaseName},
		{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: someNS},
		// No way to more rights.
		{verb: "create", group: "rbac.authorization.k8s.io", resource: "clusterrolebindings"},
		{verb: "update", group: "rbac.authorization.k8s.io", resource: "clusterroles", name: "multiproject-controller-manager"},
		{verb: "escalate", group: "rbac.authorization.k8s.io", resource: "clusterroles"},
		{verb: "bind", group: "rbac.authorization.k8s.io", resource: "clusterroles"},
		{verb: "create", group: "rbac.authorization.k8s.io", resource: "rolebindings", namespace: credentialsNS},
		{verb: "impersonate", resource: "serviceaccounts", namespace: "kube-system"},
		{verb: "create", resource: "serviceaccounts", subresource: "token", namespace: "kube-system", name: framework.ManagerServiceAccountName},
		{verb: "create", group: "certificates.k8s.io", resource: "certificatesigningrequests"},
		{verb: "update", group: "apiextensions.k8s.io", resource: "customresourcedefinitions", name: "translations.multiproject.io"},
		{verb: "create", group: "admissionregistration.k8s.io", resource: "mutatingwebhookconfigurations"},
	}

	check := func(a access, want bool) {
		t.Helper()
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   user,
			Groups: groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: a.verb, Group: a.group, Resource: a.resource,
				Subresource: a.subresource, Namespace: a.namespace, Name: a.name},
		}}
		out, err := controlPlane.AdminClient().AuthorizationV1().SubjectAccessReviews().Create(t.Context(), review, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("%s: %v", a, err)
		}
		if out.Status.Allowed != want {
			t.Errorf("%s: allowed=%v, want %v (%s)", a, out.Status.Allowed, want, out.Status.Reason)
		}
	}
	for _, a := range allowed {
		check(a, true)
	}
	for _, a := range denied {
		check(a, false)
	}
}

// TestManifestsServerSideDryRun applies every object of every file under manifests/ (CRDs, RBAC, the Deployment)
// with a server-side apply dry run, as `kubectl apply --server-side --dry-run=server -f manifests/ -R` would: the
// API server validates and admits each one without storing it. manifests/monitoring holds Prometheus's and
// Grafana's files, not the cluster's, and the kustomization is kustomize's (test/packaging covers both).
func TestManifestsServerSideDryRun(t *testing.T) {
	root := filepath.Join(controlPlane.RepoRoot(), "manifests")
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			if path == filepath.Join(root, "monitoring") {
				return filepath.SkipDir
			}
			dirs = append(dirs, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var objects []*unstructured.Unstructured
	for _, dir := range dirs {
		objs, err := framework.ReadManifestDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		objects = append(objects, objs...)
	}
	objects = slices.DeleteFunc(objects, func(o *unstructured.Unstructured) bool { return o.GetKind() == "Kustomization" })
	kinds := map[string]int{}
	for _, o := range objects {
		kinds[o.GetKind()]++
	}
	// Guard against a walk that silently finds nothing.
	for _, kind := range []string{"CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ServiceAccount", "Deployment"} {
		if kinds[kind] == 0 {
			t.Errorf("manifests/ has no %s", kind)
		}
	}

	cfg := controlPlane.AdminConfig()
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(controlPlane.AdminClient().Discovery()))
	for _, obj := range objects {
		gvk := obj.GroupVersionKind()
		what := fmt.Sprintf("%s %s", gvk.Kind, obj.GetName())
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Errorf("%s: %v", what, err)
			continue
		}
		var resource dynamic.ResourceInterface = client.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			if obj.GetNamespace() == "" {
				t.Errorf("%s is namespaced but names no namespace", what)
				continue
			}
			resource = client.Resource(mapping.Resource).Namespace(obj.GetNamespace())
		}
		_, err = resource.Apply(t.Context(), obj.GetName(), obj, metav1.ApplyOptions{
			FieldManager: "e2e-dry-run", Force: true, DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Errorf("server-side dry run of %s: %v", what, err)
		}
	}
	t.Logf("dry-run applied %d objects from manifests/: %v", len(objects), kinds)
}
