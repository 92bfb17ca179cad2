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

package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
)

// Result is what a sync asks of the queue beyond its error: RequeueAfter > 0 looks at the key again after that
// delay, also after a success (a periodic check, or a wait that no event ends).
type Result struct {
	RequeueAfter time.Duration
	// Postponed says the sync did nothing but say when to come back (RequeueAfter): it waits for something, and
	// is not counted as a sync in the metrics.
	Postponed bool
}

// ErrWaiting marks a sync error that means "not yet" rather than "failed": the key is retried with backoff as for
// any error, but the failure is logged only at V(4), and counted as an error. Wrap it with fmt.Errorf("...: %w").
var ErrWaiting = errors.New("waiting")

// SyncFunc reconciles one key of a workqueue.
type SyncFunc func(ctx context.Context, key string) (Result, error)

// Config describes one workqueue and its workers.
type Config struct {
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
	// Retry, if set, replaces how failed keys are retried and on which clock keys wait. nil: client-go's default
	// controller rate limiter on the real clock. A pointer, because a Queue holds its Config and an idle tenant
	// holds several Queues: the sharder and the drainer set it, no tenant controller does.
	Retry *Retry
}

// Retry is how a Queue retries failed keys and times the keys that wait.
type Retry struct {
	// RateLimiter, if set, decides how long a failed key waits before its next sync. nil is client-go's default
	// controller rate limiter (per key, 5 ms doubling up to 1000 s; overall, 10 retries a second), made at the
	// first failure.
	RateLimiter workqueue.TypedRateLimiter[string]
	// Clock, if set, runs the timers of delayed keys (AddAfter, RequeueAfter, a retry after its backoff), so that a
	// test steps them with a fake clock. nil is the real clock.
	Clock clock.WithDelayedExecution
}

// realClock times the keys of every Queue without a Retry.Clock.
var realClock clock.WithDelayedExecution = clock.RealClock{}

func (w *Queue) clock() clock.WithDelayedExecution {
	if w.cfg.Retry != nil && w.cfg.Retry.Clock != nil {
		return w.cfg.Retry.Clock
	}
	return realClock
}

// Queue is the runtime every controller of this manager runs on, the shape of sample-controller written once: a
// typed workqueue, event handlers registered on (tenant views of) informers and removed when the workers stop, a
// wait for the caches, up to N workers with one processNextWorkItem and its requeue decision, sync metrics and one
// log policy: a failed sync is logged at default verbosity with its key and tenant, an ErrWaiting or an
// optimistic-lock conflict at V(4), as is a sync the stop cut short.
//
// Idle costs nothing: the queue exists while it holds keys or a key is being synced, and workers run only while
// there is a key for them. A key to look at later (RequeueAfter, or a retry after its backoff) waits on a runtime
// timer, not in a delaying queue, and is added again when it fires. An idle tenant's controllers therefore hold no
// goroutine and no queue; with thousands of tenants that is most of them.
type Queue struct {
	cfg Config
	// backoff keeps each key's failures across queue lifetimes: NumRequeues and the retry delay. It is made by the
	// first failure (retryDelay): most tenants' controllers never fail, and one costs about 0.7 KB.
	backoffMu sync.Mutex
	backoff   workqueue.TypedRateLimiter[string]

	mu sync.Mutex
	// queue is nil while idle; the first Add makes one (under the same name, so its metric series go on).
	queue workqueue.TypedInterface[string]
	// active counts the workers running, starting those not yet looking for a key, reserved the keys workers
	// are about to Get: a worker calls Get only when the queue holds a key no other worker has reserved, so none
	// ever blocks in Get on an empty queue. int32 and beside stopped: they fit in two words, which keeps a Queue in
	// the allocator's 240-byte class (an idle tenant holds several).
	active, starting, reserved int32
	stopped                    bool
	// run holds what Run set up; nil before Run and after it returned (keys wait in the queue, or are dropped).
	run *runState
	// timers hold the keys to add later, each with the earliest time asked for; nil until there is one.
	timers map[string]*delayed

	registrations []registration
	// waits are what Start waits for before the first sync: the watched informers and handlers, as channels, and
	// the conditions WaitFor added.
	waits []syncWait
}

