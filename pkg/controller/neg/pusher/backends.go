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
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	compute "google.golang.org/api/compute/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	gceclient "github.com/multiproject/multiproject-controller-manager/pkg/gce/client"
	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

// Backend services: the pusher adds each NEG of a Translation to the backend services its spec names
// (networkEndpointGroup.backendServices) and removes it from those its status records
// (status.resources[].backendServices) that the spec no longer names, and from all of them before it deletes the NEG.
// Each backend service is changed by a read, a change of only the backends whose group is one of this Translation's
// NEGs (proven ours by their marker before), and a patch of the backends list with the fingerprint read, retried on
// GCE's 412 when someone else wrote in between: every other backend, setting and field stays as it was.

// Event reasons of backend service changes.
const (
	ReasonBackendServiceJoined = "NEGBackendServiceJoined"
	ReasonBackendServiceLeft   = "NEGBackendServiceLeft"
	ReasonBackendServiceFailed = "NEGBackendServiceFailed"
)

// bsRef identifies a backend service: its project, region ("" for global) and name.
type bsRef struct{ project, region, name string }

func (r bsRef) path() string {
	if r.region == "" {
		return "projects/" + r.project + "/global/backendServices/" + r.name
	}
	return "projects/" + r.project + "/regions/" + r.region + "/backendServices/" + r.name
}

func (r bsRef) String() string {
	if r.region == "" {
		return r.name + " (global)"
	}
	return r.name + " (region " + r.region + ")"
}

func parseBSRef(url string) (bsRef, bool) {
	project, region, name, ok := negapi.ParseBackendServiceURL(url)
	return bsRef{project, region, name}, ok
}

// negPath is the path form of a NEG's URL, "projects/P/zones/Z/networkEndpointGroups/N", which compares equal
// whatever host a selfLink carries.
func negPath(url string) string {
	if i := strings.Index(url, "projects/"); i >= 0 {
		return url[i:]
	}
	return url
}

func negPathOf(project, zone, name string) string {
	return "projects/" + project + "/zones/" + zone + "/networkEndpointGroups/" + name
}

// bsChange is what one sync changes in one backend service: NEGs (by path) to add or keep with these settings, and
// NEGs to remove.
type bsChange struct {
	join  map[string]mpv1alpha1.BackendServiceMembership
	leave map[string]bool
	// urls are the selfLinks of the NEGs to join, as GCE gave them, for the backends added.
	urls map[string]string
}

// joinBackendServices brings the memberships of the spec's NEGs in line with the spec, after ensure: outcomes[i]
// is spec.resources[i]'s. A NEG that ensure could not make keeps its recorded memberships untouched.
func (s *negSync) joinBackendServices(ctx context.Context, outcomes []outcome) {
	changes := map[bsRef]*bsChange{}
	change := func(ref bsRef) *bsChange {
		if c, ok := changes[ref]; ok {
			return c
		}
		c := &bsChange{join: map[string]mpv1alpha1.BackendServiceMembership{}, leave: map[string]bool{}, urls: map[string]string{}}
		changes[ref] = c
		return c
	}
	for i := range s.tr.Spec.Resources {
		res, o := &s.tr.Spec.Resources[i], &outcomes[i]
		if was := recorded(s.tr, res, s.project); was != nil {
			o.where.BackendServices = slices.Clone(was.BackendServices)
		}
		if res.NetworkEndpointGroup == nil || o.state != mpv1alpha1.BackendResourceStateReady {
			continue
		}
		neg := negPathOf(s.project, res.Zone, res.Name)
		wanted := map[bsRef]bool{}
		for _, m := range res.NetworkEndpointGroup.BackendServices {
			ref := bsRef{s.project, m.Region, m.Name}
			wanted[ref] = true
			change(ref).join[neg] = m
			if o.where.SelfLink != "" {
				change(ref).urls[neg] = o.where.SelfLink
			}
		}
		for _, url := range o.where.BackendServices {
			if ref, ok := parseBSRef(url); ok && !wanted[ref] {
				change(ref).leave[neg] = true
			}
		}
	}
	refs := make([]bsRef, 0, len(changes))
	for ref := range changes {
		refs = append(refs, ref)
	}
	slices.SortFunc(refs, func(a, b bsRef) int { return cmp.Compare(a.path(), b.path()) })
	for _, ref := range refs {
		c := changes[ref]
		selfLink, err := s.p.changeBackendService(ctx, s.gce, ref, c, s.tr)
		for i := range s.tr.Spec.Resources {
			res, o := &s.tr.Spec.Resources[i], &outcomes[i]
			neg := negPathOf(s.project, res.Zone, res.Name)
			_, joining := c.join[neg]
			if !joining && !c.leave[neg] {
				continue
			}
			if err != nil {
				s.backendServiceFailed(o, ref, err)
				continue
			}
			o.where.BackendServices = slices.DeleteFunc(o.where.BackendServices, func(url string) bool {
				r, ok := parseBSRef(url)
				return ok && r == ref
			})
			if joining {
				o.where.BackendServices = append(o.where.BackendServices, selfLink)
				slices.Sort(o.where.BackendServices)
			}
		}
	}
}

