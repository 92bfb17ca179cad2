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
	"maps"
	"slices"
	"strings"
	"sync"

	"google.golang.org/api/googleapi"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	gceclient "github.com/multiproject/multiproject-controller-manager/pkg/gce/client"
	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
)

// A NEG awaits deletion when its Translation is gone but GCE would not delete it because a backend service uses it
// (resourceInUseByAnotherResource). The deletion of a Translation does not wait for the load balancer: it detaches
// the NEG's endpoints, releases its finalizer (so the Service, its namespace, go at once) and leaves the NEG to the
// tenant's garbage sweep, which finds it by its ownership marker, as no Translation claims it, and deletes it once
// GCE lets it, retrying every --neg-gc-period. Only a NEG the sweep will find is handed over this way: one in the
// tenant's current project whose marker is this cluster's and tenant's (sweepable).

// ReasonNEGAwaitingDeletion is the Warning Event on the Service (or on its Namespace, when that is being deleted
// and accepts no new Event) when its NEGs are left to the sweep.
const ReasonNEGAwaitingDeletion = "NEGAwaitingDeletion"

// ReasonNEGsAwaitingDeletion is the Warning Event on the ProviderConfig when the set of NEGs GCE refuses to the
// sweep changes.
const ReasonNEGsAwaitingDeletion = "NEGsAwaitingDeletion"

// errNotSweepable says a NEG in use is not one the sweep would delete: it keeps its Translation's finalizer.
var errNotSweepable = errors.New("the NEG's description is not an ownership marker the garbage sweep recognises")

// sweepable says whether the garbage sweep would find and delete the NEG once it is unclaimed: sweeps run, the NEG
// is in the project they list, and its description is this cluster's and tenant's marker (a legacy marker, without
// the cluster's UID, is never swept).
func (p *Pusher) sweepable(neg negKey, description string) bool {
	return p.gcPeriod > 0 && neg.project == p.gcp.ProjectID && p.ours(description)
}

// handOver empties a NEG of a Translation being deleted that GCE refused to delete because a backend service uses
// it (o, with that error), and marks the outcome as awaiting the sweep: the Translation need not wait for it. A NEG
// the sweep would not find keeps today's answer (the finalizer stays, retried every permanentRetry); a failed
// detach is retried with backoff; a NEG gone meanwhile is done.
func (s *negSync) handOver(ctx context.Context, calls negCalls, d negDeletion, o outcome) outcome {
	gone, err := calls.detachAll(ctx, func(description string) bool {
		return slices.Contains(d.markers, description) && s.p.sweepable(calls.neg, description)
	})
	switch {
	case errors.Is(err, errNotSweepable):
		s.p.recorder.Eventf(s.tr, corev1.EventTypeWarning, ReasonInUse, "Cannot delete NEG %s in zone %s yet: %v", calls.neg.name, calls.neg.zone, o.err)
		return o
	case err != nil:
		o.err, o.reason, o.permanent = fmt.Errorf("detaching the endpoints of NEG %s, which GCE will not delete yet: %w", calls.neg.name, err), ReasonGCEError, false
		return o
	case gone:
		return outcome{where: d.where, state: mpv1alpha1.BackendResourceStateDeleting}
	}
	o.awaitingSweep = true
	return o
}

// reportHandOver says, once the Translation is released, which of its NEGs the sweep is left to delete: a Warning
// Event where the user looks, the NEG counted as awaiting deletion.
func (s *negSync) reportHandOver(ctx context.Context, handed []outcome) {
	target := s.p.handOverEventTarget(s.tr)
	for _, o := range handed {
		neg := negKey{project: s.project, zone: o.where.Zone, name: o.where.Name}
		s.p.awaiting.handedOver(neg, whyHeld(o.err))
		s.p.recorder.Eventf(target, corev1.EventTypeWarning, ReasonNEGAwaitingDeletion,
			"NEG %s in zone %s of project %s is still used by a backend service (%v): its endpoints are detached and Translation %s is released; "+
				"the tenant's garbage sweep deletes the NEG once GCE lets it, trying every %s",
			neg.name, neg.zone, neg.project, o.err, s.key, s.p.gcPeriod)
		klog.FromContext(ctx).Info("NEG in use left to the garbage sweep", "neg", neg.name, "zone", neg.zone, "err", o.err)
	}
	s.p.reportAwaitingCount()
}

