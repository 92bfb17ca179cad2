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
	"maps"
	"net/netip"
	"slices"
	"strings"

	compute "google.golang.org/api/compute/v1"
)

// The methods in this file read and change state directly, for test setup and assertions. They bypass counters,
// faults, latency and quota, and see the state as of now: operations that are due complete first.

// NEG returns a copy of the NEG as get would return it, and whether it exists.
func (s *Server) NEG(project, zone, name string) (*compute.NetworkEndpointGroup, bool) {
	p := s.existingProject(project)
	if p == nil {
		return nil, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.completeDue(s.clock.Now())
	n, ok := p.negs[negKey{zone, name}]
	if !ok {
		return nil, false
	}
	return n.snapshot(), true
}

// NEGs returns copies of all the project's NEGs, ordered by zone and name.
func (s *Server) NEGs(project string) []*compute.NetworkEndpointGroup {
	p := s.existingProject(project)
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.completeDue(s.clock.Now())
	var out []*compute.NetworkEndpointGroup
	for _, n := range p.sortedNEGs("") {
		out = append(out, n.snapshot())
	}
	return out
}

// Endpoints returns copies of the NEG's endpoints as it stores them (instance as a name, port defaulted), ordered by
// IP, port and instance, and whether the NEG exists.
func (s *Server) Endpoints(project, zone, name string) ([]*compute.NetworkEndpoint, bool) {
	p := s.existingProject(project)
	if p == nil {
		return nil, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.completeDue(s.clock.Now())
	n, ok := p.negs[negKey{zone, name}]
	if !ok {
		return nil, false
	}
	sorted := n.sortedEndpoints()
	out := make([]*compute.NetworkEndpoint, 0, len(sorted))
	for _, k := range sorted {
		ep := *n.endpoints[k.key]
		ep.Annotations = maps.Clone(ep.Annotations)
		out = append(out, &ep)
	}
	return out, true
}

// SeedNEG creates a NEG with endpoints at once, as if someone else had created it (for example a NEG without our
// ownership marker in its description). The NEG and endpoints are validated as insert and attach would; the
// endpoint count per call is not limited. It returns the NEG as stored.
func (s *Server) SeedNEG(project, zone string, neg *compute.NetworkEndpointGroup, endpoints ...*compute.NetworkEndpoint) (*compute.NetworkEndpointGroup, error) {
	if !validName.MatchString(zone) {
		return nil, invalidName("zone", zone)
	}
	p := s.project(project)
	p.mu.Lock()
	defer p.mu.Unlock()
	now := s.clock.Now()
	p.completeDue(now)
	stored, aerr := p.newNEG(zone, neg, now)
	if aerr != nil {
		return nil, aerr
	}
	key := negKey{zone, neg.Name}
	if _, exists := p.negs[key]; exists || p.pendingInserts[key] {
		return nil, errAlreadyExists(p.negPath(zone, neg.Name))
	}
	n := newNegState(zone, *stored)
	for i, ep := range endpoints {
		k, ep, aerr := p.normalizeEndpoint(&n.neg, zone, i, ep)
		if aerr != nil {
			return nil, aerr
		}
		for _, ck := range conflictKeys(n.neg.NetworkEndpointType, k) {
			if _, dup := n.byConflict[ck]; dup {
				return nil, errInvalidField(fmt.Sprintf("resource.networkEndpoints[%d]", i), k.String(), "Duplicate endpoint.")
			}
			n.byConflict[ck] = k
		}
		n.endpoints[k] = ep
	}
	if len(n.endpoints) > s.opts.MaxEndpointsPerNEG {
		return nil, fmt.Errorf("fakegce: %d endpoints exceed the limit of %d per NEG", len(n.endpoints), s.opts.MaxEndpointsPerNEG)
	}
	initMap(&p.negs)[key] = n
	return n.snapshot(), nil
}

// SetInUseBy records that backend services (names, or URLs) use the NEG, which makes delete fail with 400
// resourceInUseByAnotherResource and makes listNetworkEndpoints with healthStatus SHOW report each endpoint's health
// (SetEndpointHealth; HEALTHY unless set) for each of them. With no backend services the NEG is no longer in use.
func (s *Server) SetInUseBy(project, zone, name string, backendServices ...string) error {
	p := s.existingProject(project)
	if p == nil {
		return errNotFound("projects/" + project + "/zones/" + zone + "/networkEndpointGroups/" + name)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.completeDue(s.clock.Now())
	n, ok := p.negs[negKey{zone, name}]
	if !ok {
		return errNotFound(p.negPath(zone, name))
	}
	n.inUseBy = nil
	for _, bs := range backendServices {
		ref := bs
		if !strings.Contains(ref, "/") {
			ref = "global/backendServices/" + ref
		}
		n.inUseBy = append(n.inUseBy, p.selfLink(resourcePath(ref, p.id)))
	}
	slices.Sort(n.inUseBy)
	return nil
}

// AddInstance registers a VM in the project's zone, optionally with its primary IP ("" for none). Once a project has
// a registered instance, every endpoint attached in it must name a registered instance of the NEG's zone, which
// catches endpoints put in the wrong zone's NEG; an endpoint without ipAddress gets the instance's primary IP.
func (s *Server) AddInstance(project, zone, name, primaryIP string) error {
	if !validName.MatchString(zone) {
		return invalidName("zone", zone)
	}
	if !validName.MatchString(name) {
		return invalidName("instance", name)
	}
	var inst instance
	if primaryIP != "" {
		ip, err := netip.ParseAddr(primaryIP)
		if err != nil || !ip.Is4() {
			return errInvalidField("primaryIP", primaryIP, "Must be an IPv4 address.")
		}
		inst.primaryIP = ip
	}
	p := s.project(project)
	p.mu.Lock()
	defer p.mu.Unlock()
	zoneInstances := p.instances[zone]
	initMap(&zoneInstances)[name] = inst
	initMap(&p.instances)[zone] = zoneInstances
	return nil
}

// Projects returns the IDs of the projects that have been addressed, sorted.
func (s *Server) Projects() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.projects))
	for id := range s.projects {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}
