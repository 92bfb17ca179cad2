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
	"encoding/json"
	"maps"
	"slices"
	"strconv"
)

// negStatus is the JSON of negapi.StatusAnnotationKey, in ingress-gce's format: Service port (as a string) to NEG
// name, and the zones the NEGs are in.
type negStatus struct {
	NetworkEndpointGroups map[string]string `json:"network_endpoint_groups,omitempty"`
	Zones                 []string          `json:"zones,omitempty"`
}

// newNEGStatus builds the status of a Service's NEGs. zones must be sorted.
func newNEGStatus(negs map[int32]string, zones []string) negStatus {
	s := negStatus{NetworkEndpointGroups: make(map[string]string, len(negs)), Zones: zones}
	for port, name := range negs {
		s.NetworkEndpointGroups[strconv.Itoa(int(port))] = name
	}
	return s
}

// encode returns the annotation value. encoding/json sorts map keys, so equal statuses encode equally.
func (s negStatus) encode() string {
	b, _ := json.Marshal(s)
	return string(b)
}

// equal compares by meaning, so a value written by another tool with other spacing or key order is not rewritten.
func (s negStatus) equal(o negStatus) bool {
	return maps.Equal(s.NetworkEndpointGroups, o.NetworkEndpointGroups) && slices.Equal(s.Zones, o.Zones)
}

// statusNeedsWrite reports whether the Service's current annotation (present says whether it exists at all) differs
// from the wanted status; want nil means the annotation must be absent.
func statusNeedsWrite(current string, present bool, want *negStatus) bool {
	if want == nil {
		return present
	}
	if !present {
		return true
	}
	var have negStatus
	if err := json.Unmarshal([]byte(current), &have); err != nil {
		return true
	}
	return !have.equal(*want)
}
