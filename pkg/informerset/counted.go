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

package informerset

import (
	"errors"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// ErrTrackingClosed is what a Tracked informer answers a handler added after RemoveAll.
var ErrTrackingClosed = errors.New("the informer no longer takes handlers: its holder removed them all")

// Tracked is a shared informer that keeps the handlers registered through it. Each one is a client-go listener (two
// goroutines and a buffer) that every event is copied to, so whoever hands the informer out must be able to count
// them (the process's shared informers: Set.Handlers, whose count must not grow with the tenants) or remove them
// all at once (a tenant's controller that stops: RemoveAll). A Tracked with SharedIndexInformer set is ready to
// use, so a wrapper can hold one by value.
type Tracked struct {
	cache.SharedIndexInformer

	mu sync.Mutex
	// regs is a slice, not a map: a tenant's controller registers one or two handlers, the process a few.
	regs   []cache.ResourceEventHandlerRegistration
	closed bool
}

// Track returns informer with the handlers registered through it tracked.
func Track(informer cache.SharedIndexInformer) *Tracked {
	return &Tracked{SharedIndexInformer: informer}
}

func (t *Tracked) track(reg cache.ResourceEventHandlerRegistration, err error) (cache.ResourceEventHandlerRegistration, error) {
	if err != nil {
		return reg, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		// Added as RemoveAll ran: nobody would remove it.
		_ = t.SharedIndexInformer.RemoveEventHandler(reg)
		return nil, ErrTrackingClosed
	}
	t.regs = append(t.regs, reg)
	return reg, nil
}

func (t *Tracked) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return t.track(t.SharedIndexInformer.AddEventHandler(h))
}

func (t *Tracked) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return t.track(t.SharedIndexInformer.AddEventHandlerWithResyncPeriod(h, resync))
}

func (t *Tracked) AddEventHandlerWithOptions(h cache.ResourceEventHandler, o cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return t.track(t.SharedIndexInformer.AddEventHandlerWithOptions(h, o))
}

// RemoveEventHandler removes the handler from the informer, and then from the tracked ones.
func (t *Tracked) RemoveEventHandler(reg cache.ResourceEventHandlerRegistration) error {
	if err := t.SharedIndexInformer.RemoveEventHandler(reg); err != nil {
		return err
	}
	t.mu.Lock()
	t.regs = slices.DeleteFunc(t.regs, func(r cache.ResourceEventHandlerRegistration) bool { return r == reg })
	t.mu.Unlock()
	return nil
}

// Handlers returns how many handlers registered through t are still registered.
func (t *Tracked) Handlers() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.regs)
}

// RemoveAll removes every handler registered through t, and refuses any added later (ErrTrackingClosed).
func (t *Tracked) RemoveAll() {
	t.mu.Lock()
	regs := t.regs
	t.regs, t.closed = nil, true
	t.mu.Unlock()
	for _, reg := range regs {
		_ = t.SharedIndexInformer.RemoveEventHandler(reg)
	}
}

// Handlers returns how many event handlers are registered on the shared informer of gvr (0 if the set has none, or
// the optional API is not served yet): the Router's, a Fanout's, the claims registries'. It does not depend on the
// number of tenants.
func (s *Set) Handlers(gvr schema.GroupVersionResource) int {
	inf := s.required[gvr]
	if inf == nil {
		inf, _, _ = s.Optional(gvr)
	}
	if t, ok := inf.(*Tracked); ok {
		return t.Handlers()
	}
	return 0
}
