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
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	compute "google.golang.org/api/compute/v1"
)

// negOfGroup finds the NEG a backend's group URL names, in this project.
func (p *project) negOfGroup(group string) (*negState, *apiError) {
	path := resourcePath(group, p.id)
	parts := strings.Split(path, "/")
	if len(parts) != 6 || parts[2] != "zones" || parts[4] != "networkEndpointGroups" {
		if len(parts) == 6 && parts[4] == "instanceGroups" {
			return nil, errNotImplemented("instance group backends")
		}
		return nil, errInvalidField("resource.backends.group", group, "Must be the URL of a network endpoint group.")
	}
	if parts[1] != p.id {
		return nil, errNotImplemented("backends in another project (%s)", group)
	}
	n, ok := p.negs[negKey{parts[3], parts[5]}]
	if !ok {
		return nil, errNotFound(path)
	}
	return n, nil
}

// storeBackendService validates next's backends and stores it in place of prev (nil: a new one) with a new
// fingerprint, keeping the NEGs' record of who uses them true.
func (p *project) storeBackendService(region string, prev, next *compute.BackendService) *apiError {
	seen := map[string]bool{}
	var negs []*negState
	for i, b := range next.Backends {
		field := fmt.Sprintf("resource.backends[%d]", i)
		if b.Group == "" {
			return errRequired(field + ".group")
		}
		n, aerr := p.negOfGroup(b.Group)
		if aerr != nil {
			return aerr
		}
		if seen[n.neg.SelfLink] {
			return errInvalidField(field+".group", b.Group, "Duplicate backend group.")
		}
		seen[n.neg.SelfLink] = true
		if region != "" && regionOf(n.zone) != region {
			return errInvalidField(field+".group", b.Group, fmt.Sprintf("The network endpoint group is not in region %s.", region))
		}
		switch b.BalancingMode {
		case "RATE":
			if b.MaxRatePerEndpoint <= 0 && b.MaxRate <= 0 {
				return errInvalidField(field+".balancingMode", b.BalancingMode,
					"Balancing mode RATE needs maxRatePerEndpoint or maxRate for a network endpoint group.")
			}
		case "CONNECTION":
			switch next.Protocol {
			case "HTTP", "HTTPS", "HTTP2", "":
				return errInvalidField(field+".balancingMode", b.BalancingMode,
					fmt.Sprintf("Balancing mode CONNECTION is not supported for protocol %s.", cmpOr(next.Protocol, "HTTP")))
			}
			if b.MaxConnectionsPerEndpoint <= 0 && b.MaxConnections <= 0 {
				return errInvalidField(field+".balancingMode", b.BalancingMode,
					"Balancing mode CONNECTION needs maxConnectionsPerEndpoint or maxConnections for a network endpoint group.")
			}
		case "":
			return errRequired(field + ".balancingMode")
		default:
			return errInvalidField(field+".balancingMode", b.BalancingMode,
				"Must be RATE or CONNECTION for a network endpoint group of type GCE_VM_IP_PORT.")
		}
		if s := b.CapacityScaler; s < 0 || s > 1 || (s > 0 && s < 0.1) {
			return errInvalidField(field+".capacityScaler", fmt.Sprint(s), "Must be 0, or from 0.1 to 1.")
		}
		b.Group = n.neg.SelfLink
		negs = append(negs, n)
	}
	if prev != nil {
		p.unlinkBackends(prev)
	}
	hasHealthCheck := len(next.HealthChecks) > 0
	for _, n := range negs {
		initMap(&n.inBackends)[next.SelfLink] = hasHealthCheck
	}
	next.Fingerprint = p.newFingerprint()
	initMap(&p.backendServices)[bsKey{region, next.Name}] = next
	return nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (p *project) unlinkBackends(bs *compute.BackendService) {
	for _, b := range bs.Backends {
		if n, aerr := p.negOfGroup(b.Group); aerr == nil {
			delete(n.inBackends, bs.SelfLink)
		}
	}
}

func (p *project) newFingerprint() string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], p.s.nextID.Add(1))
	return base64.URLEncoding.EncodeToString(b[:])
}

// users are the URLs of the backend services that use the NEG, sorted.
func (n *negState) users() []string {
	out := slices.Clone(n.inUseBy)
	for bs := range n.inBackends {
		if !slices.Contains(out, bs) {
			out = append(out, bs)
		}
	}
	slices.Sort(out)
	return out
}

// backendServiceHealth answers getHealth: for the group, a NEG that is a backend of the service, each endpoint's
// state, HEALTHY or UNHEALTHY as getHealth reports them (DRAINING and UNKNOWN show as UNHEALTHY here). An endpoint
// whose state no test set is UNHEALTHY, as a new endpoint is until its health check passes. A service without a
// health check reports no health.
func (c *call) backendServiceHealth() (any, *apiError) {
	bs, ok := c.p.backendServices[bsKey{c.rt.region, c.rt.name}]
	if !ok {
		return nil, errNotFound(c.p.backendServicePath(c.rt.region, c.rt.name))
	}
	var ref compute.ResourceGroupReference
	if aerr := c.decode(&ref); aerr != nil {
		return nil, aerr
	}
	if ref.Group == "" {
		return nil, errRequired("resource.group")
	}
	n, aerr := c.p.negOfGroup(ref.Group)
	if aerr != nil {
		return nil, aerr
	}
	if _, in := n.inBackends[bs.SelfLink]; !in {
		return nil, errInvalidField("resource.group", ref.Group, "The group is not a backend of the backend service.")
	}
	out := &compute.BackendServiceGroupHealth{Kind: "compute#backendServiceGroupHealth"}
	if len(bs.HealthChecks) == 0 {
		return out, nil
	}
	for _, k := range n.sortedEndpoints() {
		ep := n.endpoints[k.key]
		state := n.backendHealth(k.key)
		if state != HealthHealthy {
			state = HealthUnhealthy
		}
		hs := &compute.HealthStatus{IpAddress: ep.IpAddress, Port: ep.Port, HealthState: state}
		if hs.Port == 0 {
			hs.Port = n.neg.DefaultPort
		}
		if ep.Instance != "" {
			hs.Instance = c.p.selfLink("projects/" + c.p.id + "/zones/" + n.zone + "/instances/" + ep.Instance)
		}
		out.HealthStatus = append(out.HealthStatus, hs)
	}
	return out, nil
}

// backendHealth is an endpoint's state as a backend service of the fake health checks it: what the test set, else
// the NEG's default if set, else UNHEALTHY.
func (n *negState) backendHealth(k endpointKey) string {
	if state, ok := n.health[k]; ok {
		return state
	}
	if n.defaultHealth != "" {
		return n.defaultHealth
	}
	return HealthUnhealthy
}
