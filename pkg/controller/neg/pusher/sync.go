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
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	gceclient "github.com/multiproject/multiproject-controller-manager/pkg/gce/client"
	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
)

// negSync is one sync of one Translation. It holds what every step uses, so that the steps below read top to bottom
// and no step's parameters repeat it.
type negSync struct {
	p *Pusher
	// key is the Translation's key (namespace/name): its queue key, the owner of its cache entries and of its
	// problem.
	key string
	// tr is the sync's copy of the Translation; a status or finalizer write replaces it with what the API server
	// returned.
	tr *mpv1alpha1.Translation
	// project is the tenant's current project, and gce its client (nil until connect).
	project string
	gce     *gceclient.Client
	// deleting: the Translation is being deleted, so a NEG GCE will not delete because a backend service uses it is
	// emptied and left to the garbage sweep rather than held on to (awaiting.go).
	deleting bool
}

// sync pushes one Translation: its NEGs made as declared, or, once it is being deleted, deleted.
func (p *Pusher) sync(ctx context.Context, key string) (worker.Result, error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return worker.Result{}, nil
	}
	tr, err := p.lister.Translations(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		// Gone: its NEGs were deleted before its finalizer was removed, or it was never ours to clean up.
		p.cache.forgetTranslation(key)
		p.programmed.Delete(key)
		p.reports.forget(key)
		p.pushed.Reported(key)
		p.setProblem(key, nil)
		p.reportMemberships(key, nil)
		return worker.Result{}, nil
	}
	if err != nil {
		return worker.Result{}, err
	}
	s := &negSync{p: p, key: key, tr: tr.DeepCopy(), project: p.gcp.ProjectID}
	if tr.DeletionTimestamp != nil {
		return s.deletion(ctx)
	}
	return s.live(ctx)
}

// live makes GCE match a live Translation: every spec resource created in the tenant's project with exactly its
// endpoints, then the resources no longer wanted (removed from the spec, or in a project the tenant left) deleted,
// so that traffic moves to the new NEGs before the old ones go.
func (s *negSync) live(ctx context.Context) (worker.Result, error) {
	if s.p.cleanupOnly {
		// The cleanup deletes live Translations; their deletion brings them back here.
		return worker.Result{}, nil
	}
	if !hasFinalizer(s.tr) {
		// Declared before made: without the finalizer a deletion could outrun the NEGs' cleanup.
		if err := s.updateFinalizers(ctx, append(s.tr.Finalizers, mpv1alpha1.TranslationDeleterFinalizer)); err != nil {
			return worker.Result{}, fmt.Errorf("adding the finalizer: %w", err)
		}
	}
	if err := s.connect(ctx); err != nil {
		return worker.Result{}, err
	}
	// Declare first: the status lists every resource, with its project, before it is created, so that one later
	// removed from the spec, or left in an old project, can still be found and deleted, also after a restart.
	if declared, changed := declare(s.tr, s.project); changed {
		if err := s.writeStatus(ctx, declared); err != nil {
			return worker.Result{}, err
		}
	}
	outcomes := make([]outcome, 0, len(s.tr.Spec.Resources))
	for i := range s.tr.Spec.Resources {
		// NEGs do not depend on each other, so one failing does not hold back the others.
		outcomes = append(outcomes, s.ensure(ctx, &s.tr.Spec.Resources[i]))
	}
	// Traffic moves before anything goes: the NEGs join their backend services, then those removed are deleted,
	// each leaving its backend services first (backends.go).
	s.joinBackendServices(ctx, outcomes)
	outcomes = append(outcomes, s.deleteRemoved(ctx)...)
	s.observeProgramming(outcomes)
	return s.finish(ctx, outcomes)
}

