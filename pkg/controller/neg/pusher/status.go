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
	"strconv"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/neg/translationwrite"
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
	// awaitingSweep: GCE would not delete the NEG because a backend service uses it; it is emptied and left to the
	// garbage sweep, so it does not hold a Translation being deleted (err says why it is still there).
	awaitingSweep bool
}

func (o outcome) status() mpv1alpha1.BackendResourceStatus {
	s := o.where
	s.State, s.EndpointCount, s.LastError = o.state, int32(o.endpoints), ""
	if o.err != nil {
		s.LastError = truncate(o.err.Error(), maxErrorLength)
	}
	return s
}

// resourceID identifies a backend resource the way spec and status entries do: the same name and zone in another
// project is another resource.
type resourceID struct {
	kind                mpv1alpha1.BackendResourceKind
	project, zone, name string
}

func specID(r *mpv1alpha1.BackendResource, project string) resourceID {
	return resourceID{kind: r.Kind, project: project, zone: r.Zone, name: r.Name}
}

// statusID is the identity of a status entry; an entry written before projects were recorded is in project.
func statusID(r *mpv1alpha1.BackendResourceStatus, project string) resourceID {
	kind := r.Kind
	if kind == "" {
		kind = mpv1alpha1.BackendResourceKindNetworkEndpointGroup
	}
	if r.Project != "" {
		project = r.Project
	}
	return resourceID{kind: kind, project: project, zone: r.Zone, name: r.Name}
}

// declaredStatus is a status entry for a spec resource about to be created in project.
func declaredStatus(r *mpv1alpha1.BackendResource, project string) mpv1alpha1.BackendResourceStatus {
	s := mpv1alpha1.BackendResourceStatus{Kind: r.Kind, Name: r.Name, Zone: r.Zone, Project: project, Description: r.Description,
		State: mpv1alpha1.BackendResourceStatePending}
	if r.NetworkEndpointGroup != nil {
		s.Network, s.Subnetwork = r.NetworkEndpointGroup.Network, r.NetworkEndpointGroup.Subnetwork
	}
	return s
}

// declare returns the status that lists every spec resource of project (new ones Pending) followed by the entries
// of resources no longer wanted (removed from the spec, or in another project) that are not deleted yet, and
// whether that lists a resource the current status does not.
func declare(tr *mpv1alpha1.Translation, project string) (mpv1alpha1.TranslationStatus, bool) {
	status := *tr.Status.DeepCopy()
	existing := map[resourceID]mpv1alpha1.BackendResourceStatus{}
	for _, r := range status.Resources {
		existing[statusID(&r, project)] = r
	}
	changed := false
	resources := make([]mpv1alpha1.BackendResourceStatus, 0, len(tr.Spec.Resources))
	inSpec := map[resourceID]bool{}
	for i := range tr.Spec.Resources {
		r := &tr.Spec.Resources[i]
		id := specID(r, project)
		inSpec[id] = true
		if s, ok := existing[id]; ok {
			resources = append(resources, s)
			continue
		}
		changed = true
		resources = append(resources, declaredStatus(r, project))
	}
	for _, r := range status.Resources {
		if !inSpec[statusID(&r, project)] {
			r.State = mpv1alpha1.BackendResourceStateDeleting
			resources = append(resources, r)
		}
	}
	status.Resources = resources
	if changed {
		setSynced(&status, tr.Generation, metav1.ConditionFalse, ReasonPending, "NEGs are being created")
	}
	return status, changed
}

// recorded returns the status entry of a spec resource in project, if the status has one.
func recorded(tr *mpv1alpha1.Translation, r *mpv1alpha1.BackendResource, project string) *mpv1alpha1.BackendResourceStatus {
	id := specID(r, project)
	for i := range tr.Status.Resources {
		if statusID(&tr.Status.Resources[i], project) == id {
			return &tr.Status.Resources[i]
		}
	}
	return nil
}

// removedResources are the NEGs the status lists (so they may exist in GCE) that the spec no longer asks for in
// project: removed from the spec, or left behind in another project.
func removedResources(tr *mpv1alpha1.Translation, project string) []mpv1alpha1.BackendResourceStatus {
	inSpec := map[resourceID]bool{}
	for i := range tr.Spec.Resources {
		inSpec[specID(&tr.Spec.Resources[i], project)] = true
	}
	var out []mpv1alpha1.BackendResourceStatus
	for _, r := range tr.Status.Resources {
		id := statusID(&r, project)
		if id.kind == mpv1alpha1.BackendResourceKindNetworkEndpointGroup && !inSpec[id] {
			if r.Project == "" {
				r.Project = project
			}
			out = append(out, r)
		}
	}
	return out
}

// markersOf are the ownership markers a removed resource may carry: the one recorded with it, or, for an entry
// written before markers were recorded, those of the Translation's resources (the NEGs of one Service port share
// their marker).
func markersOf(r *mpv1alpha1.BackendResourceStatus, tr *mpv1alpha1.Translation) []string {
	if r.Description != "" {
		return []string{r.Description}
	}
	var out []string
	for _, s := range tr.Spec.Resources {
		out = append(out, s.Description)
	}
	return out
}

