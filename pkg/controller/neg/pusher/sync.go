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
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	gceclient "github.com/multiproject/multiproject-controller-manager/pkg/gce/client"
	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
)

// Event and condition reasons.
const (
	ReasonPushed                 = "NEGsPushed"
	ReasonSynced                 = "Synced"
	ReasonPending                = "Pending"
	ReasonNEGCreated             = "NEGCreated"
	ReasonNEGDeleted             = "NEGDeleted"
	ReasonNameCollision          = "NEGNameCollision"
	ReasonNotOwned               = "NEGNotOwned"
	ReasonInUse                  = "NEGInUse"
	ReasonInvalid                = "GCERequestInvalid"
	ReasonGCEError               = "GCEError"
	ReasonCredentialsUnavailable = "CredentialsUnavailable"
	ReasonGCEUnavailable         = "GCEUnavailable"
	ReasonUnsupported            = "UnsupportedResource"
	ReasonNEGRecreated           = "NEGRecreated"
	ReasonMigrationBlocked       = "NEGMigrationBlocked"
	ReasonNEGAbandoned           = "NEGAbandoned"
)

// maxErrorLength keeps a GCE error message in the status readable (the schema allows 32 KiB).
const maxErrorLength = 1024

// outcome is what one sync step did with one backend resource.
type outcome struct {
	// where records the resource as the status lists it: project, network, subnetwork and marker.
	where     mpv1alpha1.BackendResourceStatus
	state     mpv1alpha1.BackendResourceState
	endpoints int
	err       error
	// reason is the condition reason of a failed step; permanent says only a person can fix it (no fast retry).
	reason    string
	permanent bool
}

func (o outcome) status() mpv1alpha1.BackendResourceStatus {
	s := o.where
	s.State, s.EndpointCount, s.LastError = o.state, int32(o.endpoints), ""
	if o.err != nil {
		s.LastError = truncate(o.err.Error(), maxErrorLength)
	}
	return s
}

// sync pushes one Translation: its NEGs made as declared, or, once it is being deleted, deleted.
func (p *Pusher) sync(ctx context.Context, key string) (_ worker.Result, err error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return worker.Result{}, nil
	}
	tr, err := p.lister.Translations(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		// Gone: its NEGs were deleted before its finalizer was removed, or it was never ours to clean up.
		p.cache.forgetOwner(key)
		p.setProblem(key, nil)
		return worker.Result{}, nil
	}
	if err != nil {
		return worker.Result{}, err
	}
	if tr.DeletionTimestamp != nil {
		return p.syncDeletion(ctx, key, tr.DeepCopy())
	}
	return p.syncLive(ctx, key, tr.DeepCopy())
}

// syncLive makes GCE match a live Translation: every spec resource created in the tenant's project with exactly its
// endpoints, then the resources no longer wanted (removed from the spec, or in a project the tenant left) deleted,
// so that traffic moves to the new NEGs before the old ones go.
func (p *Pusher) syncLive(ctx context.Context, key string, tr *mpv1alpha1.Translation) (worker.Result, error) {
	if p.cleanupOnly {
		// The cleanup deletes live Translations; their deletion brings them back here.
		return worker.Result{}, nil
	}
	var err error
	if !hasFinalizer(tr) {
		// Declared before made: without the finalizer a deletion could outrun the NEGs' cleanup.
		tr.Finalizers = append(tr.Finalizers, mpv1alpha1.TranslationDeleterFinalizer)
		if tr, err = p.client.MultiprojectV1alpha1().Translations(tr.Namespace).Update(ctx, tr, metav1.UpdateOptions{}); err != nil {
			return worker.Result{}, fmt.Errorf("adding the finalizer: %w", err)
		}
	}
	project := p.gcp.ProjectID
	gce, err := p.gceClient(ctx, project)
	if err != nil {
		return worker.Result{}, p.failWholly(ctx, key, tr, ReasonCredentialsUnavailable, err)
	}

	// Declare first: the status lists every resource, with its project, before it is created, so that one later
	// removed from the spec, or left in an old project, can still be found and deleted, also after a restart.
	if declared, changed := declare(tr, project); changed {
		if tr, err = p.writeStatus(ctx, tr, declared); err != nil {
			return worker.Result{}, err
		}
	}

	outcomes := make([]outcome, 0, len(tr.Spec.Resources))
	for i := range tr.Spec.Resources {
		// NEGs do not depend on each other, so one failing does not hold back the others.
		outcomes = append(outcomes, p.ensure(ctx, gce, key, tr, &tr.Spec.Resources[i]))
	}
	removed := removedResources(tr, project)
	for i := len(removed) - 1; i >= 0; i-- {
		if o := p.deleteRecorded(ctx, key, tr, &removed[i]); o.err != nil {
			outcomes = append(outcomes, o)
		}
	}
	return p.finish(ctx, key, tr, outcomes)
}

