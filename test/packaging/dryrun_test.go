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

package packaging

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"

	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

// controlPlane is a real etcd and kube-apiserver with nothing of the project installed: each rendering must stand
// on its own, as on a fresh cluster.
var controlPlane *framework.ControlPlane

func TestMain(m *testing.M) {
	framework.Main(m, framework.Options{}, &controlPlane)
}

// TestRenderingsPassServerSideDryRun applies the kustomize base and the chart, with default and with non-default
// values, as `kubectl apply --server-side --dry-run=server` would: the API server validates and admits every
// object (schemas, unknown fields, the admission policy's CEL) without storing it. Only the namespaces the objects
// go into are created for real first, since a dry-run Namespace does not exist for the objects in it.
func TestRenderingsPassServerSideDryRun(t *testing.T) {
	renderings := map[string][]*unstructured.Unstructured{
		"kustomize build manifests":        kustomizeBuild(t, "manifests"),
		"kustomize build overlays/sharded": kustomizeBuild(t, "overlays/sharded"),
		"helm template (defaults)":         mustHelmTemplate(t, defaultNamespace, nil),
		"helm template (sharded, own namespace)": mustHelmTemplate(t, "multiproject-sharded", map[string]any{
			"replicas": 3, "sharding": map[string]any{"enabled": true},
		}),
		"helm template (non-default values)": mustHelmTemplate(t, "multiproject-system", map[string]any{
			"image":            map[string]any{"repository": "registry.example.com/mpcm", "tag": "v1.2.3"},
			"replicas":         3,
			"controllers":      []any{"*", "-namespace-project"},
			"tenantLabelKey":   "example.com/tenant",
			"appOwnerLabelKey": "example.com/app-owner",
			"neg": map[string]any{"annotationKey": "example.com/neg", "statusAnnotationKey": "example.com/neg-status",
				"readinessGate": "example.com/neg-ready"},
			"extraArgs":            []any{"--cluster-name=prod-eu"},
			"credentialsNamespace": map[string]any{"name": "tenant-keys", "create": true},
			"tolerations":          []any{map[string]any{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}},
		}),
	}
	client, mapper := dynamicClient(t)
	for name, objects := range renderings {
		t.Run(name, func(t *testing.T) {
			if len(objects) == 0 {
				t.Fatal("nothing rendered")
			}
			for _, ns := range namespacesOf(objects) {
				createNamespace(t, ns)
			}
			for _, obj := range objects {
				if err := serverSideApply(t.Context(), client, mapper, obj, true); err != nil {
					t.Errorf("server-side dry run of %s: %v", key(obj), err)
				}
			}
		})
	}
}

// namespacesOf lists the namespaces the objects live in, and the Namespaces they create.
func namespacesOf(objects []*unstructured.Unstructured) []string {
	seen := map[string]bool{}
	var out []string
	for _, obj := range objects {
		ns := obj.GetNamespace()
		if obj.GetKind() == "Namespace" {
			ns = obj.GetName()
		}
		if ns != "" && !seen[ns] {
			seen[ns] = true
			out = append(out, ns)
		}
	}
	return out
}

func createNamespace(t *testing.T, name string) {
	t.Helper()
	_, err := controlPlane.AdminClient().CoreV1().Namespaces().Create(t.Context(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
}

// dynamicClient is the administrator's dynamic client and a REST mapper of the control plane.
func dynamicClient(t *testing.T) (dynamic.Interface, meta.RESTMapper) {
	t.Helper()
	client, err := dynamic.NewForConfig(controlPlane.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	return client, restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(controlPlane.AdminClient().Discovery()))
}

// resourceFor is the dynamic client of obj's resource (and namespace).
func resourceFor(client dynamic.Interface, mapper meta.RESTMapper, obj *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := obj.GroupVersionKind()
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		return client.Resource(mapping.Resource), nil
	}
	if obj.GetNamespace() == "" {
		return nil, fmt.Errorf("namespaced, but names no namespace")
	}
	return client.Resource(mapping.Resource).Namespace(obj.GetNamespace()), nil
}

// serverSideApply server-side applies obj with strict field validation, so an unknown or duplicate field is an
// error rather than a warning; with dryRun, as DryRun=All (validated and admitted, not stored).
func serverSideApply(ctx context.Context, client dynamic.Interface, mapper meta.RESTMapper, obj *unstructured.Unstructured, dryRun bool) error {
	resource, err := resourceFor(client, mapper, obj)
	if err != nil {
		return err
	}
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return err
	}
	opts := metav1.PatchOptions{FieldManager: "packaging-test", Force: ptr.To(true), FieldValidation: "Strict"}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err = resource.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, opts)
	return err
}
