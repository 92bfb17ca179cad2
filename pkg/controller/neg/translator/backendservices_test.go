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

package translator

import (
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

// TestBackendServicesAllowedAreDeclaredOnEveryNEG: the entries the tenant allows for the Service's namespace go into
// every zone's NEG of the port; one not allowed, of another project, or for a port without NEG is a Warning and left
// out; a value that does not parse is a Warning and keeps what the Translation holds.
func TestBackendServicesAllowedAreDeclaredOnEveryNEG(t *testing.T) {
	objs := webObjects()
	web := objs[4].(interface{ GetAnnotations() map[string]string }).GetAnnotations()
	web[negapi.BackendServicesAnnotationKey] = `{"backend_services":{"80":[` +
		`{"name":"web","max_rate_per_endpoint":100},` +
		`{"name":"api","region":"europe-west1","max_connections_per_endpoint":5,"capacity_scaler":0.5},` +
		`{"name":"secret","max_rate_per_endpoint":1},` +
		`{"name":"projects/other-project/global/backendServices/web","max_rate_per_endpoint":1},` +
		`{"name":"other-ns-only","max_rate_per_endpoint":1}],` +
		`"443":[{"name":"web","max_rate_per_endpoint":1}]}}`
	h := newHarness(t, objs...)
	h.translator.gcp.BackendServices = []mpv1alpha1.AllowedBackendService{
		{Name: "web"}, {Name: "api", Region: "europe-west1", Namespaces: []string{testNamespace}},
		{Name: "other-ns-only", Namespaces: []string{"elsewhere"}},
	}
	h.sync("web")

	want := []mpv1alpha1.BackendServiceMembership{
		{Name: "web", BalancingMode: mpv1alpha1.BalancingModeRate, MaxRatePerEndpoint: 100},
		{Name: "api", Region: "europe-west1", BalancingMode: mpv1alpha1.BalancingModeConnection, MaxConnectionsPerEndpoint: 5, CapacityScaler: "0.5"},
	}
	tr := h.translations()["neg-v1-web-80"]
	if tr == nil || len(tr.Spec.Resources) == 0 {
		t.Fatalf("Translation neg-v1-web-80 = %+v, want NEGs", tr)
	}
	for _, r := range tr.Spec.Resources {
		if got := r.NetworkEndpointGroup.BackendServices; !reflect.DeepEqual(got, want) {
			t.Errorf("NEG in %s: backendServices = %+v, want %+v", r.Zone, got, want)
		}
	}
	warnings := strings.Join(h.events.With("Warning "+negapi.ReasonBackendServiceNotAllowed), "\n")
	for _, name := range []string{"secret", "other-project", "other-ns-only"} {
		if !strings.Contains(warnings, name) {
			t.Errorf("no %s Warning naming %s: %s", negapi.ReasonBackendServiceNotAllowed, name, warnings)
		}
	}
	if w := h.events.With("Warning " + negapi.ReasonInvalidBackendServices); len(w) != 1 || !strings.Contains(w[0], "Port 443") {
		t.Errorf("%s Warnings = %v, want one about port 443, which has no NEG", negapi.ReasonInvalidBackendServices, w)
	}

	// A typo keeps the memberships the Translation holds.
	svc := h.service("web")
	svc.Annotations[negapi.BackendServicesAnnotationKey] = `{"backend_services":`
	if _, err := h.kube.CoreV1().Services(testNamespace).Update(h.ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.sync("web")
	for _, r := range h.translations()["neg-v1-web-80"].Spec.Resources {
		if got := r.NetworkEndpointGroup.BackendServices; !reflect.DeepEqual(got, want) {
			t.Errorf("after a malformed value, NEG in %s: backendServices = %+v, want those held, %+v", r.Zone, got, want)
		}
	}
}
