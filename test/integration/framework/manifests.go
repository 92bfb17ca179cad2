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
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// The project's own manifests, relative to the repository root. Other engineers own their contents.
const (
	ProjectCRDDir  = "manifests/crds"
	ProjectRBACDir = "manifests/rbac"
	// ProjectAdmissionDir holds the admission policy guarding who may set a namespace's tenant. It is installed with
	// the RBAC so that every test runs on a cluster that behaves like a deployed one.
	ProjectAdmissionDir = "manifests/admission"
)

const (
	// applyFieldManager owns every field the framework applies, like kubectl's "kubectl" manager.
	applyFieldManager = "integration-framework"
	// discoveryTimeout bounds the wait for a new CRD to be Established and to appear in discovery.
	discoveryTimeout = time.Minute
)

var crdGroupKind = schema.GroupKind{Group: apiextensionsv1.GroupName, Kind: "CustomResourceDefinition"}

// InstallProjectManifests applies the project's CRDs (and waits until each is Established), then its RBAC
// manifests and its admission policy. A directory that does not exist yet is reported on the progress output and
// skipped, so the framework works before those manifests are written; tests that need them check ProjectCRDDir
// themselves. The API server enforces the policy a moment after it is applied, not at once: a test that needs it
// waits for a first denial.
func (cp *ControlPlane) InstallProjectManifests(ctx context.Context) error {
	for _, dir := range []string{ProjectCRDDir, ProjectRBACDir, ProjectAdmissionDir} {
		info, err := os.Stat(filepath.Join(cp.repoRoot, dir))
		if errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(cp.progress, "framework: %s does not exist (yet); not installed\n", dir)
			continue
		}
		if err != nil {
			return err
		}
		if !info.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		if _, err := cp.ApplyManifestDir(ctx, dir); err != nil {
			return err
		}
	}
	return nil
}

// ApplyManifestDir server-side applies every object in the directory's YAML and JSON files (relative paths are
// relative to the repository root) as the admin, and returns them. CRDs go first and are waited for until
// Established, then Namespaces, then everything else, so one directory may hold CRDs and objects of their kinds.
func (cp *ControlPlane) ApplyManifestDir(ctx context.Context, dir string) ([]*unstructured.Unstructured, error) {
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(cp.repoRoot, dir)
	}
	objects, err := ReadManifestDir(dir)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(cp.progress, "framework: applying %d objects from %s\n", len(objects), dir)
	if err := ApplyObjects(ctx, cp.adminConfig, objects); err != nil {
		return nil, fmt.Errorf("applying %s: %w", dir, err)
	}
	return objects, nil
}

// ReadManifestDir decodes every object of the .yaml, .yml and .json files directly in dir, in file-name order.
// kustomization.yaml is kustomize's input, not an object, and is left out.
func ReadManifestDir(dir string) ([]*unstructured.Unstructured, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var objects []*unstructured.Unstructured
	for _, entry := range entries {
		name := entry.Name()
		ext := strings.ToLower(filepath.Ext(name))
		if entry.IsDir() || (ext != ".yaml" && ext != ".yml" && ext != ".json") || strings.HasPrefix(name, "kustomization.") {
			continue
		}
		path := filepath.Join(dir, name)
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		decoded, err := DecodeManifests(f)
		_ = f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		objects = append(objects, decoded...)
	}
	return objects, nil
}

