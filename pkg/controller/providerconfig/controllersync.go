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

// controllerSync is one controller of one tenant being brought in line by Sync: what was gathered of it, and the
// steps that act on decide's answer.
type controllerSync struct {
	m      *Manager
	pc     *mpv1alpha1.ProviderConfig
	t      *tenantControllers
	f      NamedFactory
	logger klog.Logger
	// applied is the status.appliedSpec Sync returns; the section is cleared from it once the cleanup is done.
	applied *mpv1alpha1.ProviderConfigSpec
	// section is the spec's section of the controller, nil when it has none.
	section any
	// run is what of the controller runs, nil when nothing does.
	run *controllerRun
	// cleanupTarget is the ProviderConfig a cleanup works from; nil when nothing is on record, or the spec
	// configures the controller.
	cleanupTarget *mpv1alpha1.ProviderConfig
	// missing are the APIs the cleanup needs that are not served.
	missing []string
	state   controllerState
}

// syncController brings one controller of the tenant in line: gather its state, decide, act. It returns what its
// cleanup still waits for and what was abandoned; a section whose cleanup finished is cleared from applied.
func (m *Manager) syncController(ctx context.Context, pc *mpv1alpha1.ProviderConfig, t *tenantControllers, f NamedFactory, enabled bool, applied *mpv1alpha1.ProviderConfigSpec) (pending, abandoned string, err error) {
	s := m.gather(ctx, pc, t, f, enabled, applied)
	switch decide(s.state) {
	case decisionKeep:
		return "", "", nil
	case decisionRun:
		return "", "", s.start(ctx)
	case decisionRestart:
		s.restart(ctx)
		return "", "", s.start(ctx)
	case decisionDisabled:
		m.setWaiting(t, f.Name, metav1.Condition{Type: f.ConditionType, Status: metav1.ConditionUnknown, Reason: ReasonControllerDisable,
			Message: fmt.Sprintf("the spec configures %s, but this manager runs with --controllers that disable it", f.Name)})
		return "", "", nil
	case decisionStop:
		s.stopController(ctx)
		m.locked(func() { delete(t.waiting, f.Name) })
		return "", "", nil
	case decisionAbandon:
		return s.abandon(ctx)
	case decisionCleanupBlocked:
		return s.cleanupBlocked(ctx)
	case decisionDone:
		s.done(ctx)
		return "", "", nil
	default: // decisionCleanup
		return s.cleanup(ctx)
	}
}

// gather reads what decide needs of one controller of the tenant.
func (m *Manager) gather(ctx context.Context, pc *mpv1alpha1.ProviderConfig, t *tenantControllers, f NamedFactory, enabled bool, applied *mpv1alpha1.ProviderConfigSpec) *controllerSync {
	s := &controllerSync{m: m, pc: pc, t: t, f: f, applied: applied, section: f.Section(&pc.Spec),
		logger: klog.FromContext(ctx).WithValues("providerConfig", pc.Name, "controller", f.Name)}
	m.locked(func() { s.run = t.runningInstance(f.Name) })
	configured := s.section != nil && pc.DeletionTimestamp == nil
	if !configured {
		// Only then is a cleanup looked for: the record costs a copy of pc.
		s.cleanupTarget = m.cleanupTarget(pc, f)
	}
	if s.cleanupTarget != nil {
		s.missing = m.missingAPIs(f, &s.cleanupTarget.Spec)
	}
	s.state = controllerState{
		enabled:            enabled,
		configured:         configured,
		running:            s.runKind(),
		recorded:           s.cleanupTarget != nil,
		abandoned:          f.Abandon != nil && AbandonCovers(pc),
		cleanupAPIsMissing: len(s.missing) > 0,
	}
	return s
}

// runKind says what of the controller runs.
func (s *controllerSync) runKind() runKind {
	switch {
	case s.run == nil:
		return runsNothing
	case s.run.cleanup:
		return runsCleanup
	case apiequality.Semantic.DeepEqual(s.section, s.run.section) && s.run.optionalServed == s.m.optionalServed(s.f):
		return runsCurrent
	default:
		return runsStale
	}
}

// start starts the controller from the spec's section.
func (s *controllerSync) start(ctx context.Context) error {
	_, err := s.m.start(ctx, s.pc, s.t, s.f, s.section, false)
	return err
}

