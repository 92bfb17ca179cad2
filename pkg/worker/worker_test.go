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
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
)

// countingInformer records handler registrations, so a test can tell that Run removed every handler it added.
type countingInformer struct {
	cache.SharedIndexInformer
	mu     sync.Mutex
	active int
}

func (c *countingInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	r, err := c.SharedIndexInformer.AddEventHandler(h)
	if err == nil {
		c.mu.Lock()
		c.active++
		c.mu.Unlock()
	}
	return r, err
}

func (c *countingInformer) RemoveEventHandler(r cache.ResourceEventHandlerRegistration) error {
	err := c.SharedIndexInformer.RemoveEventHandler(r)
	if err == nil {
		c.mu.Lock()
		c.active--
		c.mu.Unlock()
	}
	return err
}

func (c *countingInformer) handlers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.active
}

// startConfigMaps starts a fake ConfigMap informer holding objs.
func startConfigMaps(t *testing.T, ctx context.Context, names ...string) *countingInformer {
	t.Helper()
	var objs []any
	client := fake.NewClientset()
	for _, name := range names {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
		if _, err := client.CoreV1().ConfigMaps("ns").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, cm)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	informer := &countingInformer{SharedIndexInformer: factory.Core().V1().ConfigMaps().Informer()}
	factory.Start(ctx.Done())
	t.Cleanup(factory.Shutdown)
	return informer
}

// Every key a handler enqueues is synced; an error is retried with backoff, a success with RequeueAfter comes back
// after the delay, a plain success is done; on return the handlers are removed and the queue-depth series is gone.
func TestWorkersSyncRetryRequeueAndStop(t *testing.T) {
	metrics.Register()
	// The series outlives the test (a -count run repeats it): count from what it holds now.
	errorsBefore, _ := metrics.Syncs.Value("tenant-a", "test-controller", "error")
	successesBefore, _ := metrics.Syncs.Value("tenant-a", "test-controller", "success")
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	informer := startConfigMaps(t, ctx, "fails-once", "requeues-once", "postponed-once", "plain")

	var mu sync.Mutex
	syncs := map[string]int{}
	w := New(Config{
		Tenant:     "tenant-a",
		Controller: "test-controller",
		KeyName:    "configMap",
		Workers:    2,
		Sync: func(_ context.Context, key string) (Result, error) {
			mu.Lock()
			defer mu.Unlock()
			syncs[key]++
			switch {
			case key == "ns/fails-once" && syncs[key] == 1:
				return Result{}, errors.New("boom")
			case key == "ns/requeues-once" && syncs[key] == 1:
				return Result{RequeueAfter: 10 * time.Millisecond}, nil
			case key == "ns/postponed-once" && syncs[key] == 1:
				return Result{RequeueAfter: 10 * time.Millisecond, Postponed: true}, nil
			}
			return Result{}, nil
		},
	})
	if err := w.Watch(informer, cache.ResourceEventHandlerFuncs{AddFunc: w.AddObject}); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx, RunOptions{Started: func() { close(started) }})
	}()
	<-started

	want := map[string]int{"ns/fails-once": 2, "ns/requeues-once": 2, "ns/postponed-once": 2, "ns/plain": 1}
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		for key, n := range want {
			if syncs[key] < n {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		mu.Lock()
		t.Fatalf("syncs %v, want at least %v", syncs, want)
	}
	// The queue must then be empty: nothing synced again behind the test's back.
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return w.Len() == 0, nil
	}); err != nil {
		t.Fatalf("queue still holds %d keys", w.Len())
	}
	if errorsCounted, _ := metrics.Syncs.Value("tenant-a", "test-controller", "error"); errorsCounted-errorsBefore != 1 {
		t.Errorf("error syncs counted: %v, want 1", errorsCounted-errorsBefore)
	}
	// A postponed sync only said when to come back: fails-once's retry, requeues-once's two, postponed-once's
	// second and plain's one are the successes.
	if successes, _ := metrics.Syncs.Value("tenant-a", "test-controller", "success"); successes-successesBefore != 5 {
		t.Errorf("successful syncs counted: %v, want 5", successes-successesBefore)
	}
	if informer.handlers() != 1 {
		t.Fatalf("handlers while running: %d, want 1", informer.handlers())
	}

	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	for key, n := range want {
		if syncs[key] != n {
			t.Errorf("%s synced %d times, want %d", key, syncs[key], n)
		}
	}
	if informer.handlers() != 0 {
		t.Errorf("handlers after Run returned: %d, want 0", informer.handlers())
	}
	if n, ok := metrics.QueueDepth.Value("tenant-a", "test-controller", "tenant-a-test-controller"); ok {
		t.Errorf("queue depth series still there (%v) after stop", n)
	}
}

