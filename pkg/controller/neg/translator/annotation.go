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
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
)

// Service annotations, as ingress-gce names and formats them.
const (
	// NEGAnnotationKey is the user's request: {"exposed_ports":{"80":{}}} asks for standalone NEGs of port 80.
	NEGAnnotationKey = "cloud.google.com/neg"
	// NEGStatusAnnotationKey is the controller's answer: which NEG serves which port, in which zones.
	NEGStatusAnnotationKey = "cloud.google.com/neg-status"
)

// negAnnotation is the JSON of NEGAnnotationKey. Unknown fields are ignored, as ingress-gce does.
type negAnnotation struct {
	// Ingress asks ingress-gce for NEGs of the ports an Ingress uses. This controller serves no Ingress, so it is
	// accepted and ignored.
	Ingress bool `json:"ingress,omitempty"`
	// ExposedPorts maps a Service port number to the attributes of its standalone NEG.
	ExposedPorts map[string]negAttributes `json:"exposed_ports,omitempty"`
}

type negAttributes struct {
	// Name is a custom NEG name; empty means the generated one.
	Name string `json:"name,omitempty"`
}

// exposedPort is one validated entry of exposed_ports.
type exposedPort struct {
	Port int32
	// CustomName is the user's NEG name, or "".
	CustomName string
}

// gceName is a valid GCE resource name (RFC 1035 label, at most 63 characters).
var gceName = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)

// parseNEGAnnotation parses the value of NEGAnnotationKey and returns the exposed ports in ascending order. The
// error says what is wrong in words a user can act on; no partial result is returned with it, so a typo never
// removes the NEGs of the ports the annotation did list correctly before.
func parseNEGAnnotation(value string) ([]exposedPort, error) {
	var ann negAnnotation
	if err := json.Unmarshal([]byte(value), &ann); err != nil {
		return nil, fmt.Errorf("annotation %s is not valid JSON of the form {\"exposed_ports\":{\"80\":{}}}: %v", NEGAnnotationKey, err)
	}
	ports := make([]exposedPort, 0, len(ann.ExposedPorts))
	names := map[string]string{}
	for key, attrs := range ann.ExposedPorts {
		port, err := strconv.ParseInt(key, 10, 32)
		if err != nil || port < 1 || port > 65535 || strconv.FormatInt(port, 10) != key {
			return nil, fmt.Errorf("annotation %s: exposed port %q is not a port number (1-65535)", NEGAnnotationKey, key)
		}
		if attrs.Name != "" {
			if !gceName.MatchString(attrs.Name) {
				return nil, fmt.Errorf("annotation %s: NEG name %q of port %d is not a valid GCE name "+
					"(a lowercase letter, then up to 62 lowercase letters, digits or hyphens, not ending with a hyphen)",
					NEGAnnotationKey, attrs.Name, port)
			}
			if other, dup := names[attrs.Name]; dup {
				return nil, fmt.Errorf("annotation %s: NEG name %q is given to ports %s and %s", NEGAnnotationKey, attrs.Name, other, key)
			}
			names[attrs.Name] = key
		}
		ports = append(ports, exposedPort{Port: int32(port), CustomName: attrs.Name})
	}
	slices.SortFunc(ports, func(a, b exposedPort) int { return cmp.Compare(a.Port, b.Port) })
	return ports, nil
}
