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

package providerconfig

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"
)

// Ready condition reasons.
const (
	ReasonAllControllersReady = "AllControllersReady"
	ReasonControllersNotReady = "ControllersNotReady"
	ReasonNoControllers       = "NoControllersConfigured"
	ReasonDeleting            = "Deleting"
)

type statusWrite struct {
	basedOn string
	status  mpv1alpha1.ProviderConfigStatus
}

// recordAbandon keeps status.abandon in line with the abandon annotation: the generation at which the manager
// first saw it, kept while the annotation stays, cleared once it goes. The annotation covers only the deletion or
// migration of that generation; one left in place (a GitOps repository keeps it) abandons nothing of a later spec.
// It returns the ProviderConfig as it is now, or nil when it is gone.
func (c *Controller) recordAbandon(ctx context.Context, pc *mpv1alpha1.ProviderConfig) (*mpv1alpha1.ProviderConfig, error) {
	set := pc.Annotations[mpv1alpha1.AbandonCloudResourcesAnnotation] == "true"
	recorded := pc.Status.Abandon
	if set && recorded != nil {
		if recorded.Generation != pc.Generation {
			c.lastWritesMu.Lock()
			warned := c.staleWarned[pc.Name] == pc.Generation
			c.staleWarned[pc.Name] = pc.Generation
			c.lastWritesMu.Unlock()
			if !warned {
				c.recorder.Eventf(pc, corev1.EventTypeWarning, EventAbandonAnnotationStale,
					"annotation %s=true was given at generation %d and abandons nothing of generation %d: remove it, wait for status.abandon to go, and set it again to abandon this generation's cleanup or migration",
					mpv1alpha1.AbandonCloudResourcesAnnotation, recorded.Generation, pc.Generation)
			}
		}
		return pc, nil
	}
	if !set && recorded == nil {
		return pc, nil
	}
	next := pc.Status.DeepCopy()
	next.Abandon = nil
	if set {
		next.Abandon = &mpv1alpha1.AbandonDecision{Generation: pc.Generation}
	}
	updated, err := PatchStatus(ctx, c.client, pc, *next)
	if err != nil || updated == nil {
		return updated, err
	}
	if set {
		c.recorder.Eventf(pc, corev1.EventTypeNormal, EventAbandonRecorded,
			"annotation %s=true recorded for generation %d: what the deletion, a removed section or the NEG migration of this generation leaves outside the cluster may be abandoned; a later spec change needs a new decision",
			mpv1alpha1.AbandonCloudResourcesAnnotation, pc.Generation)
	}
	return updated, nil
}

// keepObserved replaces the Starting condition of a controller that has not reported yet with the condition the
// status already holds for this generation: a new leader restarting a converged tenant has observed nothing new,
// and flipping its conditions to Unknown and back would write every tenant's status twice per failover.
func keepObserved(pc *mpv1alpha1.ProviderConfig, conds []metav1.Condition) []metav1.Condition {
	out := slices.Clone(conds)
	for i, cond := range out {
		if cond.Reason != ReasonStarting {
			continue
		}
		if old := meta.FindStatusCondition(pc.Status.Conditions, cond.Type); old != nil && old.ObservedGeneration == pc.Generation {
			out[i] = *old
		}
	}
	return out
}

// convergedBefore reports whether the status already says that every controller of this generation runs: a new
// leader (or a restarted one) that starts them again has nothing new to tell the user, and writes no Event.
func convergedBefore(pc *mpv1alpha1.ProviderConfig) bool {
	ready := meta.FindStatusCondition(pc.Status.Conditions, mpv1alpha1.ProviderConfigConditionReady)
	return ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == pc.Generation &&
		pc.Status.ObservedGeneration == pc.Generation
}

// readyCondition is True when every configured controller's condition is True.
func readyCondition(conds []metav1.Condition) metav1.Condition {
	if len(conds) == 0 {
		return metav1.Condition{Type: mpv1alpha1.ProviderConfigConditionReady, Status: metav1.ConditionTrue, Reason: ReasonNoControllers,
			Message: "the spec configures no controller"}
	}
	var notReady []string
	for _, cond := range conds {
		if cond.Status != metav1.ConditionTrue {
			notReady = append(notReady, fmt.Sprintf("%s is %s (%s)", cond.Type, cond.Status, cond.Reason))
		}
	}
	if len(notReady) > 0 {
		sort.Strings(notReady)
		return metav1.Condition{Type: mpv1alpha1.ProviderConfigConditionReady, Status: metav1.ConditionFalse, Reason: ReasonControllersNotReady,
			Message: strings.Join(notReady, "; ")}
	}
	return metav1.Condition{Type: mpv1alpha1.ProviderConfigConditionReady, Status: metav1.ConditionTrue, Reason: ReasonAllControllersReady,
		Message: "every configured controller is running"}
}