// deleteRecorded deletes a NEG the status lists but the spec no longer wants, in the project it was made in.
//
// A NEG in a project the tenant moved away from that cannot be deleted (the project is gone, the credentials no
// longer reach it) keeps its entry, with a Warning Event, until it can, or until the operator abandons the tenant's
// cloud resources on the ProviderConfig: the entry is then dropped and the NEG left where it is.
func (p *Pusher) deleteRecorded(ctx context.Context, key string, tr *mpv1alpha1.Translation, r *mpv1alpha1.BackendResourceStatus) outcome {
	o := outcome{where: *r, state: mpv1alpha1.BackendResourceStateDeleting}
	gce, err := p.gceClient(ctx, r.Project)
	if err != nil {
		o.err, o.reason = err, ReasonCredentialsUnavailable
	} else {
		o = p.deleteNEG(ctx, gce, key, tr, o, markersOf(r, tr), false)
	}
	if o.err == nil || r.Project == p.gcp.ProjectID {
		return o
	}
	if p.abandoned != nil && p.abandoned() {
		p.recorder.Eventf(tr, corev1.EventTypeWarning, ReasonNEGAbandoned,
			"Abandoned NEG %s in zone %s of the tenant's previous project %s at the operator's request (%s): %v",
			r.Name, r.Zone, r.Project, mpv1alpha1.AbandonCloudResourcesAnnotation, o.err)
		// No error: the entry is not carried into the new status.
		return outcome{where: *r, state: mpv1alpha1.BackendResourceStateDeleting}
	}
	p.recorder.Eventf(tr, corev1.EventTypeWarning, ReasonMigrationBlocked,
		"Cannot delete NEG %s in zone %s of the tenant's previous project %s: %v; it stays listed until it can be, "+
			"or until annotation %s=true on the ProviderConfig abandons it", r.Name, r.Zone, r.Project, o.err, mpv1alpha1.AbandonCloudResourcesAnnotation)
	return o
}

// persistentFailureAttempts is how many syncs in a row must fail with retryable GCE errors before the tenant's
// condition says so. With the queue's exponential backoff, ten attempts span about five seconds; a single 5xx or
// a short rate limit stays out of the condition.
const persistentFailureAttempts = 10

// finish writes the status the outcomes amount to and decides how the key is retried.
func (p *Pusher) finish(ctx context.Context, key string, tr *mpv1alpha1.Translation, outcomes []outcome) (worker.Result, error) {
	status := buildStatus(tr, outcomes)
	if _, err := p.writeStatus(ctx, tr, status); err != nil {
		return worker.Result{}, err
	}
	var retryable []error
	var permanent *problem
	for _, o := range outcomes {
		switch {
		case o.err == nil:
		case o.permanent:
			if permanent == nil {
				permanent = &problem{reason: o.reason, message: fmt.Sprintf("NEG %s in zone %s: %v", o.where.Name, o.where.Zone, o.err)}
			}
		default:
			retryable = append(retryable, fmt.Errorf("NEG %s in zone %s: %w", o.where.Name, o.where.Zone, o.err))
		}
	}
	if failed := p.workers.NumRequeues(key); permanent == nil && len(retryable) > 0 && failed >= persistentFailureAttempts-1 {
		// Retrying is the right answer to a 5xx or a rate limit, but one that has not worked for this long is
		// something an operator must see on the tenant, not only on the Translation.
		permanent = &problem{reason: ReasonGCEUnavailable, message: fmt.Sprintf(
			"GCE failed %d attempts in a row, still retrying with backoff: %v", failed+1, retryable[0])}
	}
	p.setProblem(key, permanent)
	if len(retryable) > 0 {
		return worker.Result{}, errors.Join(retryable...)
	}
	if permanent != nil {
		return worker.Result{RequeueAfter: p.permanentRetry}, nil
	}
	return worker.Result{RequeueAfter: p.verifyPeriod}, nil
}