// handOverEventTarget is where the Event about a released Translation's NEGs goes: its Service, or the Service's
// Namespace when the Namespace is being deleted (or gone): the API server creates nothing, Events included, in a
// namespace being deleted.
func (p *Pusher) handOverEventTarget(tr *mpv1alpha1.Translation) runtime.Object {
	if p.namespaces != nil {
		obj, exists, err := p.namespaces.GetByKey(tr.Namespace)
		ns, _ := obj.(*corev1.Namespace)
		if err == nil && (!exists || (ns != nil && ns.DeletionTimestamp != nil)) {
			ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "Namespace", Name: tr.Namespace}
			if ns != nil {
				ref.UID = ns.UID
			}
			return ref
		}
	}
	for _, owner := range tr.OwnerReferences {
		if owner.APIVersion == "v1" && owner.Kind == "Service" {
			return &corev1.ObjectReference{APIVersion: "v1", Kind: "Service", Namespace: tr.Namespace, Name: owner.Name, UID: owner.UID}
		}
	}
	return tr
}

// whyHeld says briefly why GCE would not delete a NEG: for one in use, which backend services use it (GCE's message
// also names the NEG, which the reader knows), otherwise GCE's error.
func whyHeld(err error) string {
	if gceclient.Classify(err) == gceclient.ClassInUse {
		var gerr *googleapi.Error
		if errors.As(err, &gerr) {
			if _, users, ok := strings.Cut(gerr.Message, "being used by "); ok {
				return "in use by " + strings.ReplaceAll(strings.ReplaceAll(users, "'", ""), computeURLPrefix, "")
			}
		}
	}
	return truncate(err.Error(), 300)
}

// computeURLPrefix starts the resource URLs GCE's messages may carry.
const computeURLPrefix = "https://www.googleapis.com/compute/v1/"

// awaitingSet is what the pusher knows of the tenant's NEGs that wait for the sweep, and, for a cleanup, of every
// NEG with the tenant's marker in its project (Pending). Hand-overs, deletions and sweeps change it; a sequence
// number orders them, so a sweep whose list began before a change does not undo it.
type awaitingSet struct {
	mu sync.Mutex
	// seq counts hand-overs and deletions.
	seq uint64
	// held are the NEGs that carry the tenant's marker, that no Translation claims and that GCE has not let us
	// delete yet: handed over by a Translation's deletion, or refused to the sweep. Each records why, and the seq
	// of when it was added.
	held map[negKey]heldNEG
	// reported is the held set last told in an Event on the ProviderConfig.
	reported string

	// track: a cleanup's set also keeps marked, every NEG of the project carrying the tenant's marker, so that the
	// tenant's finalizer waits for them all: listed is set once a sweep has listed the project, marked holds what
	// that list found less what was deleted since, and deletedAt the seq of each deletion, so a list that began
	// before one does not bring the NEG back.
	track     bool
	listed    bool
	marked    map[negKey]bool
	deletedAt map[negKey]uint64
}

type heldNEG struct {
	why string
	seq uint64
}

// handedOver records a NEG a Translation's deletion left to the sweep.
func (a *awaitingSet) handedOver(neg negKey, why string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seq++
	if a.held == nil {
		a.held = map[negKey]heldNEG{}
	}
	a.held[neg] = heldNEG{why: why, seq: a.seq}
}

// deleted records a NEG that is gone from GCE.
func (a *awaitingSet) deleted(neg negKey) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seq++
	delete(a.held, neg)
	if a.track {
		delete(a.marked, neg)
		if a.deletedAt == nil {
			a.deletedAt = map[negKey]uint64{}
		}
		a.deletedAt[neg] = a.seq
	}
}

// wasHeld says whether a NEG was known to await deletion (so its deletion by the sweep is no leak repaired).
func (a *awaitingSet) wasHeld(neg negKey) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.held[neg]
	return ok
}

// listStart marks the start of a sweep's list, for listed and swept.
func (a *awaitingSet) listStart() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.seq
}

