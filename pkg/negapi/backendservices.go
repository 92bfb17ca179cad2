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
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
)

const (
	// BackendServicesAnnotationKey is the Service annotation that asks, per exposed port, for the backend services
	// the port's NEGs join. Its value has gke-autoneg-controller's form, so that a Service moves by copying it:
	// {"backend_services":{"80":[{"name":"web","max_rate_per_endpoint":100}]}} (docs/neg.md).
	BackendServicesAnnotationKey = "multiproject.io/neg-backend-services"
	// AutonegAnnotationKey is gke-autoneg-controller's annotation (v2). A Service without BackendServicesAnnotationKey
	// that carries it is read as if it carried ours, with the same value.
	AutonegAnnotationKey = "controller.autoneg.dev/neg"

	// ReasonInvalidBackendServices is the reason of the Warning on a Service whose backend services annotation does
	// not parse; the memberships its Translations hold stay as they are.
	ReasonInvalidBackendServices = "InvalidNEGBackendServices"
	// ReasonBackendServiceNotAllowed is the reason of the Warning on a Service that names a backend service its
	// tenant's ProviderConfig does not list for its namespace, or one of another project: that entry is left out.
	ReasonBackendServiceNotAllowed = "NEGBackendServiceNotAllowed"
)

// autonegAnnotation is the JSON of the annotation, autoneg v2's: backend services per Service port.
type autonegAnnotation struct {
	BackendServices map[string][]autonegBackend `json:"backend_services"`
}

type autonegBackend struct {
	Name   string `json:"name"`
	Region string `json:"region"`
	// The rate and connection targets are JSON numbers in autoneg; whole numbers are taken.
	MaxRatePerEndpoint        *float64 `json:"max_rate_per_endpoint"`
	MaxConnectionsPerEndpoint *float64 `json:"max_connections_per_endpoint"`
	// CapacityScaler is from 0 to 1; absent means 1. autoneg's initial_capacity (a percentage applied only when it
	// first adds a backend) is accepted and ignored: the scaler is kept as the annotation says at every sync.
	CapacityScaler  *float64 `json:"capacity_scaler"`
	InitialCapacity *float64 `json:"initial_capacity"`
}

// BackendServiceRequest is one backend service a port asks to join, parsed.
type BackendServiceRequest struct {
	Port int32
	// Project is the project a URL-form name gave, "" for a plain name (the tenant's project).
	Project    string
	Membership mpv1alpha1.BackendServiceMembership
}

var (
	gceRegion = regexp.MustCompile(`^[a-z]+-[a-z]+[0-9]{1,2}$`)
	// backendServicePath matches the path form of a name: [.../]projects/P/(global|regions/R)/backendServices/N.
	backendServicePath = regexp.MustCompile(`(?:^|/)projects/([^/]+)/(?:global|regions/([^/]+))/backendServices/([^/]+)$`)
)

// BackendServicesAnnotation returns the key the Service asks for backend services with: ours, else autoneg's, else
// "".
func BackendServicesAnnotation(svc *corev1.Service) string {
	for _, key := range []string{BackendServicesAnnotationKey, AutonegAnnotationKey} {
		if _, ok := svc.Annotations[key]; ok {
			return key
		}
	}
	return ""
}

// BackendServiceRequests reads the Service's backend services annotation: asked says whether it carries one, and
// err, which names the annotation, says why it does not parse (then requests is nil). A name left out is autoneg's
// default, "<service>-<port>".
func BackendServiceRequests(svc *corev1.Service) (requests []BackendServiceRequest, asked bool, err error) {
	key := BackendServicesAnnotation(svc)
	if key == "" {
		return nil, false, nil
	}
	requests, err = ParseBackendServices(svc.Annotations[key], svc.Name)
	if err != nil {
		return nil, true, fmt.Errorf("annotation %s: %w", key, err)
	}
	return requests, true, nil
}

// ParseBackendServices parses a value of the annotation for the Service named service. No partial result comes
// with an error, so a typo never removes a NEG from a backend service the value named correctly before.
func ParseBackendServices(value, service string) ([]BackendServiceRequest, error) {
	var ann autonegAnnotation
	if err := json.Unmarshal([]byte(value), &ann); err != nil {
		return nil, fmt.Errorf("not valid JSON of the form "+
			`{"backend_services":{"80":[{"name":"web","max_rate_per_endpoint":100}]}}: %v`, err)
	}
	var out []BackendServiceRequest
	for key, backends := range ann.BackendServices {
		port, err := strconv.ParseInt(key, 10, 32)
		if err != nil || port < 1 || port > 65535 || strconv.FormatInt(port, 10) != key {
			return nil, fmt.Errorf("port %q is not a port number (1-65535)", key)
		}
		seen := map[string]bool{}
		for i, b := range backends {
			req, err := parseBackend(b, int32(port), service)
			if err != nil {
				return nil, fmt.Errorf("port %d, entry %d: %w", port, i, err)
			}
			id := req.Project + "/" + req.Membership.Region + "/" + req.Membership.Name
			if seen[id] {
				return nil, fmt.Errorf("port %d names backend service %s twice", port, describeBackendService(req.Membership))
			}
			seen[id] = true
			out = append(out, req)
		}
	}
	return out, nil
}

