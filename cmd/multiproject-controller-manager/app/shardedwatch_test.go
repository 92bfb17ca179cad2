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

package app

import (
	"context"
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	tunnelv1alpha1 "github.com/multiproject/api/pangolin/tunnel/v1alpha1"
	mpfake "github.com/multiproject/client-go/clientset/versioned/fake"
)

// TestLeftoversAreFoundWhereverTheNamespaceWent: the namespaces that hold a tenant's Translations and
// PangolinResources are found by their tenant label, whatever tenant the namespace belongs to now, for every
// tenant asked for (in batches), and for no other.
func TestLeftoversAreFoundWhereverTheNamespaceWent(t *testing.T) {
	const key = mpv1alpha1.DefaultProviderConfigLabelKey
	labeled := func(tenant string) map[string]string { return map[string]string{key: tenant} }
	objs := []runtime.Object{
		&mpv1alpha1.Translation{ObjectMeta: metav1.ObjectMeta{Namespace: "moved-away", Name: "a", Labels: labeled("t1")}},
		&mpv1alpha1.Translation{ObjectMeta: metav1.ObjectMeta{Namespace: "t1-app", Name: "b", Labels: labeled("t1")}},
		&tunnelv1alpha1.PangolinResource{ObjectMeta: metav1.ObjectMeta{Namespace: "tunnels", Name: "c", Labels: labeled("t1")}},
		&mpv1alpha1.Translation{ObjectMeta: metav1.ObjectMeta{Namespace: "other-app", Name: "d", Labels: labeled("other")}},
	}
	var tenants []string
	for i := range leftoverBatch + 5 {
		tenants = append(tenants, fmt.Sprintf("tenant-%d", i))
		objs = append(objs, &mpv1alpha1.Translation{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%d", i), Name: "x",
			Labels: labeled(fmt.Sprintf("tenant-%d", i))}})
	}
	client := mpfake.NewClientset(objs...)
	got, err := managerWrittenNamespaces(context.Background(), client, key, append(tenants, "t1"))
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
