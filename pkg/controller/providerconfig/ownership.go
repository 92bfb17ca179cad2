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
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/sharding"
	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
)

// ShardHolders says which live shard may still run a tenant (sharding.Holders).
type ShardHolders interface {
	// Holder returns that shard and when to look again, or "" when none may run the tenant.
	Holder(ctx context.Context, pc *mpv1alpha1.ProviderConfig) (string, time.Time, error)
	// HeldInCache is Holder from the cache alone, for reports.
	HeldInCache(pc *mpv1alpha1.ProviderConfig) bool
}

// TenantCoverage says whether a shard's informers have read a tenant's namespaces (sharding.Coverage).
type TenantCoverage interface {
	Covers(tenant string) bool
}

// Ownership says which tenants this replica runs and writes; the zero value runs every one. The controller is
// built with it (NewController) and keeps it for its life.
type Ownership struct {
	// Shard, if set, makes the controller run, and write, only the ProviderConfigs that shard owns
	// (sharding.Owns); any other is stopped (without cleanup: its new owner carries on) on its next sync.
	Shard string
	// Holders, if set, makes the controller leave alone every tenant that another live shard may still run, until
	// that shard has released it or its Lease has expired. Unsharded, those are the tenants whose shard label or
	// status.shard names a shard whose Lease is live: during a move between sharded and unsharded replicas, both
	// kinds run at once, and the leader Lease they share keeps the sharder and this controller apart but not the
	// shards. As a shard, those are its tenants whose status.shard names another live shard: a label moved by hand
	// or by a stale GitOps apply while that shard still drains the tenant.
	Holders ShardHolders
	// Coverage, if set, makes a shard start a tenant only once its informers have read the tenant's namespaces:
	// with --sharded-watch they read only what the shard's selector holds, and a tenant that has just moved here
	// would otherwise start on caches without its objects.
	Coverage TenantCoverage
}

// owns says whether this replica may run and write the ProviderConfig. A shard owns the tenants labeled with it and
// not draining (sharding.Owns), once no other live shard may still run them (Ownership.Holders) and its informers have
// read their namespaces (Ownership.Coverage). A replica that runs unsharded owns every tenant, except, with
// Ownership.Holders, those a live shard may still run. When another shard holds the tenant, it returns when to look
// again (when that shard's Lease would expire; a release is an event that brings the tenant back sooner).
func (c *Controller) owns(ctx context.Context, pc *mpv1alpha1.ProviderConfig) (bool, time.Duration, error) {
	if c.shard != "" && !sharding.Owns(c.shard, pc.Labels) {
		return false, 0, nil
	}
	if c.holders != nil && (c.shard == "" || (pc.Status.Shard != "" && pc.Status.Shard != c.shard)) {
		if held, recheck, err := c.heldElsewhere(ctx, pc); err != nil || held {
			return false, recheck, err
		}
	}
	if c.shard != "" && c.coverage != nil && !c.coverage.Covers(pc.Name) {
		// Not a failure: the coverage hands the tenant back once its namespaces are read.
		return false, 0, fmt.Errorf("%w: this shard's informers have not read the namespaces of ProviderConfig %s yet",
			worker.ErrWaiting, pc.Name)
	}
	return true, 0, nil
}

// heldElsewhere says whether another live shard may still run the tenant, and when to look again; it tells the
// user once per holding shard.
func (c *Controller) heldElsewhere(ctx context.Context, pc *mpv1alpha1.ProviderConfig) (bool, time.Duration, error) {
	shard, expiry, err := c.holders.Holder(ctx, pc)
	if err != nil {
		return false, 0, fmt.Errorf("looking for a shard that may still run ProviderConfig %s: %w", pc.Name, err)
	}
	c.heldMu.Lock()
	told := c.heldBy[pc.Name]
	if shard == "" {
		delete(c.heldBy, pc.Name)
	} else {
		c.heldBy[pc.Name] = shard
	}
	c.heldMu.Unlock()
	if shard == "" {
		return false, 0, nil
	}
	if told != shard {
		if c.shard == "" {
			c.recorder.Eventf(pc, corev1.EventTypeNormal, EventHeldByShard,
				"Shard %s (named by the label %s or status.shard) holds a live Lease and may run the tenant; this replica runs unsharded and starts it once that shard has released it or its Lease has expired",
				shard, sharding.ShardLabel)
		} else {
			c.recorder.Eventf(pc, corev1.EventTypeNormal, EventHeldByShard,
				"Shard %s (named by status.shard) holds a live Lease and may still run the tenant; shard %s, which the label %s names, starts it once that shard has released it or its Lease has expired",
				shard, c.shard, sharding.ShardLabel)
		}
	}
	// Just after the expiry as read: a renewal since then moves it, and the next look finds the new one.
	return true, time.Until(expiry) + 10*time.Millisecond, nil
}

// ownsCached is owns without a read from the API server, for reports.
func (c *Controller) ownsCached(pc *mpv1alpha1.ProviderConfig) bool {
	if c.shard != "" && !sharding.Owns(c.shard, pc.Labels) {
		return false
	}
	return c.holders == nil || !c.holders.HeldInCache(pc)
}

// release clears status.shard of a tenant this shard no longer owns, once nothing of it runs here any more: while
// it names this shard, the sharder does not assign the tenant again (its label may be gone, but this shard may still
// be stopping it), nor does a replica running unsharded start it. A tenant that is drained is released by the
// Drainer too; one whose label was removed only here. Nothing to do when not sharded.
func (c *Controller) release(ctx context.Context, name string) error {
	if c.shard == "" {
		return nil
	}
	if !c.manager.Quiet(name) {
		return fmt.Errorf("a controller of ProviderConfig %s did not return within the stop timeout and still runs; not releasing it", name)
	}
	if err := sharding.Release(ctx, c.client, name, c.shard); err != nil && !errors.Is(err, sharding.ErrStillOwned) {
		return fmt.Errorf("releasing ProviderConfig %s: %w", name, err)
	}
	return nil
}

// StopUnowned stops a tenant this replica no longer owns, and returns nil only once every controller instance of
// the tenant has returned: one that outlives the stop timeout is detached but still acts, so until it returns
// StopUnowned fails and the caller (the Drainer) must not let another replica start the tenant. It waits for a
// sync of the tenant in progress and reads the ProviderConfig after it, so a sync that decided on an older read
// cannot start the tenant again afterwards; it fails if the informer says the tenant is still owned.
func (c *Controller) StopUnowned(ctx context.Context, name string) error {
	c.tenantLocks.LockKey(name)
	defer func() { _ = c.tenantLocks.UnlockKey(name) }()
	if pc, err := c.lister.Get(name); err == nil && c.ownsCached(pc) {
		return fmt.Errorf("ProviderConfig %s is still owned by this replica", name)
	}
	c.manager.Stop(ctx, name)
	if !c.manager.Quiet(name) {
		return fmt.Errorf("a controller of ProviderConfig %s did not return within the stop timeout and still runs", name)
	}
	return nil
}
