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

package translator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/neg/translationwrite"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
)

// errWaiting says a sync must be retried because a Translation it wants to write still exists in another form (being
// deleted, or another tenant's): nothing failed, so it is logged only at V(4).
var errWaiting = fmt.Errorf("%w for an old Translation of the same name to be deleted", worker.ErrWaiting)

// errClaimsChanged says the claim records answered otherwise than the plan assumed: nothing was written, and the
// record's event brings the Service back to plan again.
var errClaimsChanged = fmt.Errorf("%w for the claim records to show the custom NEG names just settled", worker.ErrWaiting)

// apply writes a plan of the Service's Translations: first the claim records of its custom NEG names
// (settleNames), then the deletes, then the creates, patches and updates that do not wait for a deletion it has
// just asked for. It remembers its own writes (ownWrites) and records the plan's Events
// for the writes that succeeded. A custom NEG name another Service's Translation still declares holds its write
// back; the NEGNameConflict warnings that say so are returned. A write that waits (errWaiting) is retried after the
// others are done.
func (t *Translator) apply(ctx context.Context, svc *corev1.Service, p plan) ([]tenant.Warning, error) {
	logger := klog.FromContext(ctx)
	for _, k := range p.kept {
		logger.V(4).Info("Keeping a Translation of another version until its successor is synced",
			"translation", k.translation, "successor", k.successor)
	}
	for _, b := range p.blocked {
		logger.V(4).Info("Waiting for a Translation to be deleted before creating its successor",
			"translation", b.translation, "deleting", b.leaving)
	}
	warnings, changed, err := t.settleNames(ctx, p.unsettled)
	if err != nil {
		return nil, err
	}
	if changed {
		return nil, errClaimsChanged
	}
	deleted, errs := t.applyDeletes(ctx, svc, p.deletes)
	waiting := p.waiting
	for _, w := range p.writes {
		if i := slices.IndexFunc(w.after, func(tr *mpv1alpha1.Translation) bool { return deleted[tr.UID] }); i >= 0 {
			logger.V(4).Info("Waiting for a Translation to be deleted before creating its successor",
				"translation", w.want.Name, "deleting", w.after[i].Name)
			waiting = true
			continue
		}
		warning, err := t.applyWrite(ctx, svc, w)
		switch {
		case errors.Is(err, errWaiting):
			waiting = true
		case err != nil:
			errs = append(errs, err)
		}
		if warning != nil {
			warnings = append(warnings, *warning)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return warnings, err
	}
	if waiting {
		return warnings, errWaiting
	}
	return warnings, nil
}

// applyDeletes asks for the plan's deletions and records their Events. It returns the UIDs of the Translations
// whose deletion it asked for now.
func (t *Translator) applyDeletes(ctx context.Context, svc *corev1.Service, deletes []deletion) (map[types.UID]bool, []error) {
	var errs []error
	var asked map[types.UID]bool
	for _, d := range deletes {
		ok, err := t.deleteTranslation(ctx, d.translation)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !ok {
			continue
		}
		if asked == nil {
			asked = map[types.UID]bool{}
		}
		asked[d.translation.UID] = true
		if d.predecessor {
			klog.FromContext(ctx).Info("Deleted a Translation left by a former Service of the same name",
				"translation", d.translation.Name, "formerUID", ownerUID(d.translation), "uid", svc.UID)
		}
		t.recorder.Event(svc, corev1.EventTypeNormal, d.event.reason, d.event.message)
	}
	return asked, errs
}

// applyWrite makes one create, spec patch or update, once the custom NEG name it declares first, if any, is
// reserved. It returns the NEGNameConflict warning of a name another Service's Translation holds.
func (t *Translator) applyWrite(ctx context.Context, svc *corev1.Service, w write) (*tenant.Warning, error) {
	object := w.want.Namespace + "/" + w.want.Name
	if w.reserve != "" {
		holder, free, err := t.reserveName(ctx, svc, w.reserve, object)
		if err != nil {
			return nil, err
		}
		if !free {
			klog.FromContext(ctx).V(2).Info("Waiting for another Service's Translation to let a custom NEG name go",
				"translation", w.want.Name, "neg", w.reserve, "usedBy", holder)
			if holder == "" {
				return nil, nil
			}
			return &tenant.Warning{Reason: ReasonNameConflict, Message: nameConflictMessage(w.reserve, t.gcp.ProjectID, portOf(w.want), holder)}, nil
		}
	}
	var err error
	switch w.kind {
	case createTranslation:
		err = t.create(ctx, svc, w)
	case patchTranslationSpec:
		err = t.patchSpec(ctx, svc, w.have, w.want)
	case updateTranslation:
		err = t.update(ctx, svc, w.have, w.want)
	}
	if w.reserve != "" {
		// A create answered AlreadyExists wrote nothing.
		t.nameCreated(w.reserve, object, err == nil)
	}
	return nil, err
}

// create creates a desired Translation and records the plan's Event. A create answered AlreadyExists meets one the
// unfiltered cache does not show yet: once it does, a retry (with backoff: one labeled for another tenant brings no
// event) finds it the Service's own (compared), a former Service's (deleted) or leaving (waited for).
func (t *Translator) create(ctx context.Context, svc *corev1.Service, w write) error {
	var created *mpv1alpha1.Translation
	err := t.writeTranslation(svc, func(trigger time.Time) error {
		want := w.want.DeepCopy()
		metav1.SetMetaDataAnnotation(&want.ObjectMeta, negapi.TriggerTimeAnnotation, negapi.FormatTriggerTime(trigger))
		var err error
		created, err = t.mp.MultiprojectV1alpha1().Translations(svc.Namespace).Create(ctx, want, metav1.CreateOptions{})
		return err
	})
	switch {
	case apierrors.IsAlreadyExists(err):
		return errWaiting
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		// The namespace is being deleted, the Service with it (its Translation released already, its NEGs left to
		// the sweep if a backend service still uses them): nothing may be created there, and nothing needs to be.
		klog.FromContext(ctx).V(2).Info("Not creating a Translation in a namespace being deleted", "translation", w.want.Name)
		return nil
	case err != nil:
		return fmt.Errorf("creating Translation %s: %w", w.want.Name, err)
	}
	t.writes.createdTranslation(svc.Namespace+"/"+svc.Name, created.Name, created.UID)
	t.recorder.Event(svc, corev1.EventTypeNormal, w.event.reason, w.event.message)
	return nil
}

// patchSpec replaces the Translation's spec with want's by a JSON patch that first tests its UID. The patch
// carries no resourceVersion: the translator is the only writer of a Translation's spec (its Service's key is
// synced by one worker at a time, and a tenant runs on one replica), and the pusher's status writes change the
// resourceVersion all the time, so an update bound to the cached version would often be refused (409) and
// retried. A failed test (422: the Translation was replaced) or a missing one (404) is retried from the cache.
func (t *Translator) patchSpec(ctx context.Context, svc *corev1.Service, have, want *mpv1alpha1.Translation) error {
	var out *metav1.ObjectMeta
	err := t.writeTranslation(svc, func(trigger time.Time) error {
		patch, err := json.Marshal([]map[string]any{
			{"op": "test", "path": "/metadata/uid", "value": have.UID},
			{"op": "replace", "path": "/spec", "value": want.Spec},
			triggerTimeOp(have, trigger),
		})
		if err != nil {
			return err
		}
		// Only the metadata comes back: the spec is what was sent.
		out, err = translationwrite.Patch(ctx, t.mp, svc.Namespace, have.Name, types.JSONPatchType, patch, metav1.PatchOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("updating the spec of Translation %s: %w", want.Name, err)
	}
	if out.Generation > have.Generation {
		t.writes.patchedTranslationSpec(svc.Namespace+"/"+svc.Name, out.Name, out.UID, out.Generation)
	}
	klog.FromContext(ctx).V(2).Info("Updated Translation", "translation", want.Name, "endpoints", endpointCount(want))
	return nil
}

// update writes want's spec, labels, translatorAnnotations and controller reference over have, bound to have's
// version.
func (t *Translator) update(ctx context.Context, svc *corev1.Service, have, want *mpv1alpha1.Translation) error {
	updated := have.DeepCopy()
	updated.Spec = want.Spec
	if updated.Labels == nil {
		updated.Labels = map[string]string{}
	}
	maps.Copy(updated.Labels, want.Labels)
	// Other annotations (another build's, a user's) stay as they are.
	for _, key := range translatorAnnotations {
		if value, ok := want.Annotations[key]; ok {
			metav1.SetMetaDataAnnotation(&updated.ObjectMeta, key, value)
		} else {
			delete(updated.Annotations, key)
		}
	}
	updated.OwnerReferences = withController(updated.OwnerReferences, want.OwnerReferences[0])
	var out *mpv1alpha1.Translation
	err := t.writeTranslation(svc, func(trigger time.Time) error {
		metav1.SetMetaDataAnnotation(&updated.ObjectMeta, negapi.TriggerTimeAnnotation, negapi.FormatTriggerTime(trigger))
		var err error
		out, err = t.mp.MultiprojectV1alpha1().Translations(svc.Namespace).Update(ctx, updated, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		// A conflict (the pusher wrote the status since the cache's version) is retried from the cache.
		return fmt.Errorf("updating Translation %s: %w", want.Name, err)
	}
	if out.ResourceVersion != have.ResourceVersion {
		t.writes.updatedTranslation(svc.Namespace+"/"+svc.Name, out.Name, out.UID, have.ResourceVersion)
	}
	klog.FromContext(ctx).V(2).Info("Updated Translation", "translation", want.Name, "endpoints", endpointCount(want))
	return nil
}

// writeTranslation makes one Translation write of the Service (send, given the trigger time the write carries) and
// keeps the group commit's books on it, the same for a create, a spec patch and an update: the trigger time of the
// changes not written yet is taken for it and given back if it fails, and the API server's answer (its time, a 429)
// decides whether the Service's next changes are held (groupCommit.wrote).
func (t *Translator) writeTranslation(svc *corev1.Service, send func(trigger time.Time) error) error {
	key := svc.Namespace + "/" + svc.Name
	trigger := t.batch.takeTrigger(key)
	sent := t.batch.clock.Now()
	err := send(trigger)
	t.batch.wrote(key, t.batch.clock.Since(sent), err)
	if err != nil {
		t.batch.giveBack(key, trigger)
	}
	return err
}

// triggerTimeOp is the JSON patch operation that sets the Translation's trigger-time annotation to the write's
// (negapi.TriggerTimeAnnotation; "" for none, so that a generation never shows an earlier write's): into the
// annotations it has, or as its first.
func triggerTimeOp(have *mpv1alpha1.Translation, trigger time.Time) map[string]any {
	value := negapi.FormatTriggerTime(trigger)
	if have.Annotations == nil {
		return map[string]any{"op": "add", "path": "/metadata/annotations", "value": map[string]string{negapi.TriggerTimeAnnotation: value}}
	}
	// JSON pointer: "/" in a key is written "~1".
	return map[string]any{"op": "add", "path": "/metadata/annotations/" + strings.ReplaceAll(negapi.TriggerTimeAnnotation, "/", "~1"), "value": value}
}

// deleteTranslation deletes a Translation, with its UID as precondition so that a successor of the same name is
// never hit. It reports whether this call asked for the deletion: false if it was gone or already going.
func (t *Translator) deleteTranslation(ctx context.Context, tr *mpv1alpha1.Translation) (bool, error) {
	if t.leaving(tr) {
		return false, nil
	}
	uid := tr.UID
	err := t.mp.MultiprojectV1alpha1().Translations(tr.Namespace).Delete(ctx, tr.Name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case apierrors.IsConflict(err):
		// The precondition failed: the name now belongs to another Translation, which is not this one's to delete.
		return false, nil
	case err != nil:
		return false, fmt.Errorf("deleting stale Translation %s: %w", tr.Name, err)
	}
	if uid != "" {
		t.writes.deletedTranslation(uid)
	}
	return true, nil
}

func withController(refs []metav1.OwnerReference, controller metav1.OwnerReference) []metav1.OwnerReference {
	out := []metav1.OwnerReference{controller}
	for _, r := range refs {
		if r.UID != controller.UID && (r.Controller == nil || !*r.Controller) {
			out = append(out, r)
		}
	}
	return out
}

func endpointCount(tr *mpv1alpha1.Translation) int {
	n := 0
	for _, r := range tr.Spec.Resources {
		if r.NetworkEndpointGroup != nil {
			n += len(r.NetworkEndpointGroup.Endpoints)
		}
	}
	return n
}
