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
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestDecodeManifestsSplitsDocumentsAndFlattensLists(t *testing.T) {
	const manifests = `# leading comment document
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: first
  namespace: kube-system
---
---
# only a comment
---
apiVersion: v1
kind: List
items:
- apiVersion: rbac.authorization.k8s.io/v1
  kind: ClusterRole
  metadata:
    name: second
- apiVersion: rbac.authorization.k8s.io/v1
  kind: ClusterRoleBinding
  metadata:
    name: third
`
	objects, err := DecodeManifests(strings.NewReader(manifests))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, obj := range objects {
		got = append(got, obj.GetKind()+"/"+obj.GetName())
	}
	want := []string{"ServiceAccount/first", "ClusterRole/second", "ClusterRoleBinding/third"}
	if !slices.Equal(got, want) {
		t.Errorf("decoded %v, want %v", got, want)
	}
}

func TestDecodeManifestsRejectsADocumentWithoutKind(t *testing.T) {
	_, err := DecodeManifests(strings.NewReader("apiVersion: v1\nmetadata:\n  name: x\n"))
	if err == nil || !strings.Contains(err.Error(), "document 1") {
		t.Errorf("got error %v, want one naming document 1", err)
	}
}

func TestReadManifestDirReadsOnlyManifestFilesInNameOrder(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"b.yaml":             "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, namespace: x}\n",
		"a.json":             `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "x"}}`,
		"c.yml":              "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: x}\n",
		"README.md":          "# not a manifest\n",
		"kustomization.yaml": "resources: [b.yaml]\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	objects, err := ReadManifestDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, obj := range objects {
		got = append(got, obj.GetName())
	}
	if want := []string{"a", "b", "c"}; !slices.Equal(got, want) {
		t.Errorf("read %v, want %v", got, want)
	}
}

func TestNamespacePrefixIsADNSLabelPrefixNamedAfterTheTest(t *testing.T) {
	for testName, want := range map[string]string{
		"TestGarbageCollection/owner_deleted": "testgarbagecollection-owner-deleted-",
		"Test_With__Odd--Chars!":              "test-with-odd-chars-",
		strings.Repeat("x", 100):              strings.Repeat("x", 40) + "-",
		"///":                                 "test-",
	} {
		if got := namespacePrefix(testName); got != want {
			t.Errorf("namespacePrefix(%q) = %q, want %q", testName, got, want)
		}
	}
}