// leaveBackendServices removes the NEG from every backend service its status entry records, before it is deleted.
// It returns the entry's memberships that are left: none when all went well.
func (s *negSync) leaveBackendServices(ctx context.Context, gce *gceclient.Client, where mpv1alpha1.BackendResourceStatus) ([]string, error) {
	project := cmp.Or(where.Project, s.project)
	neg := negPathOf(project, where.Zone, where.Name)
	left := slices.Clone(where.BackendServices)
	for _, url := range where.BackendServices {
		ref, ok := parseBSRef(url)
		if !ok {
			left = slices.DeleteFunc(left, func(u string) bool { return u == url })
			continue
		}
		c := &bsChange{leave: map[string]bool{neg: true}}
		if _, err := s.p.changeBackendService(ctx, gce, ref, c, s.tr); err != nil {
			return left, fmt.Errorf("removing NEG %s in zone %s from backend service %s before deleting it: %w", where.Name, where.Zone, ref, err)
		}
		left = slices.DeleteFunc(left, func(u string) bool { return u == url })
	}
	return left, nil
}

// withMemberships adds to a spec resource's status entry, about to be deleted, the backend services its recorded
// entry lists and those its spec names (in case the status write that recorded a join was lost): removing a NEG
// from a backend service it is not in changes nothing.
func (s *negSync) withMemberships(where mpv1alpha1.BackendResourceStatus, res *mpv1alpha1.BackendResource) mpv1alpha1.BackendResourceStatus {
	if was := recorded(s.tr, res, s.project); was != nil {
		where.BackendServices = append(where.BackendServices, was.BackendServices...)
	}
	if res.NetworkEndpointGroup != nil {
		for _, m := range res.NetworkEndpointGroup.BackendServices {
			where.BackendServices = append(where.BackendServices, bsRef{s.project, m.Region, m.Name}.path())
		}
	}
	seen := map[bsRef]bool{}
	where.BackendServices = slices.DeleteFunc(where.BackendServices, func(url string) bool {
		ref, ok := parseBSRef(url)
		if !ok || seen[ref] {
			return true
		}
		seen[ref] = true
		return false
	})
	return where
}

// changeBackendService applies c to the backend service: read, change only the backends of c's NEGs, patch with
// the fingerprint read, again from the read if GCE says the fingerprint is stale. It returns the service's selfLink.
// A backend service that does not exist has nothing to leave; to join it is an error. A change made is an Event on
// about (the Translation; the ProviderConfig for the sweep's).
func (p *Pusher) changeBackendService(ctx context.Context, gce *gceclient.Client, ref bsRef, c *bsChange, about runtime.Object) (string, error) {
	selfLink := ref.path()
	wrote := false
	err := retry.OnError(retry.DefaultRetry, gceclient.IsStaleFingerprint, func() error {
		bs, err := gce.GetBackendService(ctx, ref.region, ref.name)
		if gceclient.IsNotFound(err) && len(c.join) == 0 {
			return nil
		}
		if err != nil {
			return err
		}
		selfLink = bs.SelfLink
		backends, changed := changedBackends(bs.Backends, c)
		if !changed {
			return nil
		}
		if err := gce.SetBackends(ctx, ref.region, ref.name, bs.Fingerprint, backends); err != nil {
			return err
		}
		wrote = true
		return nil
	})
	if err != nil {
		return "", err
	}
	if wrote {
		klog.FromContext(ctx).V(2).Info("Changed backend service", "backendService", ref.path(), "joining", len(c.join), "leaving", len(c.leave))
		if about == nil {
			return selfLink, nil
		}
		if len(c.join) > 0 {
			p.recorder.Eventf(about, corev1.EventTypeNormal, ReasonBackendServiceJoined, "NEGs %s are backends of backend service %s", describeNEGs(c.join), ref)
		}
		if len(c.leave) > 0 {
			p.recorder.Eventf(about, corev1.EventTypeNormal, ReasonBackendServiceLeft, "NEGs %s are no longer backends of backend service %s", describeNEGs(c.leave), ref)
		}
	}
	return selfLink, nil
}

// changedBackends is the backends list with c applied: a backend of a NEG to leave dropped, one of a NEG to join
// given the settings asked (and added if missing), every other backend as it was.
func changedBackends(current []*compute.Backend, c *bsChange) ([]*compute.Backend, bool) {
	out := make([]*compute.Backend, 0, len(current)+len(c.join))
	changed := false
	present := map[string]bool{}
	for _, b := range current {
		neg := negPath(b.Group)
		if c.leave[neg] {
			changed = true
			continue
		}
		if m, ok := c.join[neg]; ok {
			present[neg] = true
			if !sameSettings(b, m) {
				b = withSettings(b, m)
				changed = true
			}
		}
		out = append(out, b)
	}
	joins := make([]string, 0, len(c.join))
	for neg := range c.join {
		if !present[neg] {
			joins = append(joins, neg)
		}
	}
	slices.Sort(joins)
	for _, neg := range joins {
		group := c.urls[neg]
		if group == "" {
			group = neg // GCE takes a partial URL too
		}
		out = append(out, withSettings(&compute.Backend{Group: group}, c.join[neg]))
		changed = true
	}
	return out, changed
}