// A failed sync is logged at default verbosity with its key; a wait ("not yet") only at V(4).
func TestWorkersLogFailuresAtDefaultVerbosity(t *testing.T) {
	for name, tc := range map[string]struct {
		err         error
		wantVisible bool
	}{
		"failure": {err: errors.New("the API refused"), wantVisible: true},
		"waiting": {err: fmt.Errorf("%w: the predecessor is not synced yet", ErrWaiting)},
	} {
		t.Run(name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(0), ktesting.BufferLogs(true)))
			ctx = klog.NewContext(ctx, logger)
			var calls atomic.Int32
			w := New(Config{Tenant: "tenant-a", Controller: "logs", KeyName: "configMap",
				Sync: func(context.Context, string) (Result, error) {
					calls.Add(1)
					return Result{}, tc.err
				}})
			w.Add("ns/one")
			t.Cleanup(func() { w.Close(ctx) })
			key, shutdown := w.queue.Get()
			if shutdown {
				t.Fatal("queue shut down")
			}
			w.processNextWorkItem(&runState{ctx: ctx, workCtx: ctx}, w.queue, key)
			logs := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
			visible := strings.Contains(logs, "Sync failed") && strings.Contains(logs, `configMap="ns/one"`)
			if visible != tc.wantVisible {
				t.Errorf("failure visible at V(0): %v, want %v; logs:\n%s", visible, tc.wantVisible, logs)
			}
			if calls.Load() != 1 {
				t.Errorf("synced %d times, want 1", calls.Load())
			}
			if w.NumRequeues("ns/one") != 1 {
				t.Errorf("requeues %d, want 1 (retried with backoff)", w.NumRequeues("ns/one"))
			}
			w.mu.Lock()
			_, delayed := w.timers["ns/one"]
			w.mu.Unlock()
			if !delayed {
				t.Error("the failed key waits for no retry")
			}
		})
	}
}

// Once the context ends, the keys still queued are not synced: a sync on an ended context could only fail, and
// would be logged as a failure at every tenant stop.
func TestWorkersDropQueuedKeysOnStop(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	var synced atomic.Int32
	w := New(Config{Tenant: "tenant-a", Controller: "stop", KeyName: "key",
		Sync: func(context.Context, string) (Result, error) {
			synced.Add(1)
			return Result{}, nil
		}})
	w.Add("ns/one")
	w.Add("ns/two")
	cancel()
	queue := w.queue
	queue.ShutDown()
	for {
		key, shutdown := queue.Get()
		if shutdown {
			break
		}
		w.processNextWorkItem(&runState{ctx: ctx, workCtx: ctx}, queue, key)
	}
	if n := synced.Load(); n != 0 {
		t.Errorf("synced %d keys after the stop, want 0", n)
	}
}

// runWorkers runs w until the test ends and waits until its workers may start.
func runWorkers(t *testing.T, ctx context.Context, w *Queue, workers int) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	started := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx, RunOptions{Workers: workers, Started: func() { close(started) }})
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-started:
	case <-done:
		t.Fatal("Run returned before it started")
	}
}

