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
	"testing"

	compute "google.golang.org/api/compute/v1"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
)

// TestAHybridNEGHasNoSubnetworkNoInstanceAndNoIPv6: GCE refuses a NON_GCP_PRIVATE_IP_PORT NEG with a subnetwork, and
// an endpoint of one with an instance or an IPv6 address; the same NEG without a subnetwork takes an IPv4 address
// and port.
func TestAHybridNEGHasNoSubnetworkNoInstanceAndNoIPv6(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	_, err := e.svc.NetworkEndpointGroups.Insert(project, zone, &compute.NetworkEndpointGroup{
		Name: "hybrid", NetworkEndpointType: fakegce.TypeNonGCPPrivateIPPort, Subnetwork: "default",
	}).Do()
	wantAPIError(t, err, http.StatusBadRequest, fakegce.ReasonInvalid)
	if got := e.srv.NEGs(project); len(got) != 0 {
		t.Fatalf("the refused insert left NEGs: %v", got)
	}
	_, err = e.svc.NetworkEndpointGroups.Insert(project, zone, &compute.NetworkEndpointGroup{
		Name: "hybrid", NetworkEndpointType: fakegce.TypeNonGCPPrivateIPPort,
	}).Do()
	noErr(t, err)
	for _, refused := range []*compute.NetworkEndpoint{
		{IpAddress: "10.0.0.1", Port: 8080, Instance: "node-1"},
		{IpAddress: "10.0.0.1", Port: 8080, Ipv6Address: "fd00::1"},
		{IpAddress: "fd00::1", Port: 8080},
	} {
		_, err = e.attach(project, zone, "hybrid", []*compute.NetworkEndpoint{refused})
		wantAPIError(t, err, http.StatusBadRequest, fakegce.ReasonInvalid)
	}
	_, err = e.attach(project, zone, "hybrid", []*compute.NetworkEndpoint{{IpAddress: "10.0.0.1", Port: 8080}})
	noErr(t, err)
	if got, _ := e.srv.Endpoints(project, zone, "hybrid"); len(got) != 1 || got[0].IpAddress != "10.0.0.1" || got[0].Instance != "" {
		t.Errorf("endpoints = %+v", got)
	}
}
