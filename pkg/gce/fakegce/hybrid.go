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

package fakegce

import compute "google.golang.org/api/compute/v1"

// refuseHybridSubnetwork is GCE's answer to a NON_GCP_PRIVATE_IP_PORT NEG inserted with a subnetwork: a hybrid NEG
// has a network only (its endpoints are outside Google Cloud, reached through hybrid connectivity; gcloud's
// --subnet is not accepted for the type). The endpoint rules of the type (no instance, no IPv6 address, an IPv4
// address required) are normalizeEndpoint's.
func refuseHybridSubnetwork(negType string, in *compute.NetworkEndpointGroup) *apiError {
	if negType != TypeNonGCPPrivateIPPort || in.Subnetwork == "" {
		return nil
	}
	return errInvalidField("resource.subnetwork", in.Subnetwork,
		"Can not be set for network endpoint groups of type "+TypeNonGCPPrivateIPPort+".")
}