// idle is Idle, and also the queue dropped: an idle controller holds none.
func (w *Queue) idle() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.queue == nil && w.active == 0 && w.reserved == 0 && w.starting == 0
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// An idle controller holds no queue and no worker goroutine: workers start when keys arrive, at most the worker
// count at once, and the last one drops the queue once it is empty; the next key starts them again.
func TestIdleWorkersHoldNothing(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	var inFlight, most, synced atomic.Int32
	release := make(chan struct{})
	w := New(Config{Tenant: "tenant-a", Controller: "idle", KeyName: "key",
		Sync: func(context.Context, string) (Result, error) {
			n := inFlight.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			<-release
			inFlight.Add(-1)
			synced.Add(1)
			return Result{}, nil
		}})
	runWorkers(t, ctx, w, 3)
	if !w.idle() {
		t.Fatal("a controller with no key holds a queue or workers")
	}
	base := runtime.NumGoroutine()
	for i := range 20 {
		w.Add("ns/key-" + strconv.Itoa(i))
	}
	waitUntil(t, "three syncs at once", func() bool { return inFlight.Load() == 3 })
	if got := runtime.NumGoroutine() - base; got > 3+2 {
		t.Errorf("%d goroutines for 3 workers (the queue's metrics loop may add one)", got)
	}
	close(release)
	waitUntil(t, "every key synced", func() bool { return synced.Load() == 20 })
	waitUntil(t, "the workers and the queue gone", w.idle)
	if m := most.Load(); m != 3 {
		t.Errorf("at most %d syncs at once, want 3", m)
	}
	waitUntil(t, "goroutines back to the idle count", func() bool { return runtime.NumGoroutine() <= base })

	w.Add("ns/later")
	waitUntil(t, "a key added to an idle controller synced", func() bool { return synced.Load() == 21 })
	waitUntil(t, "idle again", w.idle)
}

// A key is never synced by two workers at once, however often it is added while it is being synced, and a key
// added during its sync is synced again afterwards.
func TestWorkersNeverSyncAKeyTwiceAtOnce(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	var mu sync.Mutex
	syncing := map[string]bool{}
	lastAdd, lastSyncStart := map[string]int{}, map[string]int{}
	var clock, overlaps atomic.Int32
	w := New(Config{Tenant: "tenant-a", Controller: "overlap", KeyName: "key",
		Sync: func(_ context.Context, key string) (Result, error) {
			mu.Lock()
			if syncing[key] {
				overlaps.Add(1)
			}
			syncing[key] = true
			lastSyncStart[key] = int(clock.Add(1))
			mu.Unlock()
			time.Sleep(100 * time.Microsecond) // some work, so that adds land during syncs
			mu.Lock()
			syncing[key] = false
			mu.Unlock()
			return Result{}, nil
		}})
	runWorkers(t, ctx, w, 4)
	keys := []string{"ns/a", "ns/b", "ns/c"}
	var adders sync.WaitGroup
	for g := range 4 {
		adders.Go(func() {
			for i := range 300 {
				key := keys[(g+i)%len(keys)]
				mu.Lock()
				lastAdd[key] = int(clock.Add(1))
				mu.Unlock()
				w.Add(key)
			}
		})
	}
	adders.Wait()
	waitUntil(t, "every key synced after its last add", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, key := range keys {
			if lastSyncStart[key] < lastAdd[key] {
				return false
			}
		}
		return true
	})
	waitUntil(t, "idle", w.idle)
	if n := overlaps.Load(); n > 0 {
		t.Errorf("%d syncs of a key while it was being synced", n)
	}
}

// AddAfter keeps the earliest time asked for a key, and Close stops every timer so that nothing is added after it.
func TestAddAfterEarliestWinsAndCloseStopsTimers(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	var synced atomic.Int32
	w := New(Config{Tenant: "tenant-a", Controller: "timers", KeyName: "key",
		Sync: func(context.Context, string) (Result, error) {
			synced.Add(1)
			return Result{}, nil
		}})
	runWorkers(t, ctx, w, 1)
	w.AddAfter("ns/soon", time.Hour)
	w.AddAfter("ns/soon", time.Millisecond)
	w.AddAfter("ns/soon", time.Hour)
	waitUntil(t, "the key synced after the shortest delay", func() bool { return synced.Load() == 1 })
	w.AddAfter("ns/never", time.Hour)
	w.Close(ctx)
	w.mu.Lock()
	left := len(w.timers)
	w.mu.Unlock()
	if left != 0 {
		t.Errorf("%d timers left after Close", left)
	}
	w.Add("ns/after-close")
	if n := w.Len(); n != 0 {
		t.Errorf("a closed controller took a key: %d queued", n)
	}
}

