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

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	compute "google.golang.org/api/compute/v1"
)

// The health states listNetworkEndpoints reports with healthStatus SHOW (HealthStatusForNetworkEndpoint.healthState
// in the discovery document). The fake runs no health checks: a test sets them with SetEndpointHealth.
const (
	HealthHealthy   = "HEALTHY"
	HealthUnhealthy = "UNHEALTHY"
	HealthDraining  = "DRAINING"
	HealthUnknown   = "UNKNOWN"
)

func validHealthState(state string) bool {
	switch state {
	case HealthHealthy, HealthUnhealthy, HealthDraining, HealthUnknown:
		return true
	}
	return false
}

// SetEndpointHealth sets the health state (HealthHealthy, HealthUnhealthy, HealthDraining or HealthUnknown) that
// listNetworkEndpoints with healthStatus SHOW reports for the attached endpoint with this IP and port (0 for a
// GCE_VM_IP endpoint, which has none), once for each backend service set with SetInUseBy. An endpoint whose state was
// never set is reported with the NEG's default (SetDefaultEndpointHealth), HEALTHY unless changed. The state is
// forgotten when the endpoint is detached or the NEG deleted, as GCE forgets an endpoint's health.
//
// The endpoint must be attached (its attach operation completed): a state for an endpoint the NEG does not have is an
// error rather than kept for later, so that a wrong IP or port fails the test that sets it. To have endpoints report
// a state from their first listing, set the NEG's default before they are attached.
func (s *Server) SetEndpointHealth(project, zone, neg, ipAddress string, port int64, state string) error {
	if !validHealthState(state) {
		return fmt.Errorf("fakegce: health state %q is not one of HEALTHY, UNHEALTHY, DRAINING, UNKNOWN", state)
	}
	ip, err := netip.ParseAddr(ipAddress)
	if err != nil || !ip.Is4() {
		return errInvalidField("ipAddress", ipAddress, "Must be an IPv4 address.")
	}
	if port < 0 || port > 65535 {
		return errInvalidField("port", strconv.FormatInt(port, 10), "Must be from 0 to 65535.")
	}
	return s.withNEG(project, zone, neg, func(n *negState) error {
		found := false
		for k := range n.endpoints {
			if k.ip == ip && k.port == port {
				initMap(&n.health)[k] = state
				found = true
			}
		}
		if !found {
			return fmt.Errorf("fakegce: NEG %s in zone %s of project %s has no endpoint %s:%d", neg, zone, project, ip, port)
		}
		return nil
	})
}

// SetDefaultEndpointHealth sets the state reported for every endpoint of the NEG, attached now or later, whose own
// state was not set with SetEndpointHealth. It lets a test make endpoints UNHEALTHY from their first listing, before
// it knows their addresses. The default is forgotten when the NEG is deleted; a NEG starts with HEALTHY.
func (s *Server) SetDefaultEndpointHealth(project, zone, neg, state string) error {
	if !validHealthState(state) {
		return fmt.Errorf("fakegce: health state %q is not one of HEALTHY, UNHEALTHY, DRAINING, UNKNOWN", state)
	}
	return s.withNEG(project, zone, neg, func(n *negState) error {
		n.defaultHealth = state
		return nil
	})
}

// withNEG runs f on an existing NEG with its project's lock held, after due operations complete, so that a state set
// right after an attach operation completes applies to the attached endpoints.
func (s *Server) withNEG(project, zone, neg string, f func(*negState) error) error {
	p := s.existingProject(project)
	if p == nil {
		return errNotFound("projects/" + project + "/zones/" + zone + "/networkEndpointGroups/" + neg)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.completeDue(s.clock.Now())
	n, ok := p.negs[negKey{zone, neg}]
	if !ok {
		return errNotFound(p.negPath(zone, neg))
	}
	return f(n)
}

// healths is what listNetworkEndpoints with healthStatus SHOW reports for one endpoint: its state once for each
// backend service that health checks the NEG, and nothing when none does, as GCE reports no health for a NEG that no
// backend service health-checks. Only backendService and healthState are filled. A backend service a test named with
// SetInUseBy reports HEALTHY for an endpoint whose state was not set; one of the fake's own backend services (with
// healthChecks) reports UNHEALTHY, as a new endpoint is until its first check passes.
func (n *negState) healths(k endpointKey) []*compute.HealthStatusForNetworkEndpoint {
	var out []*compute.HealthStatusForNetworkEndpoint
	for _, bs := range n.inUseBy {
		state, ok := n.health[k]
		if !ok {
			state = n.defaultHealth
		}
		if state == "" {
			state = HealthHealthy
		}
		out = append(out, &compute.HealthStatusForNetworkEndpoint{
			BackendService: &compute.BackendServiceReference{BackendService: bs},
			HealthState:    state,
		})
	}
	for _, bs := range sortedKeys(n.inBackends) {
		if !n.inBackends[bs] || slices.Contains(n.inUseBy, bs) {
			continue
		}
		out = append(out, &compute.HealthStatusForNetworkEndpoint{
			BackendService: &compute.BackendServiceReference{BackendService: bs},
			HealthState:    n.backendHealth(k),
		})
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
