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
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/keymutex"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"
	mplisters "github.com/multiproject/client-go/listers/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/apibudget"
	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
	"github.com/multiproject/multiproject-controller-manager/pkg/sharding"
	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
)

// Event reasons on ProviderConfigs.
const (
	EventControllersStarted = "ControllersStarted"
	EventControllerFailed   = "ControllerFailed"
	EventCleanupPending     = "CleanupPending"
	EventCleanedUp          = "CleanedUp"
	// EventCloudResourcesAbandoned lists what the operator abandoned with the abandon annotation.
	EventCloudResourcesAbandoned = "CloudResourcesAbandoned"
	// EventAbandonRecorded says which generation the abandon annotation covers, once the manager recorded it.
	EventAbandonRecorded = "AbandonRecorded"
	// EventAbandonAnnotationStale says that an abandon annotation left in place covers nothing of the current
	// generation.
	EventAbandonAnnotationStale = "AbandonAnnotationStale"
	// EventHeldByShard: a replica that runs unsharded does not start the tenant while a live shard may run it.
	EventHeldByShard = "HeldByShard"
)

// Ready condition reasons.
const (
	ReasonAllControllersReady = "AllControllersReady"
	ReasonControllersNotReady = "ControllersNotReady"
	ReasonNoControllers       = "NoControllersConfigured"
	ReasonDeleting            = "Deleting"
)

// PendingRecheckInterval is how often a deleting ProviderConfig with pending cloud state is looked at again.
const PendingRecheckInterval = 5 * time.Second

// Controller is the ProviderConfigController: it hands every ProviderConfig to the Manager and writes its status.
type Controller struct {
	client   mpclientset.Interface
	lister   mplisters.ProviderConfigLister
	informer cache.SharedIndexInformer
	manager  *Manager
	recorder record.EventRecorder
	workers  *worker.Queue

	// lastWrites remembers, per ProviderConfig, the status last written and the resourceVersion it was computed
	// from. A sync that runs before the informer has seen that write computes the same status from the same
	// (stale) object; it must not send it again. An entry goes once the cache shows the status it holds.
	lastWritesMu sync.Mutex
	lastWrites   map[string]statusWrite

	// shard, if set (a sharded replica), is this replica's shard: it runs and writes only the ProviderConfigs the
	// shard owns, stops the others, and names itself in status.shard. tenantLocks serializes a sync with
	// StopUnowned for the same tenant.
	shard       string
	tenantLocks keymutex.KeyMutex

	// staleWarned remembers, per ProviderConfig, the generation for which a stale abandon annotation was last
	// reported, so that the Warning is recorded once per generation, not on every sync. Guarded by lastWritesMu.
	staleWarned map[string]int64

	// listed remembers, per ProviderConfig, the Secrets its status.secretsInUse listed when last synced, so that
	// they can be released if it vanishes; protected, those this process has seen carry the tenant's in-use
	// finalizer, so a sync does not read them again.
	secretsMu sync.Mutex
	listed    map[string][]mpv1alpha1.SecretReference
	protected map[string]sets.Set[mpv1alpha1.SecretReference]

	// superseded remembers, per ProviderConfig, the resourceVersions that a sync read and then changed with a
	// write of its own. A sync that reads one of them from a cache that has not delivered that write yet would
	// repeat what the write followed from (an Abandon, a CleanedUp Event, a Secret protected again after its
	// release); it waits for the write's own event instead. Guarded by lastWritesMu.
	superseded map[string]sets.Set[string]

	// holders, if set (a replica that runs unsharded under leader election), says which tenants a sharded replica
	// may still run: this replica does not start those. heldBy remembers, per tenant, the shard last reported in
	// an Event, so that a wait is told once.
	holders ShardHolders
	heldMu  sync.Mutex
	heldBy  map[string]string
}

