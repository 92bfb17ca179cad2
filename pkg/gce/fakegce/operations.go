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
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	compute "google.golang.org/api/compute/v1"
)

// waitDeadline is how long zoneOperations.wait blocks at most before it returns the operation as it is: GCE's
// documented "2 minute deadline".
const waitDeadline = 2 * time.Minute

// maxRetainedOperations bounds the finished operations a project keeps, so a long demo does not grow without
// limit. GCE also forgets old operations; callers poll an operation soon after they start it.
const maxRetainedOperations = 10000

// operation is one zonal operation: what zoneOperations.get returns, and the change it makes when it completes.
type operation struct {
	op compute.Operation
	// apply makes the operation's change to the project's state, under the project's lock, and returns the error the
	// operation ends with, if any. It is nil for an operation that fails by an injected async fault.
	apply func() *apiError
	// fail is the error of an injected async fault.
	fail *apiError
	// release, if set, runs when the operation completes, whether it succeeded or failed: an insert frees the name
	// it reserved.
	release func()
	// dueAt and pollsNeeded are when the operation may complete: at or after dueAt on the clock, once polled
	// pollsNeeded times.
	dueAt       time.Time
	pollsNeeded int
	polls       int
	requestID   string
	// done is closed when the operation completes, waking waiters.
	done chan struct{}
}

func (o *operation) isDone() bool { return o.op.Status == "DONE" }

func (o *operation) due(now time.Time) bool { return o.polls >= o.pollsNeeded && !now.Before(o.dueAt) }

// snapshot is the operation as a response: a copy, so encoding it outside the lock races with nothing.
func (o *operation) snapshot() *compute.Operation {
	c := o.op
	if o.op.Error != nil {
		errs := make([]*compute.OperationErrorErrors, len(o.op.Error.Errors))
		for i, e := range o.op.Error.Errors {
			ec := *e
			errs[i] = &ec
		}
		c.Error = &compute.OperationError{Errors: errs}
	}
	return &c
}

// startOperation records a new operation of the given type on the NEG and, if the server's operations complete at
// once, completes it before returning, so that the call's response already reports DONE.
func (c *call) startOperation(opType string, targetID uint64, apply func() *apiError, release func()) *compute.Operation {
	p, s := c.p, c.s
	id := s.nextID.Add(1)
	name := fmt.Sprintf("operation-%d-%016x", c.now.UnixMilli(), id)
	ts := formatTime(c.now)
	o := &operation{
		op: compute.Operation{
			Kind:              "compute#operation",
			Id:                id,
			Name:              name,
			OperationType:     opType,
			Status:            "RUNNING",
			Progress:          0,
			InsertTime:        ts,
			StartTime:         ts,
			CreationTimestamp: ts,
			User:              "fakegce",
			Zone:              p.selfLink("projects/" + p.id + "/zones/" + c.rt.zone),
			SelfLink:          p.selfLink("projects/" + p.id + "/zones/" + c.rt.zone + "/operations/" + name),
			TargetLink:        p.selfLink(p.negPath(c.rt.zone, c.rt.name)),
			TargetId:          targetID,
			ClientOperationId: c.query.Get("requestId"),
		},
		apply:       apply,
		release:     release,
		dueAt:       c.now.Add(s.opts.OperationDelay),
		pollsNeeded: s.opts.OperationPolls,
		requestID:   c.query.Get("requestId"),
		done:        make(chan struct{}),
	}
	if c.fault != nil {
		o.apply, o.fail = nil, c.fault.apiError()
	}
	initMap(&p.ops)[opKey{c.rt.zone, name}] = o
	initMap(&p.opsByID)[id] = o
	p.opOrder = append(p.opOrder, o)
	if o.requestID != "" {
		initMap(&p.requestIDs)[o.requestID] = o
	}
	c.rec.Operation = name
	if o.due(c.now) {
		p.finish(o, c.now)
	} else {
		p.pending = append(p.pending, o)
	}
	p.pruneOperations()
	return o.snapshot()
}

// finish completes an operation: applies its change (or its injected failure) and marks it DONE.
func (p *project) finish(o *operation, now time.Time) {
	if o.release != nil {
		o.release()
	}
	var aerr *apiError
	if o.fail != nil {
		aerr = o.fail
	} else if o.apply != nil {
		aerr = o.apply()
	}
	o.op.Status = "DONE"
	o.op.Progress = 100
	o.op.EndTime = formatTime(now)
	if aerr != nil {
		o.op.HttpErrorStatusCode = int64(aerr.code)
		o.op.HttpErrorMessage = aerr.httpErrorMessage()
		o.op.Error = &compute.OperationError{Errors: []*compute.OperationErrorErrors{{
			Code:    aerr.operationErrorCode(),
			Message: aerr.message,
		}}}
	}
	close(o.done)
}

