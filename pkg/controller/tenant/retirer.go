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
	"sync"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Retirer is the core of a controller's cleanup: it deletes, one by one with the workqueue's backoff, every object
// of the tenant's view that Select picks, until its context ends. What deleting means (a UID precondition, a NotFound
// that counts as done) is Delete's.
type Retirer struct {
	// Name names the retirer in logs and its queue.
	Name     string
	Informer cache.SharedIndexInformer
	// Select returns the key to delete an object by, and false for objects that are not to be deleted (not ours,
	// already being deleted).
	Select func(obj any) (key string, ok bool)
	// Delete deletes the object of key; nil means done (also when it is gone already).
	Delete func(ctx context.Context, key string) error
}

// Run deletes until ctx ends, then returns once its handler is removed and its worker gone.
func (r *Retirer) Run(ctx context.Context) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx).WithValues("controller", r.Name)
	ctx = klog.NewContext(ctx, logger)
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: r.Name})
	enqueue := func(obj any) {
		if key, ok := r.Select(obj); ok {
			queue.Add(key)
		}
	}
	registration, err := r.Informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }})
	if err != nil {
		logger.Error(err, "Could not watch what to delete")
		queue.ShutDown()
		return
	}
	var worker sync.WaitGroup
	defer func() {
		queue.ShutDown()
		worker.Wait()
		if err := r.Informer.RemoveEventHandler(registration); err != nil {
			logger.Error(err, "Could not remove an event handler")
		}
	}()
	if !cache.WaitForCacheSync(ctx.Done(), registration.HasSynced) {
		return
	}
	worker.Go(func() {
		wait.UntilWithContext(ctx, func(ctx context.Context) {
			for r.processNextWorkItem(ctx, queue) {
			}
		}, time.Second)
	})
	<-ctx.Done()
}

func (r *Retirer) processNextWorkItem(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string]) bool {
	key, shutdown := queue.Get()
	if shutdown {
		return false
	}
	defer queue.Done(key)
	if err := r.Delete(ctx, key); err != nil {
		klog.FromContext(ctx).Error(err, "Deleting failed; retrying with backoff", "key", key)
		queue.AddRateLimited(key)
		return true
	}
	queue.Forget(key)
	return true
}
