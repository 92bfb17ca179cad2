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

package tenant

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
)

// Result is what a sync asks of the queue beyond its error: RequeueAfter > 0 looks at the key again after that
// delay, also after a success (a periodic check, or a wait that no event ends).
type Result struct {
	RequeueAfter time.Duration
}

// ErrWaiting marks a sync error that means "not yet" rather than "failed": the key is retried with backoff as for
// any error, but the failure is logged only at V(4), and counted as an error. Wrap it with fmt.Errorf("...: %w").
var ErrWaiting = errors.New("waiting")

// SyncFunc reconciles one key of a workqueue.
type SyncFunc func(ctx context.Context, key string) (Result, error)

// WorkerConfig describes one workqueue and its workers.
type WorkerConfig struct {
	// Tenant is the ProviderConfig the workers serve; "" for a process-wide controller. It labels logs and metrics.
	Tenant string
	// Controller is the --controllers name, the controller label of the sync metrics.
	Controller string
	// Queue names the queue among the controller's queues (e.g. neg's "translator" and "pusher"); "" when the
	// controller has one. The workqueue's own metrics are named <tenant>-<controller>[-<queue>].
	Queue string
	// KeyName is the log key of the item being synced: "service", "namespace", "ingress".
	KeyName string
	// Workers is how many keys are synced at once; at least one runs.
	Workers int
	// Sync reconciles one key.
	Sync SyncFunc
	// Observe, if set, replaces the per-tenant sync metrics (the ProviderConfig controller has its own series).
	Observe func(key string, err error)
	// AfterSync, if set (by tests), is called after every sync with its outcome.
	AfterSync func(key string, err error)
}

// Workers is the runtime every controller of this manager runs on, the shape of sample-controller written once: a
// typed rate-limited workqueue, event handlers registered on (tenant views of) informers and removed when the
// workers stop, a wait for the caches, N workers with one processNextWorkItem and its requeue decision, sync
// metrics and one log policy: a failed sync is logged at default verbosity with its key and tenant, an ErrWaiting
// or an optimistic-lock conflict at V(4), as is a sync the stop cut short.
type Workers struct {
	cfg   WorkerConfig
	queue workqueue.TypedRateLimitingInterface[string]

	mu            sync.Mutex
	registrations []registration
	synced        []cache.InformerSynced
}

type registration struct {
	informer     cache.SharedIndexInformer
	registration cache.ResourceEventHandlerRegistration
}

// NewWorkers builds the queue and the workers of cfg; nothing runs until Run.
func NewWorkers(cfg WorkerConfig) *Workers {
	cfg.Workers = max(cfg.Workers, 1)
	return &Workers{
		cfg: cfg,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: cfg.queueName()}),
	}
}

func (c WorkerConfig) queueName() string {
	name := c.Controller
	if c.Queue != "" {
		name += "-" + c.Queue
	}
	if c.Tenant != "" {
		name = c.Tenant + "-" + name
	}
	return name
}

// Add enqueues a key.
func (w *Workers) Add(key string) { w.queue.Add(key) }

// AddAfter enqueues a key once the delay has passed.
func (w *Workers) AddAfter(key string, delay time.Duration) { w.queue.AddAfter(key, delay) }

// AddObject enqueues the namespace/name key of an object or of a deleted object's tombstone.
func (w *Workers) AddObject(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("%s: %w", w.cfg.queueName(), err))
		return
	}
	w.queue.Add(key)
}

// NumRequeues returns how many times in a row key was put back with backoff: its failed syncs since its last
// success. A sync reads it for the attempts before the one under way.
func (w *Workers) NumRequeues(key string) int { return w.queue.NumRequeues(key) }

// Len returns how many keys wait in the queue.
func (w *Workers) Len() int { return w.queue.Len() }

