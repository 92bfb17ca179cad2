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
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/apibudget"
	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
	"github.com/multiproject/multiproject-controller-manager/pkg/sharding"
)

// sync brings one tenant in line with its ProviderConfig. It returns a delay after which to look again when the
// tenant waits for something no event announces (cloud cleanup).
func (c *Controller) sync(ctx context.Context, name string) (time.Duration, error) {
	c.tenantLocks.LockKey(name)
	defer func() { _ = c.tenantLocks.UnlockKey(name) }()
	pc, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return 0, c.vanished(ctx, name)
	}
	if err != nil {
		return 0, err
	}
	if c.isSuperseded(name, pc.ResourceVersion) {
		// The informer has not delivered this replica's own change of this very object yet; its event syncs again.
		return 0, nil
	}
	s := &tenantSync{c: c, name: name}
	defer func() { c.supersede(name, s.changed) }()
	owned, recheck, err := c.owns(ctx, pc)
	if err != nil {
		return 0, err
	}
	if !owned {
		return recheck, s.disown(ctx)
	}
	if pc, err = s.finalizer(ctx, pc); err != nil || pc == nil {
		return 0, err
	}
	if pc, err = s.recordShard(ctx, pc); err != nil || pc == nil {
		return 0, err
	}
	if pc, err = s.declare(ctx, pc); err != nil || pc == nil {
		return 0, err
	}
	out, syncErr := s.controllers(ctx, pc)
	if pc.DeletionTimestamp != nil {
		return s.deletion(ctx, pc, out, syncErr)
	}
	return s.status(ctx, pc, out, syncErr)
}

// tenantSync is one sync of one tenant: the steps of Controller.sync, each of which ends the sync by returning a
// nil ProviderConfig, and the resourceVersions its writes replaced.
type tenantSync struct {
	c    *Controller
	name string
	// changed holds the resourceVersions that this sync read and then changed with a write of its own; the sync
	// remembers them when it ends (supersede).
	changed []string
}

// wrote records that a write of this sync changed the ProviderConfig it read at resourceVersion before.
func (s *tenantSync) wrote(before string, after *mpv1alpha1.ProviderConfig) {
	if after != nil && after.ResourceVersion != before && before != "" {
		s.changed = append(s.changed, before)
	}
}

// write makes one write of the sync and records what it changed. It returns the ProviderConfig as it is now, or
// nil when it is gone.
func (s *tenantSync) write(pc *mpv1alpha1.ProviderConfig, write func(*mpv1alpha1.ProviderConfig) (*mpv1alpha1.ProviderConfig, error)) (*mpv1alpha1.ProviderConfig, error) {
	read := pc.ResourceVersion
	pc, err := write(pc)
	s.wrote(read, pc)
	return pc, err
}

// vanished forgets a ProviderConfig that is gone: deleted without (or after) our finalizer, or moved to another
// shard. Nothing may keep running for it.
func (c *Controller) vanished(ctx context.Context, name string) error {
	c.manager.Stop(ctx, name)
	if err := c.releaseVanished(ctx, name); err != nil {
		return err
	}
	metrics.ForgetProviderConfig(name)
	apibudget.Forget(name)
	c.lastWritesMu.Lock()
	delete(c.lastWrites, name)
	delete(c.staleWarned, name)
	delete(c.superseded, name)
	delete(c.startingSince, name)
	c.lastWritesMu.Unlock()
	c.heldMu.Lock()
	delete(c.heldBy, name)
	c.heldMu.Unlock()
	// Gone from a shard's view: deleted, drained, or its label removed by hand or by an update that replaced the
	// object.
	return c.release(ctx, name)
}

// disown stops a tenant this replica does not own: assigned elsewhere, or draining. The owner writes the status
// (and releases its Secrets); a drain is acknowledged by the Drainer. Or, unsharded, a live shard may still run it.
func (s *tenantSync) disown(ctx context.Context) error {
	s.c.manager.Stop(ctx, s.name)
	s.c.rememberSecrets(s.name, nil)
	return s.c.release(ctx, s.name)
}

