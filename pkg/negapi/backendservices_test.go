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

package negapi

import (
	"reflect"
	"strings"
	"testing"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
)

// TestParseBackendServices reads autoneg's format: RATE or CONNECTION by the target given, the region, the
// "<service>-<port>" default name, a URL naming the project, and refuses the malformed.
func TestParseBackendServices(t *testing.T) {
	got, err := ParseBackendServices(`{"backend_services":{"80":[{"name":"web","max_rate_per_endpoint":100,"capacity_scaler":0.5},`+
		`{"region":"europe-west1","max_connections_per_endpoint":10}],`+
		`"443":[{"name":"projects/other-project/global/backendServices/tls","max_rate_per_endpoint":5,"capacity_scaler":1}]}}`, "svc")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]BackendServiceRequest{
		"web": {Port: 80, Membership: mpv1alpha1.BackendServiceMembership{Name: "web", BalancingMode: "RATE", MaxRatePerEndpoint: 100, CapacityScaler: "0.5"}},
		"svc-80": {Port: 80, Membership: mpv1alpha1.BackendServiceMembership{Name: "svc-80", Region: "europe-west1",
			BalancingMode: "CONNECTION", MaxConnectionsPerEndpoint: 10}},
		"tls": {Port: 443, Project: "other-project", Membership: mpv1alpha1.BackendServiceMembership{Name: "tls", BalancingMode: "RATE", MaxRatePerEndpoint: 5}},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d requests, want %d: %+v", len(got), len(want), got)
	}
	for _, r := range got {
		if !reflect.DeepEqual(r, want[r.Membership.Name]) {
			t.Errorf("got %+v, want %+v", r, want[r.Membership.Name])
		}
	}
	for value, wantErr := range map[string]string{
		`{"backend_services":{"80":[{"name":"web"}]}}`:                                                                    "needs max_rate_per_endpoint",
		`{"backend_services":{"80":[{"name":"web","max_rate_per_endpoint":1,"max_connections_per_endpoint":1}]}}`:         "not both",
		`{"backend_services":{"80":[{"name":"Web","max_rate_per_endpoint":1}]}}`:                                          "not a valid GCE name",
		`{"backend_services":{"80":[{"name":"web","max_rate_per_endpoint":1,"capacity_scaler":1.5}]}}`:                    "capacity_scaler",
		`{"backend_services":{"http":[]}}`:                                                                                "not a port number",
		`{"backend_services":{"80":[{"name":"web","max_rate_per_endpoint":1},{"name":"web","max_rate_per_endpoint":2}]}}`: "twice",
		`{"backend_services":`: "not valid JSON",
	} {
		if _, err := ParseBackendServices(value, "svc"); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("ParseBackendServices(%s) = %v, want an error containing %q", value, err, wantErr)
		}
	}
}

func TestAllowedBackendService(t *testing.T) {
	allowed := []mpv1alpha1.AllowedBackendService{{Name: "web"}, {Name: "api", Region: "europe-west1", Namespaces: []string{"team-a"}}}
	for _, c := range []struct {
		ns   string
		m    mpv1alpha1.BackendServiceMembership
		want bool
	}{
		{"any", mpv1alpha1.BackendServiceMembership{Name: "web"}, true},
		{"any", mpv1alpha1.BackendServiceMembership{Name: "web", Region: "europe-west1"}, false},
		{"team-a", mpv1alpha1.BackendServiceMembership{Name: "api", Region: "europe-west1"}, true},
		{"team-b", mpv1alpha1.BackendServiceMembership{Name: "api", Region: "europe-west1"}, false},
		{"team-a", mpv1alpha1.BackendServiceMembership{Name: "other"}, false},
	} {
		if got := AllowedBackendService(allowed, c.ns, c.m); got != c.want {
			t.Errorf("AllowedBackendService(%s, %+v) = %v, want %v", c.ns, c.m, got, c.want)
		}
	}
	if AllowedBackendService(nil, "any", mpv1alpha1.BackendServiceMembership{Name: "web"}) {
		t.Error("nothing is allowed by default")
	}
}
