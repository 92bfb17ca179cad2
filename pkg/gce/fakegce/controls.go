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
	"net/http"
	"time"
)

// Fault is an error the server returns in place of a method's answer, for a project's calls of that method.
//
// Which matching calls fail: every one by default; with EveryNth only the Nth, 2Nth, ... matching call; with
// Probability only that share of them (drawn from a random source seeded by Options.Seed). Times, if set, removes
// the fault after it has fired that many times; "fail the next 3 calls" is Fault{Code: 503, Times: 3}.
type Fault struct {
	// Code is the HTTP status, e.g. 403, 429, 500 or 503.
	Code int
	// Reason is errors[0].reason. Default: GCE's reason for Code (403 forbidden, 429 rateLimitExceeded, 5xx
	// backendError, ...). For Compute Engine's rate quota use Code 403 with ReasonRateLimitExceeded.
	Reason string
	// Message is the error message. Default: a message saying the fault was injected.
	Message string
	// Times removes the fault once it has fired this many times. 0: it stays until ClearFaults.
	Times int
	// EveryNth fails only every Nth matching call. 0 or 1: every matching call.
	EveryNth int
	// Probability, in (0, 1), fails a matching call with that probability. 0: always.
	Probability float64
	// Async, for a mutating method, accepts the call and fails its operation instead: the call returns an
	// Operation, which becomes DONE with this error in Operation.error and httpErrorStatusCode, and the call changes
	// nothing. For other methods Async is ignored.
	Async bool
	// HealthStatus, for MethodListEndpoints only, limits the fault to calls with this healthStatus: "SHOW" fails a
	// readiness poll's health lists and leaves the endpoint lists of a NEG controller ("SKIP", or none) alone.
	// "": every call of the method.
	HealthStatus string
}

type faultState struct {
	Fault
	matched int // matching calls seen
	fired   int
}

func (f *Fault) apiError() *apiError {
	reason := f.Reason
	if reason == "" {
		reason = defaultReason(f.Code)
	}
	msg := f.Message
	if msg == "" {
		msg = fmt.Sprintf("fakegce: injected fault: %d %s", f.Code, reason)
	}
	return &apiError{code: f.Code, reason: reason, message: msg}
}

// fireFault returns the first fault of the method (then of AnyMethod) that fires for this call, or nil. healthStatus
// is the call's healthStatus, normalized ("SKIP" when absent), for listNetworkEndpoints, and "" for other methods.
func (p *project) fireFault(m Method, healthStatus string) *Fault {
	for _, key := range []Method{m, AnyMethod} {
		list := p.faults[key]
		for i, fs := range list {
			if fs.HealthStatus != "" && fs.HealthStatus != healthStatus {
				continue
			}
			fs.matched++
			if fs.EveryNth > 1 && fs.matched%fs.EveryNth != 0 {
				continue
			}
			if fs.Probability > 0 && p.random().Float64() >= fs.Probability {
				continue
			}
			fs.fired++
			if fs.Times > 0 && fs.fired >= fs.Times {
				p.faults[key] = append(list[:i:i], list[i+1:]...)
			}
			f := fs.Fault
			return &f
		}
	}
	return nil
}

// InjectFault makes calls of method (or of every method, with AnyMethod) in project fail as f says. Faults of a
// method are tried in the order they were injected; the first that fires decides the call.
func (s *Server) InjectFault(project string, method Method, f Fault) {
	if f.Code < 400 || f.Code > 599 {
		panic(fmt.Sprintf("fakegce: fault code %d is not an HTTP error status", f.Code))
	}
	if f.HealthStatus != "" && (method != MethodListEndpoints || (f.HealthStatus != "SHOW" && f.HealthStatus != "SKIP")) {
		panic(fmt.Sprintf("fakegce: fault HealthStatus %q: want SHOW or SKIP, on %s only", f.HealthStatus, MethodListEndpoints))
	}
	p := s.project(project)
	p.mu.Lock()
	defer p.mu.Unlock()
	initMap(&p.faults)[method] = append(p.faults[method], &faultState{Fault: f})
}

// ClearFaults removes every fault and every injected latency of the project.
func (s *Server) ClearFaults(project string) {
	p := s.project(project)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults, p.latency = nil, nil
}