// finalizer puts the finalizer on before anything starts, so that nothing a controller makes can outlive the
// tenant, and goes on with the object the patch returned: waiting for the update's event to bring it back cost
// every tenant's start one more sync and one informer round trip (a cold start of thousands waited for each in
// turn); the event, whose resourceVersion this sync replaced, then does nothing. A ProviderConfig deleted without
// it has nothing to clean up: its controllers stop and its Secrets are released.
func (s *tenantSync) finalizer(ctx context.Context, pc *mpv1alpha1.ProviderConfig) (*mpv1alpha1.ProviderConfig, error) {
	if slices.Contains(pc.Finalizers, mpv1alpha1.ProviderConfigCleanupFinalizer) {
		return pc, nil
	}
	if pc.DeletionTimestamp != nil {
		s.c.manager.Stop(ctx, s.name)
		_, err := s.write(pc, func(pc *mpv1alpha1.ProviderConfig) (*mpv1alpha1.ProviderConfig, error) {
			return s.c.releaseSecrets(ctx, pc, nil)
		})
		return nil, err
	}
	return s.write(pc, func(pc *mpv1alpha1.ProviderConfig) (*mpv1alpha1.ProviderConfig, error) {
		return PatchFinalizer(ctx, s.c.client, pc, true)
	})
}

// recordShard makes a shard record itself in the status before it starts the tenant, on the object it read: a label
// removed since makes the write fail, and the status, which no update of the object can erase, then tells the
// sharder (and a replica running unsharded) that this shard may run the tenant until it releases it.
func (s *tenantSync) recordShard(ctx context.Context, pc *mpv1alpha1.ProviderConfig) (*mpv1alpha1.ProviderConfig, error) {
	if s.c.shard == "" || pc.Status.Shard == s.c.shard {
		return pc, nil
	}
	pc, err := s.write(pc, func(pc *mpv1alpha1.ProviderConfig) (*mpv1alpha1.ProviderConfig, error) {
		return sharding.RecordOwner(ctx, s.c.client, pc, s.c.shard)
	})
	if apierrors.IsConflict(err) {
		// Our read is older than the object: the informer delivers the newer one, and it is looked at again.
		return nil, nil
	}
	return pc, err
}

// declare puts on record, before any controller starts, what it and its cleanup will rely on.
func (s *tenantSync) declare(ctx context.Context, pc *mpv1alpha1.ProviderConfig) (*mpv1alpha1.ProviderConfig, error) {
	writes := []func(*mpv1alpha1.ProviderConfig) (*mpv1alpha1.ProviderConfig, error){
		// Declared before made: the sections the controllers start from are on record before they start, so that
		// a cleanup can still reach what they make after the section is removed.
		func(pc *mpv1alpha1.ProviderConfig) (*mpv1alpha1.ProviderConfig, error) {
			return RecordAppliedSpec(ctx, s.c.client, s.c.manager, pc)
		},
		// The abandon decision is on record before anything acts on it, so what it covers is known after a restart.
		func(pc *mpv1alpha1.ProviderConfig) (*mpv1alpha1.ProviderConfig, error) {
			return s.c.recordAbandon(ctx, pc)
		},
		// The credentials a controller or its cleanup reads are protected before it starts: deleting the Secret
		// together with the tenant (one Helm release) must not take them from the cleanup.
		func(pc *mpv1alpha1.ProviderConfig) (*mpv1alpha1.ProviderConfig, error) {
			return s.c.protectSecrets(ctx, pc)
		},
	}
	for _, write := range writes {
		var err error
		if pc, err = s.write(pc, write); err != nil || pc == nil {
			return nil, err
		}
	}
	return pc, nil
}