// deletion deletes the NEGs of a Translation being deleted, in reverse order, each in the project it was made in,
// and then removes the finalizer. A NEG GCE will not delete because a backend service uses it does not hold the
// finalizer once it is emptied and left to the garbage sweep (handOver); any other failure does.
func (s *negSync) deletion(ctx context.Context) (worker.Result, error) {
	if !hasFinalizer(s.tr) {
		return worker.Result{}, nil
	}
	if err := s.connect(ctx); err != nil {
		return worker.Result{}, err
	}
	s.deleting = true
	failures := s.deleteRemoved(ctx)
	for i := len(s.tr.Spec.Resources) - 1; i >= 0; i-- {
		res := &s.tr.Spec.Resources[i]
		if res.Kind != mpv1alpha1.BackendResourceKindNetworkEndpointGroup || res.Zone == "" {
			continue
		}
		o := s.deleteNEG(ctx, negDeletion{where: s.withMemberships(declaredStatus(res, s.project), res), gce: s.gce, markers: []string{res.Description}, inSpec: true})
		if o.err != nil {
			failures = append(failures, o)
		}
	}
	var handed []outcome
	holding := false
	for _, o := range failures {
		if o.awaitingSweep {
			handed = append(handed, o)
		} else {
			holding = true
		}
	}
	if holding {
		// The status says what is still there; NEGs already deleted are no longer listed.
		return s.finish(ctx, failures)
	}
	isDeleter := func(f string) bool { return f == mpv1alpha1.TranslationDeleterFinalizer }
	if err := s.updateFinalizers(ctx, slices.DeleteFunc(s.tr.Finalizers, isDeleter)); err != nil {
		if apierrors.IsNotFound(err) {
			return worker.Result{}, nil
		}
		return worker.Result{}, fmt.Errorf("removing the finalizer: %w", err)
	}
	klog.FromContext(ctx).V(2).Info("Deleted the Translation's NEGs and removed its finalizer", "leftToTheSweep", len(handed))
	if len(handed) > 0 {
		s.reportHandOver(ctx, handed)
	}
	s.p.cache.forgetTranslation(s.key)
	s.p.setProblem(s.key, nil)
	s.p.reportMemberships(s.key, nil)
	return worker.Result{}, nil
}

// updateFinalizers sets the Translation's finalizers (the pusher's only write outside the status), bound to the
// cached version. It is a patch of the finalizers alone, not an update of the whole object: an update sends the
// Translation as this build's types know it, which would drop the fields a newer build added to its spec.
func (s *negSync) updateFinalizers(ctx context.Context, finalizers []string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"finalizers": finalizers, "resourceVersion": s.tr.ResourceVersion}})
	if err != nil {
		return err
	}
	updated, err := s.p.client.MultiprojectV1alpha1().Translations(s.tr.Namespace).Patch(ctx, s.tr.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return err
	}
	s.tr = updated
	return nil
}

// connect gets the client of the tenant's current project. Without one nothing can be done, and the whole
// Translation says why.
func (s *negSync) connect(ctx context.Context) error {
	gce, err := s.p.gceClient(ctx, s.project)
	if err != nil {
		return s.failWholly(ctx, ReasonCredentialsUnavailable, err)
	}
	s.gce = gce
	return nil
}

// ensure makes one NEG exist with exactly the resource's endpoints. It holds the NEG's cache entry throughout. A
// NEG recorded with another network or subnetwork is deleted and created again: GCE cannot change them in place.
func (s *negSync) ensure(ctx context.Context, res *mpv1alpha1.BackendResource) outcome {
	if res.Kind != mpv1alpha1.BackendResourceKindNetworkEndpointGroup || res.NetworkEndpointGroup == nil || res.Zone == "" {
		o := outcome{where: declaredStatus(res, s.project), state: mpv1alpha1.BackendResourceStateError, reason: ReasonUnsupported, permanent: true}
		o.err = fmt.Errorf("resource kind %q is not a NetworkEndpointGroup with zone and parameters", res.Kind)
		return o
	}
	if gone := s.deleteIfMoved(ctx, res); gone.err != nil {
		return gone
	}
	calls := s.lock(s.gce, negKey{project: s.project, zone: res.Zone, name: res.Name})
	defer calls.unlock()
	// A second attempt follows an error that may come from a stale cache (the NEG vanished, an endpoint attached
	// behind our back): the entry is re-read and the step tried once more before the error counts.
	for attempt := 0; ; attempt++ {
		o, retry := s.ensureOnce(ctx, res, calls)
		if !retry || attempt == 1 {
			if o.reason == ReasonInvalid || o.reason == ReasonInUse {
				s.p.recorder.Eventf(s.tr, corev1.EventTypeWarning, o.reason, "GCE refused a change to NEG %s in zone %s: %v", res.Name, res.Zone, o.err)
			}
			return o
		}
	}
}

