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
	"fmt"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
)

// syncController brings one controller of the tenant in line. It returns what its cleanup still waits for and
// what was abandoned; a section whose cleanup finished is cleared from applied.
func (m *Manager) syncController(ctx context.Context, pc *mpv1alpha1.ProviderConfig, t *tenantControllers, f NamedFactory, enabled bool, applied *mpv1alpha1.ProviderConfigSpec) (pending, abandoned string, err error) {
	logger := klog.FromContext(ctx).WithValues("providerConfig", pc.Name, "controller", f.Name)
	deleting := pc.DeletionTimestamp != nil
	section := f.Section(&pc.Spec)
	var run *controllerRun
	m.locked(func() { run = t.runningInstance(f.Name) })

	if section != nil && !deleting {
		if !enabled {
			m.setWaiting(t, f.Name, metav1.Condition{Type: f.ConditionType, Status: metav1.ConditionUnknown, Reason: ReasonControllerDisable,
				Message: fmt.Sprintf("the spec configures %s, but this manager runs with --controllers that disable it", f.Name)})
			return "", "", nil
		}
		if run != nil && (run.cleanup || !apiequality.Semantic.DeepEqual(section, run.section)) {
			why := "spec section changed"
			if run.cleanup {
				why = "the spec configures it again"
			}
			logger.Info("Stopping tenant controller", "reason", why, "cleanup", run.cleanup)
			m.stopRun(ctx, pc.Name, t, run)
			run = nil
		}
		if run != nil {
			return "", "", nil
		}
		_, err := m.start(ctx, pc, t, f, section, false)
		return "", "", err
	}

	// The tenant no longer configures the controller, or is being deleted.
	if run != nil && !run.cleanup {
		why := "spec section removed"
		if deleting {
			why = "ProviderConfig deleted"
		}
		logger.Info("Stopping tenant controller", "reason", why)
		m.stopRun(ctx, pc.Name, t, run)
		run = nil
	}
	cleanupPC := m.cleanupTarget(pc, f)
	if cleanupPC == nil {
		// Nothing on record that a cleanup would need: the controller never ran for this tenant, or has none.
		m.locked(func() { delete(t.waiting, f.Name) })
		return "", "", nil
	}
	done := func() {
		if run != nil {
			m.stopRun(ctx, pc.Name, t, run)
		}
		f.CopySection(applied, &mpv1alpha1.ProviderConfigSpec{})
		m.locked(func() { delete(t.waiting, f.Name) })
	}

	// Only what is outside the cluster can be abandoned: a controller without Abandon (its cleanup removes
	// objects in the cluster, which can always be removed) cleans up to the end whatever the annotation says.
	if f.Abandon != nil && AbandonCovers(pc) {
		if run != nil {
			m.stopRun(ctx, pc.Name, t, run)
			run = nil
		}
		what, err := m.abandon(ctx, cleanupPC, f)
		if err != nil {
			return "", "", err
		}
		logger.Info("Cleanup abandoned at the operator's request", "abandoned", what)
		done()
		return "", what, nil
	}

	if run == nil {
		blocked := ""
		switch missing := m.missingAPIs(f, &cleanupPC.Spec); {
		case !enabled:
			blocked = "this manager runs with --controllers that disable " + f.Name
		case len(missing) > 0:
			blocked = "the cluster does not serve " + strings.Join(missing, ", ")
		}
		if blocked != "" {
			left, err := m.look(ctx, cleanupPC, f)
			if err != nil {
				left = "cannot tell what is left (" + err.Error() + ")"
			}
			if left == "" {
				done()
				return "", "", nil
			}
			msg := fmt.Sprintf("cleanup cannot run: %s; left: %s; %s", blocked, left, abandonHint(pc, f))
			m.setWaiting(t, f.Name, metav1.Condition{Type: f.ConditionType, Status: metav1.ConditionFalse, Reason: ReasonCleanupBlocked, Message: msg})
			return msg, "", nil
		}
		var err error
		if run, err = m.start(ctx, cleanupPC, t, f, f.Section(&cleanupPC.Spec), true); err != nil || run == nil {
			what := "waiting for the cleanup to start"
			if err != nil {
				what = "the cleanup could not start: " + err.Error()
			}
			return what, "", err
		}
	}
	left, err := f.Pending(ctx, run.cleanupContext)
	if err != nil {
		return "checking what is left: " + err.Error(), "", err
	}
	if left == "" {
		logger.Info("Tenant controller cleaned up")
		done()
		return "", "", nil
	}
	run.condition.cleaningUp(left)
	if f.Abandon == nil && AbandonCovers(pc) {
		return left + " (in the cluster: the abandon annotation does not cover it)", "", nil
	}
	return left, "", nil
}

// AbandonCovers reports whether the abandon annotation covers pc's current generation: it is set, and the
// decision the manager recorded when it first saw it (status.abandon) is of this generation. An annotation left in
// place from an earlier deletion or migration covers nothing of a later one.
func AbandonCovers(pc *mpv1alpha1.ProviderConfig) bool {
	return pc.Annotations[mpv1alpha1.AbandonCloudResourcesAnnotation] == "true" &&
		pc.Status.Abandon != nil && pc.Status.Abandon.Generation == pc.Generation
}

// abandonHint tells the operator of a blocked cleanup what the way out is.
func abandonHint(pc *mpv1alpha1.ProviderConfig, f NamedFactory) string {
	switch {
	case f.Abandon == nil:
		return fmt.Sprintf("what is left is in the cluster and is not abandoned by annotation %s: run the manager with %s enabled, or delete it by hand",
			mpv1alpha1.AbandonCloudResourcesAnnotation, f.Name)
	case pc.Annotations[mpv1alpha1.AbandonCloudResourcesAnnotation] == "true" && pc.Status.Abandon != nil && pc.Status.Abandon.Generation != pc.Generation:
		return fmt.Sprintf("annotation %s=true was given for generation %d and does not cover generation %d: remove it, wait for status.abandon to go, and set it again to abandon this",
			mpv1alpha1.AbandonCloudResourcesAnnotation, pc.Status.Abandon.Generation, pc.Generation)
	default:
		return fmt.Sprintf("set annotation %s=true to abandon it", mpv1alpha1.AbandonCloudResourcesAnnotation)
	}
}

// cleanupTarget returns the ProviderConfig a cleanup of f works from: pc, with f's section taken from
// status.appliedSpec when the spec no longer has it; nil when f has no cleanup or nothing is on record.
func (m *Manager) cleanupTarget(pc *mpv1alpha1.ProviderConfig, f NamedFactory) *mpv1alpha1.ProviderConfig {
	if !f.Cleans() {
		return nil
	}
	if pc.Status.AppliedSpec == nil || f.Section(pc.Status.AppliedSpec) == nil {
		// Never recorded: the controller never started for this tenant (or ran before records were kept; a
		// deleting tenant whose spec still has the section is cleaned up from the spec).
		if pc.DeletionTimestamp == nil || f.Section(&pc.Spec) == nil {
			return nil
		}
		return pc
	}
	target := pc.DeepCopy()
	if f.Section(&target.Spec) == nil {
		f.CopySection(&target.Spec, pc.Status.AppliedSpec)
	}
	return target
}
