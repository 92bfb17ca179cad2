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
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

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
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	informer := startConfigMaps(t, ctx, "fails-once", "requeues-once", "plain")

	var mu sync.Mutex
	syncs := map[string]int{}
	w := NewWorkers(WorkerConfig{
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

	want := map[string]int{"ns/fails-once": 2, "ns/requeues-once": 2, "ns/plain": 1}
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
	errorsCounted, err := testutil.GetCounterMetricValue(metrics.Syncs.WithLabelValues("tenant-a", "test-controller", "error"))
	if err != nil || errorsCounted != 1 {
		t.Errorf("error syncs counted: %v (err %v), want 1", errorsCounted, err)
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
	if n, _ := testutil.GetGaugeMetricValue(metrics.QueueDepth.WithLabelValues("tenant-a", "test-controller", "tenant-a-test-controller")); n != 0 {
		t.Errorf("queue depth series still %v after stop", n)
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
			w := NewWorkers(WorkerConfig{Tenant: "tenant-a", Controller: "logs", KeyName: "configMap",
				Sync: func(context.Context, string) (Result, error) {
					calls.Add(1)
					return Result{}, tc.err
				}})
			w.Add("ns/one")
			if !w.processNextWorkItem(ctx) {
				t.Fatal("queue shut down")
			}
			logs := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
			visible := strings.Contains(logs, "Sync failed") && strings.Contains(logs, `configMap="ns/one"`)
			if visible != tc.wantVisible {
				t.Errorf("failure visible at V(0): %v, want %v; logs:\n%s", visible, tc.wantVisible, logs)
			}
			if calls.Load() != 1 {
				t.Errorf("synced %d times, want 1", calls.Load())
			}
			if w.queue.NumRequeues("ns/one") != 1 {
				t.Errorf("requeues %d, want 1 (retried with backoff)", w.queue.NumRequeues("ns/one"))
			}
			w.queue.ShutDown()
		})
	}
}

// Once the context ends, the keys still queued are not synced: a sync on an ended context could only fail, and
// would be logged as a failure at every tenant stop.
func TestWorkersDropQueuedKeysOnStop(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	var synced atomic.Int32
	w := NewWorkers(WorkerConfig{Tenant: "tenant-a", Controller: "stop", KeyName: "key",
		Sync: func(context.Context, string) (Result, error) {
			synced.Add(1)
			return Result{}, nil
		}})
	w.Add("ns/one")
	w.Add("ns/two")
	cancel()
	w.queue.ShutDown()
	for w.processNextWorkItem(ctx) {
	}
	if n := synced.Load(); n != 0 {
		t.Errorf("synced %d keys after the stop, want 0", n)
	}
}