// deleteIfMoved deletes the NEG of a spec resource whose status entry records another network or subnetwork, so
// that ensure creates it anew. The status keeps the old network until the NEG is made anew, so a crash in between
// deletes it again.
func (s *negSync) deleteIfMoved(ctx context.Context, res *mpv1alpha1.BackendResource) outcome {
	was := recorded(s.tr, res, s.project)
	if was == nil || was.Network == "" ||
		(was.Network == res.NetworkEndpointGroup.Network && was.Subnetwork == res.NetworkEndpointGroup.Subnetwork) {
		return outcome{}
	}
	gone := s.deleteNEG(ctx, negDeletion{where: *was, gce: s.gce, markers: []string{res.Description}, inSpec: true})
	if gone.err == nil {
		s.p.recorder.Eventf(s.tr, corev1.EventTypeNormal, ReasonNEGRecreated, "NEG %s in zone %s moves from network %s/%s to %s/%s: deleted, to be created again",
			res.Name, res.Zone, was.Network, was.Subnetwork, res.NetworkEndpointGroup.Network, res.NetworkEndpointGroup.Subnetwork)
	}
	return gone
}

// ensureOnce is one attempt of ensure; it reports whether an error may come from a stale cache entry, so that one
// more attempt, on the entry read again, is worth it.
func (s *negSync) ensureOnce(ctx context.Context, res *mpv1alpha1.BackendResource, calls negCalls) (outcome, bool) {
	o := outcome{where: declaredStatus(res, s.project), state: mpv1alpha1.BackendResourceStatePending}
	if err := calls.awaitPending(ctx); err != nil {
		return calls.failed(o, err), false
	}
	if err := calls.observe(ctx, res.Description); err != nil {
		return calls.failed(o, err), false
	}
	if !calls.entry.exists {
		err := calls.insert(ctx, newNEG(res))
		switch gceclient.Classify(err) {
		case gceclient.ClassNone:
			s.p.recorder.Eventf(s.tr, corev1.EventTypeNormal, ReasonNEGCreated, "Created NEG %s in zone %s of project %s", res.Name, res.Zone, s.project)
		case gceclient.ClassAlreadyExists:
			// Someone took the name since we looked: look again, then decide whose it is.
			calls.entry.invalidate()
			return calls.failed(o, err), true
		default:
			return calls.failed(o, err), false
		}
	}
	if calls.entry.description != res.Description {
		calls.entry.owned = false
		o.state, o.reason, o.permanent = mpv1alpha1.BackendResourceStateError, ReasonNameCollision, true
		o.err = fmt.Errorf("a NEG named %s already exists in zone %s of project %s without this Translation's "+
			"ownership marker in its description; it is left untouched", res.Name, res.Zone, s.project)
		s.p.recorder.Event(s.tr, corev1.EventTypeWarning, ReasonNameCollision, o.err.Error())
		return o, false
	}
	calls.entry.owned = true
	o.where.ID, o.where.SelfLink = negID(calls.entry.id), calls.entry.selfLink
	if err := calls.setEndpoints(ctx, res.NetworkEndpointGroup); err != nil {
		return calls.failed(o, err), retryAfterEndpointError(err)
	}
	o.state, o.endpoints = mpv1alpha1.BackendResourceStateReady, len(calls.entry.endpoints)
	return o, false
}

// deleteRemoved deletes the NEGs the status lists but the spec no longer wants, last first, and returns the
// outcomes that failed.
func (s *negSync) deleteRemoved(ctx context.Context) []outcome {
	var failures []outcome
	removed := removedResources(s.tr, s.project)
	for i := len(removed) - 1; i >= 0; i-- {
		if o := s.deleteRecorded(ctx, &removed[i]); o.err != nil {
			failures = append(failures, o)
		}
	}
	return failures
}

