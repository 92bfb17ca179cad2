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
	"slices"
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime/schema"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
)

// Each controller runs for the tenants that configure its section (a plain nil otherwise, so the manager does not
// start it), reports its own condition, waits for the APIs it needs, and, when it cleans up, records and restores
// exactly its section.
func TestControllerDescriptors(t *testing.T) {
	full := mpv1alpha1.ProviderConfigSpec{
		GCP:      &mpv1alpha1.GCPConfig{ProjectID: "p-123456", Network: "default"},
		Rancher:  &mpv1alpha1.RancherConfig{ClusterID: "c-1"},
		Pangolin: &mpv1alpha1.PangolinConfig{TunnelNamespace: "tunnels"},
	}
	for _, tc := range []struct {
		name      string
		condition string
		apis      []schema.GroupVersionResource
		section   any
		cleans    bool
	}{
		{"neg", mpv1alpha1.ProviderConfigConditionNEGReady, []schema.GroupVersionResource{informerset.Translations}, full.GCP, true},
		{"namespace-project", mpv1alpha1.ProviderConfigConditionNamespaceProjectReady, []schema.GroupVersionResource{informerset.Projects}, full.Rancher, false},
		{"ingress-tunnel", mpv1alpha1.ProviderConfigConditionIngressTunnelReady, []schema.GroupVersionResource{informerset.PangolinTunnels, informerset.PangolinResources}, full.Pangolin, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, ok := NewControllerDescriptors().Get(tc.name)
			if !ok {
				t.Fatalf("no descriptor named %q", tc.name)
			}
			f := d.Factory
			if d.DefaultConcurrentSyncs < 1 || f.New == nil || f.ConditionType != tc.condition || !slices.Equal(f.RequiredAPIs(&full), tc.apis) {
				t.Errorf("descriptor %s: workers %d, condition %q, APIs %v", d.Name, d.DefaultConcurrentSyncs, f.ConditionType, f.RequiredAPIs(&full))
			}
			if got := f.Section(&mpv1alpha1.ProviderConfigSpec{}); got != nil {
				t.Errorf("Section of a spec without it = %#v, want a plain nil", got)
			}
			if got := f.Section(&full); got != tc.section {
				t.Errorf("Section = %#v, want %#v", got, tc.section)
			}
			if f.Cleans() != tc.cleans {
				t.Fatalf("Cleans() = %v, want %v", f.Cleans(), tc.cleans)
			}
			if !tc.cleans {
				return
			}
			var recorded mpv1alpha1.ProviderConfigSpec
			f.CopySection(&recorded, &full)
			if got := f.Section(&recorded); got == tc.section || !apiequality.Semantic.DeepEqual(got, tc.section) {
				t.Errorf("CopySection recorded %#v, want a deep copy of %#v", got, tc.section)
			}
			copied := 0
			for _, present := range []bool{recorded.GCP != nil, recorded.Rancher != nil, recorded.Pangolin != nil} {
				if present {
					copied++
				}
			}
			if copied != 1 {
				t.Errorf("CopySection copied %d sections, want only its own: %+v", copied, recorded)
			}
			f.CopySection(&recorded, &mpv1alpha1.ProviderConfigSpec{})
			if got := f.Section(&recorded); got != nil {
				t.Errorf("CopySection from a spec without the section left %#v", got)
			}
		})
	}
}