// failWholly records an error that stops the whole Translation (no client for GCE): every resource keeps its last
// known state with the error, and the key is retried with backoff.
func (p *Pusher) failWholly(ctx context.Context, key string, tr *mpv1alpha1.Translation, reason string, cause error) error {
	p.setProblem(key, &problem{reason: reason, message: cause.Error()})
	status := *tr.Status.DeepCopy()
	status.ObservedGeneration = tr.Generation
	setSynced(&status, tr.Generation, metav1.ConditionFalse, reason, truncate(cause.Error(), maxErrorLength))
	if _, err := p.writeStatus(ctx, tr, status); err != nil {
		return errors.Join(cause, err)
	}
	return cause
}

// ensure makes one NEG exist with exactly the resource's endpoints. It holds the NEG's cache entry throughout. A
// NEG recorded with another network or subnetwork is deleted and created again: GCE cannot change them in place.
func (p *Pusher) ensure(ctx context.Context, gce *gceclient.Client, owner string, tr *mpv1alpha1.Translation, res *mpv1alpha1.BackendResource) outcome {
	o := outcome{where: declaredStatus(res, gce.Project()), state: mpv1alpha1.BackendResourceStatePending}
	if res.Kind != mpv1alpha1.BackendResourceKindNetworkEndpointGroup || res.NetworkEndpointGroup == nil || res.Zone == "" {
		o.state, o.reason, o.permanent = mpv1alpha1.BackendResourceStateError, ReasonUnsupported, true
		o.err = fmt.Errorf("resource kind %q is not a NetworkEndpointGroup with zone and parameters", res.Kind)
		return o
	}
	if was := recorded(tr, res, gce.Project()); was != nil && was.Network != "" &&
		(was.Network != res.NetworkEndpointGroup.Network || was.Subnetwork != res.NetworkEndpointGroup.Subnetwork) {
		// The status keeps the old network until the NEG is made anew, so a crash in between deletes it again.
		gone := p.deleteNEG(ctx, gce, owner, tr, outcome{where: *was, state: mpv1alpha1.BackendResourceStateDeleting}, []string{res.Description}, true)
		if gone.err != nil {
			return gone
		}
		p.recorder.Eventf(tr, corev1.EventTypeNormal, ReasonNEGRecreated, "NEG %s in zone %s moves from network %s/%s to %s/%s: deleted, to be created again",
			res.Name, res.Zone, was.Network, was.Subnetwork, res.NetworkEndpointGroup.Network, res.NetworkEndpointGroup.Subnetwork)
	}
	e := p.cache.lock(owner, negKey{project: gce.Project(), zone: res.Zone, name: res.Name})
	defer e.mu.Unlock()
	// A second attempt follows an error that may come from a stale cache (the NEG vanished, an endpoint attached
	// behind our back): the entry is re-read and the step tried once more before the error counts.
	for attempt := 0; ; attempt++ {
		o, retry := p.ensureOnce(ctx, gce, tr, res, e)
		if !retry || attempt == 1 {
			if o.reason == ReasonInvalid || o.reason == ReasonInUse {
				p.recorder.Eventf(tr, corev1.EventTypeWarning, o.reason, "GCE refused a change to NEG %s in zone %s: %v", res.Name, res.Zone, o.err)
			}
			return o
		}
	}
}

