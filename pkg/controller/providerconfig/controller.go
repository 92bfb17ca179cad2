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
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/keymutex"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"
	mplisters "github.com/multiproject/client-go/listers/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
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

	// startingSince remembers, per ProviderConfig whose controllers have started and not all reported, when a sync
	// first found them so; the status waits for their reports up to startingGrace (awaitReports). Guarded by
	// lastWritesMu.
	startingSince map[string]time.Time
	startingGrace time.Duration
	clock         clock.PassiveClock

	// holders, if set (under leader election, or sharded), says which tenants another live shard may still run:
	// this replica does not start those (Ownership.Holders). heldBy remembers, per tenant, the shard last reported in
	// an Event, so that a wait is told once.
	holders ShardHolders
	heldMu  sync.Mutex
	heldBy  map[string]string

	// coverage, if set (a shard whose namespaced informers read only its tenants' namespaces), says whether those
	// informers have read a tenant's namespaces yet: the tenant does not start before.
	coverage TenantCoverage
}

// NewController builds the controller. informer is the shared ProviderConfig informer; manager must have been
// built with OnConditionChange set to the returned controller's Enqueue (use NewManagerAndController); ownership
// says which tenants it runs (the zero value: every one).
func NewController(client mpclientset.Interface, informer cache.SharedIndexInformer, manager *Manager, recorder record.EventRecorder,
	ownership Ownership) *Controller {
	c := &Controller{
		shard:         ownership.Shard,
		holders:       ownership.Holders,
		coverage:      ownership.Coverage,
		client:        client,
		lister:        mplisters.NewProviderConfigLister(informer.GetIndexer()),
		informer:      informer,
		manager:       manager,
		recorder:      recorder,
		lastWrites:    map[string]statusWrite{},
		staleWarned:   map[string]int64{},
		superseded:    map[string]sets.Set[string]{},
		startingSince: map[string]time.Time{},
		startingGrace: StartingReportGrace,
		clock:         clock.RealClock{},
		listed:        map[string][]mpv1alpha1.SecretReference{},
		protected:     map[string]sets.Set[mpv1alpha1.SecretReference]{},
		heldBy:        map[string]string{},
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
// Controller, which runs the tenants ownership gives it.
func NewManagerAndController(cfg ManagerConfig, client mpclientset.Interface, informer cache.SharedIndexInformer, recorder record.EventRecorder,
	ownership Ownership) (*Manager, *Controller) {
	// Controllers report conditions only once started, which is after this function returns, so c is set by then.
	var c *Controller
	cfg.OnConditionChange = func(name string) { c.Enqueue(name) }
	m := NewManager(cfg)
	c = NewController(client, informer, m, recorder, ownership)
	return m, c
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
