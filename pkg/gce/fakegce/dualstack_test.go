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

package fakegce_test

import (
	"net/http"
	"strings"
	"testing"

	compute "google.golang.org/api/compute/v1"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
)

// TestDualStackEndpoints: a GCE_VM_IP_PORT endpoint takes an ipv6Address beside its ipAddress, stored and listed in
// RFC 5952 form with its health; an IPv4 address and port hold one IPv6 address at a time and an IPv6 address and
// port one endpoint, so a change of form is a detach and an attach; a detach names both addresses; an ipv6Address
// that is not one, or on a NEG type without instances, is refused as the API refuses a field.
func TestDualStackEndpoints(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	e.insert(t, project, zone, "neg-1")
	dual := &compute.NetworkEndpoint{Instance: "node-1", IpAddress: "10.0.0.1", Ipv6Address: "fd00:0:0::1", Port: 8080}
	_, err := e.attach(project, zone, "neg-1", []*compute.NetworkEndpoint{dual})
	noErr(t, err)
	got, _ := e.srv.Endpoints(project, zone, "neg-1")
	if len(got) != 1 || got[0].Ipv6Address != "fd00::1" || got[0].IpAddress != "10.0.0.1" {
		t.Fatalf("endpoints after the attach = %+v, want 10.0.0.1 with fd00::1", got)
	}
	noErr(t, e.srv.SetInUseBy(project, zone, "neg-1", "bs-a"))
	noErr(t, e.srv.SetEndpointHealth(project, zone, "neg-1", "10.0.0.1", 8080, fakegce.HealthUnhealthy))
	res, err := e.svc.NetworkEndpointGroups.ListNetworkEndpoints(project, zone, "neg-1",
		&compute.NetworkEndpointGroupsListEndpointsRequest{HealthStatus: "SHOW"}).Do()
	noErr(t, err)
	if len(res.Items) != 1 || res.Items[0].NetworkEndpoint.Ipv6Address != "fd00::1" || len(res.Items[0].Healths) != 1 ||
		res.Items[0].Healths[0].HealthState != fakegce.HealthUnhealthy {
		t.Errorf("listed with health: %+v", res.Items)
	}

	refused := []struct {
		what string
		ep   *compute.NetworkEndpoint
		want string
	}{
		{"an IPv4 address as ipv6Address", &compute.NetworkEndpoint{Instance: "node-1", IpAddress: "10.0.0.2", Ipv6Address: "10.0.0.3", Port: 8080},
			"Must be an IPv6 address."},
		{"an IPv4-mapped address", &compute.NetworkEndpoint{Instance: "node-1", IpAddress: "10.0.0.2", Ipv6Address: "::ffff:10.0.0.3", Port: 8080},
			"Must be an IPv6 address."},
		{"the IPv4 address of an attached endpoint with another IPv6 one", &compute.NetworkEndpoint{Instance: "node-1", IpAddress: "10.0.0.1", Ipv6Address: "fd00::2", Port: 8080},
			"is already attached"},
		{"the IPv4 address of an attached endpoint alone", &compute.NetworkEndpoint{Instance: "node-1", IpAddress: "10.0.0.1", Port: 8080},
			"is already attached"},
		{"the IPv6 address of an attached endpoint with another IPv4 one", &compute.NetworkEndpoint{Instance: "node-1", IpAddress: "10.0.0.2", Ipv6Address: "fd00::1", Port: 8080},
			"is already attached"},
	}
	for _, c := range refused {
		_, err := e.attach(project, zone, "neg-1", []*compute.NetworkEndpoint{c.ep})
		if gerr := wantAPIError(t, err, http.StatusBadRequest, fakegce.ReasonInvalid); !strings.Contains(gerr.Message, c.want) {
			t.Errorf("%s: %q, want %q", c.what, gerr.Message, c.want)
		}
	}

	// A detach names the endpoint as attached: by its IPv4 address alone it is another endpoint.
	_, err = e.detach(project, zone, "neg-1", []*compute.NetworkEndpoint{{Instance: "node-1", IpAddress: "10.0.0.1", Port: 8080}})
	wantAPIError(t, err, http.StatusBadRequest, fakegce.ReasonInvalid)
	_, err = e.detach(project, zone, "neg-1", []*compute.NetworkEndpoint{dual})
	noErr(t, err)
	// Then the IPv4-only form of the same Pod attaches: the Service went back to single-stack.
	_, err = e.attach(project, zone, "neg-1", []*compute.NetworkEndpoint{{Instance: "node-1", IpAddress: "10.0.0.1", Port: 8080}})
	noErr(t, err)
}
