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

package pusher

import (
	"testing"

	compute "google.golang.org/api/compute/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
)

func TestNewNEG(t *testing.T) {
	resource := func(endpointType mpv1alpha1.NetworkEndpointType) *mpv1alpha1.BackendResource {
		return &mpv1alpha1.BackendResource{
			Kind: mpv1alpha1.BackendResourceKindNetworkEndpointGroup, Name: "neg-a", Zone: "europe-west1-b", Description: "marker",
			NetworkEndpointGroup: &mpv1alpha1.NetworkEndpointGroupParameters{
				NetworkEndpointType: endpointType, Network: "net", Subnetwork: "sub", Port: 8080,
				// Endpoints are attached after the insert, never sent with it.
				Endpoints: []mpv1alpha1.NetworkEndpoint{{Instance: "vm-1", IPAddress: "10.0.0.1", Port: 8080}},
			},
		}
	}
	want := func(endpointType string) *compute.NetworkEndpointGroup {
		return &compute.NetworkEndpointGroup{Name: "neg-a", Description: "marker", NetworkEndpointType: endpointType,
			Network: "net", Subnetwork: "sub", DefaultPort: 8080}
	}
	for _, tc := range []struct {
		name string
		res  *mpv1alpha1.BackendResource
		want *compute.NetworkEndpointGroup
	}{
		{"type given", resource(mpv1alpha1.NetworkEndpointTypeGCEVMIPPort), want("GCE_VM_IP_PORT")},
		{"type defaults to GCE_VM_IP_PORT", resource(""), want("GCE_VM_IP_PORT")},
		{"another type is kept", resource("NON_GCP_PRIVATE_IP_PORT"), want("NON_GCP_PRIVATE_IP_PORT")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := newNEG(tc.res); !apiequality.Semantic.DeepEqual(got, tc.want) {
				t.Errorf("newNEG() = %+v, want %+v", got, tc.want)
			}
		})
	}
}
