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
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"
)

// registrar is the informer under a Tracked: it keeps the handlers registered on it, and refuses to remove one it
// does not know, as a client-go informer refuses a handle of another kind.
type registrar struct {
	cache.SharedIndexInformer
	regs map[cache.ResourceEventHandlerRegistration]bool
}

type registration struct {
	cache.ResourceEventHandlerRegistration
	id int
}

func (r *registrar) add() (cache.ResourceEventHandlerRegistration, error) {
	reg := &registration{id: len(r.regs)}
	r.regs[reg] = true
	return reg, nil
}

func (r *registrar) AddEventHandler(cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return r.add()
}

func (r *registrar) AddEventHandlerWithResyncPeriod(cache.ResourceEventHandler, time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return r.add()
}

func (r *registrar) AddEventHandlerWithOptions(cache.ResourceEventHandler, cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return r.add()
}

func (r *registrar) RemoveEventHandler(reg cache.ResourceEventHandlerRegistration) error {
	if !r.regs[reg] {
		return errors.New("unknown registration")
	}
	delete(r.regs, reg)
	return nil
}

// TestTrackedKeepsItsHandlers: every way of adding a handler is tracked, a removal the informer refuses still
// counts, and RemoveAll takes every handler off the informer and refuses new ones.
func TestTrackedKeepsItsHandlers(t *testing.T) {
	inner := &registrar{regs: map[cache.ResourceEventHandlerRegistration]bool{}}
	tracked := Track(inner)
	h := cache.ResourceEventHandlerFuncs{}
	first, _ := tracked.AddEventHandler(h)
	if _, err := tracked.AddEventHandlerWithResyncPeriod(h, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := tracked.AddEventHandlerWithOptions(h, cache.HandlerOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := tracked.Handlers(); got != 3 {
		t.Fatalf("%d handlers tracked, want 3", got)
	}
	if err := tracked.RemoveEventHandler(first); err != nil {
		t.Fatal(err)
	}
	if err := tracked.RemoveEventHandler(&registration{id: -1}); err == nil {
		t.Error("the informer's refusal to remove a handler it does not know was not returned")
	}
	if got, registered := tracked.Handlers(), len(inner.regs); got != 2 || registered != 2 {
		t.Fatalf("after one removal: %d handlers tracked, %d registered; want 2 and 2", got, registered)
	}

	tracked.RemoveAll()
	if got, registered := tracked.Handlers(), len(inner.regs); got != 0 || registered != 0 {
		t.Fatalf("after RemoveAll: %d handlers tracked, %d registered; want none", got, registered)
	}
	if _, err := tracked.AddEventHandler(h); !errors.Is(err, ErrTrackingClosed) {
		t.Errorf("a handler added after RemoveAll: %v, want ErrTrackingClosed", err)
	}
	if registered := len(inner.regs); registered != 0 {
		t.Errorf("a handler added after RemoveAll stayed registered on the informer")
	}
}