// runState is what the workers started on demand need from Run.
type runState struct {
	ctx, workCtx context.Context
	workers      int
	wg           sync.WaitGroup
}

type delayed struct {
	timer clock.Timer
	at    time.Time
}

type registration struct {
	informer     cache.SharedIndexInformer
	registration cache.ResourceEventHandlerRegistration
}

// New describes the queue and the workers of cfg; nothing is allocated or runs until there is a key and Run
// has started.
func New(cfg Config) *Queue {
	cfg.Workers = max(cfg.Workers, 1)
	return &Queue{cfg: cfg}
}

func (c Config) queueName() string {
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
func (w *Queue) Add(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	if w.queue == nil {
		w.queue = workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: w.cfg.queueName()})
	}
	w.queue.Add(key)
	w.startWorkersLocked()
}

// AddAfter enqueues a key once the delay has passed (at once if it is not positive). Asked again before then, the
// earlier time wins, as in client-go's delaying queue.
func (w *Queue) AddAfter(key string, delay time.Duration) {
	if delay <= 0 {
		w.Add(key)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	at := w.clock().Now().Add(delay)
	if d, ok := w.timers[key]; ok {
		if !at.Before(d.at) {
			return
		}
		d.timer.Stop()
	}
	d := &delayed{at: at}
	d.timer = w.clock().AfterFunc(delay, func() {
		w.mu.Lock()
		if w.timers[key] == d {
			delete(w.timers, key)
		}
		w.mu.Unlock()
		w.Add(key)
	})
	if w.timers == nil {
		w.timers = map[string]*delayed{}
	}
	w.timers[key] = d
}

// startWorkersLocked starts a worker for each key that no running worker will take, up to the worker count, once
// Run has started.
func (w *Queue) startWorkersLocked() {
	if w.run == nil || w.queue == nil {
		return
	}
	for int(w.active) < w.run.workers && w.queue.Len()-int(w.reserved+w.starting) > 0 {
		w.active++
		w.starting++
		run, queue := w.run, w.queue
		run.wg.Go(func() { w.work(run, queue) })
	}
}

// AddObject enqueues the namespace/name key of an object or of a deleted object's tombstone.
func (w *Queue) AddObject(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("%s: %w", w.cfg.queueName(), err))
		return
	}
	w.Add(key)
}

// NumRequeues returns how many times in a row key was put back with backoff: its failed syncs since its last
// success. A sync reads it for the attempts before the one under way.
func (w *Queue) NumRequeues(key string) int {
	w.backoffMu.Lock()
	defer w.backoffMu.Unlock()
	if w.backoff == nil {
		return 0
	}
	return w.backoff.NumRequeues(key)
}

// retryDelay counts a failure of key and returns how long to wait before syncing it again.
func (w *Queue) retryDelay(key string) time.Duration {
	w.backoffMu.Lock()
	defer w.backoffMu.Unlock()
	if w.backoff == nil && w.cfg.Retry != nil {
		w.backoff = w.cfg.Retry.RateLimiter
	}
	if w.backoff == nil {
		w.backoff = workqueue.DefaultTypedControllerRateLimiter[string]()
	}
	return w.backoff.When(key)
}

// succeeded forgets key's failures.
func (w *Queue) succeeded(key string) {
	w.backoffMu.Lock()
	defer w.backoffMu.Unlock()
	if w.backoff != nil {
		w.backoff.Forget(key)
	}
}

// Len returns how many keys wait in the queue.
func (w *Queue) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.queue == nil {
		return 0
	}
	return w.queue.Len()
}

