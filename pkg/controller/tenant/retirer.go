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

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
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
	workers := worker.New(worker.Config{
		Controller: r.Name,
		KeyName:    "key",
		Workers:    1,
		Sync: func(ctx context.Context, key string) (worker.Result, error) {
			return worker.Result{}, r.Delete(ctx, key)
		},
		// A cleanup has no sync series of its own: the ProviderConfig's condition reports what is left.
		Observe: func(string, error) {},
	})
	enqueue := func(obj any) {
		if key, ok := r.Select(obj); ok {
			workers.Add(key)
		}
	}
	if err := workers.Watch(r.Informer, cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }}); err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Could not watch what to delete")
		workers.Close(ctx)
		return
	}
	workers.Run(ctx, worker.RunOptions{})
}