// listedMarked records, for a cleanup, the NEGs with the tenant's marker that a list begun at start found.
func (a *awaitingSet) listedMarked(start uint64, marked []negKey) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.track {
		return
	}
	a.listed = true
	a.marked = map[negKey]bool{}
	for _, neg := range marked {
		if a.deletedAt[neg] <= start {
			a.marked[neg] = true
		}
	}
	maps.DeleteFunc(a.deletedAt, func(_ negKey, seq uint64) bool { return seq <= start })
}

// swept replaces what a sweep whose list began at start knows with what it found held (refused by GCE); NEGs handed
// over since the list began stay. It returns the held set as text, and whether that is news for an Event.
func (a *awaitingSet) swept(start uint64, refused map[negKey]string) (text string, changed bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	next := map[negKey]heldNEG{}
	for neg, h := range a.held {
		if h.seq > start {
			next[neg] = h
		}
	}
	for neg, why := range refused {
		next[neg] = heldNEG{why: why, seq: a.seq}
	}
	a.held = next
	text = describeHeld(next, len(next))
	changed = text != a.reported
	a.reported = text
	return text, changed
}

// count is how many NEGs await deletion.
func (a *awaitingSet) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.held)
}

// left says, for a cleanup's Pending, which NEGs of project keep the tenant: "" when none; with translationsLeft,
// only those awaiting deletion (the others are the Translations' own, which Pending names).
func (a *awaitingSet) left(project string, translationsLeft bool) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.listed {
		return fmt.Sprintf("project %s not yet swept for NEGs awaiting deletion", project)
	}
	left := make(map[negKey]heldNEG, len(a.held))
	maps.Copy(left, a.held)
	if !translationsLeft {
		for neg := range a.marked {
			if _, ok := left[neg]; !ok {
				left[neg] = heldNEG{why: "carries the tenant's ownership marker"}
			}
		}
	}
	if len(left) == 0 {
		return ""
	}
	return fmt.Sprintf("%d awaiting deletion in project %s: %s", len(left), project, describeHeld(left, maxListed))
}

// maxListed is how many NEGs a message names.
const maxListed = 5

// describeHeld names up to n NEGs, sorted, with why each is still there.
func describeHeld(held map[negKey]heldNEG, n int) string {
	keys := slices.SortedFunc(maps.Keys(held), func(a, b negKey) int {
		return strings.Compare(a.zone+"/"+a.name, b.zone+"/"+b.name)
	})
	var parts []string
	for _, neg := range keys[:min(n, len(keys))] {
		parts = append(parts, fmt.Sprintf("NEG %s/%s (%s)", neg.zone, neg.name, held[neg].why))
	}
	s := strings.Join(parts, ", ")
	if len(keys) > n {
		s += fmt.Sprintf(" and %d more", len(keys)-n)
	}
	return s
}

// reportAwaitingCount exports how many NEGs await deletion.
func (p *Pusher) reportAwaitingCount() {
	metrics.NEGsAwaitingDeletion.Set(float64(p.awaiting.count()), p.tenant)
}

// reportSwept tells what a sweep left held: the count, the tenant's condition with reason (NEGInUse: a person must
// detach the NEGs from their backend services), and, when the set changed, a Warning Event on the ProviderConfig.
func (p *Pusher) reportSwept(ctx context.Context, start uint64, refused map[negKey]string, reason string) {
	text, changed := p.awaiting.swept(start, refused)
	p.reportAwaitingCount()
	if len(refused) == 0 {
		p.setProblem(sweepKey, nil)
		return
	}
	msg := fmt.Sprintf("%d NEGs of project %s carry this tenant's ownership marker, no Translation claims them, and GCE will not delete them yet: %s; "+
		"the garbage sweep tries again every %s", len(refused), p.gcp.ProjectID, text, p.gcPeriod)
	p.setProblem(sweepKey, &problem{reason: reason, message: msg})
	if changed && p.providerConfig != nil {
		p.recorder.Event(p.providerConfig, corev1.EventTypeWarning, ReasonNEGsAwaitingDeletion, msg)
	}
	klog.FromContext(ctx).Info("NEGs await deletion", "project", p.gcp.ProjectID, "count", len(refused))
}

// cleanups maps the Context of each running cleanup to its pusher's awaitingSet, for Pending, which is given that
// Context: a tenant's finalizer must wait for the NEGs its sweep still has to delete, which no Translation lists.
var cleanups sync.Map // *tenant.Context → *awaitingSet
