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
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// negAnnotation is the JSON of the NEG annotation. Unknown fields are ignored, as ingress-gce does.
type negAnnotation struct {
	// Ingress asks ingress-gce for NEGs of the ports an Ingress uses. This controller serves no Ingress, so it is
	// accepted and ignored.
	Ingress bool `json:"ingress,omitempty"`
	// ExposedPorts maps a Service port number to the attributes of its standalone NEG.
	ExposedPorts map[string]negAttributes `json:"exposed_ports,omitempty"`
	// Zones names zones whose NEGs exist ahead of any Node there, as ingress-gce's pre-provisioning reads it; nil
	// when absent or null (zones.go).
	Zones *[]string `json:"zones,omitempty"`
}

type negAttributes struct {
	// Name is a custom NEG name; empty means the generated one.
	Name string `json:"name,omitempty"`
}

// ExposedPort is one validated entry of exposed_ports.
type ExposedPort struct {
	Port int32
	// CustomName is the user's NEG name, or "".
	CustomName string
}

// gceName matches a valid GCE resource name (RFC 1035 label, at most 63 characters).
var gceName = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)

// IsGCEName says whether name is a valid GCE resource name, as a custom NEG name must be.
func IsGCEName(name string) bool { return gceName.MatchString(name) }

// ExposedPorts reads the Service's annotation k.Annotation, or k.PreviousAnnotation where it carries only that one:
// annotated says whether the Service carries either, ports are the ports it exposes (none for {"ingress":true}),
// and err, which names the annotation, says why its value does not parse (then ports is nil).
func (k Keys) ExposedPorts(svc *corev1.Service) (ports []ExposedPort, annotated bool, err error) {
	key := k.askedWith(svc)
	if key == "" {
		return nil, false, nil
	}
	if ports, err = ParseAnnotation(svc.Annotations[key]); err != nil {
		return nil, true, fmt.Errorf("annotation %s: %w", key, err)
	}
	return ports, true, nil
}

// Asks says whether the Service asks for NEGs, under k.Annotation or, not moved yet, k.PreviousAnnotation.
func (k Keys) Asks(svc *corev1.Service) bool { return k.askedWith(svc) != "" }

// AskedOnlyWithPrevious returns the message of the Warning for a Service that asks for NEGs only under
// k.PreviousAnnotation, and false for any other Service.
func (k Keys) AskedOnlyWithPrevious(svc *corev1.Service) (string, bool) {
	if k.askedWith(svc) != k.PreviousAnnotation || k.PreviousAnnotation == "" {
		return "", false
	}
	return fmt.Sprintf("The Service asks for NEGs with %s, the key of before --neg-previous-annotation-key names; "+
		"its NEGs are kept while the flag is set. Annotate it with %s (same value), then remove %s (docs/gke.md)",
		k.PreviousAnnotation, k.Annotation, k.PreviousAnnotation), true
}

// askedWith is the annotation the Service asks with: k.Annotation, else k.PreviousAnnotation, else "".
func (k Keys) askedWith(svc *corev1.Service) string {
	for _, key := range []string{k.Annotation, k.PreviousAnnotation} {
		if _, ok := svc.Annotations[key]; ok && key != "" {
			return key
		}
	}
	return ""
}

// ParseAnnotation parses a value of the NEG annotation and returns the exposed ports in ascending order. The error
// says what is wrong in words a user can act on (Keys.ExposedPorts adds the annotation's name); no partial result is returned with it, so a typo never
// removes the NEGs of the ports the annotation did list correctly before.
func ParseAnnotation(value string) ([]ExposedPort, error) {
	ann, err := decodeAnnotation(value)
	if err != nil {
		return nil, err
	}
	ports := make([]ExposedPort, 0, len(ann.ExposedPorts))
	names := map[string]string{}
	for key, attrs := range ann.ExposedPorts {
		port, err := strconv.ParseInt(key, 10, 32)
		if err != nil || port < 1 || port > 65535 || strconv.FormatInt(port, 10) != key {
			return nil, fmt.Errorf("exposed port %q is not a port number (1-65535)", key)
		}
		if attrs.Name != "" {
			if !IsGCEName(attrs.Name) {
				return nil, fmt.Errorf("NEG name %q of port %d is not a valid GCE name "+
					"(a lowercase letter, then up to 62 lowercase letters, digits or hyphens, not ending with a hyphen)",
					attrs.Name, port)
			}
			if other, dup := names[attrs.Name]; dup {
				return nil, fmt.Errorf("NEG name %q is given to ports %s and %s", attrs.Name, other, key)
			}
			names[attrs.Name] = key
		}
		ports = append(ports, ExposedPort{Port: int32(port), CustomName: attrs.Name})
	}
	slices.SortFunc(ports, func(a, b ExposedPort) int { return cmp.Compare(a.Port, b.Port) })
	return ports, nil
}

// decodeAnnotation decodes a value of the NEG annotation; a field of the wrong JSON type (a "zones" that is not a
// list of strings, say) makes the whole value malformed.
func decodeAnnotation(value string) (negAnnotation, error) {
	var ann negAnnotation
	if err := json.Unmarshal([]byte(value), &ann); err != nil {
		return negAnnotation{}, fmt.Errorf("not valid JSON of the form {\"exposed_ports\":{\"80\":{}}}: %v", err)
	}
	return ann, nil
}
