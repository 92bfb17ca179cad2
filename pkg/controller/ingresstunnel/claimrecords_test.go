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

package ingresstunnel

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	tunnelv1alpha1 "github.com/multiproject/api/pangolin/tunnel/v1alpha1"
	mpfake "github.com/multiproject/client-go/clientset/versioned/fake"
)

// TestClaimRecordsReadIngressesAndPangolinResources pins what the controller gives the claims package's live reads:
// a recorded holder is an Ingress claiming the hosts its tenant allows (spec.pangolin.allowedHostnames, read live)
// while its tenant has a Pangolin section, and a previous holder's object is a PangolinResource publishing the name.
func TestClaimRecordsReadIngressesAndPangolinResources(t *testing.T) {
	ing := seedIngress()
	ing.Spec.IngressClassName = nil
	ing.Annotations = map[string]string{AnnotationEnabled: "true"}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace, Labels: map[string]string{testLabelKey: testTenant}}}
	res := &tunnelv1alpha1.PangolinResource{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "res"},
		Spec: tunnelv1alpha1.PangolinResourceSpec{HTTPConfig: &tunnelv1alpha1.HTTPConfig{Subdomain: "app", DomainName: "example.com"}}}
	tests := []struct {
		name string
		spec mpv1alpha1.ProviderConfigSpec
		want []string
	}{
		{name: "a tenant with a Pangolin section", spec: mpv1alpha1.ProviderConfigSpec{Pangolin: testConfig()},
			want: []string{"admin.example.com", "api.example.com", "app.example.com"}},
		{name: "a tenant without one", spec: mpv1alpha1.ProviderConfigSpec{GCP: &mpv1alpha1.GCPConfig{}}},
		{name: "a tenant that allows some of the hosts", spec: mpv1alpha1.ProviderConfigSpec{Pangolin: func() *mpv1alpha1.PangolinConfig {
			c := testConfig()
			c.AllowedHostnames = []mpv1alpha1.AllowedHostname{"app.example.com", "*.api.example.com"} // not api.example.com itself
			return c
		}()}, want: []string{"app.example.com"}},
		{name: "a tenant that allows none of them", spec: mpv1alpha1.ProviderConfigSpec{Pangolin: func() *mpv1alpha1.PangolinConfig {
			c := testConfig()
			c.AllowedHostnames = []mpv1alpha1.AllowedHostname{"*.example.net"}
			return c
		}()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pc := &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: testTenant}, Spec: tt.spec}
			records := hostKindOf(kubefake.NewClientset(ns, ing), mpfake.NewClientset([]runtime.Object{pc, res}...), nil, testLabelKey)
			ctx := context.Background()
			names, err := records.Live(ctx, testTenant, testNamespace+"/"+ing.Name, ing.UID)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(names, tt.want) {
				t.Errorf("Live() = %q, want %q", names, tt.want)
			}
			for name, want := range map[string]bool{"app.example.com": true, "api.example.com": false} {
				publishes, err := records.Object(ctx, testNamespace+"/res", name)
				if err != nil {
					t.Fatal(err)
				}
				if publishes != want {
					t.Errorf("Object(%s) = %t, want %t", name, publishes, want)
				}
			}
		})
	}
}