func (p *Pusher) ensureOnce(ctx context.Context, gce *gceclient.Client, tr *mpv1alpha1.Translation, res *mpv1alpha1.BackendResource, e *negEntry) (outcome, bool) {
	o := outcome{where: declaredStatus(res, gce.Project()), state: mpv1alpha1.BackendResourceStatePending}
	params := res.NetworkEndpointGroup
	if err := p.awaitPending(ctx, gce, res.Zone, e); err != nil {
		return p.failed(o, e, err), false
	}
	if err := p.observe(ctx, gce, res.Zone, res.Name, e, res.Description); err != nil {
		return p.failed(o, e, err), false
	}
	if !e.exists {
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
		err := gce.InsertNEG(ctx, res.Zone, neg)
		switch gceclient.Classify(err) {
		case gceclient.ClassNone:
			e.known, e.exists, e.owned, e.description = true, true, true, res.Description
			e.defaultPort = neg.DefaultPort
			e.endpoints = map[endpointKey]*compute.NetworkEndpoint{}
			e.observed = time.Now()
			p.recorder.Eventf(tr, corev1.EventTypeNormal, ReasonNEGCreated, "Created NEG %s in zone %s of project %s", res.Name, res.Zone, gce.Project())
		case gceclient.ClassAlreadyExists:
			// Someone took the name since we looked: look again, then decide whose it is.
			e.invalidate()
			return p.failed(o, e, err), true
		default:
			return p.failed(o, e, err), false
		}
	}
	if e.description != res.Description {
		e.owned = false
		o.state, o.reason, o.permanent = mpv1alpha1.BackendResourceStateError, ReasonNameCollision, true
		o.err = fmt.Errorf("a NEG named %s already exists in zone %s of project %s without this Translation's "+
			"ownership marker in its description; it is left untouched", res.Name, res.Zone, gce.Project())
		p.recorder.Event(tr, corev1.EventTypeWarning, ReasonNameCollision, o.err.Error())
		return o, false
	}
	e.owned = true

	toDetach, toAttach := diff(e, params)
	for batch := range slices.Chunk(toDetach, gceclient.MaxEndpointsPerCall) {
		if err := gce.DetachEndpoints(ctx, res.Zone, res.Name, endpointsOf(batch)); err != nil {
			return p.failed(o, e, err), retryAfterEndpointError(err)
		}
		for _, d := range batch {
			delete(e.endpoints, d.key)
		}
	}
	for batch := range slices.Chunk(toAttach, gceclient.MaxEndpointsPerCall) {
		if err := gce.AttachEndpoints(ctx, res.Zone, res.Name, endpointsOf(batch)); err != nil {
			return p.failed(o, e, err), retryAfterEndpointError(err)
		}
		for _, a := range batch {
			e.endpoints[a.key] = a.endpoint
		}
	}
	o.state, o.endpoints = mpv1alpha1.BackendResourceStateReady, len(e.endpoints)
	return o, false
}