// controllers has the Manager bring the tenant's controllers in line, and tells the user what changed.
func (s *tenantSync) controllers(ctx context.Context, pc *mpv1alpha1.ProviderConfig) (Outcome, error) {
	before := s.c.manager.Running(s.name)
	out, syncErr := s.c.manager.Sync(ctx, pc)
	out.Conditions = keepObserved(pc, out.Conditions)
	if after := s.c.manager.Running(s.name); !slices.Equal(before, after) && len(after) > 0 && !convergedBefore(pc) {
		s.c.recorder.Eventf(pc, corev1.EventTypeNormal, EventControllersStarted, "running: %s", strings.Join(after, ", "))
	}
	if syncErr != nil {
		s.c.recorder.Event(pc, corev1.EventTypeWarning, EventControllerFailed, syncErr.Error())
	}
	if len(out.Abandoned) > 0 {
		s.c.recorder.Event(pc, corev1.EventTypeWarning, EventCloudResourcesAbandoned, "abandoned at the operator's request: "+strings.Join(out.Abandoned, "; "))
	}
	return out, syncErr
}

// requeue is when to look again at a tenant whose cleanup waits for something no event announces.
func requeue(out Outcome) time.Duration {
	if len(out.Pending) > 0 {
		return PendingRecheckInterval
	}
	return 0
}

// deletion finishes a deleting tenant once its cleanups have nothing left: its controllers stop, its Secrets are
// released and the finalizer goes. Until then, the status says what the deletion waits for.
func (s *tenantSync) deletion(ctx context.Context, pc *mpv1alpha1.ProviderConfig, out Outcome, syncErr error) (time.Duration, error) {
	if len(out.Pending) > 0 || syncErr != nil {
		if err := s.cleanupPending(ctx, pc, out, syncErr); err != nil {
			return 0, err
		}
		return requeue(out), syncErr
	}
	s.c.manager.Stop(ctx, s.name)
	// Nothing of the tenant needs its Secrets any more.
	pc, err := s.write(pc, func(pc *mpv1alpha1.ProviderConfig) (*mpv1alpha1.ProviderConfig, error) {
		return s.c.releaseSecrets(ctx, pc, nil)
	})
	if err != nil || pc == nil {
		return 0, err
	}
	klog.FromContext(ctx).Info("Tenant stopped and cleaned up; removing the finalizer")
	updated, err := PatchFinalizer(ctx, s.c.client, pc, false)
	if err != nil {
		return 0, err
	}
	// Changed or gone: either way an event follows, and no sync may act on this copy again.
	s.changed = append(s.changed, pc.ResourceVersion)
	if updated != nil {
		s.c.recorder.Event(pc, corev1.EventTypeNormal, EventCleanedUp, "every controller of the tenant stopped and nothing is left outside the cluster")
	}
	return 0, nil
}

// cleanupPending writes the status of a deleting tenant whose cleanup is not finished, or whose controllers failed.
func (s *tenantSync) cleanupPending(ctx context.Context, pc *mpv1alpha1.ProviderConfig, out Outcome, syncErr error) error {
	what := strings.Join(out.Pending, "; ")
	if syncErr != nil {
		what = strings.Join(append(out.Pending, syncErr.Error()), "; ")
	}
	ready := metav1.Condition{Type: mpv1alpha1.ProviderConfigConditionReady, Status: metav1.ConditionFalse, Reason: ReasonDeleting,
		Message: "deletion waits for cleanup outside the cluster: " + what}
	written, err := s.c.writeStatus(ctx, pc, out.Conditions, ready, pc.Status.ObservedGeneration, out.Applied)
	if err != nil {
		return err
	}
	if written {
		s.changed = append(s.changed, pc.ResourceVersion)
		s.c.recorder.Event(pc, corev1.EventTypeNormal, EventCleanupPending, ready.Message)
	}
	return nil
}

