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

package tenancy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"

	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
)

// KeyFunc returns the keys under which an object of a shared informer concerns an Interest (for a Rancher Project:
// its cluster and each of its names). It is given the object itself, never a tombstone; no key means the object
// concerns nobody.
type KeyFunc func(obj any) []string

// ErrUseInterest is returned when a handler is added to a Fanout directly: every tenant would get every event.
var ErrUseInterest = errors.New("tenancy: this shared informer delivers events by key; register an Interest")

// Fanout is the one event handler on a shared informer that tenants read unfiltered (a resource that belongs to no
// tenant, such as Rancher Projects or PangolinTunnels, of which a tenant's configuration names the ones it uses). It
// files each event under the keys its KeyFunc gives the object and hands it only to the Interests that hold one of
// those keys, so delivering an event costs O(the interested tenants), not O(tenants), and the informer carries one
// listener (two goroutines and a buffer) whatever the number of tenants.
//
// A Fanout is also the shared informer for reading: GetIndexer, GetStore, HasSynced and the rest are the informer's.
// It refuses handlers of its own (ErrUseInterest) and anything that would reconfigure the informer, and Run starts
// nothing: the informer is run once by its owner.
type Fanout struct {
	cache.SharedIndexInformer
	keys KeyFunc
	reg  cache.ResourceEventHandlerRegistration

	mu        sync.RWMutex
	byKey     map[string]map[*Interest]struct{}
	interests sets.Set[*Interest]
	closed    bool
}

var _ cache.SharedIndexInformer = &Fanout{}

// NewFanout adds the Fanout's one handler to informer. Close removes it.
func NewFanout(informer cache.SharedIndexInformer, keys KeyFunc) (*Fanout, error) {
	if informer == nil || keys == nil {
		return nil, errors.New("tenancy: a Fanout needs an informer and a key function")
	}
	f := &Fanout{SharedIndexInformer: informer, keys: keys, byKey: map[string]map[*Interest]struct{}{}, interests: sets.New[*Interest]()}
	reg, err := informer.AddEventHandler(fanoutHandler{f})
	if err != nil {
		return nil, fmt.Errorf("tenancy: adding the fan-out handler: %w", err)
	}
	f.reg = reg
	return f, nil
}

// Interest registers a new, empty interest: its handlers get nothing until keys are added.
func (f *Fanout) Interest() (*Interest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, errors.New("tenancy: the Fanout is closed")
	}
	in := &Interest{f: f, keys: sets.New[string]()}
	f.interests.Insert(in)
	return in, nil
}

// Close removes the Fanout's handler from the informer and closes every Interest.
func (f *Fanout) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	interests := f.interests.UnsortedList()
	f.mu.Unlock()
	for _, in := range interests {
		in.Close()
	}
	return f.SharedIndexInformer.RemoveEventHandler(f.reg)
}

// RegistrationCount returns how many Interests are open, for leak tests.
func (f *Fanout) RegistrationCount() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.interests.Len()
}

// KeyCount returns how many keys some Interest holds, for leak tests.
func (f *Fanout) KeyCount() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.byKey)
}

// AddEventHandler refuses: see ErrUseInterest.
func (f *Fanout) AddEventHandler(cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return nil, ErrUseInterest
}

// AddEventHandlerWithResyncPeriod refuses: see ErrUseInterest.
func (f *Fanout) AddEventHandlerWithResyncPeriod(cache.ResourceEventHandler, time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return nil, ErrUseInterest
}

// AddEventHandlerWithOptions refuses: see ErrUseInterest.
func (f *Fanout) AddEventHandlerWithOptions(cache.ResourceEventHandler, cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return nil, ErrUseInterest
}

// RemoveEventHandler refuses: the Fanout has no handler but its own.
func (f *Fanout) RemoveEventHandler(cache.ResourceEventHandlerRegistration) error {
	return ErrUseInterest
}

// Run starts nothing; it waits for stop.
func (f *Fanout) Run(stopCh <-chan struct{}) { <-stopCh }

// RunWithContext starts nothing; it waits for ctx to end.
func (f *Fanout) RunWithContext(ctx context.Context) { <-ctx.Done() }

// SetTransform returns ErrNotSupportedOnView.
func (f *Fanout) SetTransform(cache.TransformFunc) error { return ErrNotSupportedOnView }

// SetWatchErrorHandler returns ErrNotSupportedOnView.
func (f *Fanout) SetWatchErrorHandler(cache.WatchErrorHandler) error { return ErrNotSupportedOnView }

// SetWatchErrorHandlerWithContext returns ErrNotSupportedOnView.
func (f *Fanout) SetWatchErrorHandlerWithContext(cache.WatchErrorHandlerWithContext) error {
	return ErrNotSupportedOnView
}

// AddIndexers returns ErrNotSupportedOnView.
func (f *Fanout) AddIndexers(cache.Indexers) error { return ErrNotSupportedOnView }

