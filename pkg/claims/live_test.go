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

package claims

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpfake "github.com/multiproject/client-go/clientset/versioned/fake"
)

const liveLabelKey = "multiproject.io/provider-config"

// testObjects are claimants (ConfigMaps, claiming the keys of their data) and publishers (Secrets, publishing the
// keys of theirs) as a controller would describe them for a Kind; the tenant runs the controller when its
// ProviderConfig has a GCP section.
func testObjects(objects ...runtime.Object) TenantObjects[*corev1.ConfigMap, *corev1.Secret] {
	var kubeObjects, mpObjects []runtime.Object
	for _, obj := range objects {
		if _, ok := obj.(*mpv1alpha1.ProviderConfig); ok {
			mpObjects = append(mpObjects, obj)
		} else {
			kubeObjects = append(kubeObjects, obj)
		}
	}
	kube, mp := kubefake.NewClientset(kubeObjects...), mpfake.NewClientset(mpObjects...)
	// A failing read, for the cases that must pass an error on.
	kube.PrependReactor("get", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.(k8stesting.GetAction).GetName() == "broken" {
			return true, nil, errors.New("the API server does not answer")
		}
		return false, nil, nil
	})
	return TenantObjects[*corev1.ConfigMap, *corev1.Secret]{
		Kube: kube, MP: mp, LabelKey: liveLabelKey,
		GetClaimant: func(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
			return kube.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
		},
		ClaimedNames: func(cm *corev1.ConfigMap) []string { return keys(cm.Data) },
		Runs:         func(pc *mpv1alpha1.ProviderConfig) bool { return pc.Spec.GCP != nil },
		GetPublisher: func(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
			return kube.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		},
		HoldingOf: func(obj any) (Holding, bool) {
			secret := obj.(*corev1.Secret)
			return Holding{Names: keys(secret.StringData)}, len(secret.StringData) > 0
		},
		ListPublishers: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return kube.CoreV1().Secrets(metav1.NamespaceAll).List(ctx, opts)
		},
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestKindLive(t *testing.T) {
	namespace := func(tenant string) *corev1.Namespace {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}
		if tenant != "" {
			ns.Labels = map[string]string{liveLabelKey: tenant}
		}
		return ns
	}
	running := &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a"},
		Spec: mpv1alpha1.ProviderConfigSpec{GCP: &mpv1alpha1.GCPConfig{}}}
	withoutSection := &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a"}}
	claimant := func(name string, uid types.UID, names ...string) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid}, Data: map[string]string{}}
		for _, n := range names {
			cm.Data[n] = ""
		}
		return cm
	}
	tests := []struct {
		name    string
		objects []runtime.Object
		key     string
		want    []string
		wantErr bool
	}{
		{name: "claims its names", key: "ns/a", want: []string{"x", "y"},
			objects: []runtime.Object{namespace("tenant-a"), running, claimant("a", "uid-a", "y", "x")}},
		{name: "gone", key: "ns/a", objects: []runtime.Object{namespace("tenant-a"), running}},
		{name: "replaced by an object of another UID", key: "ns/a",
			objects: []runtime.Object{namespace("tenant-a"), running, claimant("a", "uid-b", "x")}},
		{name: "claims nothing", key: "ns/a", objects: []runtime.Object{namespace("tenant-a"), running, claimant("a", "uid-a")}},
		{name: "its namespace left the tenant", key: "ns/a",
			objects: []runtime.Object{namespace("tenant-b"), running, claimant("a", "uid-a", "x")}},
		{name: "its tenant no longer runs the controller", key: "ns/a",
			objects: []runtime.Object{namespace("tenant-a"), withoutSection, claimant("a", "uid-a", "x")}},
		{name: "its tenant is gone", key: "ns/a", objects: []runtime.Object{namespace("tenant-a"), claimant("a", "uid-a", "x")}},
		{name: "a malformed key names nothing", key: "a/b/c", objects: []runtime.Object{namespace("tenant-a"), running}},
		{name: "a failed read is an error", key: "ns/broken", wantErr: true,
			objects: []runtime.Object{namespace("tenant-a"), running}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kind := testObjects(tt.objects...).Kind("ConfigMap", configMaps)
			got, err := kind.Live(context.Background(), "tenant-a", tt.key, "uid-a")
			if (err != nil) != tt.wantErr {
				t.Fatalf("Live() error = %v, want an error: %t", err, tt.wantErr)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Live() = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestKindLiveScopesNames: with ScopeNames, a live claimant claims its names in its tenant's scope, read from the
// tenant's ProviderConfig as it is now (a custom NEG name in the tenant's GCP project).
func TestKindLiveScopesNames(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: map[string]string{liveLabelKey: "tenant-a"}}}
	pc := &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a"},
		Spec: mpv1alpha1.ProviderConfigSpec{GCP: &mpv1alpha1.GCPConfig{ProjectID: "project-a"}}}
	claimant := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: "uid-a"},
		Data: map[string]string{"x": "", "y": ""}}
	objects := testObjects(ns, pc, claimant)
	objects.ScopeNames = func(pc *mpv1alpha1.ProviderConfig, names []string) []string {
		var out []string
		for _, n := range names {
			out = append(out, pc.Spec.GCP.ProjectID+"/"+n)
		}
		return out
	}
	for _, tt := range []struct {
		name    string
		project string
		want    []string
	}{
		{name: "in its tenant's project", project: "project-a", want: []string{"project-a/x", "project-a/y"}},
		{name: "in the project its tenant moved to", project: "project-b", want: []string{"project-b/x", "project-b/y"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pc.Spec.GCP.ProjectID = tt.project
			if _, err := objects.MP.MultiprojectV1alpha1().ProviderConfigs().Update(context.Background(), pc, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			got, err := objects.Kind("ConfigMap", configMaps).Live(context.Background(), "tenant-a", "ns/a", "uid-a")
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("Live() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestKindObject(t *testing.T) {
	publisher := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, StringData: map[string]string{"x": ""}}
	silent := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}}
	tests := []struct {
		name, key, publishes string
		want, wantErr        bool
	}{
		{name: "still publishes the name", key: "ns/p", publishes: "x", want: true},
		{name: "publishes another name", key: "ns/p", publishes: "y"},
		{name: "publishes nothing", key: "ns/s", publishes: "x"},
		{name: "gone", key: "ns/gone", publishes: "x"},
		{name: "a malformed key names nothing", key: "a/b/c", publishes: "x"},
		{name: "a failed read is an error", key: "ns/broken", publishes: "x", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kind := testObjects(publisher, silent).Kind("ConfigMap", configMaps)
			got, err := kind.Object(context.Background(), tt.key, tt.publishes)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Object() error = %v, want an error: %t", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("Object() = %t, want %t", got, tt.want)
			}
		})
	}
}

// TestKindPublishers: the live lookup finds, in every namespace, exactly the objects that publish the name.
func TestKindPublishers(t *testing.T) {
	secret := func(namespace, name string, names ...string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, StringData: map[string]string{}}
		for _, n := range names {
			s.StringData[n] = ""
		}
		return s
	}
	kind := testObjects(secret("ns-a", "p", "x", "y"), secret("ns-b", "q", "x"), secret("ns-b", "r", "y"),
		secret("ns-c", "s")).Kind("ConfigMap", configMaps)
	got, err := kind.Publishers(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, []string{"ns-a/p", "ns-b/q"}) {
		t.Errorf("Publishers(x) = %q, want ns-a/p and ns-b/q", keys)
	}
}
