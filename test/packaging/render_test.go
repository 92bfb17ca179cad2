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

// Package packaging tests how the manager is installed and watched: the kustomize base in manifests/, the Helm
// chart in charts/, and the Prometheus rules and Grafana dashboard in manifests/monitoring/. Without the
// `integration` tag everything runs in process; with it, the renderings are also applied with a server-side dry run
// to a real kube-apiserver (hack/test-packaging.sh).
package packaging

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

const (
	chartName = "multiproject-controller-manager"
	// defaultNamespace is where manifests/ puts the manager, and so the release namespace that makes the chart
	// render the same objects.
	defaultNamespace = "kube-system"
)

// readmeInstall is what README.md's "Deploying" applies: `kubectl apply -f manifests/crds/ -f manifests/rbac/
// -f manifests/admission/ -f manifests/deployment.yaml`. The kustomize base must install exactly this.
var readmeInstall = []string{"manifests/crds", "manifests/rbac", "manifests/admission", "manifests/deployment.yaml"}

var (
	repoRootOnce sync.Once
	repoRoot     string
	repoRootErr  error
)

// root is the repository root: the directory above this module's that holds the product's go.mod.
func root(t testing.TB) string {
	t.Helper()
	repoRootOnce.Do(func() { repoRoot, repoRootErr = framework.FindRepoRoot() })
	if repoRootErr != nil {
		t.Fatal(repoRootErr)
	}
	return repoRoot
}

// readPaths decodes the objects of manifest directories (their files, as `kubectl apply -f DIR` reads them, not
// recursively) and files, relative to the repository root.
func readPaths(t testing.TB, paths ...string) []*unstructured.Unstructured {
	t.Helper()
	var objects []*unstructured.Unstructured
	for _, p := range paths {
		abs := filepath.Join(root(t), p)
		info, err := os.Stat(abs)
		if err != nil {
			t.Fatal(err)
		}
		if info.IsDir() {
			objs, err := framework.ReadManifestDir(abs)
			if err != nil {
				t.Fatal(err)
			}
			objects = append(objects, objs...)
			continue
		}
		f, err := os.Open(abs)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := framework.DecodeManifests(f)
		_ = f.Close()
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		objects = append(objects, objs...)
	}
	return objects
}

// kustomizeBuild is `kustomize build DIR` (and what `kubectl apply -k DIR` applies); a relative DIR is relative to
// the repository root.
func kustomizeBuild(t testing.TB, dir string) []*unstructured.Unstructured {
	t.Helper()
	path := dir
	if !filepath.IsAbs(path) {
		path = filepath.Join(root(t), dir)
	}
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resources, err := k.Run(filesys.MakeFsOnDisk(), path)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	out, err := resources.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	objects, err := framework.DecodeManifests(strings.NewReader(string(out)))
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	return objects
}

func loadChart(t testing.TB) *chart.Chart {
	t.Helper()
	return loadChartDir(t, filepath.Join(root(t), "charts", chartName))
}

func loadChartDir(t testing.TB, dir string) *chart.Chart {
	t.Helper()
	// The chart's crds/ are symbolic links to manifests/crds, so that the chart never carries stale CRDs; Helm's
	// loader logs each one through the standard logger, once per load.
	log.SetOutput(io.Discard)
	defer log.SetOutput(os.Stderr)
	c, err := loader.Load(dir)
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	return c
}

// helmTemplate renders the chart as `helm template --include-crds -n NAMESPACE` does: an install with a
// client-only dry run, which validates the values against values.schema.json and checks the chart's kubeVersion.
func helmTemplate(t testing.TB, namespace string, values map[string]any) ([]*unstructured.Unstructured, error) {
	t.Helper()
	return helmTemplateChart(t, loadChart(t), namespace, values)
}

func helmTemplateChart(t testing.TB, c *chart.Chart, namespace string, values map[string]any) ([]*unstructured.Unstructured, error) {
	t.Helper()
	install := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	install.DryRun = true
	install.DryRunOption = "client"
	install.ClientOnly = true
	install.Replace = true
	install.IncludeCRDs = true
	install.ReleaseName = chartName
	install.Namespace = namespace
	rel, err := install.Run(c, values)
	if err != nil {
		return nil, err
	}
	objects, err := framework.DecodeManifests(strings.NewReader(rel.Manifest))
	if err != nil {
		return nil, fmt.Errorf("decoding the rendered chart: %w", err)
	}
	return objects, nil
}

func mustHelmTemplate(t testing.TB, namespace string, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	objects, err := helmTemplate(t, namespace, values)
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	return objects
}

// key names an object as kubectl does: kind.group namespace/name.
func key(obj *unstructured.Unstructured) string {
	gvk := obj.GroupVersionKind()
	kind := gvk.Kind
	if gvk.Group != "" {
		kind += "." + gvk.Group
	}
	if ns := obj.GetNamespace(); ns != "" {
		return kind + " " + ns + "/" + obj.GetName()
	}
	return kind + " " + obj.GetName()
}

// byKey indexes objects by key and fails on a duplicate, which an apply would silently merge.
func byKey(t testing.TB, what string, objects []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	t.Helper()
	m := make(map[string]*unstructured.Unstructured, len(objects))
	for _, obj := range objects {
		k := key(obj)
		if _, dup := m[k]; dup {
			t.Errorf("%s: %s appears twice", what, k)
		}
		m[k] = obj
	}
	return m
}

// diffObjects reports, per object, how got differs from want: objects missing, extra, or with other content
// (compared as parsed objects, so formatting, key order and comments do not count).
func diffObjects(t testing.TB, wantName string, want []*unstructured.Unstructured, gotName string, got []*unstructured.Unstructured) {
	t.Helper()
	w, g := byKey(t, wantName, want), byKey(t, gotName, got)
	var keys []string
	for k := range w {
		keys = append(keys, k)
	}
	for k := range g {
		if _, ok := w[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		wo, inWant := w[k]
		gotObj, inGot := g[k]
		switch {
		case !inGot:
			t.Errorf("%s has %s, %s does not", wantName, k, gotName)
		case !inWant:
			t.Errorf("%s has %s, %s does not", gotName, k, wantName)
		default:
			if d := diffValue(wo.Object, gotObj.Object); d != "" {
				t.Errorf("%s differs between %s and %s (-%s +%s):\n%s", k, wantName, gotName, wantName, gotName, d)
			}
		}
	}
}

// diffValue compares two JSON-like values after a JSON round trip, so that an int written by a test and the
// float64 a decoder produced compare equal.
func diffValue(want, got any) string {
	return cmp.Diff(normalize(want), normalize(got))
}

func normalize(v any) any {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("unmarshalable %T: %v", v, err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		return fmt.Sprintf("unmarshalable %T: %v", v, err)
	}
	return out
}

// deepCopyValue copies a JSON-like value (maps, slices, strings, numbers, bools) so that test edits never alias.
func deepCopyValue(v any) any {
	return normalize(v)
}

// find returns the object of that kind and name (any namespace), failing the test if there is none.
func find(t testing.TB, objects []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, obj := range objects {
		if obj.GetKind() == kind && obj.GetName() == name {
			return obj
		}
	}
	t.Fatalf("no %s %s among %d objects", kind, name, len(objects))
	return nil
}