// status writes the status of a tenant that is not being deleted, after releasing the Secrets nothing needs any
// more.
func (s *tenantSync) status(ctx context.Context, pc *mpv1alpha1.ProviderConfig, out Outcome, syncErr error) (time.Duration, error) {
	ready := readyCondition(out.Conditions)
	// A generation is observed once the controllers run from its spec: a GitOps health check that compares
	// observedGeneration with generation must not see convergence while a section waits to start (or cannot
	// start here at all; its condition says why).
	generation := pc.Status.ObservedGeneration
	if syncErr == nil && out.BuiltFromSpec {
		generation = pc.Generation
	}
	// A Secret the spec no longer names and no pending cleanup needs (a changed credentialsSecretRef, a removed
	// section cleaned up) is released.
	pc, err := s.write(pc, func(pc *mpv1alpha1.ProviderConfig) (*mpv1alpha1.ProviderConfig, error) {
		return s.c.releaseSecrets(ctx, pc, s.c.manager.SecretsInUse(&pc.Spec, out.Applied))
	})
	if err != nil || pc == nil {
		return 0, err
	}
	if wait := s.c.awaitReports(s.name, out.Conditions); wait > 0 && syncErr == nil {
		if recheck := requeue(out); recheck > 0 {
			wait = min(wait, recheck)
		}
		return wait, nil
	}
	written, err := s.c.writeStatus(ctx, pc, out.Conditions, ready, generation, out.Applied)
	if err != nil {
		return 0, err
	}
	if written {
		s.changed = append(s.changed, pc.ResourceVersion)
	}
	return requeue(out), syncErr
}

// StartingReportGrace is how long the status waits for a controller that has just started to report its condition
// before it says that the controller is Starting.
const StartingReportGrace = 10 * time.Second

// awaitReports returns how long the status write may still wait for the controllers that have started and not
// reported yet; 0 when none is starting, or once they have had StartingReportGrace. A started controller reports
// as soon as its caches have synced, which for every tenant but a very large one is a few milliseconds, and its
// report syncs the tenant again: writing "Starting" in between cost every tenant's start one more status write
// (three instead of two: one in four of a cold start's writes on its busier client) to say something true for
// milliseconds. One that takes longer than the grace is reported Starting.
func (c *Controller) awaitReports(name string, conds []metav1.Condition) time.Duration {
	starting := slices.ContainsFunc(conds, func(cond metav1.Condition) bool { return cond.Reason == ReasonStarting })
	c.lastWritesMu.Lock()
	defer c.lastWritesMu.Unlock()
	if !starting {
		delete(c.startingSince, name)
		return 0
	}
	now := c.clock.Now()
	since, ok := c.startingSince[name]
	if !ok {
		since = now
		c.startingSince[name] = now
	}
	return max(0, c.startingGrace-now.Sub(since))
}

// isSuperseded reports whether a sync of this replica changed the ProviderConfig at this resourceVersion, whose
// informer has not delivered that change yet. A resourceVersion it did not change means the cache has caught up:
// what was remembered for the ProviderConfig goes.
func (c *Controller) isSuperseded(name, resourceVersion string) bool {
	c.lastWritesMu.Lock()
	defer c.lastWritesMu.Unlock()
	if c.superseded[name].Has(resourceVersion) {
		return true
	}
	delete(c.superseded, name)
	return false
}

// supersede remembers resourceVersions of the ProviderConfig that a sync changed.
func (c *Controller) supersede(name string, resourceVersions []string) {
	// An object without a resourceVersion (only a fake clientset stores one) cannot be told from its successor.
	resourceVersions = slices.DeleteFunc(resourceVersions, func(rv string) bool { return rv == "" })
	if len(resourceVersions) == 0 {
		return
	}
	c.lastWritesMu.Lock()
	defer c.lastWritesMu.Unlock()
	if c.superseded[name] == nil {
		c.superseded[name] = sets.New[string]()
	}
	c.superseded[name].Insert(resourceVersions...)
}
