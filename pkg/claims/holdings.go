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

package claims

import (
	"slices"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"

	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
)

// onAdd, onUpdate and onDelete are the registry's one handler on the holdings informer (see carryLocked): they keep
// held current and wake the claimants waiting for a name that may have come free.
func (r *Registry) onAdd(obj any) { r.observe(nil, obj) }

func (r *Registry) onUpdate(oldObj, newObj any) { r.observe(oldObj, newObj) }

// observe indexes an object's names. An object that stops publishing a name, or changes hands, may free it: the
// claimants waiting for its names are enqueued.
func (r *Registry) observe(oldObj, obj any) {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	h, publishes := r.holdingOf(obj)
	r.mu.Lock()
	var wake []func()
	if publishes {
		for _, name := range h.Names {
			r.heldLocked(name, key)
			if p, found := r.pending[name]; found && p.object == key {
				delete(r.pending, name)
			}
		}
	}
	old, had := Holding{}, false
	if oldObj != nil {
		old, had = r.holdingOf(oldObj)
	}
	if had != publishes || old.Owner != h.Owner || !slices.Equal(old.Names, h.Names) {
		if had {
			for _, name := range old.Names {
				wake = append(wake, r.takeWaitersLocked(name)...)
			}
		}
		// Who publishes a name decides who holds it (incumbentsLocked): its claimants decide again.
		wake = append(wake, r.claimantsLocked(old.Names, h.Names)...)
	}
	r.mu.Unlock()
	r.wake(wake)
}

func (r *Registry) onDelete(obj any) {
	obj = worker.LastState(obj)
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	h, publishes := r.holdingOf(obj)
	if !publishes {
		return
	}
	r.mu.Lock()
	var wake []func()
	for _, name := range h.Names {
		if p, found := r.pending[name]; found && p.object == key {
			delete(r.pending, name)
		}
		// The store decides: a new object of the same name may already be there.
		if _, exists, _ := r.store.GetByKey(key); !exists && r.held[name] != nil {
			r.held[name].Delete(key)
			if len(r.held[name]) == 0 {
				delete(r.held, name)
			}
		}
		wake = append(wake, r.takeWaitersLocked(name)...)
		wake = append(wake, r.claimantsLocked(nil, []string{name})...)
		if r.releases != nil {
			// A record kept for this object (release) may go now.
			r.releases.Add(name)
		}
	}
	r.mu.Unlock()
	r.wake(wake)
}

// claimantsLocked returns the calls that enqueue every claimant of the names in either list, once each.
func (r *Registry) claimantsLocked(before, after []string) []func() {
	var wake []func()
	for name := range sets.New(before...).Insert(after...) {
		for _, c := range r.claims[name] {
			wake = append(wake, r.enqueueLocked(c.id()))
		}
	}
	return wake
}
