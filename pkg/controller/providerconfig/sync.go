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
	logger := klog.FromContext(ctx) // carries the providerConfig key (worker.Queue)
	c.tenantLocks.LockKey(name)
	defer func() { _ = c.tenantLocks.UnlockKey(name) }()
	pc, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		// Deleted without (or after) our finalizer, or moved to another shard: nothing may keep running for it.
		c.manager.Stop(ctx, name)
		if err := c.releaseVanished(ctx, name); err != nil {
			return 0, err
		}
		metrics.ForgetProviderConfig(name)
		apibudget.Forget(name)
		c.lastWritesMu.Lock()
		delete(c.lastWrites, name)
		delete(c.staleWarned, name)
		delete(c.superseded, name)
		c.lastWritesMu.Unlock()
		c.heldMu.Lock()
		delete(c.heldBy, name)
		c.heldMu.Unlock()
		// Gone from a shard's view: deleted, drained, or its label removed by hand or by an update that replaced
		// the object.
		return 0, c.release(ctx, name)
	}
	if err != nil {
		return 0, err
	}
	if c.isSuperseded(name, pc.ResourceVersion) {
		// The informer has not delivered this replica's own change of this very object yet; its event syncs again.
		return 0, nil
	}
	// wrote records the resourceVersion a write of this sync changed; the deferred call remembers them all.
	var changed []string
	wrote := func(before string, after *mpv1alpha1.ProviderConfig) {
		if after != nil && after.ResourceVersion != before && before != "" {
			changed = append(changed, before)
		}
	}
	defer func() { c.supersede(name, changed) }()
	owned, recheck, err := c.owns(ctx, pc)
	if err != nil {
		return 0, err
	}
	if !owned {
		// Assigned elsewhere, or draining: the owner writes the status (and releases its Secrets); a drain is
		// acknowledged by the Drainer. Or, unsharded, a live shard may still run it.
		c.manager.Stop(ctx, name)
		c.rememberSecrets(name, nil)
		return recheck, c.release(ctx, name)
	}
	if pc.DeletionTimestamp != nil && !slices.Contains(pc.Finalizers, mpv1alpha1.ProviderConfigCleanupFinalizer) {
		c.manager.Stop(ctx, name)
		released, err := c.releaseSecrets(ctx, pc, nil)
		wrote(pc.ResourceVersion, released)
		return 0, err
	}
	// The finalizer goes on before anything starts, so that nothing a controller makes can outlive the tenant.
	if !slices.Contains(pc.Finalizers, mpv1alpha1.ProviderConfigCleanupFinalizer) {
		updated, err := PatchFinalizer(ctx, c.client, pc, true)
		wrote(pc.ResourceVersion, updated)
		if err != nil {
			return 0, err
		}
		// The update event brings the object back with the finalizer.
		return 0, nil
	}
	// A shard records itself in the status before it starts the tenant, on the object it read: a label removed
	// since makes the write fail, and the status, which no update of the object can erase, then tells the sharder
	// (and a replica running unsharded) that this shard may run the tenant until it releases it.
	if c.shard != "" && pc.Status.Shard != c.shard {
		read := pc.ResourceVersion
		recorded, err := sharding.RecordOwner(ctx, c.client, pc, c.shard)
		wrote(read, recorded)
		if apierrors.IsConflict(err) {
			// Our read is older than the object: the informer delivers the newer one, and it is looked at again.
			return 0, nil
		}
		if err != nil || recorded == nil {
			return 0, err
		}
		pc = recorded
	}
	// Declared before made: the sections the controllers start from are on record before they start, so that a
	// cleanup can still reach what they make after the section is removed.
	read := pc.ResourceVersion
	pc, err = RecordAppliedSpec(ctx, c.client, c.manager, pc)
	wrote(read, pc)
	if err != nil || pc == nil {
		return 0, err
	}
	// The abandon decision is on record before anything acts on it, so what it covers is known after a restart.
	read = pc.ResourceVersion
	pc, err = c.recordAbandon(ctx, pc)
	wrote(read, pc)
	if err != nil || pc == nil {
		return 0, err
	}
	// The credentials a controller or its cleanup reads are protected before it starts: deleting the Secret
	// together with the tenant (one Helm release) must not take them from the cleanup.
	read = pc.ResourceVersion
	pc, err = c.protectSecrets(ctx, pc)
	wrote(read, pc)
	if err != nil || pc == nil {
		return 0, err
	}

	before := c.manager.Running(name)
	out, syncErr := c.manager.Sync(ctx, pc)
	out.Conditions = keepObserved(pc, out.Conditions)
	if after := c.manager.Running(name); !slices.Equal(before, after) && len(after) > 0 && !convergedBefore(pc) {
		c.recorder.Eventf(pc, corev1.EventTypeNormal, EventControllersStarted, "running: %s", strings.Join(after, ", "))
	}
	if syncErr != nil {
		c.recorder.Event(pc, corev1.EventTypeWarning, EventControllerFailed, syncErr.Error())
	}
	if len(out.Abandoned) > 0 {
		c.recorder.Event(pc, corev1.EventTypeWarning, EventCloudResourcesAbandoned, "abandoned at the operator's request: "+strings.Join(out.Abandoned, "; "))
	}
	var requeue time.Duration
	if len(out.Pending) > 0 {
		requeue = PendingRecheckInterval
	}

	if pc.DeletionTimestamp != nil {
		if len(out.Pending) > 0 || syncErr != nil {
			what := strings.Join(out.Pending, "; ")
			if syncErr != nil {
				what = strings.Join(append(out.Pending, syncErr.Error()), "; ")
			}
			ready := metav1.Condition{Type: mpv1alpha1.ProviderConfigConditionReady, Status: metav1.ConditionFalse, Reason: ReasonDeleting,
				Message: "deletion waits for cleanup outside the cluster: " + what}
			if written, err := c.writeStatus(ctx, pc, out.Conditions, ready, pc.Status.ObservedGeneration, out.Applied); err != nil {
				return 0, err
			} else if written {
				changed = append(changed, pc.ResourceVersion)
				c.recorder.Event(pc, corev1.EventTypeNormal, EventCleanupPending, ready.Message)
			}
			return requeue, syncErr
		}
		c.manager.Stop(ctx, name)
		// Nothing of the tenant needs its Secrets any more.
		read = pc.ResourceVersion
		pc, err = c.releaseSecrets(ctx, pc, nil)
		wrote(read, pc)
		if err != nil || pc == nil {
			return 0, err
		}
		logger.Info("Tenant stopped and cleaned up; removing the finalizer")
		updated, err := PatchFinalizer(ctx, c.client, pc, false)
		if err != nil {
			return 0, err
		}
		// Changed or gone: either way an event follows, and no sync may act on this copy again.
		changed = append(changed, pc.ResourceVersion)
		if updated != nil {
			c.recorder.Event(pc, corev1.EventTypeNormal, EventCleanedUp, "every controller of the tenant stopped and nothing is left outside the cluster")
		}
		return 0, nil
	}

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
	read = pc.ResourceVersion
	pc, err = c.releaseSecrets(ctx, pc, c.manager.SecretsInUse(&pc.Spec, out.Applied))
	wrote(read, pc)
	if err != nil || pc == nil {
		return 0, err
	}
	if written, err := c.writeStatus(ctx, pc, out.Conditions, ready, generation, out.Applied); err != nil {
		return 0, err
	} else if written {
		changed = append(changed, pc.ResourceVersion)
	}
	return requeue, syncErr
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
