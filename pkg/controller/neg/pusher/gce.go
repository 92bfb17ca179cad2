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

package pusher

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	compute "google.golang.org/api/compute/v1"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	gceclient "github.com/multiproject/multiproject-controller-manager/pkg/gce/client"
)

// negCalls makes the GCE calls on one NEG while its cache entry is locked, and keeps the entry true to what they
// found and did: what a call read or changed is recorded, and an error that may mean the entry is wrong drops it.
// It knows nothing of Translations, their status or their Events.
type negCalls struct {
	gce   *gceclient.Client
	cache *negCache
	neg   negKey
	entry *negEntry
	// verifyPeriod is how long a read of GCE is trusted (Pusher.verifyPeriod).
	verifyPeriod time.Duration
}

// lock locks the NEG's cache entry for the sync's Translation and returns the NEG's calls; unlock releases it.
func (s *negSync) lock(gce *gceclient.Client, neg negKey) negCalls {
	return negCalls{gce: gce, cache: s.p.cache, neg: neg, entry: s.p.cache.lock(s.key, neg), verifyPeriod: s.p.verifyPeriod}
}

func (c negCalls) unlock() { c.cache.unlock(c.neg, c.entry) }

// awaitPending waits for the operation of an earlier call whose wait failed; afterwards the entry is re-read, since
// that operation may have changed the NEG either way.
func (c negCalls) awaitPending(ctx context.Context) error {
	e := c.entry
	if e.pendingOperation == "" {
		return nil
	}
	err := c.gce.WaitOperation(ctx, c.neg.zone, e.pendingOperation)
	var waitErr *gceclient.OperationWaitError
	if errors.As(err, &waitErr) && !gceclient.IsNotFound(waitErr.Err) {
		return err
	}
	e.invalidate()
	e.pendingOperation = ""
	return nil
}

// observe fills the entry from GCE unless it is known and fresh: a get, and, for a NEG carrying marker, its
// endpoints (one call per 500).
func (c negCalls) observe(ctx context.Context, marker string) error {
	e := c.entry
	fresh := c.verifyPeriod <= 0 || time.Since(e.observed) < c.verifyPeriod
	if e.known && fresh && (!e.exists || e.endpoints != nil || e.description != marker) {
		return nil
	}
	e.invalidate()
	neg, err := c.gce.GetNEG(ctx, c.neg.zone, c.neg.name)
	if gceclient.IsNotFound(err) {
		e.known, e.observed = true, time.Now()
		return nil
	}
	if err != nil {
		return err
	}
	e.exists, e.description, e.defaultPort = true, neg.Description, neg.DefaultPort
	e.id, e.selfLink = neg.Id, neg.SelfLink
	if neg.Description == marker {
		listed, err := c.gce.ListEndpoints(ctx, c.neg.zone, c.neg.name)
		if gceclient.IsNotFound(err) {
			e.exists, e.description = false, ""
			e.known, e.observed = true, time.Now()
			return nil
		}
		if err != nil {
			e.invalidate()
			return err
		}
		e.endpoints = make(map[endpointKey]*compute.NetworkEndpoint, len(listed))
		for _, ep := range listed {
			e.endpoints[keyOf(ep, e.defaultPort)] = ep
		}
	}
	e.known, e.observed = true, time.Now()
	return nil
}

// insert creates the NEG; once GCE has, the entry records it as ours, without endpoints.
func (c negCalls) insert(ctx context.Context, neg *compute.NetworkEndpointGroup) error {
	ref, err := c.gce.InsertNEG(ctx, c.neg.zone, neg)
	if err != nil {
		return err
	}
	e := c.entry
	e.known, e.exists, e.owned, e.description = true, true, true, neg.Description
	e.id, e.selfLink = ref.ID, ref.SelfLink
	e.defaultPort = neg.DefaultPort
	e.endpoints = map[endpointKey]*compute.NetworkEndpoint{}
	e.observed = time.Now()
	return nil
}