func parseBackend(b autonegBackend, port int32, service string) (BackendServiceRequest, error) {
	req := BackendServiceRequest{Port: port}
	m := &req.Membership
	m.Name, m.Region = b.Name, b.Region
	if m.Name == "" {
		m.Name = fmt.Sprintf("%s-%d", service, port)
	}
	if match := backendServicePath.FindStringSubmatch(m.Name); match != nil {
		req.Project, m.Name = match[1], match[3]
		if match[2] != "" {
			if m.Region != "" && m.Region != match[2] {
				return req, fmt.Errorf("name %q is in region %s, not %s", b.Name, match[2], m.Region)
			}
			m.Region = match[2]
		}
	}
	if !IsGCEName(m.Name) {
		return req, fmt.Errorf("backend service name %q is not a valid GCE name", m.Name)
	}
	if m.Region != "" && !gceRegion.MatchString(m.Region) {
		return req, fmt.Errorf("region %q is not a GCE region name (such as europe-west1)", m.Region)
	}
	whole := func(field string, v float64) (int32, error) {
		if v < 1 || v > 1<<31-1 || v != float64(int32(v)) {
			return 0, fmt.Errorf("%s %v is not a whole number of at least 1", field, v)
		}
		return int32(v), nil
	}
	var err error
	switch {
	case b.MaxRatePerEndpoint != nil && b.MaxConnectionsPerEndpoint != nil:
		return req, fmt.Errorf("give max_rate_per_endpoint (RATE) or max_connections_per_endpoint (CONNECTION), not both")
	case b.MaxRatePerEndpoint != nil:
		m.BalancingMode = mpv1alpha1.BalancingModeRate
		m.MaxRatePerEndpoint, err = whole("max_rate_per_endpoint", *b.MaxRatePerEndpoint)
	case b.MaxConnectionsPerEndpoint != nil:
		m.BalancingMode = mpv1alpha1.BalancingModeConnection
		m.MaxConnectionsPerEndpoint, err = whole("max_connections_per_endpoint", *b.MaxConnectionsPerEndpoint)
	default:
		return req, fmt.Errorf("backend service %s needs max_rate_per_endpoint (RATE) or max_connections_per_endpoint (CONNECTION)", m.Name)
	}
	if err != nil {
		return req, err
	}
	if s := b.CapacityScaler; s != nil {
		if *s < 0 || *s > 1 || (*s > 0 && *s < 0.1) {
			return req, fmt.Errorf("capacity_scaler %v is not 0 or from 0.1 to 1", *s)
		}
		if *s != 1 {
			m.CapacityScaler = strconv.FormatFloat(*s, 'f', -1, 64)
			if len(m.CapacityScaler) > 5 {
				return req, fmt.Errorf("capacity_scaler %v has more than 3 decimals", *s)
			}
		}
	}
	return req, nil
}

func describeBackendService(m mpv1alpha1.BackendServiceMembership) string {
	if m.Region == "" {
		return m.Name + " (global)"
	}
	return m.Name + " (region " + m.Region + ")"
}

// DescribeBackendService names a backend service in a message: "web (global)", "web (region europe-west1)".
func DescribeBackendService(m mpv1alpha1.BackendServiceMembership) string {
	return describeBackendService(m)
}

// AllowedBackendService says whether the tenant's list allows a Service of namespace to join the backend service.
func AllowedBackendService(allowed []mpv1alpha1.AllowedBackendService, namespace string, m mpv1alpha1.BackendServiceMembership) bool {
	for _, a := range allowed {
		if a.Name != m.Name || a.Region != m.Region {
			continue
		}
		if len(a.Namespaces) == 0 {
			return true
		}
		for _, ns := range a.Namespaces {
			if ns == namespace {
				return true
			}
		}
	}
	return false
}

// ParseBackendServiceURL returns the project, region ("" for global) and name of a backend service URL or path.
func ParseBackendServiceURL(url string) (project, region, name string, ok bool) {
	match := backendServicePath.FindStringSubmatch(strings.TrimSpace(url))
	if match == nil {
		return "", "", "", false
	}
	return match[1], match[2], match[3], true
}