// restart stops what runs in place of the controller the spec configures: an instance built from another section,
// or the cleanup.
func (s *controllerSync) restart(ctx context.Context) {
	why := "spec section changed"
	if apiequality.Semantic.DeepEqual(s.section, s.run.section) {
		why = "an optional API it reads is now served"
	}
	if s.run.cleanup {
		why = "the spec configures it again"
	}
	s.logger.Info("Stopping tenant controller", "reason", why, "cleanup", s.run.cleanup)
	s.stopRun(ctx)
}

// stopController stops the controller, not its cleanup, when the tenant no longer configures it or is being deleted.
func (s *controllerSync) stopController(ctx context.Context) {
	if s.run == nil || s.run.cleanup {
		return
	}
	why := "spec section removed"
	if s.pc.DeletionTimestamp != nil {
		why = "ProviderConfig deleted"
	}
	s.logger.Info("Stopping tenant controller", "reason", why)
	s.stopRun(ctx)
}

// stopRun stops whatever of the controller runs.
func (s *controllerSync) stopRun(ctx context.Context) {
	if s.run != nil {
		s.m.stopRun(ctx, s.pc.Name, s.t, s.run)
		s.run = nil
	}
}

// abandon gives up what the cleanup would remove, at the operator's request. Only what is outside the cluster can
// be abandoned: a controller without Abandon (its cleanup removes objects in the cluster, which can always be
// removed) cleans up to the end whatever the annotation says.
func (s *controllerSync) abandon(ctx context.Context) (pending, abandoned string, err error) {
	s.stopController(ctx)
	s.stopRun(ctx)
	what, err := s.m.abandon(ctx, s.cleanupTarget, s.f)
	if err != nil {
		return "", "", err
	}
	s.logger.Info("Cleanup abandoned at the operator's request", "abandoned", what)
	s.done(ctx)
	return "", what, nil
}

// cleanupBlocked says what a cleanup that cannot run here leaves, and why; done when nothing is left.
func (s *controllerSync) cleanupBlocked(ctx context.Context) (pending, abandoned string, err error) {
	s.stopController(ctx)
	blocked := "the cluster does not serve " + strings.Join(s.missing, ", ")
	if !s.state.enabled {
		blocked = "this manager runs with --controllers that disable " + s.f.Name
	}
	left, err := s.m.look(ctx, s.cleanupTarget, s.f)
	if err != nil {
		left = "cannot tell what is left (" + err.Error() + ")"
	}
	if s.looked(left) == decisionDone {
		s.done(ctx)
		return "", "", nil
	}
	msg := fmt.Sprintf("cleanup cannot run: %s; left: %s; %s", blocked, left, abandonHint(s.pc, s.f))
	s.m.setWaiting(s.t, s.f.Name, metav1.Condition{Type: s.f.ConditionType, Status: metav1.ConditionFalse, Reason: ReasonCleanupBlocked, Message: msg})
	return msg, "", nil
}

// cleanup runs the cleanup, in place of the controller, and asks it what is left; done when nothing is.
func (s *controllerSync) cleanup(ctx context.Context) (pending, abandoned string, err error) {
	s.stopController(ctx)
	if s.run == nil {
		if s.run, err = s.m.start(ctx, s.cleanupTarget, s.t, s.f, s.f.Section(&s.cleanupTarget.Spec), true); err != nil || s.run == nil {
			what := "waiting for the cleanup to start"
			if err != nil {
				what = "the cleanup could not start: " + err.Error()
			}
			return what, "", err
		}
	}
	left, err := s.f.Pending(ctx, s.run.cleanupContext)
	if err != nil {
		return "checking what is left: " + err.Error(), "", err
	}
	if s.looked(left) == decisionDone {
		s.logger.Info("Tenant controller cleaned up")
		s.done(ctx)
		return "", "", nil
	}
	s.run.condition.cleaningUp(left)
	if s.f.Abandon == nil && AbandonCovers(s.pc) {
		return left + " (in the cluster: the abandon annotation does not cover it)", "", nil
	}
	return left, "", nil
}

// looked asks decide again, now that what the cleanup leaves is known.
func (s *controllerSync) looked(left string) decision {
	s.state.running = s.runKind()
	s.state.looked, s.state.left = true, left
	return decide(s.state)
}

// done ends a cleanup that has nothing left: it stops, its section leaves the record, and its condition goes.
func (s *controllerSync) done(ctx context.Context) {
	s.stopRun(ctx)
	s.f.CopySection(s.applied, &mpv1alpha1.ProviderConfigSpec{})
	s.m.locked(func() { delete(s.t.waiting, s.f.Name) })
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
