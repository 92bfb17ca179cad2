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
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/client-go/tools/cache"
)

// gatedInformer is an informer whose sync, and that of every handler added to it, the test decides: both are
// synced once open is closed.
type gatedInformer struct {
	cache.SharedIndexInformer
	open chan struct{}
}

func (g *gatedInformer) AddEventHandler(cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return gatedRegistration{g}, nil
}

func (g *gatedInformer) RemoveEventHandler(cache.ResourceEventHandlerRegistration) error { return nil }
func (g *gatedInformer) HasSynced() bool                                                 { return cache.IsDone(g) }
func (g *gatedInformer) HasSyncedChecker() cache.DoneChecker                             { return g }
func (g *gatedInformer) Name() string                                                    { return "gated" }
func (g *gatedInformer) Done() <-chan struct{}                                           { return g.open }

type gatedRegistration struct{ g *gatedInformer }

func (r gatedRegistration) HasSynced() bool                     { return r.g.HasSynced() }
func (r gatedRegistration) HasSyncedChecker() cache.DoneChecker { return r.g }

// The first sync of a controller starts the moment its informers and handlers have synced, on a fake clock: not a
// poll period later (cache.WaitForCacheSync looks every 100 ms, and a handler added to a running informer, as every
// tenant's are, has never synced at its first look). A cold start of thousands of tenants, and the first Service
// of a new tenant, waited that period for nothing.
func TestTheFirstSyncStartsWhenTheCachesHaveSynced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		informer := &gatedInformer{open: make(chan struct{})}
		var synced atomic.Int32
		w := New(Config{Tenant: "tenant-a", Controller: "first-sync", KeyName: "key",
			Sync: func(context.Context, string) (Result, error) {
				synced.Add(1)
				return Result{}, nil
			}})
		if err := w.Watch(informer, cache.ResourceEventHandlerFuncs{}); err != nil {
			t.Fatal(err)
		}
		var started atomic.Bool
		w.Start(ctx, RunOptions{Started: func() { started.Store(true) }}, func() {})
		w.Add("key")
		synctest.Wait()
		if started.Load() || synced.Load() != 0 {
			t.Fatal("the workers started before the caches synced")
		}

		begin := time.Now()
		close(informer.open)
		synctest.Wait()
		if !started.Load() || synced.Load() != 1 {
			t.Fatalf("the caches synced and the queued key was not synced at once (started %t, syncs %d): the start waits for a poll",
				started.Load(), synced.Load())
		}
		if waited := time.Since(begin); waited != 0 {
			t.Errorf("the first sync came %v after the caches synced, on the fake clock; want at once", waited)
		}
		cancel()
		synctest.Wait()
	})
}

// A condition added with WaitFor, which has no channel, is still waited for: polled, once the channels closed.
func TestWaitForConditionsAreStillWaitedFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		informer := &gatedInformer{open: make(chan struct{})}
		close(informer.open)
		var ready atomic.Bool
		var synced atomic.Int32
		w := New(Config{Tenant: "tenant-a", Controller: "wait-for", KeyName: "key",
			Sync: func(context.Context, string) (Result, error) {
				synced.Add(1)
				return Result{}, nil
			}})
		if err := w.Watch(informer, cache.ResourceEventHandlerFuncs{}); err != nil {
			t.Fatal(err)
		}
		w.WaitFor(ready.Load)
		w.Start(ctx, RunOptions{}, func() {})
		w.Add("key")
		// Inside the bubble a sleep moves the fake clock: ten poll periods pass at once.
		time.Sleep(time.Second)
		synctest.Wait()
		if synced.Load() != 0 {
			t.Fatal("the workers started before the WaitFor condition held")
		}
		ready.Store(true)
		time.Sleep(time.Second)
		synctest.Wait()
		if synced.Load() != 1 {
			t.Fatalf("%d syncs once the condition held, want 1", synced.Load())
		}
		cancel()
		synctest.Wait()
	})
}