// targets returns the live handlers of the Interests filed under any of keys, each once. The snapshot is taken
// under the read lock and the handlers are called without it, so a handler may add or remove keys, or close its
// Interest.
func (f *Fanout) targets(keys []string) []*interestHandler {
	if len(keys) == 0 {
		return nil
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	var seen []*Interest
	var out []*interestHandler
	for _, k := range keys {
		for in := range f.byKey[k] {
			if slices.Contains(seen, in) {
				continue
			}
			seen = append(seen, in)
			out = append(out, in.handlers...)
		}
	}
	return out
}

// fanoutHandler is the Fanout's handler on the shared informer. client-go calls it one event at a time, so each
// Interest's handlers get their events in order and never concurrently.
type fanoutHandler struct{ f *Fanout }

func (h fanoutHandler) OnAdd(obj any, isInInitialList bool) {
	for _, t := range h.f.targets(h.f.keys(obj)) {
		if !t.removed.Load() {
			t.handler.OnAdd(obj, isInInitialList)
		}
	}
}

// OnUpdate goes to every Interest filed under a key of either state, as the update it is: the handler reads an
// unfiltered informer, so it sees both states and decides what the change means to it (a Project renamed away from
// a tenant's name concerns that tenant).
func (h fanoutHandler) OnUpdate(oldObj, newObj any) {
	oldKeys, newKeys := h.f.keys(oldObj), h.f.keys(newObj)
	keys := newKeys
	if !slices.Equal(oldKeys, newKeys) {
		keys = append(slices.Clip(oldKeys), newKeys...)
	}
	for _, t := range h.f.targets(keys) {
		if !t.removed.Load() {
			t.handler.OnUpdate(oldObj, newObj)
		}
	}
}

// OnDelete finds the keys of a tombstone's last known state and passes the tombstone on, as client-go does.
func (h fanoutHandler) OnDelete(obj any) {
	state := worker.LastState(obj)
	for _, t := range h.f.targets(h.f.keys(state)) {
		if !t.removed.Load() {
			t.handler.OnDelete(obj)
		}
	}
}

// Interest is one reader's (a tenant's controller's) interest in some keys of a Fanout's informer. It is a
// cache.SharedIndexInformer, so a controller reads the shared objects through it (GetIndexer, listers) and adds
// handlers to it as to any informer (worker.Queue.Watch); those handlers get the events of the objects filed under
// the keys the Interest holds now, and nothing else. Keys are added and removed as the controller learns what it
// needs (Add, Remove).
//
// Unlike client-go, a handler gets no initial list: an Interest is for changes from the moment a key is added, and
// the present state is read from the indexer. A controller that adds a key before it reads the indexer misses
// nothing: an event delivered before the key was added changed the store before the read.
//
// Handlers are called on the Fanout's handler goroutine, one event at a time: they must not block (enqueue and
// return). They may call any method of the Interest. A removed handler gets no event that starts being delivered
// after RemoveEventHandler returns.
type Interest struct {
	f *Fanout
	// keys and handlers are guarded by f.mu; handlers is copy-on-write, so a dispatch may keep its snapshot.
	keys     sets.Set[string]
	handlers []*interestHandler
	closed   bool
	// ownsFanout: made by NewInterest, whose Fanout is closed with it.
	ownsFanout bool
}

var _ cache.SharedIndexInformer = &Interest{}

// NewInterest is an Interest on a Fanout of its own, for a reader that is alone on its informer (a test's plain
// informer): closing the Interest removes the Fanout's handler too.
func NewInterest(informer cache.SharedIndexInformer, keys KeyFunc) (*Interest, error) {
	f, err := NewFanout(informer, keys)
	if err != nil {
		return nil, err
	}
	in, err := f.Interest()
	if err != nil {
		return nil, errors.Join(err, f.Close())
	}
	in.ownsFanout = true
	return in, nil
}

// Add files the Interest under keys. Adding a key it holds does nothing.
func (in *Interest) Add(keys ...string) {
	f := in.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if in.closed {
		return
	}
	for _, k := range keys {
		if in.keys.Has(k) {
			continue
		}
		in.keys.Insert(k)
		if f.byKey[k] == nil {
			f.byKey[k] = map[*Interest]struct{}{}
		}
		f.byKey[k][in] = struct{}{}
	}
}

// Remove takes keys out of the Interest. Removing a key it does not hold does nothing.
func (in *Interest) Remove(keys ...string) {
	f := in.f
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range keys {
		in.removeLocked(k)
	}
}

func (in *Interest) removeLocked(k string) {
	if !in.keys.Has(k) {
		return
	}
	in.keys.Delete(k)
	delete(in.f.byKey[k], in)
	if len(in.f.byKey[k]) == 0 {
		delete(in.f.byKey, k)
	}
}

// Keys returns the keys the Interest holds, for tests.
func (in *Interest) Keys() sets.Set[string] {
	in.f.mu.RLock()
	defer in.f.mu.RUnlock()
	return in.keys.Clone()
}

// Close removes every handler and key of the Interest; nothing reaches it afterwards. It may be called more than
// once, and from a handler.
func (in *Interest) Close() {
	f := in.f
	f.mu.Lock()
	if in.closed {
		f.mu.Unlock()
		return
	}
	in.closed = true
	for k := range in.keys.Clone() {
		in.removeLocked(k)
	}
	for _, h := range in.handlers {
		h.removed.Store(true)
	}
	in.handlers = nil
	f.interests.Delete(in)
	f.mu.Unlock()
	if in.ownsFanout {
		_ = f.Close()
	}
}

// HandlerCount returns how many handlers are registered on the Interest, for leak tests.
func (in *Interest) HandlerCount() int {
	in.f.mu.RLock()
	defer in.f.mu.RUnlock()
	return len(in.handlers)
}

// AddEventHandler registers a handler for the events of the objects filed under the Interest's keys. Its
// registration has synced once the Fanout's own has (the informer synced and its initial list went through the
// Fanout).
func (in *Interest) AddEventHandler(handler cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	f := in.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if in.closed {
		return nil, errors.New("tenancy: the Interest is closed")
	}
	h := &interestHandler{interest: in, handler: handler}
	in.handlers = append(slices.Clip(in.handlers), h)
	return h, nil
}

// AddEventHandlerWithResyncPeriod is AddEventHandler: the handler gets the shared informer's resyncs of its keys'
// objects, at the informer's period.
func (in *Interest) AddEventHandlerWithResyncPeriod(handler cache.ResourceEventHandler, _ time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return in.AddEventHandler(handler)
}

// AddEventHandlerWithOptions is AddEventHandler; the options are ignored.
func (in *Interest) AddEventHandlerWithOptions(handler cache.ResourceEventHandler, _ cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return in.AddEventHandler(handler)
}

// RemoveEventHandler removes a handler added to this Interest. It is idempotent and may be called from a handler.
func (in *Interest) RemoveEventHandler(reg cache.ResourceEventHandlerRegistration) error {
	h, ok := reg.(*interestHandler)
	if !ok || h.interest != in {
		return fmt.Errorf("tenancy: registration %v is not one of this Interest", reg)
	}
	f := in.f
	f.mu.Lock()
	defer f.mu.Unlock()
	h.removed.Store(true)
	in.handlers = slices.DeleteFunc(slices.Clone(in.handlers), func(x *interestHandler) bool { return x == h })
	return nil
}

// Run starts nothing; it waits for stop.
func (in *Interest) Run(stopCh <-chan struct{}) { <-stopCh }

// RunWithContext starts nothing; it waits for ctx to end.
func (in *Interest) RunWithContext(ctx context.Context) { <-ctx.Done() }

// SetTransform returns ErrNotSupportedOnView.
func (in *Interest) SetTransform(cache.TransformFunc) error { return ErrNotSupportedOnView }

// SetWatchErrorHandler returns ErrNotSupportedOnView.
func (in *Interest) SetWatchErrorHandler(cache.WatchErrorHandler) error { return ErrNotSupportedOnView }

// SetWatchErrorHandlerWithContext returns ErrNotSupportedOnView.
func (in *Interest) SetWatchErrorHandlerWithContext(cache.WatchErrorHandlerWithContext) error {
	return ErrNotSupportedOnView
}

// AddIndexers returns ErrNotSupportedOnView.
func (in *Interest) AddIndexers(cache.Indexers) error { return ErrNotSupportedOnView }

// GetStore returns the shared informer's store.
func (in *Interest) GetStore() cache.Store { return in.f.GetStore() }

// GetIndexer returns the shared informer's indexer.
func (in *Interest) GetIndexer() cache.Indexer { return in.f.GetIndexer() }

// GetController returns the shared informer's controller.
func (in *Interest) GetController() cache.Controller { return in.f.GetController() }

// HasSynced reports whether the shared informer has synced.
func (in *Interest) HasSynced() bool { return in.f.HasSynced() }

// HasSyncedChecker is the shared informer's.
func (in *Interest) HasSyncedChecker() cache.DoneChecker { return in.f.HasSyncedChecker() }

// LastSyncResourceVersion is the shared informer's.
func (in *Interest) LastSyncResourceVersion() string { return in.f.LastSyncResourceVersion() }

// IsStopped reports whether the shared informer stopped or the Interest is closed.
func (in *Interest) IsStopped() bool { return in.Closed() || in.f.IsStopped() }

// Closed reports whether the Interest is closed.
func (in *Interest) Closed() bool {
	in.f.mu.RLock()
	defer in.f.mu.RUnlock()
	return in.closed
}

// interestHandler is one handler of an Interest, and its registration.
type interestHandler struct {
	interest *Interest
	handler  cache.ResourceEventHandler
	removed  atomic.Bool
}

// HasSynced is the Fanout's registration's: the informer synced and its initial list went through the Fanout.
func (h *interestHandler) HasSynced() bool { return h.interest.f.reg.HasSynced() }

// HasSyncedChecker is the Fanout's registration's.
func (h *interestHandler) HasSyncedChecker() cache.DoneChecker {
	return h.interest.f.reg.HasSyncedChecker()
}