// writeStatus sets the conditions (and drops those of controllers no longer configured) and writes the status
// only when it changed. It reports whether it wrote.
func (c *Controller) writeStatus(ctx context.Context, pc *mpv1alpha1.ProviderConfig, conds []metav1.Condition, ready metav1.Condition, generation int64, applied *mpv1alpha1.ProviderConfigSpec) (bool, error) {
	status := pc.Status.DeepCopy()
	status.AppliedSpec = applied
	status.Shard = c.shard
	present := map[string]bool{ready.Type: true}
	for _, cond := range append(conds, ready) {
		cond.ObservedGeneration = pc.Generation
		meta.SetStatusCondition(&status.Conditions, cond)
		present[cond.Type] = true
	}
	for _, t := range c.manager.ConditionTypes() {
		if !present[t] {
			meta.RemoveStatusCondition(&status.Conditions, t)
		}
	}
	status.ObservedGeneration = generation
	if apiequality.Semantic.DeepEqual(*status, pc.Status) {
		// The cache shows the status wanted: a write of ours it lagged behind is in it, and need not be kept.
		c.lastWritesMu.Lock()
		delete(c.lastWrites, pc.Name)
		c.lastWritesMu.Unlock()
		return false, nil
	}
	c.lastWritesMu.Lock()
	last, wrote := c.lastWrites[pc.Name]
	c.lastWritesMu.Unlock()
	if wrote && last.basedOn == pc.ResourceVersion && sameIgnoringTransitionTimes(*status, last.status) {
		// Already written from this very object; the informer has not delivered our write yet.
		return false, nil
	}
	updated, err := PatchStatus(ctx, c.client, pc, *status)
	if err != nil || updated == nil {
		return false, err
	}
	c.lastWritesMu.Lock()
	c.lastWrites[pc.Name] = statusWrite{basedOn: pc.ResourceVersion, status: *status}
	c.lastWritesMu.Unlock()
	return true, nil
}

// RecordAppliedSpec puts the sections the manager is about to start pc's controllers from on record in
// status.appliedSpec (Manager.Record), if they are not yet: declared before made, so that a cleanup can still reach
// what the controllers make after a section is removed. It returns the ProviderConfig as it is now, or nil when it
// is gone.
func RecordAppliedSpec(ctx context.Context, client mpclientset.Interface, m *Manager, pc *mpv1alpha1.ProviderConfig) (*mpv1alpha1.ProviderConfig, error) {
	applied := m.Record(pc)
	if apiequality.Semantic.DeepEqual(applied, pc.Status.AppliedSpec) {
		return pc, nil
	}
	next := pc.Status.DeepCopy()
	next.AppliedSpec = applied
	return PatchStatus(ctx, client, pc, *next)
}

// PatchStatus sends the difference between pc's status and status as a merge patch of the status subresource: the
// manager is the only writer of the status, and a patch never carries a stale copy of anything else. It returns
// the updated object, or nil when the ProviderConfig is gone.
func PatchStatus(ctx context.Context, client mpclientset.Interface, pc *mpv1alpha1.ProviderConfig, status mpv1alpha1.ProviderConfigStatus) (*mpv1alpha1.ProviderConfig, error) {
	before, err := json.Marshal(map[string]any{"status": pc.Status})
	if err != nil {
		return nil, err
	}
	after, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return nil, err
	}
	// The difference, not the whole status: a field left out must be removed (a section of status.appliedSpec
	// whose cleanup finished), which a merge patch says with null.
	patch, err := jsonpatch.CreateMergePatch(before, after)
	if err != nil {
		return nil, err
	}
	updated, err := client.MultiprojectV1alpha1().ProviderConfigs().Patch(ctx, pc.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("writing the status of ProviderConfig %s: %w", pc.Name, err)
	}
	return updated, nil
}

// sameIgnoringTransitionTimes compares two statuses as a reader would: a condition recomputed from a stale object
// gets a new lastTransitionTime, but says the same thing.
func sameIgnoringTransitionTimes(a, b mpv1alpha1.ProviderConfigStatus) bool {
	a, b = *a.DeepCopy(), *b.DeepCopy()
	for i := range a.Conditions {
		a.Conditions[i].LastTransitionTime = metav1.Time{}
	}
	for i := range b.Conditions {
		b.Conditions[i].LastTransitionTime = metav1.Time{}
	}
	return apiequality.Semantic.DeepEqual(a, b)
}

// PatchFinalizer adds or removes the manager's finalizer with a merge patch that carries the resourceVersion, so a
// concurrent change of the finalizer list makes it fail with a conflict instead of overwriting that change. It
// returns the updated object, or nil when the ProviderConfig is gone.
func PatchFinalizer(ctx context.Context, client mpclientset.Interface, pc *mpv1alpha1.ProviderConfig, present bool) (*mpv1alpha1.ProviderConfig, error) {
	finalizers := slices.DeleteFunc(slices.Clone(pc.Finalizers), func(f string) bool { return f == mpv1alpha1.ProviderConfigCleanupFinalizer })
	if present {
		finalizers = append(finalizers, mpv1alpha1.ProviderConfigCleanupFinalizer)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": finalizers, "resourceVersion": pc.ResourceVersion}})
	if err != nil {
		return nil, err
	}
	updated, err := client.MultiprojectV1alpha1().ProviderConfigs().Patch(ctx, pc.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("updating the finalizer of ProviderConfig %s: %w", pc.Name, err)
	}
	return updated, nil
}