// ShardHolders says which live shard may still run a tenant (sharding.Holders).
type ShardHolders interface {
	// Holder returns that shard and when to look again, or "" when none may run the tenant.
	Holder(ctx context.Context, pc *mpv1alpha1.ProviderConfig) (string, time.Time, error)
	// HeldInCache is Holder from the cache alone, for reports.
	HeldInCache(pc *mpv1alpha1.ProviderConfig) bool
}

type statusWrite struct {
	basedOn string
	status  mpv1alpha1.ProviderConfigStatus
}

// NewController builds the controller. informer is the shared ProviderConfig informer; manager must have been
// built with OnConditionChange set to the returned controller's Enqueue (use NewManagerAndController).
func NewController(client mpclientset.Interface, informer cache.SharedIndexInformer, manager *Manager, recorder record.EventRecorder) *Controller {
	c := &Controller{
		client:      client,
		lister:      mplisters.NewProviderConfigLister(informer.GetIndexer()),
		informer:    informer,
		manager:     manager,
		recorder:    recorder,
		lastWrites:  map[string]statusWrite{},
		staleWarned: map[string]int64{},
		superseded:  map[string]sets.Set[string]{},
		listed:      map[string][]mpv1alpha1.SecretReference{},
		protected:   map[string]sets.Set[mpv1alpha1.SecretReference]{},
		heldBy:      map[string]string{},
		// Hashed: two tenants may share a lock, which at worst makes one wait for the other's sync.
		tenantLocks: keymutex.NewHashed(64),
	}
	c.workers = worker.New(worker.Config{
		Controller: "providerconfig",
		KeyName:    "providerConfig",
		Sync: func(ctx context.Context, name string) (worker.Result, error) {
			requeueAfter, err := c.sync(ctx, name)
			return worker.Result{RequeueAfter: requeueAfter}, err
		},
		// The ProviderConfig controller is process-wide: its syncs have their own series.
		Observe: func(name string, err error) {
			// The sync of a tenant that is gone (or moved to another shard) forgot its series; counting it
			// would make one again, for good.
			if _, getErr := c.lister.Get(name); apierrors.IsNotFound(getErr) {
				return
			}
			result := "success"
			if err != nil {
				result = "error"
			}
			metrics.ProviderConfigSyncs.Inc(name, result)
		},
	})
	return c
}

// NewManagerAndController wires a Manager whose condition changes enqueue the ProviderConfig into the returned
// Controller.
func NewManagerAndController(cfg ManagerConfig, client mpclientset.Interface, informer cache.SharedIndexInformer, recorder record.EventRecorder) (*Manager, *Controller) {
	// Controllers report conditions only once started, which is after this function returns, so c is set by then.
	var c *Controller
	cfg.OnConditionChange = func(name string) { c.Enqueue(name) }
	m := NewManager(cfg)
	c = NewController(client, informer, m, recorder)
	return m, c
}

// RunAsShard makes the controller run, and write, only the ProviderConfigs that shard owns (sharding.Owns); any
// other is stopped (without cleanup: its new owner carries on) on its next sync. Call it before Run.
func (c *Controller) RunAsShard(shard string) { c.shard = shard }

// YieldToShards makes a controller that runs unsharded leave alone every tenant that a live shard may still run
// (its shard label or status.shard names a shard whose Lease is live), until that shard has released it or its
// Lease has expired: during a move between sharded and unsharded replicas, both kinds run at once, and the leader
// Lease they share keeps the sharder and this controller apart but not the shards. Call it before Run.
func (c *Controller) YieldToShards(holders ShardHolders) { c.holders = holders }

