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
	"hash/fnv"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	compute "google.golang.org/api/compute/v1"
)

// project is the state of one GCP project: its NEGs and operations in every zone, and the test controls (call
// counters, faults, latency, quota) that belong to it, so that one tenant's faults never reach another's calls.
type project struct {
	s  *Server
	id string

	// mu guards everything below. Each project has its own lock, so tenants' calls do not serialise on each other.
	mu sync.Mutex

	negs map[negKey]*negState
	// pendingInserts holds the names of NEGs whose insert operation has not completed, so that a second insert of
	// the name is refused while the first is in flight.
	pendingInserts map[negKey]bool
	// instances are the VMs tests registered with AddInstance, by zone and name. When a project has any, endpoint
	// instances must be among them.
	instances map[string]map[string]instance

	ops map[opKey]*operation
	// opOrder lists the retained operations oldest first, for pruning; pending lists those not DONE, oldest
	// first, for completion.
	opOrder    []*operation
	pending    []*operation
	opsByID    map[uint64]*operation
	requestIDs map[string]*operation

	// calls counts calls per zone and method (zone "" for the project-wide aggregatedList), for assertions such as
	// "at most one attach call per zone and 500 endpoints". A slice searched in order: a project sees a few dozen
	// pairs at most, most only the sweep's lists.
	calls   []zoneMethodCount
	errors  map[Method]int
	faults  map[Method][]*faultState
	latency map[Method]time.Duration
	// backendServices are the project's backend services, global (region "") and regional; bsOps the operations
	// of their writes, which complete at once, by scope ("global" or the region) and name.
	backendServices map[bsKey]*compute.BackendService
	bsOps           map[opKey]*compute.Operation
	// afterGet holds changes to make to a backend service right after its next get is answered (ChangeAfterNextGet).
	afterGet map[bsKey][]func(*compute.BackendService)
	// rng decides the faults that fire with a probability; made by the first one.
	rng *rand.Rand

	quota       *Quota // nil: the server's Options.Quota
	quotaWindow time.Time
	readsUsed   int
	writesUsed  int
}

type negKey struct{ zone, name string }

type zoneMethodCount struct {
	zone   string
	method Method
	n      int
}

type opKey struct{ zone, name string }

type instance struct {
	primaryIP netip.Addr
}

// negState is one NEG: the resource as GCE returns it (without size, which is derived) and its endpoints.
type negState struct {
	zone string
	neg  compute.NetworkEndpointGroup
	// endpoints are keyed by the endpoint's identity; byConflict maps what must be unique in the NEG (ip:port, or
	// the instance for GCE_VM_IP) to the endpoint that holds it.
	endpoints  map[endpointKey]*compute.NetworkEndpoint
	byConflict map[string]endpointKey
	// inUseBy lists the URLs of backend services a test said reference the NEG (SetInUseBy); inBackends those of
	// the fake's backend services whose backends name it, each with whether it has a health check. A NEG in use
	// by either cannot be deleted.
	inUseBy    []string
	inBackends map[string]bool
	// health holds the states tests set for attached endpoints (SetEndpointHealth); a detach forgets its endpoints'.
	// defaultHealth ("": HEALTHY) is the state of the others (SetDefaultEndpointHealth).
	health        map[endpointKey]string
	defaultHealth string
}

// newProject returns an empty project. Its maps are made by their first write (initMap): most projects a test's
// manager touches are only listed by the NEG garbage sweep, and the fake's record of each must not weigh in a
// benchmark of the manager's heap per tenant.
func newProject(s *Server, id string) *project {
	return &project{s: s, id: id}
}

// initMap returns *m, made first if it is nil.
func initMap[K comparable, V any](m *map[K]V) map[K]V {
	if *m == nil {
		*m = map[K]V{}
	}
	return *m
}

// random returns the project's random source, seeded per project so that one project's traffic does not change
// which calls of another fail.
func (p *project) random() *rand.Rand {
	if p.rng == nil {
		h := fnv.New64a()
		_, _ = h.Write([]byte(p.id))
		p.rng = rand.New(rand.NewPCG(p.s.opts.Seed, h.Sum64()))
	}
	return p.rng
}

// countCall records a call to method in zone and returns the latency to inject before answering it. Operations that
// are due complete first, so that every call sees the state as of now.
func (p *project) countCall(now time.Time, m Method, zone string) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.completeDue(now)
	counted := false
	for i := range p.calls {
		if c := &p.calls[i]; c.zone == zone && c.method == m {
			c.n++
			counted = true
			break
		}
	}
	if !counted {
		p.calls = append(p.calls, zoneMethodCount{zone: zone, method: m, n: 1})
	}
	if d, ok := p.latency[m]; ok {
		return d
	}
	return p.latency[AnyMethod]
}

// admit decides whether a counted call may run: first the rate quota, then injected faults. A fault with Async set on
// a mutating method is returned for the handler to put in the call's operation instead of failing the call.
// healthStatus is the call's, for listNetworkEndpoints (see fireFault).
func (p *project) admit(now time.Time, m Method, healthStatus string) (*Fault, *apiError) {
	if aerr := p.takeQuota(now, m); aerr != nil {
		return nil, aerr
	}
	f := p.fireFault(m, healthStatus)
	if f == nil {
		return nil, nil
	}
	if f.Async && m.Mutating() {
		return f, nil
	}
	return nil, f.apiError()
}

func (p *project) selfLink(path string) string { return p.s.opts.SelfLinkBase + path }

func (p *project) negPath(zone, name string) string {
	return "projects/" + p.id + "/zones/" + zone + "/networkEndpointGroups/" + name
}
