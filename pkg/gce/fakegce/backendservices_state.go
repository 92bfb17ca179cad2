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
	"encoding/json"

	compute "google.golang.org/api/compute/v1"
)

// The methods below read and change backend services directly, for test setup and assertions.

// InsertBackendService stores a backend service (region "": global) as insert would, e.g. one a test's Terraform
// made, and returns it as stored.
func (s *Server) InsertBackendService(project, region string, bs *compute.BackendService) (*compute.BackendService, error) {
	p := s.project(project)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.completeDue(s.clock.Now())
	rec := &CallRecord{}
	method := MethodBackendServiceInsert
	if region != "" {
		method = MethodRegionBackendServiceInsert
	}
	b, err := json.Marshal(bs)
	if err != nil {
		return nil, err
	}
	c := &call{s: s, p: p, rt: route{method: method, project: project, region: region}, body: b, now: s.clock.Now(), rec: rec}
	if _, aerr := c.insertBackendService(); aerr != nil {
		return nil, aerr
	}
	return copyBackendService(p.backendServices[bsKey{region, bs.Name}]), nil
}

// BackendService returns a copy of a backend service (region "": global) and whether it exists.
func (s *Server) BackendService(project, region, name string) (*compute.BackendService, bool) {
	p := s.existingProject(project)
	if p == nil {
		return nil, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	bs, ok := p.backendServices[bsKey{region, name}]
	if !ok {
		return nil, false
	}
	return copyBackendService(bs), true
}

// ModifyBackendService changes a backend service at once, as someone else's write would: change edits it, the
// result is validated as a write is, and the fingerprint changes.
func (s *Server) ModifyBackendService(project, region, name string, change func(*compute.BackendService)) error {
	p := s.existingProject(project)
	if p == nil {
		return errNotFound("projects/" + project + "/backendServices/" + name)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.completeDue(s.clock.Now())
	cur, ok := p.backendServices[bsKey{region, name}]
	if !ok {
		return errNotFound(p.backendServicePath(region, name))
	}
	next := copyBackendService(cur)
	change(next)
	if aerr := p.storeBackendService(region, cur, next); aerr != nil {
		return aerr
	}
	return nil
}

// ChangeAfterNextGet makes change to the backend service right after its next get is answered, as someone else's
// write landing between a caller's read and its write: that write carries a stale fingerprint and gets 412.
func (s *Server) ChangeAfterNextGet(project, region, name string, change func(*compute.BackendService)) {
	p := s.project(project)
	p.mu.Lock()
	defer p.mu.Unlock()
	key := bsKey{region, name}
	initMap(&p.afterGet)[key] = append(p.afterGet[key], change)
}