// owns says whether this replica may run and write the ProviderConfig. A shard owns the tenants labeled with it and
// not draining (sharding.Owns). A replica that runs unsharded owns every tenant, except, with YieldToShards, those a
// live shard may still run: then it returns when to look again (when that shard's Lease would expire; a release is
// an event that brings the tenant back sooner).
func (c *Controller) owns(ctx context.Context, pc *mpv1alpha1.ProviderConfig) (bool, time.Duration, error) {
	switch {
	case c.shard != "":
		return sharding.Owns(c.shard, pc.Labels), 0, nil
	case c.holders == nil:
		return true, 0, nil
	}
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
		return true, 0, nil
	}
	if told != shard {
		c.recorder.Eventf(pc, corev1.EventTypeNormal, EventHeldByShard,
			"Shard %s (named by the label %s or status.shard) holds a live Lease and may run the tenant; this replica runs unsharded and starts it once that shard has released it or its Lease has expired",
			shard, sharding.ShardLabel)
	}
	// Just after the expiry as read: a renewal since then moves it, and the next look finds the new one.
	return false, time.Until(expiry) + 10*time.Millisecond, nil
}

// ownsCached is owns without a read from the API server, for reports.
func (c *Controller) ownsCached(pc *mpv1alpha1.ProviderConfig) bool {
	switch {
	case c.shard != "":
		return sharding.Owns(c.shard, pc.Labels)
	case c.holders == nil:
		return true
	}
	return !c.holders.HeldInCache(pc)
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

// Enqueue schedules a sync of the named ProviderConfig.
func (c *Controller) Enqueue(name string) { c.workers.Add(name) }

// EnqueueAll schedules every known ProviderConfig, e.g. when an API that controllers wait for appears.
func (c *Controller) EnqueueAll() {
	names, err := c.lister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, pc := range names {
		c.workers.Add(pc.Name)
	}
}

// Run processes ProviderConfigs with the given number of workers until ctx ends, then stops every tenant's
// controllers and returns once they are gone, or with ErrControllersStillRunning once the stop timeout has
// passed for those that are not.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer c.manager.StopRunsWhenDone(ctx)()
	if err := c.workers.Watch(c.informer, cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueObject,
		UpdateFunc: func(_, obj any) { c.enqueueObject(obj) },
		DeleteFunc: c.enqueueObject,
	}); err != nil {
		if ctx.Err() != nil {
			// Stopped before it started: the informer, which runs on the same context, refuses new handlers.
			return nil
		}
		return err
	}
	logger := klog.FromContext(ctx)
	logger.Info("Starting ProviderConfig controller", "workers", workers)
	defer metrics.AddTenantSource(metrics.TenantSource{Statuses: c.statuses, Running: c.manager.AllRunning})()
	c.workers.Run(ctx, worker.RunOptions{Workers: workers})
	logger.Info("Stopping every tenant's controllers")
	if running := c.manager.StopAll(ctx); len(running) > 0 {
		return fmt.Errorf("%w: tenants %s", ErrControllersStillRunning, strings.Join(running, ", "))
	}
	return nil
}

// statuses lists, for the status series, the ProviderConfigs this replica runs, with their status as the cache holds
// it: every status this controller writes comes back as an update.
func (c *Controller) statuses() []metrics.ProviderConfigStatus {
	pcs, err := c.lister.List(labels.Everything())
	if err != nil {
		return nil
	}
	out := make([]metrics.ProviderConfigStatus, 0, len(pcs))
	for _, pc := range pcs {
		if c.ownsCached(pc) {
			out = append(out, metrics.ProviderConfigStatus{Name: pc.Name, Conditions: pc.Status.Conditions, DeletionTimestamp: pc.DeletionTimestamp})
		}
	}
	return out
}

// ErrControllersStillRunning is Run's error when a tenant's controller did not return within the stop timeout:
// it still acts, so the process must not hand its tenants over (release a Lease) before it exits.
var ErrControllersStillRunning = errors.New("controllers still running after the stop timeout")

func (c *Controller) enqueueObject(obj any) {
	obj = worker.LastState(obj)
	if pc, ok := obj.(*mpv1alpha1.ProviderConfig); ok {
		c.workers.Add(pc.Name)
	}
}

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