// Idle reports whether no key waits in the queue and no worker is syncing one. Len alone cannot say it: a key a
// worker took is no longer queued while its sync still runs and may still write. Keys waiting on a timer (a retry,
// a RequeueAfter) do not count until it fires.
func (w *Queue) Idle() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return (w.queue == nil || w.queue.Len() == 0) && w.active == 0 && w.reserved == 0 && w.starting == 0
}

// Watch adds a handler to an informer (typically a tenant view). Run waits for the informer and the handler to
// have synced before it starts the workers, and removes the handler when it returns. Call it before Run.
func (w *Queue) Watch(informer cache.SharedIndexInformer, handler cache.ResourceEventHandler) error {
	r, err := informer.AddEventHandler(handler)
	if err != nil {
		return fmt.Errorf("%s: watching: %w", w.cfg.queueName(), err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.registrations = append(w.registrations, registration{informer: informer, registration: r})
	w.waits = append(w.waits, syncWait{checker: informer.HasSyncedChecker()}, syncWait{checker: r.HasSyncedChecker()})
	return nil
}

// WaitFor adds conditions Run waits for, besides the watched informers, before it starts the workers.
func (w *Queue) WaitFor(synced ...cache.InformerSynced) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, f := range synced {
		w.waits = append(w.waits, syncWait{synced: f})
	}
}

// Close removes every handler Watch added, stops the timers of delayed keys and shuts the queue down. Run does it
// on return; a controller that gives up before Run (a Watch failed) calls it so that nothing it registered or
// started outlives it.
func (w *Queue) Close(ctx context.Context) {
	w.mu.Lock()
	w.stopLocked()
	registrations := w.registrations
	w.registrations = nil
	w.mu.Unlock()
	for _, r := range registrations {
		if err := r.informer.RemoveEventHandler(r.registration); err != nil {
			utilruntime.HandleErrorWithContext(ctx, err, "Could not remove an event handler", "queue", w.cfg.queueName())
		}
	}
}

// stopLocked refuses further keys, stops the timers and shuts the queue down (a shut-down queue still hands out
// the keys it holds, to workers draining on their WorkContext) and forgets it.
func (w *Queue) stopLocked() {
	w.stopped = true
	for key, d := range w.timers {
		d.timer.Stop()
		delete(w.timers, key)
	}
	if w.queue != nil {
		// Workers draining on their WorkContext keep their own reference; the keys nobody takes are dropped.
		w.queue.ShutDown()
		w.queue = nil
	}
}

// RunOptions change how Run stops.
type RunOptions struct {
	// Workers, if positive, overrides Config.Workers (a process-wide controller learns its count at Run).
	Workers int
	// WorkContext, if set, is the context syncs run on instead of Run's: a controller whose syncs must finish
	// what they started (the NEG pusher's GCE calls) gives one that ends later than Run's; the keys queued when
	// Run's context ends are then still synced while it lasts.
	WorkContext context.Context
	// Started, if set, is called once the caches have synced and the workers run.
	Started func()
	// Stop, if set, is the run's StopSignal: the workers stop when it fires rather than by watching ctx (the
	// manager fires it right after it cancels ctx). See StopSignal.
	Stop *StopSignal
}

// Run waits for the caches, syncs keys with up to N workers started as keys arrive until ctx ends, and returns once
// the queue is shut down, every worker has returned and every handler is removed. Keys still queued are dropped
// (unless the WorkContext outlives ctx): the next start lists them again.
func (w *Queue) Run(ctx context.Context, opts RunOptions) {
	done := make(chan struct{})
	w.Start(ctx, opts, func() { close(done) })
	<-done
}

// Start is Run without a goroutine held while the controller is idle: it returns at once, waits for the caches on a
// goroutine that ends once they have synced, and calls done once everything Run would have waited for is over.
// Until ctx ends, an idle controller started this way holds no goroutine at all.
func (w *Queue) Start(ctx context.Context, opts RunOptions, done func()) {
	run := &runState{ctx: ctx, workCtx: ctx, workers: w.cfg.Workers}
	if opts.WorkContext != nil {
		run.workCtx = opts.WorkContext
	}
	if opts.Workers > 0 {
		run.workers = opts.Workers
	}
	finish := func() {
		defer done()
		w.mu.Lock()
		w.run = nil
		w.stopLocked()
		w.mu.Unlock()
		run.wg.Wait()
		w.Close(ctx)
		metrics.ForgetQueue(w.cfg.Tenant, w.cfg.Controller, w.cfg.queueName())
	}
	w.mu.Lock()
	waits := w.waits
	w.mu.Unlock()
	go func() {
		defer utilruntime.HandleCrashWithContext(ctx)
		if !waitForSync(ctx, waits) {
			finish()
			return
		}
		w.mu.Lock()
		if w.stopped {
			w.mu.Unlock()
			finish()
			return
		}
		w.run = run
		w.waits = nil // waited for; kept, the checks cost every idle controller a few hundred bytes
		w.startWorkersLocked()
		w.mu.Unlock()
		if opts.Started != nil {
			opts.Started()
		}
		// The stop runs on a goroutine of its own once the run is over; until then nothing waits.
		AfterStop(ctx, opts.Stop, finish)
	}()
}

// work is one worker: it takes keys while the queue holds one that no other worker has reserved, then returns.
// The last worker to leave an empty queue drops it, so an idle controller holds neither.
func (w *Queue) work(run *runState, queue workqueue.TypedInterface[string]) {
	defer utilruntime.HandleCrashWithContext(run.ctx)
	w.mu.Lock()
	w.starting--
	for {
		if queue.Len()-int(w.reserved) <= 0 || run.workCtx.Err() != nil {
			w.active--
			if w.active == 0 && w.queue == queue && queue.Len() == 0 {
				w.queue = nil
				queue.ShutDown()
			}
			w.mu.Unlock()
			return
		}
		w.reserved++
		w.mu.Unlock()
		key, shutdown := queue.Get()
		w.mu.Lock()
		w.reserved--
		w.mu.Unlock()
		if !shutdown {
			w.processNextWorkItem(run, queue, key)
		}
		w.mu.Lock()
	}
}

// processNextWorkItem syncs one key and decides its requeue: backoff after an error, the asked delay after a
// success, nothing otherwise.
func (w *Queue) processNextWorkItem(run *runState, queue workqueue.TypedInterface[string], key string) {
	defer queue.Done(key)
	ctx := run.workCtx
	if ctx.Err() != nil {
		// Stopping: a shut-down queue still hands out what it holds, but a sync on an ended context can only
		// fail. The keys left are dropped; the next start lists them again.
		return
	}

	logger := klog.FromContext(ctx).WithValues(w.cfg.keyName(), key)
	result, err := w.cfg.Sync(klog.NewContext(ctx, logger), key)
	if !result.Postponed || err != nil {
		w.observe(key, err)
	}
	if w.cfg.AfterSync != nil {
		w.cfg.AfterSync(key, err)
	}
	switch {
	case err != nil && (errors.Is(err, ErrWaiting) || apierrors.IsConflict(err) || ctx.Err() != nil):
		logger.V(4).Info("Retrying", "reason", err.Error())
		w.AddAfter(key, w.retryDelay(key))
	case err != nil:
		logger.Error(err, "Sync failed; retrying with backoff")
		w.AddAfter(key, w.retryDelay(key))
	default:
		w.succeeded(key)
		if result.RequeueAfter > 0 {
			w.AddAfter(key, result.RequeueAfter)
		}
	}
}

func (w *Queue) observe(key string, err error) {
	if w.cfg.Observe != nil {
		w.cfg.Observe(key, err)
		return
	}
	metrics.ObserveSync(w.cfg.Tenant, w.cfg.Controller, w.cfg.queueName(), err, w.Len())
}

func (c Config) keyName() string {
	if c.KeyName == "" {
		return "key"
	}
	return c.KeyName
}