// DecodeManifests decodes a stream of YAML documents separated by "---" (or JSON objects). Empty and comment-only
// documents are skipped, and a List is flattened into its items.
func DecodeManifests(r io.Reader) ([]*unstructured.Unstructured, error) {
	decoder := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	var objects []*unstructured.Unstructured
	for document := 1; ; document++ {
		var content map[string]any
		if err := decoder.Decode(&content); err != nil {
			if errors.Is(err, io.EOF) {
				return objects, nil
			}
			return nil, fmt.Errorf("document %d: %w", document, err)
		}
		if len(content) == 0 {
			continue
		}
		obj := &unstructured.Unstructured{Object: content}
		if obj.GetAPIVersion() == "" || obj.GetKind() == "" {
			return nil, fmt.Errorf("document %d has no apiVersion or kind", document)
		}
		if !obj.IsList() {
			objects = append(objects, obj)
			continue
		}
		err := obj.EachListItem(func(item runtime.Object) error {
			objects = append(objects, item.(*unstructured.Unstructured))
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", document, err)
		}
	}
}

// ApplyObjects server-side applies objects with cfg, resolving each kind through discovery. CRDs are applied first
// and waited for until Established, Namespaces next, the rest in the given order.
func ApplyObjects(ctx context.Context, cfg *rest.Config, objects []*unstructured.Unstructured) error {
	a, err := newApplier(cfg)
	if err != nil {
		return err
	}
	ordered := slices.Clone(objects)
	applyRank := func(obj *unstructured.Unstructured) int {
		switch gk := obj.GroupVersionKind().GroupKind(); {
		case gk == crdGroupKind:
			return 0
		case gk == (schema.GroupKind{Kind: "Namespace"}):
			return 1
		default:
			return 2
		}
	}
	slices.SortStableFunc(ordered, func(x, y *unstructured.Unstructured) int { return applyRank(x) - applyRank(y) })

	var crdNames []string
	for _, obj := range ordered {
		if applyRank(obj) > 0 && len(crdNames) > 0 {
			if err := a.waitEstablished(ctx, crdNames); err != nil {
				return err
			}
			crdNames = nil
		}
		if err := a.apply(ctx, obj); err != nil {
			return err
		}
		if applyRank(obj) == 0 {
			crdNames = append(crdNames, obj.GetName())
		}
	}
	return a.waitEstablished(ctx, crdNames)
}

type applier struct {
	dynamic dynamic.Interface
	crds    apiextensionsclient.Interface
	mapper  *restmapper.DeferredDiscoveryRESTMapper
}

func newApplier(cfg *rest.Config) (*applier, error) {
	dynamicClient, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	crdClient, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &applier{
		dynamic: dynamicClient,
		crds:    crdClient,
		mapper:  restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(crdClient.Discovery())),
	}, nil
}

func (a *applier) apply(ctx context.Context, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	mapping, err := a.restMapping(ctx, gvk)
	if err != nil {
		return err
	}
	obj = obj.DeepCopy()
	var resource dynamic.ResourceInterface
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			// Guessing a namespace (kubectl uses the kubeconfig's) would hide a manifest that works only by luck.
			return fmt.Errorf("%s %s is namespaced but its manifest names no namespace", gvk.Kind, obj.GetName())
		}
		resource = a.dynamic.Resource(mapping.Resource).Namespace(obj.GetNamespace())
	} else {
		obj.SetNamespace("")
		resource = a.dynamic.Resource(mapping.Resource)
	}
	_, err = resource.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: applyFieldManager, Force: true})
	if err != nil {
		return fmt.Errorf("applying %s %s: %w", gvk.Kind, namespacedName(obj), err)
	}
	return nil
}

// restMapping resolves a kind to its resource. A kind served by a CRD that was just Established may be missing
// from discovery for a moment, so a miss resets the cached discovery and is retried until discoveryTimeout.
func (a *applier) restMapping(ctx context.Context, gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	var mapping *meta.RESTMapping
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, pollInterval, discoveryTimeout, true, func(context.Context) (bool, error) {
		mapping, lastErr = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(lastErr) {
			a.mapper.Reset()
			return false, nil
		}
		return lastErr == nil, lastErr
	})
	if err != nil && lastErr != nil {
		return nil, fmt.Errorf("the API server does not serve %s: %w", gvk, lastErr)
	}
	return mapping, err
}

func (a *applier) waitEstablished(ctx context.Context, names []string) error {
	for _, name := range names {
		var lastErr error
		err := wait.PollUntilContextTimeout(ctx, pollInterval, discoveryTimeout, true, func(ctx context.Context) (bool, error) {
			crd, err := a.crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				lastErr = err
				return false, nil
			}
			if apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) {
				return true, nil
			}
			lastErr = fmt.Errorf("conditions: %v", crd.Status.Conditions)
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CustomResourceDefinition %s not Established: %w (last: %v)", name, err, lastErr)
		}
	}
	// The new kinds are not in the mapper's cached discovery yet.
	a.mapper.Reset()
	return nil
}

func namespacedName(obj *unstructured.Unstructured) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}