// deleteRecorded deletes a NEG the status lists but the spec no longer wants, in the project it was made in.
//
// A NEG in a project the tenant moved away from that cannot be deleted (the project is gone, the credentials no
// longer reach it) keeps its entry, with a Warning Event, until it can, or until the operator abandons the tenant's
// cloud resources on the ProviderConfig: the entry is then dropped and the NEG left where it is.
func (s *negSync) deleteRecorded(ctx context.Context, r *mpv1alpha1.BackendResourceStatus) outcome {
	o := outcome{where: *r, state: mpv1alpha1.BackendResourceStateDeleting}
	gce, err := s.p.gceClient(ctx, r.Project)
	if err != nil {
		o.err, o.reason = err, ReasonCredentialsUnavailable
	} else {
		o = s.deleteNEG(ctx, negDeletion{where: *r, gce: gce, markers: markersOf(r, s.tr)})
	}
	if o.err == nil || r.Project == s.project {
		return o
	}
	if s.p.abandoned != nil && s.p.abandoned() {
		s.p.recorder.Eventf(s.tr, corev1.EventTypeWarning, ReasonNEGAbandoned,
			"Abandoned NEG %s in zone %s of the tenant's previous project %s at the operator's request (%s): %v",
			r.Name, r.Zone, r.Project, mpv1alpha1.AbandonCloudResourcesAnnotation, o.err)
		// No error: the entry is not carried into the new status.
		return outcome{where: *r, state: mpv1alpha1.BackendResourceStateDeleting}
	}
	s.p.recorder.Eventf(s.tr, corev1.EventTypeWarning, ReasonMigrationBlocked,
		"Cannot delete NEG %s in zone %s of the tenant's previous project %s: %v; it stays listed until it can be, "+
			"or until annotation %s=true on the ProviderConfig abandons it", r.Name, r.Zone, r.Project, o.err, mpv1alpha1.AbandonCloudResourcesAnnotation)
	return o
}

// negDeletion is one NEG a sync deletes.
type negDeletion struct {
	// where is the NEG as the status records it (for a spec resource: as it would be declared).
	where mpv1alpha1.BackendResourceStatus
	// gce is the client of the NEG's project.
	gce *gceclient.Client
	// markers are the descriptions that prove the NEG ours.
	markers []string
	// inSpec says the spec still lists the NEG (the Translation is being deleted, or the NEG moves to another
	// network) rather than having dropped it; it words the Event about a NEG that is not ours.
	inSpec bool
}

