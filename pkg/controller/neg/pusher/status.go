package pusher

import (
	"context"
	"fmt"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
)

// resourceID identifies a backend resource the way spec and status entries do.
type resourceID struct {
	kind       mpv1alpha1.BackendResourceKind
	zone, name string
}

func specID(r *mpv1alpha1.BackendResource) resourceID {
	return resourceID{kind: r.Kind, zone: r.Zone, name: r.Name}
}

func statusID(r *mpv1alpha1.BackendResourceStatus) resourceID {
	kind := r.Kind
	if kind == "" {
		kind = mpv1alpha1.BackendResourceKindNetworkEndpointGroup
	}
	return resourceID{kind: kind, zone: r.Zone, name: r.Name}
}

// declare returns the status that lists every spec resource (new ones Pending) followed by the entries of resources
// removed from the spec that are not deleted yet, and whether that differs from the current status in listing a new
// resource.
func declare(tr *mpv1alpha1.Translation) (mpv1alpha1.TranslationStatus, bool) {
	status := *tr.Status.DeepCopy()
	existing := map[resourceID]mpv1alpha1.BackendResourceStatus{}
	for _, r := range status.Resources {
		existing[statusID(&r)] = r
	}
	changed := false
	resources := make([]mpv1alpha1.BackendResourceStatus, 0, len(tr.Spec.Resources))
	inSpec := map[resourceID]bool{}
	for i := range tr.Spec.Resources {
		r := &tr.Spec.Resources[i]
		id := specID(r)
		inSpec[id] = true
		if s, ok := existing[id]; ok {
			resources = append(resources, s)
			continue
		}
		changed = true
		resources = append(resources, mpv1alpha1.BackendResourceStatus{Kind: r.Kind, Name: r.Name, Zone: r.Zone, State: mpv1alpha1.BackendResourceStatePending})
	}
	for _, r := range status.Resources {
		if !inSpec[statusID(&r)] {
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

// removedResources are the resources the status lists (so they may exist in GCE) that the spec no longer does.
func removedResources(tr *mpv1alpha1.Translation) []mpv1alpha1.BackendResourceStatus {
	inSpec := map[resourceID]bool{}
	for i := range tr.Spec.Resources {
		inSpec[specID(&tr.Spec.Resources[i])] = true
	}
	var out []mpv1alpha1.BackendResourceStatus
	for _, r := range tr.Status.Resources {
		if statusID(&r).kind == mpv1alpha1.BackendResourceKindNetworkEndpointGroup && !inSpec[statusID(&r)] {
			out = append(out, r)
		}
	}
	return out
}

// specDescriptions are the ownership markers of the Translation's resources. The status does not record a removed
// resource's marker, so a NEG removed from the spec counts as ours when it carries one of these: the Translation's
// resources are the NEGs of one Service port and share their marker.
func specDescriptions(tr *mpv1alpha1.Translation) []string {
	var out []string
	for _, r := range tr.Spec.Resources {
		out = append(out, r.Description)
	}
	return out
}

// buildStatus is the status the outcomes amount to, with the Synced condition.
func buildStatus(tr *mpv1alpha1.Translation, outcomes []outcome) mpv1alpha1.TranslationStatus {
	status := mpv1alpha1.TranslationStatus{ObservedGeneration: tr.Generation}
	status.Conditions = append(status.Conditions, tr.Status.Conditions...)
	var failures []string
	reason := ""
	for _, o := range outcomes {
		status.Resources = append(status.Resources, o.status())
		if o.state == mpv1alpha1.BackendResourceStateReady {
			continue
		}
		if reason == "" {
			reason = o.reason
			if reason == "" {
				reason = string(o.state)
			}
		}
		msg := fmt.Sprintf("%s/%s: %s", o.zone, o.name, o.state)
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

// writeStatus writes status through the status subresource unless it is what the object already has.
func (p *Pusher) writeStatus(ctx context.Context, tr *mpv1alpha1.Translation, status mpv1alpha1.TranslationStatus) (*mpv1alpha1.Translation, error) {
	if apiequality.Semantic.DeepEqual(tr.Status, status) {
		return tr, nil
	}
	next := tr.DeepCopy()
	next.Status = status
	updated, err := p.client.MultiprojectV1alpha1().Translations(tr.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{})
	if err != nil {
		return tr, fmt.Errorf("writing the status: %w", err)
	}
	return updated, nil
}
