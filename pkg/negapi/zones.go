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
	"regexp"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// AllZones is the entry of "zones" that asks for every zone of the tenant (its ProviderConfig's spec.gcp.zones):
// ingress-gce reads it as every zone of the cluster's region, which a ProviderConfig, naming no region, leaves to
// its administrator to list.
const AllZones = "*"

// gceZone matches a GCE zone name: a region (a continent or country, a direction and a number: "europe-west1",
// "northamerica-northeast2") and a zone suffix ("b"). The ProviderConfig's CRD checks spec.gcp.zones with the same
// pattern.
var gceZone = regexp.MustCompile(`^[a-z]+-[a-z]+[0-9]{1,2}-[a-z][a-z0-9]*$`)

// IsGCEZone says whether zone is a GCE zone name.
func IsGCEZone(zone string) bool { return len(zone) <= 63 && gceZone.MatchString(zone) }

// ZoneRequest is what the "zones" field of a Service's NEG annotation asks for.
type ZoneRequest struct {
	// Given: the annotation has the field. Absent (or null), the Service takes its tenant's zones.
	Given bool
	// All: the field lists "*", the tenant's zones (AllZones).
	All bool
	// Zones are the valid zone names it lists, sorted, each once.
	Zones []string
	// Invalid are the entries that are neither a zone name nor "*", in the order given: ignored, each the subject of
	// a Warning.
	Invalid []string
}

// ParseZones reads the "zones" field of a value of the NEG annotation. Only a value that is not JSON of the
// annotation's form is an error (ParseAnnotation refuses it too); an entry that is not a zone name is reported in
// Invalid and left out, so that one wrong entry does not take the Service's other zones away.
func ParseZones(value string) (ZoneRequest, error) {
	ann, err := decodeAnnotation(value)
	if err != nil || ann.Zones == nil {
		return ZoneRequest{}, err
	}
	req := ZoneRequest{Given: true}
	for _, zone := range *ann.Zones {
		switch {
		case zone == AllZones:
			req.All = true
		case IsGCEZone(zone):
			req.Zones = append(req.Zones, zone)
		default:
			req.Invalid = append(req.Invalid, zone)
		}
	}
	slices.Sort(req.Zones)
	req.Zones = slices.Compact(req.Zones)
	return req, nil
}

// Zones reads the "zones" field of the annotation the Service asks for NEGs with (Keys.ExposedPorts); a Service
// that does not ask has none.
func (k Keys) Zones(svc *corev1.Service) (ZoneRequest, error) {
	key := k.askedWith(svc)
	if key == "" {
		return ZoneRequest{}, nil
	}
	return ParseZones(svc.Annotations[key])
}