// deleteNEG deletes one NEG if it is ours: its description is one of the markers (or, from the cache, it was ours
// when last seen). A NEG that is not ours, or that another Translation claims, is left alone and counts as done.
func (s *negSync) deleteNEG(ctx context.Context, d negDeletion) outcome {
	o := outcome{where: d.where, state: mpv1alpha1.BackendResourceStateDeleting}
	neg := negKey{project: d.gce.Project(), zone: d.where.Zone, name: d.where.Name}
	calls := s.lock(d.gce, neg)
	defer calls.unlock()
	if other := s.claimedByAnother(neg); other != "" {
		// Handed over (a custom NEG name kept across a translation version bump, say): the NEG is not this
		// Translation's to delete any more.
		klog.FromContext(ctx).V(2).Info("Not deleting a NEG another Translation claims", "neg", neg.name, "zone", neg.zone, "claimedBy", other)
		return o
	}
	if err := calls.awaitPending(ctx); err != nil {
		o.err, o.reason = err, ReasonGCEError
		return o
	}
	exists, ours, err := calls.provenOurs(ctx, d.markers)
	if err != nil {
		o.err, o.reason = err, ReasonGCEError
		return o
	}
	if !exists {
		s.p.awaiting.deleted(neg)
		return o
	}
	if !ours {
		what := "removed from"
		if d.inSpec {
			what = "of"
		}
		s.p.recorder.Eventf(s.tr, corev1.EventTypeWarning, ReasonNotOwned,
			"Not deleting NEG %s in zone %s (%s the Translation): its description does not carry the Translation's ownership marker", neg.name, neg.zone, what)
		return o
	}
	// Out of its backend services first: GCE refuses to delete a NEG a backend service uses. A refusal to take it out
	// (a permission, say) does not hold a Translation being deleted: the delete is tried, and GCE's in-use answer
	// hands the NEG over to the sweep as for any backend service that uses it.
	left, err := s.leaveBackendServices(ctx, d.gce, d.where)
	o.where.BackendServices = left
	if err != nil {
		o.err = err
		o.reason, o.permanent = backendServiceErrorReason(err)
		if !s.deleting || !o.permanent {
			return o
		}
		s.p.recorder.Eventf(s.tr, corev1.EventTypeWarning, ReasonBackendServiceFailed, "NEG %s in zone %s: %v", neg.name, neg.zone, err)
		o.err, o.reason, o.permanent = nil, "", false
	}
	err = calls.delete(ctx)
	switch gceclient.Classify(err) {
	case gceclient.ClassNone:
		s.p.awaiting.deleted(neg)
		s.p.recorder.Eventf(s.tr, corev1.EventTypeNormal, ReasonNEGDeleted, "Deleted NEG %s in zone %s of project %s", neg.name, neg.zone, neg.project)
	case gceclient.ClassNotFound:
		s.p.awaiting.deleted(neg)
	case gceclient.ClassInUse:
		o.err, o.reason, o.permanent = err, ReasonInUse, true
		if s.deleting {
			return s.handOver(ctx, calls, d, o)
		}
		s.p.recorder.Eventf(s.tr, corev1.EventTypeWarning, ReasonInUse, "Cannot delete NEG %s in zone %s yet: %v", neg.name, neg.zone, err)
	case gceclient.ClassInvalid:
		o.err, o.reason, o.permanent = err, ReasonInvalid, true
	default:
		o.err, o.reason = err, ReasonGCEError
	}
	return o
}

// claimedByAnother returns the key of another live Translation of the tenant that declares the NEG (in its spec, in
// the tenant's current project, or as a live entry of its status), or "".
func (s *negSync) claimedByAnother(neg negKey) string {
	translations, err := s.p.lister.List(labels.Everything())
	if err != nil {
		return ""
	}
	for _, tr := range translations {
		key := tr.Namespace + "/" + tr.Name
		if key != s.key && tr.DeletionTimestamp == nil && slices.Contains(declaredNEGs(tr, s.project, false), neg) {
			return key
		}
	}
	return ""
}

// persistentFailureAttempts is how many syncs in a row must fail with retryable GCE errors before the tenant's
// condition says so. With the queue's exponential backoff, ten attempts span about five seconds; a single 5xx or
// a short rate limit stays out of the condition.
const persistentFailureAttempts = 10

// finish writes the status the outcomes amount to, reports the Translation's problem and decides how the key is
// retried.
func (s *negSync) finish(ctx context.Context, outcomes []outcome) (worker.Result, error) {
	status := buildStatus(s.tr, outcomes)
	summarize(s.tr, &status, s.project)
	reportIn, err := s.report(ctx, status)
	if err != nil {
		return worker.Result{}, err
	}
	s.p.reportMemberships(s.key, status.Resources)
	permanent, retryable := problemOf(outcomes)
	if failed := s.p.workers.NumRequeues(s.key); permanent == nil && len(retryable) > 0 && failed >= persistentFailureAttempts-1 {
		// Retrying is the right answer to a 5xx or a rate limit, but one that has not worked for this long is
		// something an operator must see on the tenant, not only on the Translation.
		permanent = &problem{reason: ReasonGCEUnavailable, message: fmt.Sprintf(
			"GCE failed %d attempts in a row, still retrying with backoff: %v", failed+1, retryable[0])}
	}
	s.p.setProblem(s.key, permanent)
	if len(retryable) > 0 {
		return worker.Result{}, errors.Join(retryable...)
	}
	if permanent != nil {
		return worker.Result{RequeueAfter: s.p.permanentRetry}, nil
	}
	if reportIn > 0 {
		return worker.Result{RequeueAfter: reportIn}, nil
	}
	return worker.Result{RequeueAfter: s.p.verifyPeriod}, nil
}