// awaitPending waits for the operation of an earlier call whose wait failed; afterwards the entry is re-read, since
// that operation may have changed the NEG either way.
func (p *Pusher) awaitPending(ctx context.Context, gce *gceclient.Client, zone string, e *negEntry) error {
	if e.pendingOperation == "" {
		return nil
	}
	err := gce.WaitOperation(ctx, zone, e.pendingOperation)
	var waitErr *gceclient.OperationWaitError
	if errors.As(err, &waitErr) && !gceclient.IsNotFound(waitErr.Err) {
		return err
	}
	e.invalidate()
	e.pendingOperation = ""
	return nil
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

// failed turns a GCE error into the resource's outcome and drops the cache entry unless the call certainly changed
// nothing (a rate limit refuses the call before it runs).
func (p *Pusher) failed(o outcome, e *negEntry, err error) outcome {
	o.err = err
	o.state = mpv1alpha1.BackendResourceStateError
	class := gceclient.Classify(err)
	var waitErr *gceclient.OperationWaitError
	switch {
	case errors.As(err, &waitErr):
		e.invalidate()
		e.pendingOperation = waitErr.Operation
	case gceclient.Reason(err) != gceclient.ReasonRateLimitExceeded:
		e.invalidate()
	}
	switch class {
	case gceclient.ClassInvalid:
		o.reason, o.permanent = ReasonInvalid, true
	case gceclient.ClassInUse:
		o.reason, o.permanent = ReasonInUse, true
	default:
		o.reason = ReasonGCEError
	}
	return o
}

// observe fills the entry from GCE unless it is known and fresh: a get, and, for a NEG carrying marker, its
// endpoints (one call per 500).
func (p *Pusher) observe(ctx context.Context, gce *gceclient.Client, zone, name string, e *negEntry, marker string) error {
	fresh := p.verifyPeriod <= 0 || time.Since(e.observed) < p.verifyPeriod
	if e.known && fresh && (!e.exists || e.endpoints != nil || e.description != marker) {
		return nil
	}
	e.invalidate()
	neg, err := gce.GetNEG(ctx, zone, name)
	if gceclient.IsNotFound(err) {
		e.known, e.observed = true, time.Now()
		return nil
	}
	if err != nil {
		return err
	}
	e.exists, e.description, e.defaultPort = true, neg.Description, neg.DefaultPort
	if neg.Description == marker {
		listed, err := gce.ListEndpoints(ctx, zone, name)
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

type keyedEndpoint struct {
	key      endpointKey
	endpoint *compute.NetworkEndpoint
}

// diff returns what to detach (GCE's endpoints the spec does not list, in GCE's form, which a detach must match)
// and what to attach (listed endpoints GCE lacks), each in a stable order.
func diff(e *negEntry, params *mpv1alpha1.NetworkEndpointGroupParameters) (toDetach, toAttach []keyedEndpoint) {
	defaultPort := int64(params.Port)
	if e.defaultPort != 0 {
		defaultPort = e.defaultPort
	}
	desired := make(map[endpointKey]*compute.NetworkEndpoint, len(params.Endpoints))
	for _, ep := range params.Endpoints {
		ce := &compute.NetworkEndpoint{Instance: ep.Instance, IpAddress: ep.IPAddress, Port: int64(ep.Port)}
		desired[keyOf(ce, defaultPort)] = ce
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

// syncDeletion deletes the NEGs of a Translation being deleted, in reverse order, each in the project it was made
// in, and then removes the finalizer.
func (p *Pusher) syncDeletion(ctx context.Context, key string, tr *mpv1alpha1.Translation) (worker.Result, error) {
	if !hasFinalizer(tr) {
		return worker.Result{}, nil
	}
	project := p.gcp.ProjectID
	gce, err := p.gceClient(ctx, project)
	if err != nil {
		return worker.Result{}, p.failWholly(ctx, key, tr, ReasonCredentialsUnavailable, err)
	}
	var failures []outcome
	removed := removedResources(tr, project)
	for i := len(removed) - 1; i >= 0; i-- {
		if o := p.deleteRecorded(ctx, key, tr, &removed[i]); o.err != nil {
			failures = append(failures, o)
		}
	}
	for i := len(tr.Spec.Resources) - 1; i >= 0; i-- {
		r := &tr.Spec.Resources[i]
		if r.Kind != mpv1alpha1.BackendResourceKindNetworkEndpointGroup || r.Zone == "" {
			continue
		}
		o := outcome{where: declaredStatus(r, project), state: mpv1alpha1.BackendResourceStateDeleting}
		if o = p.deleteNEG(ctx, gce, key, tr, o, []string{r.Description}, true); o.err != nil {
			failures = append(failures, o)
		}
	}
	if len(failures) > 0 {
		// The status says what is still there; NEGs already deleted are no longer listed.
		return p.finish(ctx, key, tr, failures)
	}
	tr.Finalizers = slices.DeleteFunc(tr.Finalizers, func(f string) bool { return f == mpv1alpha1.TranslationDeleterFinalizer })
	if _, err := p.client.MultiprojectV1alpha1().Translations(tr.Namespace).Update(ctx, tr, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return worker.Result{}, nil
		}
		return worker.Result{}, fmt.Errorf("removing the finalizer: %w", err)
	}
	klog.FromContext(ctx).V(2).Info("Deleted the Translation's NEGs and removed its finalizer")
	p.cache.forgetOwner(key)
	p.setProblem(key, nil)
	return worker.Result{}, nil
}

// deleteNEG deletes one NEG if it is ours: its description is one of markers (or, from the cache, it was ours when
// last seen). A NEG that is not ours is left alone and counts as done. inSpec says the NEG is still in the spec (a
// Translation deletion) rather than removed from it.
func (p *Pusher) deleteNEG(ctx context.Context, gce *gceclient.Client, owner string, tr *mpv1alpha1.Translation, o outcome, markers []string, inSpec bool) outcome {
	k := negKey{project: gce.Project(), zone: o.where.Zone, name: o.where.Name}
	e := p.cache.lock(owner, k)
	defer e.mu.Unlock()
	if other := p.claimedByAnother(owner, k); other != "" {
		// Handed over (a custom NEG name kept across a translation version bump, say): the NEG is not this
		// Translation's to delete any more.
		klog.FromContext(ctx).V(2).Info("Not deleting a NEG another Translation claims", "neg", k.name, "zone", k.zone, "claimedBy", other)
		return o
	}
	if err := p.awaitPending(ctx, gce, k.zone, e); err != nil {
		o.err, o.reason = err, ReasonGCEError
		return o
	}
	if e.known && !e.exists {
		return o
	}
	if !e.known || !e.owned {
		neg, err := gce.GetNEG(ctx, k.zone, k.name)
		if gceclient.IsNotFound(err) {
			e.invalidate()
			e.known = true
			return o
		}
		if err != nil {
			o.err, o.reason = err, ReasonGCEError
			return o
		}
		if !slices.Contains(markers, neg.Description) {
			what := "removed from"
			if inSpec {
				what = "of"
			}
			p.recorder.Eventf(tr, corev1.EventTypeWarning, ReasonNotOwned,
				"Not deleting NEG %s in zone %s (%s the Translation): its description does not carry the Translation's ownership marker", k.name, k.zone, what)
			return o
		}
	}
	err := gce.DeleteNEG(ctx, k.zone, k.name)
	switch gceclient.Classify(err) {
	case gceclient.ClassNone, gceclient.ClassNotFound:
		e.invalidate()
		e.known = true
		if err == nil {
			p.recorder.Eventf(tr, corev1.EventTypeNormal, ReasonNEGDeleted, "Deleted NEG %s in zone %s of project %s", k.name, k.zone, gce.Project())
		}
		return o
	case gceclient.ClassInUse:
		o.err, o.reason, o.permanent = err, ReasonInUse, true
		p.recorder.Eventf(tr, corev1.EventTypeWarning, ReasonInUse, "Cannot delete NEG %s in zone %s yet: %v", k.name, k.zone, err)
	case gceclient.ClassInvalid:
		e.invalidate()
		o.err, o.reason, o.permanent = err, ReasonInvalid, true
	default:
		e.invalidate()
		var waitErr *gceclient.OperationWaitError
		if errors.As(err, &waitErr) {
			e.pendingOperation = waitErr.Operation
		}
		o.err, o.reason = err, ReasonGCEError
	}
	return o
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// claimedByAnother returns the key of another live Translation of the tenant that declares the NEG (in its spec, in
// the tenant's current project, or as a live entry of its status), or "".
func (p *Pusher) claimedByAnother(owner string, k negKey) string {
	translations, err := p.lister.List(labels.Everything())
	if err != nil {
		return ""
	}
	for _, tr := range translations {
		key := tr.Namespace + "/" + tr.Name
		if key != owner && tr.DeletionTimestamp == nil && slices.Contains(declaredNEGs(tr, p.gcp.ProjectID, false), k) {
			return key
		}
	}
	return ""
}
