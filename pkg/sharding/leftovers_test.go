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

package sharding

import (
	"context"
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metadatafake "k8s.io/client-go/metadata/fake"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
)

// TestLeftoversAreFoundWhereverTheNamespaceWent: the namespaces that hold a tenant's Translations and
// PangolinResources (the manager-written resources of the resource table) are found by their tenant label, whatever
// tenant the namespace belongs to now, for every tenant asked for (in batches), and for no other.
func TestLeftoversAreFoundWhereverTheNamespaceWent(t *testing.T) {
	if got := ManagerWritten(); !slices.Equal(got, []schema.GroupVersionResource{informerset.Translations, informerset.PangolinResources}) {
		t.Fatalf("ManagerWritten() = %v, want Translations and PangolinResources", got)
	}
	const key = mpv1alpha1.DefaultProviderConfigLabelKey
	object := func(gvr schema.GroupVersionResource, kind, namespace, name, tenant string) runtime.Object {
		return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: gvr.GroupVersion().String(), Kind: kind},
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{key: tenant}}}
	}
	translation := func(namespace, name, tenant string) runtime.Object {
		return object(informerset.Translations, "Translation", namespace, name, tenant)
	}
	objs := []runtime.Object{
		translation("moved-away", "a", "t1"),
		translation("t1-app", "b", "t1"),
		object(informerset.PangolinResources, "PangolinResource", "tunnels", "c", "t1"),
		translation("other-app", "d", "other"),
	}
	var tenants []string
	for i := range leftoverBatch + 5 {
		tenants = append(tenants, fmt.Sprintf("tenant-%d", i))
		objs = append(objs, translation(fmt.Sprintf("ns-%d", i), "x", fmt.Sprintf("tenant-%d", i)))
	}
	scheme := runtime.NewScheme()
	metav1.AddMetaToScheme(scheme)
	client := metadatafake.NewSimpleMetadataClient(scheme, objs...)
	got, err := Leftovers(context.Background(), client, ManagerWritten(), key, append(tenants, "t1"))
	if err != nil {
		t.Fatal(err)
	}
	t1 := got["t1"]
	slices.Sort(t1)
	if !slices.Equal(t1, []string{"moved-away", "t1-app", "tunnels"}) {
		t.Errorf("t1's leftovers in %v, want moved-away, t1-app and tunnels", t1)
	}
	if _, ok := got["other"]; ok {
		t.Error("a tenant not asked for was answered")
	}
	if last := fmt.Sprintf("tenant-%d", leftoverBatch+4); !slices.Equal(got[last], []string{fmt.Sprintf("ns-%d", leftoverBatch+4)}) {
		t.Errorf("%s (in the second batch): %v", last, got[last])
	}
}
