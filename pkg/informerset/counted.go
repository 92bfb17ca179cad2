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
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// countedInformer is a shared informer that knows the handlers registered on it. Each one is a client-go listener
// (two goroutines and a buffer) that every event is copied to, so their number must not grow with the tenants:
// Set.Handlers lets tests (and a debugger) check it.
type countedInformer struct {
	cache.SharedIndexInformer

	mu   sync.Mutex
	regs map[cache.ResourceEventHandlerRegistration]struct{}
}

func counted(informer cache.SharedIndexInformer) *countedInformer {
	return &countedInformer{SharedIndexInformer: informer, regs: map[cache.ResourceEventHandlerRegistration]struct{}{}}
}

func (c *countedInformer) track(reg cache.ResourceEventHandlerRegistration, err error) (cache.ResourceEventHandlerRegistration, error) {
	if err == nil {
		c.mu.Lock()
		c.regs[reg] = struct{}{}
		c.mu.Unlock()
	}
	return reg, err
}

func (c *countedInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return c.track(c.SharedIndexInformer.AddEventHandler(h))
}

func (c *countedInformer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return c.track(c.SharedIndexInformer.AddEventHandlerWithResyncPeriod(h, resync))
}

func (c *countedInformer) AddEventHandlerWithOptions(h cache.ResourceEventHandler, o cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return c.track(c.SharedIndexInformer.AddEventHandlerWithOptions(h, o))
}

func (c *countedInformer) RemoveEventHandler(reg cache.ResourceEventHandlerRegistration) error {
	err := c.SharedIndexInformer.RemoveEventHandler(reg)
	if err == nil {
		c.mu.Lock()
		delete(c.regs, reg)
		c.mu.Unlock()
	}
	return err
}

func (c *countedInformer) handlers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.regs)
}

// Handlers returns how many event handlers are registered on the shared informer of gvr (0 if the set has none, or
// the optional API is not served yet): the Router's, a Fanout's, the claims registries'. It does not depend on the
// number of tenants.
func (s *Set) Handlers(gvr schema.GroupVersionResource) int {
	inf := s.required[gvr]
	if inf == nil {
		inf, _, _ = s.Optional(gvr)
	}
	if c, ok := inf.(*countedInformer); ok {
		return c.handlers()
	}
	return 0
}