// newNEG is the NEG GCE is asked to create for a spec resource; its endpoint type defaults to GCE_VM_IP_PORT.
func newNEG(res *mpv1alpha1.BackendResource) *compute.NetworkEndpointGroup {
	params := res.NetworkEndpointGroup
	neg := &compute.NetworkEndpointGroup{
		Name:                res.Name,
		Description:         res.Description,
		NetworkEndpointType: string(params.NetworkEndpointType),
		Network:             params.Network,
		Subnetwork:          params.Subnetwork,
		DefaultPort:         int64(params.Port),
	}
	if neg.NetworkEndpointType == "" {
		neg.NetworkEndpointType = string(mpv1alpha1.NetworkEndpointTypeGCEVMIPPort)
	}
	return neg
}

// setEndpoints makes the NEG's endpoints those params list: it detaches what GCE has and params do not list, then
// attaches what params list and GCE lacks, in batches of at most MaxEndpointsPerCall. Detaches go first so that an
// IP:port moving to another instance is free when it is attached. Each batch is recorded as soon as it succeeds, so
// a failure loses nothing already done.
func (c negCalls) setEndpoints(ctx context.Context, params *mpv1alpha1.NetworkEndpointGroupParameters) error {
	toDetach, toAttach := diff(c.entry, params)
	for batch := range slices.Chunk(toDetach, gceclient.MaxEndpointsPerCall) {
		if err := c.gce.DetachEndpoints(ctx, c.neg.zone, c.neg.name, endpointsOf(batch)); err != nil {
			return err
		}
		for _, d := range batch {
			delete(c.entry.endpoints, d.key)
		}
	}
	for batch := range slices.Chunk(toAttach, gceclient.MaxEndpointsPerCall) {
		if err := c.gce.AttachEndpoints(ctx, c.neg.zone, c.neg.name, endpointsOf(batch)); err != nil {
			return err
		}
		for _, a := range batch {
			c.entry.endpoints[a.key] = a.endpoint
		}
	}
	return nil
}