// SetLatency delays every call of method (or, with AnyMethod, of any method without a latency of its own) in the
// project by d of clock time before it is answered. 0 removes it. The delay comes before the quota and fault checks,
// as network and queueing time would.
func (s *Server) SetLatency(project string, method Method, d time.Duration) {
	p := s.project(project)
	p.mu.Lock()
	defer p.mu.Unlock()
	if d <= 0 {
		delete(p.latency, method)
		return
	}
	initMap(&p.latency)[method] = d
}

// Quota is a per-project rate quota over synchronized one-minute windows, the way Compute Engine counts API rate
// quotas: when a window's budget is spent, calls fail with 403 rateLimitExceeded until the next minute starts. Reads
// (get, list, listNetworkEndpoints, zoneOperations get and wait) and mutations (insert, delete, attach, detach) have
// separate budgets, as Compute Engine's read and mutation ("Queries") groups do. 0 means unlimited.
type Quota struct {
	ReadsPerMinute     int
	MutationsPerMinute int
}

// SetQuota sets the project's rate quota, replacing Options.Quota for it. Counting starts afresh: calls made before
// SetQuota in the current minute do not count against the new budget, so a test's setup calls do not spend it.
func (s *Server) SetQuota(project string, q Quota) {
	p := s.project(project)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.quota = &q
	p.readsUsed, p.writesUsed = 0, 0
}

// takeQuota spends one call of the method's budget in the current window, or fails. Refused calls spend nothing.
func (p *project) takeQuota(now time.Time, m Method) *apiError {
	q := p.s.opts.Quota
	if p.quota != nil {
		q = *p.quota
	}
	window := now.Truncate(time.Minute)
	if !window.Equal(p.quotaWindow) {
		p.quotaWindow, p.readsUsed, p.writesUsed = window, 0, 0
	}
	used, limit, metric := &p.readsUsed, q.ReadsPerMinute, "Read requests"
	if m.Mutating() {
		used, limit, metric = &p.writesUsed, q.MutationsPerMinute, "Queries"
	}
	if limit > 0 && *used >= limit {
		return &apiError{http.StatusForbidden, ReasonRateLimitExceeded, fmt.Sprintf(
			"Quota exceeded for quota metric '%s' and limit '%s per minute' of service 'compute.googleapis.com' "+
				"for consumer 'project:%s'.", metric, metric, p.id)}
	}
	*used++
	return nil
}

// Calls returns how many requests of each method the project received, including those that failed. Methods never
// called are absent.
func (s *Server) Calls(project string) map[Method]int {
	p := s.existingProject(project)
	if p == nil {
		return map[Method]int{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[Method]int{}
	for _, c := range p.calls {
		out[c.method] += c.n
	}
	return out
}

// ZoneCalls returns how many requests of each method the project received for one zone, including those that
// failed; zone "" holds the project-wide aggregatedList. Methods never called in the zone are absent.
func (s *Server) ZoneCalls(project, zone string) map[Method]int {
	p := s.existingProject(project)
	if p == nil {
		return map[Method]int{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[Method]int{}
	for _, c := range p.calls {
		if c.zone == zone {
			out[c.method] += c.n
		}
	}
	return out
}

// Errors returns how many requests of each method the project answered with an error status.
func (s *Server) Errors(project string) map[Method]int {
	p := s.existingProject(project)
	if p == nil {
		return map[Method]int{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.errors)
}

// MutatingCalls returns how many insert, delete, attach and detach requests the project received.
func (s *Server) MutatingCalls(project string) int {
	n := 0
	for m, c := range s.Calls(project) {
		if m.Mutating() {
			n += c
		}
	}
	return n
}

// ResetCalls zeroes the call counters (also per zone) and error counters of every project. State, faults, latency and quotas stay.
func (s *Server) ResetCalls() {
	s.mu.Lock()
	projects := make([]*project, 0, len(s.projects))
	for _, p := range s.projects {
		projects = append(projects, p)
	}
	s.mu.Unlock()
	for _, p := range projects {
		p.mu.Lock()
		p.calls, p.errors = nil, nil
		p.mu.Unlock()
	}
}