// Watch adds a handler to an informer (typically a tenant view). Run waits for the informer and the handler to
// have synced before it starts the workers, and removes the handler when it returns. Call it before Run.
func (w *Workers) Watch(informer cache.SharedIndexInformer, handler cache.ResourceEventHandler) error {
	r, err := informer.AddEventHandler(handler)
	if err != nil {
		return fmt.Errorf("%s: watching: %w", w.cfg.queueName(), err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.registrations = append(w.registrations, registration{informer: informer, registration: r})
	w.synced = append(w.synced, informer.HasSynced, r.HasSynced)
	return nil
}

// WaitFor adds conditions Run waits for, besides the watched informers, before it starts the workers.
func (w *Workers) WaitFor(synced ...cache.InformerSynced) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.synced = append(w.synced, synced...)
}

// Close removes every handler Watch added and shuts the queue down. Run does it on return; a controller that
// gives up before Run (a Watch failed) calls it so that nothing it registered or started outlives it.
func (w *Workers) Close(ctx context.Context) {
	w.queue.ShutDown()
	w.mu.Lock()
	registrations := w.registrations
	w.registrations = nil
	w.mu.Unlock()
	for _, r := range registrations {
		if err := r.informer.RemoveEventHandler(r.registration); err != nil {
			utilruntime.HandleErrorWithContext(ctx, err, "Could not remove an event handler", "queue", w.cfg.queueName())
		}
	}
}

// RunOptions change how Run stops.
type RunOptions struct {
	// Workers, if positive, overrides WorkerConfig.Workers (a process-wide controller learns its count at Run).
	Workers int
	// WorkContext, if set, is the context syncs run on instead of Run's: a controller whose syncs must finish
	// what they started (the NEG pusher's GCE calls) gives one that ends later than Run's.
	WorkContext context.Context
	// Started, if set, is called once the caches have synced and the workers run.
	Started func()
}

// Run waits for the caches, runs the workers until ctx ends, and returns once the queue is shut down, every worker
// has returned and every handler is removed. Keys still queued are dropped: the next start lists them again.
func (w *Workers) Run(ctx context.Context, opts RunOptions) {
	defer utilruntime.HandleCrashWithContext(ctx)
	var workers sync.WaitGroup
	defer func() {
		w.queue.ShutDown()
		workers.Wait()
		w.Close(ctx)
		metrics.ForgetQueue(w.cfg.Tenant, w.cfg.Controller, w.cfg.queueName())
	}()
	w.mu.Lock()
	synced := append([]cache.InformerSynced(nil), w.synced...)
	w.mu.Unlock()
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return
	}
	workCtx := ctx
	if opts.WorkContext != nil {
		workCtx = opts.WorkContext
	}
	n := w.cfg.Workers
	if opts.Workers > 0 {
		n = opts.Workers
	}
	for range n {
		workers.Go(func() {
			wait.UntilWithContext(ctx, func(context.Context) {
				for w.processNextWorkItem(workCtx) {
				}
			}, time.Second)
		})
	}
	if opts.Started != nil {
		opts.Started()
	}
	<-ctx.Done()
}

// processNextWorkItem syncs one key and decides its requeue: backoff after an error, the asked delay after a
// success, nothing otherwise.
func (w *Workers) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := w.queue.Get()
	if shutdown {
		return false
	}
	defer w.queue.Done(key)
	if ctx.Err() != nil {
		// Stopping: a shut-down queue still hands out what it holds, but a sync on an ended context can only
		// fail. The keys left are dropped; the next start lists them again.
		return false
	}

	logger := klog.FromContext(ctx).WithValues(w.cfg.keyName(), key)
	result, err := w.cfg.Sync(klog.NewContext(ctx, logger), key)
	w.observe(key, err)
	if w.cfg.AfterSync != nil {
		w.cfg.AfterSync(key, err)
	}
	switch {
	case err != nil && (errors.Is(err, ErrWaiting) || apierrors.IsConflict(err) || ctx.Err() != nil):
		logger.V(4).Info("Retrying", "reason", err.Error())
		w.queue.AddRateLimited(key)
	case err != nil:
		logger.Error(err, "Sync failed; retrying with backoff")
		w.queue.AddRateLimited(key)
	default:
		w.queue.Forget(key)
		if result.RequeueAfter > 0 {
			w.queue.AddAfter(key, result.RequeueAfter)
		}
	}
	return true
}

func (w *Workers) observe(key string, err error) {
	if w.cfg.Observe != nil {
		w.cfg.Observe(key, err)
		return
	}
	metrics.ObserveSync(w.cfg.Tenant, w.cfg.Controller, w.cfg.queueName(), err, w.queue.Len())
}

func (c WorkerConfig) keyName() string {
	if c.KeyName == "" {
		return "key"
	}
	return c.KeyName
}