// provenOurs says whether the NEG exists and whether it is ours: the entry knows it ours, or its description, read
// from GCE, is one of markers.
func (c negCalls) provenOurs(ctx context.Context, markers []string) (exists, ours bool, err error) {
	e := c.entry
	if e.known && !e.exists {
		return false, false, nil
	}
	if e.known && e.owned {
		return true, true, nil
	}
	neg, err := c.gce.GetNEG(ctx, c.neg.zone, c.neg.name)
	if gceclient.IsNotFound(err) {
		e.invalidate()
		e.known = true
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	return true, slices.Contains(markers, neg.Description), nil
}

// delete deletes the NEG, with its endpoints, and records what GCE's answer says of it.
func (c negCalls) delete(ctx context.Context) error {
	err := c.gce.DeleteNEG(ctx, c.neg.zone, c.neg.name)
	switch gceclient.Classify(err) {
	case gceclient.ClassNone, gceclient.ClassNotFound:
		c.entry.invalidate()
		c.entry.known = true
	case gceclient.ClassInUse:
		// Refused because a backend service uses it: the NEG is as it was.
	case gceclient.ClassInvalid:
		c.entry.invalidate()
	default:
		c.entry.invalidate()
		var waitErr *gceclient.OperationWaitError
		if errors.As(err, &waitErr) {
			c.entry.pendingOperation = waitErr.Operation
		}
	}
	return err
}

// detachAll detaches every endpoint of a NEG that GCE would not delete, once its description, read again, passes
// sweepable (errNotSweepable otherwise); gone says the NEG no longer exists. The endpoints are those GCE lists, in
// GCE's form, which a detach must match. The entry is read again at its next use.
func (c negCalls) detachAll(ctx context.Context, sweepable func(description string) bool) (gone bool, err error) {
	c.entry.invalidate()
	neg, err := c.gce.GetNEG(ctx, c.neg.zone, c.neg.name)
	if gceclient.IsNotFound(err) {
		c.entry.known = true
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if !sweepable(neg.Description) {
		return false, errNotSweepable
	}
	listed, err := c.gce.ListEndpoints(ctx, c.neg.zone, c.neg.name)
	if gceclient.IsNotFound(err) {
		c.entry.known = true
		return true, nil
	}
	if err != nil {
		return false, err
	}
	for batch := range slices.Chunk(listed, gceclient.MaxEndpointsPerCall) {
		if err := c.gce.DetachEndpoints(ctx, c.neg.zone, c.neg.name, batch); err != nil {
			var waitErr *gceclient.OperationWaitError
			if errors.As(err, &waitErr) {
				c.entry.pendingOperation = waitErr.Operation
			}
			return false, err
		}
	}
	return false, nil
}

// failed turns a GCE error into the resource's outcome and drops the cache entry unless the call certainly changed
// nothing (a rate limit refuses the call before it runs).
func (c negCalls) failed(o outcome, err error) outcome {
	o.err = err
	o.state = mpv1alpha1.BackendResourceStateError
	var waitErr *gceclient.OperationWaitError
	switch {
	case errors.As(err, &waitErr):
		c.entry.invalidate()
		c.entry.pendingOperation = waitErr.Operation
	case gceclient.Reason(err) != gceclient.ReasonRateLimitExceeded:
		c.entry.invalidate()
	}
	switch gceclient.Classify(err) {
	case gceclient.ClassInvalid:
		o.reason, o.permanent = ReasonInvalid, true
	case gceclient.ClassInUse:
		o.reason, o.permanent = ReasonInUse, true
	default:
		o.reason = ReasonGCEError
	}
	return o
}

// retryAfterEndpointError says whether an attach or detach error may come from a stale cache: a vanished NEG (it
// is recreated) or a refused batch (the endpoint set changed behind our back).
func retryAfterEndpointError(err error) bool {
	switch gceclient.Classify(err) {
	case gceclient.ClassNotFound, gceclient.ClassInvalid:
		return true
	}
	return false
}

type keyedEndpoint struct {
	key      endpointKey
	endpoint *compute.NetworkEndpoint
}

// diff returns what to detach (GCE's endpoints the spec does not list, in GCE's form, which a detach must match)
// and what to attach (listed endpoints GCE lacks), each in a stable order.
//
// A listed endpoint that names no Pod is one an older build wrote (or the previous CRDs pruned), or one of a
// Service without Pods, which never has an IPv6 address: it is matched as an older build matches it, by instance,
// IPv4 address and port, so that GCE's endpoint with both addresses stays as it is. Else a roll-forward after an
// older build rewrote a dual-stack Service's spec would detach each endpoint to attach it IPv4-only, then again to
// give it back the IPv6 address the translator derives at its next sync.
func diff(e *negEntry, params *mpv1alpha1.NetworkEndpointGroupParameters) (toDetach, toAttach []keyedEndpoint) {
	defaultPort := int64(params.Port)
	if e.defaultPort != 0 {
		defaultPort = e.defaultPort
	}
	dualStackInGCE := map[endpointKey]endpointKey{} // GCE's endpoints with an IPv6 address, by their IPv4 form
	for k := range e.endpoints {
		if k.ipv6 != "" {
			v4 := k
			v4.ipv6 = ""
			dualStackInGCE[v4] = k
		}
	}
	desired := make(map[endpointKey]*compute.NetworkEndpoint, len(params.Endpoints))
	for _, ep := range params.Endpoints {
		ce := &compute.NetworkEndpoint{Instance: ep.Instance, IpAddress: ep.IPAddress, Ipv6Address: ep.Ipv6Address, Port: int64(ep.Port)}
		k := keyOf(ce, defaultPort)
		if inGCE, ok := dualStackInGCE[k]; ok && ep.Pod == "" {
			k, ce = inGCE, e.endpoints[inGCE]
		}
		desired[k] = ce
	}
	for k, ep := range e.endpoints {
		if _, ok := desired[k]; !ok {
			toDetach = append(toDetach, keyedEndpoint{key: k, endpoint: ep})
		}
	}
	for k, ep := range desired {
		if _, ok := e.endpoints[k]; !ok {
			toAttach = append(toAttach, keyedEndpoint{key: k, endpoint: ep})
		}
	}
	byKey := func(a, b keyedEndpoint) int {
		return strings.Compare(fmt.Sprint(a.key), fmt.Sprint(b.key))
	}
	slices.SortFunc(toDetach, byKey)
	slices.SortFunc(toAttach, byKey)
	return toDetach, toAttach
}

func endpointsOf(batch []keyedEndpoint) []*compute.NetworkEndpoint {
	out := make([]*compute.NetworkEndpoint, len(batch))
	for i, b := range batch {
		out[i] = b.endpoint
	}
	return out
}