// buildStatus is the status the outcomes amount to, with the Synced condition. An outcome that did not learn its
// NEG's id and selfLink (a step failed before GCE was read) keeps those its status entry already records.
func buildStatus(tr *mpv1alpha1.Translation, outcomes []outcome) mpv1alpha1.TranslationStatus {
	status := mpv1alpha1.TranslationStatus{ObservedGeneration: tr.Generation}
	status.Conditions = append(status.Conditions, tr.Status.Conditions...)
	recordedRefs := map[resourceID]mpv1alpha1.BackendResourceStatus{}
	for _, r := range tr.Status.Resources {
		recordedRefs[statusID(&r, r.Project)] = r
	}
	var failures []string
	reason := ""
	for _, o := range outcomes {
		entry := o.status()
		if was, ok := recordedRefs[statusID(&entry, entry.Project)]; ok && entry.ID == "" {
			entry.ID, entry.SelfLink = was.ID, was.SelfLink
		}
		status.Resources = append(status.Resources, entry)
		if o.state == mpv1alpha1.BackendResourceStateReady {
			continue
		}
		if reason == "" {
			reason = o.reason
			if reason == "" {
				reason = string(o.state)
			}
		}
		msg := fmt.Sprintf("%s/%s: %s", o.where.Zone, o.where.Name, o.state)
		if o.err != nil {
			msg += ": " + o.err.Error()
		}
		failures = append(failures, msg)
	}
	if len(failures) == 0 {
		setSynced(&status, tr.Generation, metav1.ConditionTrue, ReasonSynced, fmt.Sprintf("%d NEGs match the spec", len(outcomes)))
	} else {
		setSynced(&status, tr.Generation, metav1.ConditionFalse, reason, truncate(strings.Join(failures, "; "), maxErrorLength))
	}
	return status
}

func setSynced(status *mpv1alpha1.TranslationStatus, generation int64, s metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{
		Type: mpv1alpha1.TranslationConditionSynced, Status: s, Reason: reason, Message: message, ObservedGeneration: generation,
	})
}

// negID is a GCE id as the status records it: a decimal string, "" for none known.
func negID(id uint64) string {
	if id == 0 {
		return ""
	}
	return strconv.FormatUint(id, 10)
}

// summarize sets each entry's lifecycle and the status's counts from the spec: an entry the spec lists with
// endpoints is Active, one it lists without any is Inactive (a NEG kept in a zone that lost its Nodes, or fixed
// ahead where nothing runs yet), and any other, or every entry of a Translation being deleted, AwaitingDeletion.
func summarize(tr *mpv1alpha1.Translation, status *mpv1alpha1.TranslationStatus, project string) {
	endpoints := map[resourceID]int{}
	if tr.DeletionTimestamp == nil {
		for i := range tr.Spec.Resources {
			r := &tr.Spec.Resources[i]
			n := 0
			if r.NetworkEndpointGroup != nil {
				n = len(r.NetworkEndpointGroup.Endpoints)
			}
			endpoints[specID(r, project)] = n
		}
	}
	status.ActiveResources, status.InactiveResources, status.EndpointCount = 0, 0, 0
	for i := range status.Resources {
		r := &status.Resources[i]
		n, inSpec := endpoints[statusID(r, project)]
		switch {
		case !inSpec || r.State == mpv1alpha1.BackendResourceStateDeleting:
			r.Lifecycle = mpv1alpha1.BackendResourceLifecycleAwaitingDeletion
		case n > 0:
			r.Lifecycle = mpv1alpha1.BackendResourceLifecycleActive
			status.ActiveResources++
		default:
			r.Lifecycle = mpv1alpha1.BackendResourceLifecycleInactive
			status.InactiveResources++
		}
		status.EndpointCount += r.EndpointCount
	}
}

// writeStatus writes status, its lifecycles and counts summarized, through the status subresource unless it is what
// the Translation already has; the sync goes on with what the API server returned. On a CRD from before those fields
// (bf30f57's) the API server drops them, so each sync that writes sends them again: apply the new CRDs first.
func (s *negSync) writeStatus(ctx context.Context, status mpv1alpha1.TranslationStatus) error {
	summarize(s.tr, &status, s.project)
	if apiequality.Semantic.DeepEqual(s.tr.Status, status) {
		return nil
	}
	return s.sendStatus(ctx, status)
}

// sendStatus writes status, summarized and different from the Translation's, through the status subresource.
func (s *negSync) sendStatus(ctx context.Context, status mpv1alpha1.TranslationStatus) error {
	next := s.tr.DeepCopy()
	next.Status = status
	// The API server answers with the metadata only: the Translation written is next with it.
	updated, err := translationwrite.UpdateStatus(ctx, s.p.client, next, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("writing the status: %w", err)
	}
	// The status now says what the pusher did: it carries every report held (reports.go).
	s.p.reports.wrote(s.key, s.tr.UID)
	s.p.pushed.Reported(s.key)
	s.tr = updated
	return nil
}

// failWholly records an error that stops the whole Translation (no client for GCE): every resource keeps its last
// known state with the error, and the key is retried with backoff.
func (s *negSync) failWholly(ctx context.Context, reason string, cause error) error {
	s.p.setProblem(s.key, &problem{reason: reason, message: cause.Error()})
	status := *s.tr.Status.DeepCopy()
	status.ObservedGeneration = s.tr.Generation
	setSynced(&status, s.tr.Generation, metav1.ConditionFalse, reason, truncate(cause.Error(), maxErrorLength))
	if err := s.writeStatus(ctx, status); err != nil {
		return errors.Join(cause, err)
	}
	return cause
}

// declaredNEGs are the NEGs a Translation declares: its spec's, in the tenant's current project, and those its status
// lists in the project each records (entries being deleted only with withDeleting).
func declaredNEGs(tr *mpv1alpha1.Translation, project string, withDeleting bool) []negKey {
	var out []negKey
	for _, r := range tr.Spec.Resources {
		out = append(out, negKey{project: project, zone: r.Zone, name: r.Name})
	}
	for i := range tr.Status.Resources {
		r := &tr.Status.Resources[i]
		if withDeleting || r.State != mpv1alpha1.BackendResourceStateDeleting {
			out = append(out, negKey{project: statusID(r, project).project, zone: r.Zone, name: r.Name})
		}
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