// completeDue completes, oldest first, every operation whose time has come, and drops finished operations from the
// pending list. Operations complete lazily, when a call or a helper looks at the project, which is
// indistinguishable from outside and needs no background goroutine.
func (p *project) completeDue(now time.Time) {
	kept := p.pending[:0]
	for _, o := range p.pending {
		if !o.isDone() && o.due(now) {
			p.finish(o, now)
		}
		if !o.isDone() {
			kept = append(kept, o)
		}
	}
	clear(p.pending[len(kept):])
	p.pending = kept
}

// pruneOperations forgets the oldest finished operations beyond maxRetainedOperations.
func (p *project) pruneOperations() {
	if len(p.opOrder) <= maxRetainedOperations {
		return
	}
	kept := p.opOrder[:0]
	excess := len(p.opOrder) - maxRetainedOperations
	for _, o := range p.opOrder {
		if excess > 0 && o.isDone() {
			excess--
			delete(p.ops, opKey{zoneOf(o), o.op.Name})
			delete(p.opsByID, o.op.Id)
			if o.requestID != "" && p.requestIDs[o.requestID] == o {
				delete(p.requestIDs, o.requestID)
			}
			continue
		}
		kept = append(kept, o)
	}
	clear(p.opOrder[len(kept):])
	p.opOrder = kept
}

func zoneOf(o *operation) string {
	z := o.op.Zone
	for i := len(z) - 1; i >= 0; i-- {
		if z[i] == '/' {
			return z[i+1:]
		}
	}
	return z
}

// lookupOperation finds an operation of the zone by name or, as the API allows, by its numeric id.
func (p *project) lookupOperation(zone, nameOrID string) *operation {
	if o, ok := p.ops[opKey{zone, nameOrID}]; ok {
		return o
	}
	if id, err := strconv.ParseUint(nameOrID, 10, 64); err == nil {
		if o, ok := p.opsByID[id]; ok && zoneOf(o) == zone {
			return o
		}
	}
	return nil
}

func (p *project) operationNotFound(zone, name string) *apiError {
	return errNotFound("projects/" + p.id + "/zones/" + zone + "/operations/" + name)
}

// getOperation answers zoneOperations.get. Each get counts as a poll of the operation.
func (c *call) getOperation() (any, *apiError) {
	o := c.p.lookupOperation(c.rt.zone, c.rt.name)
	if o == nil {
		return nil, c.p.operationNotFound(c.rt.zone, c.rt.name)
	}
	if !o.isDone() {
		o.polls++
		if o.due(c.now) {
			c.p.finish(o, c.now)
		}
	}
	return o.snapshot(), nil
}

// waitOperation answers zoneOperations.wait: it counts a poll, then blocks until the operation is DONE or the wait
// deadline passes, whichever is first, and returns the operation as it then is. If the operation still needs more
// polls than this one, it returns at once, as the real method may: callers have to loop.
func (s *Server) waitOperation(ctx context.Context, p *project, rt route) (any, *apiError) {
	p.mu.Lock()
	start := s.clock.Now()
	p.completeDue(start)
	if _, aerr := p.admit(start, rt.method, ""); aerr != nil {
		p.mu.Unlock()
		return nil, aerr
	}
	o := p.lookupOperation(rt.zone, rt.name)
	if o == nil {
		p.mu.Unlock()
		return nil, p.operationNotFound(rt.zone, rt.name)
	}
	if !o.isDone() {
		o.polls++
	}
	deadline := start.Add(waitDeadline)
	for {
		now := s.clock.Now()
		if !o.isDone() && o.due(now) {
			p.finish(o, now)
		}
		if o.isDone() || o.polls < o.pollsNeeded || !now.Before(deadline) {
			snap := o.snapshot()
			p.mu.Unlock()
			return snap, nil
		}
		wake := min(o.dueAt.Sub(now), deadline.Sub(now))
		p.mu.Unlock()
		timer := s.clock.NewTimer(wake)
		select {
		case <-timer.C():
		case <-o.done:
		case <-ctx.Done():
			timer.Stop()
			return nil, &apiError{http.StatusServiceUnavailable, ReasonBackendError, "fakegce: wait ended: client gone or server closed"}
		}
		timer.Stop()
		p.mu.Lock()
		p.completeDue(s.clock.Now())
	}
}

// CompleteOperations completes every pending operation of the project now, whatever its delay or polls, in the
// order they were started. Tests use it to settle state without advancing a clock.
func (s *Server) CompleteOperations(project string) {
	p := s.existingProject(project)
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := s.clock.Now()
	for _, o := range p.pending {
		if !o.isDone() {
			p.finish(o, now)
		}
	}
	clear(p.pending)
	p.pending = p.pending[:0]
}

// PendingOperations returns how many of the project's operations are not DONE yet.
func (s *Server) PendingOperations(project string) int {
	p := s.existingProject(project)
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.completeDue(s.clock.Now())
	return len(p.pending)
}

// formatTime writes a timestamp the way GCE does: RFC 3339 with milliseconds and a numeric offset.
func formatTime(t time.Time) string { return t.Format("2006-01-02T15:04:05.000-07:00") }