func capacityScaler(m mpv1alpha1.BackendServiceMembership) float64 {
	if m.CapacityScaler == "" {
		return 1
	}
	v, err := strconv.ParseFloat(m.CapacityScaler, 64)
	if err != nil {
		return 1
	}
	return v
}

func sameSettings(b *compute.Backend, m mpv1alpha1.BackendServiceMembership) bool {
	return b.BalancingMode == string(m.BalancingMode) && b.MaxRatePerEndpoint == float64(m.MaxRatePerEndpoint) &&
		b.MaxConnectionsPerEndpoint == int64(m.MaxConnectionsPerEndpoint) && b.CapacityScaler == capacityScaler(m)
}

// withSettings returns a copy of the backend with the membership's balancing settings; its other fields (a
// description, a failover flag) stay.
func withSettings(b *compute.Backend, m mpv1alpha1.BackendServiceMembership) *compute.Backend {
	out := *b
	out.BalancingMode = string(m.BalancingMode)
	out.MaxRatePerEndpoint, out.MaxConnectionsPerEndpoint = 0, 0
	out.MaxRate, out.MaxConnections, out.MaxUtilization = 0, 0, 0
	switch m.BalancingMode {
	case mpv1alpha1.BalancingModeRate:
		out.MaxRatePerEndpoint = float64(m.MaxRatePerEndpoint)
	case mpv1alpha1.BalancingModeConnection:
		out.MaxConnectionsPerEndpoint = int64(m.MaxConnectionsPerEndpoint)
	}
	out.CapacityScaler = capacityScaler(m)
	return &out
}

// backendServiceFailed marks a NEG's outcome failed by a backend service change, with a Warning Event.
func (s *negSync) backendServiceFailed(o *outcome, ref bsRef, err error) {
	err = fmt.Errorf("backend service %s: %w", ref, err)
	if o.err == nil {
		o.err, o.state = err, mpv1alpha1.BackendResourceStateError
		o.reason, o.permanent = backendServiceErrorReason(err)
	}
	s.p.recorder.Eventf(s.tr, corev1.EventTypeWarning, ReasonBackendServiceFailed, "NEG %s in zone %s: %v", o.where.Name, o.where.Zone, err)
}

// reportMemberships records how many memberships the Translation's status entries hold, and exports the tenant's
// sum.
func (p *Pusher) reportMemberships(key string, resources []mpv1alpha1.BackendResourceStatus) {
	n := 0
	for _, r := range resources {
		n += len(r.BackendServices)
	}
	if n == 0 {
		p.memberships.Delete(key)
	} else {
		p.memberships.Store(key, n)
	}
	total := 0
	p.memberships.Range(func(_, v any) bool {
		total += v.(int)
		return true
	})
	metrics.NEGBackendServiceMemberships.Set(float64(total), p.tenant)
}

// describeNEGs lists NEG paths as "zone/name", sorted.
func describeNEGs[V any](negs map[string]V) string {
	out := make([]string, 0, len(negs))
	for path := range negs {
		parts := strings.Split(path, "/")
		out = append(out, parts[len(parts)-3]+"/"+parts[len(parts)-1])
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// backendServiceErrorReason classifies a failed backend service change: a rate limit, a server error or a
// fingerprint still stale after the retries is retried with backoff; a refusal (the backend service missing, a
// backend GCE will not take, a permission) waits for a person.
func backendServiceErrorReason(err error) (reason string, permanent bool) {
	if gceclient.IsStaleFingerprint(err) {
		return ReasonGCEError, false
	}
	switch gceclient.Classify(err) {
	case gceclient.ClassRetryable, gceclient.ClassOther:
		return ReasonGCEError, false
	}
	return ReasonBackendServiceFailed, true
}

// leaveAllowedBackendServices removes an unclaimed NEG of ours, about to be swept, from every backend service the
// tenant allows: the Translation that recorded its memberships is gone (force-deleted, or released while GCE
// refused the leave), and those are the only backend services the manager ever made it join. A backend service it
// is not in is read and left unwritten.
func (p *Pusher) leaveAllowedBackendServices(ctx context.Context, gce *gceclient.Client, neg negKey) error {
	c := &bsChange{leave: map[string]bool{negPathOf(neg.project, neg.zone, neg.name): true}}
	var about runtime.Object
	if p.providerConfig != nil {
		about = p.providerConfig
	}
	for _, allowed := range p.gcp.BackendServices {
		ref := bsRef{project: neg.project, region: allowed.Region, name: allowed.Name}
		if _, err := p.changeBackendService(ctx, gce, ref, c, about); err != nil {
			return fmt.Errorf("removing unclaimed NEG %s in zone %s from backend service %s before deleting it: %w", neg.name, neg.zone, ref, err)
		}
	}
	return nil
}