// Started with Start, an idle controller holds no goroutine at all: the wait for the caches ends once they have
// synced, and the stop runs when the context ends and then calls done once.
func TestStartedIdleWorkersHoldNoGoroutine(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	informer := startConfigMaps(t, ctx, "one")
	var synced atomic.Int32
	w := New(Config{Tenant: "tenant-a", Controller: "start", KeyName: "key",
		Sync: func(context.Context, string) (Result, error) {
			synced.Add(1)
			return Result{}, nil
		}})
	if err := w.Watch(informer, cache.ResourceEventHandlerFuncs{AddFunc: w.AddObject}); err != nil {
		t.Fatal(err)
	}
	// The informer's own goroutines start asynchronously; they are there once it has synced.
	waitUntil(t, "the informer synced", informer.HasSynced)
	base := runtime.NumGoroutine()
	var dones atomic.Int32
	w.Start(ctx, RunOptions{}, func() { dones.Add(1) })
	waitUntil(t, "the informer's object synced", func() bool { return synced.Load() == 1 })
	waitUntil(t, "no goroutine left for the idle controller", func() bool { return w.idle() && runtime.NumGoroutine() <= base })
	cancel()
	waitUntil(t, "done called", func() bool { return dones.Load() == 1 })
	if informer.handlers() != 0 {
		t.Errorf("%d handlers left after the stop", informer.handlers())
	}
}

// A failed key waits the delay its Config's Retry.RateLimiter gives, on its Retry.Clock: a fake clock alone decides
// when the retry comes, as the sharder's and the drainer's tests need, and the limiter's delays (1 s, then 2 s)
// are the ones waited, not the default limiter's milliseconds.
func TestRetriesWaitTheRateLimitersDelayOnTheClock(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var syncs atomic.Int32
	w := New(Config{Controller: "clocked", KeyName: "key", Retry: &Retry{Clock: clk,
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute)},
		Sync: func(context.Context, string) (Result, error) {
			if syncs.Add(1) <= 2 {
				return Result{}, errors.New("boom")
			}
			return Result{}, nil
		}})
	runWorkers(t, ctx, w, 1)
	w.Add("ns/key")
	for failures, backoff := range []time.Duration{time.Second, 2 * time.Second} {
		waitUntil(t, "a failed sync waiting for its retry", func() bool { return syncs.Load() == int32(failures+1) && clk.HasWaiters() })
		clk.Step(backoff - time.Millisecond)
		if n := syncs.Load(); n != int32(failures+1) || !clk.HasWaiters() {
			t.Fatalf("retried before the backoff of %s had passed on the clock: %d syncs", backoff, n)
		}
		if n := w.NumRequeues("ns/key"); n != failures+1 {
			t.Errorf("NumRequeues = %d, want %d", n, failures+1)
		}
		clk.Step(time.Millisecond)
	}
	waitUntil(t, "the third sync", func() bool { return syncs.Load() == 3 })
	waitUntil(t, "the success forgotten", func() bool { return w.NumRequeues("ns/key") == 0 })
}

// Idle stays false while a sync runs, though its key is no longer queued: a test that waits for Len() == 0 before it
// counts what syncs wrote can miss a write still on its way.
func TestIdleWaitsForTheSyncUnderWay(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	started, release := make(chan struct{}), make(chan struct{})
	w := New(Config{Tenant: "tenant-a", Controller: "busy", KeyName: "key",
		Sync: func(context.Context, string) (Result, error) {
			close(started)
			<-release
			return Result{}, nil
		}})
	runWorkers(t, ctx, w, 1)
	if !w.Idle() {
		t.Fatal("a queue that never had a key is not idle")
	}
	w.Add("ns/a")
	<-started
	if w.Len() != 0 {
		t.Fatalf("Len() = %d while the only key is being synced, want 0", w.Len())
	}
	if w.Idle() {
		t.Error("Idle() while a sync runs")
	}
	close(release)
	waitUntil(t, "idle once the sync returned", w.Idle)
}

// An idle tenant holds several Queues: one stays in the allocator's 240-byte size class, where it was before the
// retry options came (the idle-tenant benchmark measured the next class up).
func TestAQueueStaysInItsSizeClass(t *testing.T) {
	if size := unsafe.Sizeof(Queue{}); size > 240 {
		t.Errorf("a Queue is %d bytes, want at most 240", size)
	}
}
