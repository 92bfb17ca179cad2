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
	"fmt"

	"k8s.io/client-go/tools/cache"
)

// The registry of a routed resource: which tenant handlers its events go to, changed copy-on-write under registryMu
// so that dispatch never waits for a registration, and when a tenant's view of it has synced.

// handlersFor returns the handlers that see an object of owner o: every tenant's for a shared object.
func (res *routedResource) handlersFor(o owner) []*registration {
	if o.shared {
		return res.everyHandler()
	}
	return res.handlersOf(o.tenant)
}

// handlersOf returns the handlers of one tenant; none for "" (nobody).
func (res *routedResource) handlersOf(tenant string) []*registration {
	if tenant == "" {
		return nil
	}
	res.registryMu.RLock()
	defer res.registryMu.RUnlock()
	return res.byTenant[tenant]
}

func (res *routedResource) everyHandler() []*registration {
	res.registryMu.RLock()
	defer res.registryMu.RUnlock()
	return res.everyTenant
}

// goLive makes a registration receive routed events, unless it was removed meanwhile. Both are decided under
// registryMu, so a registration removed concurrently never lingers in the registry.
func (res *routedResource) goLive(g *registration) bool {
	res.registryMu.Lock()
	defer res.registryMu.Unlock()
	if g.removed.Load() {
		return false
	}
	res.byTenant[g.tenant.name] = appendCopy(res.byTenant[g.tenant.name], g)
	if res.kind == kindClusterShared {
		res.everyTenant = appendCopy(res.everyTenant, g)
	}
	return true
}

// remove marks a registration removed and takes it out of the registry. It reports false if it was already
// removed. It never waits for dispatch, so a handler may remove itself.
func (res *routedResource) remove(g *registration) bool {
	res.registryMu.Lock()
	defer res.registryMu.Unlock()
	if g.removed.Load() {
		return false
	}
	g.removed.Store(true)
	if hs := withoutCopy(res.byTenant[g.tenant.name], g); len(hs) > 0 {
		res.byTenant[g.tenant.name] = hs
	} else {
		delete(res.byTenant, g.tenant.name)
	}
	if res.kind == kindClusterShared {
		res.everyTenant = withoutCopy(res.everyTenant, g)
	}
	return true
}

// appendCopy and withoutCopy never write to the slice they are given, which dispatch may be iterating.
func appendCopy(hs []*registration, g *registration) []*registration {
	out := make([]*registration, len(hs), len(hs)+1)
	copy(out, hs)
	return append(out, g)
}

func withoutCopy(hs []*registration, g *registration) []*registration {
	out := make([]*registration, 0, len(hs))
	for _, h := range hs {
		if h != g {
			out = append(out, h)
		}
	}
	return out
}

// hasSyncedChecker is done once this resource's informer and the Namespace informer have both synced: a tenant's
// view of a namespaced resource is not complete before the namespaces' labels are known.
func (res *routedResource) hasSyncedChecker() cache.DoneChecker {
	res.syncedOnce.Do(func() {
		own := res.informer.HasSyncedChecker()
		if res == res.router.namespaces {
			res.syncedChecker = own
			return
		}
		nsChecker := res.router.namespaces.informer.HasSyncedChecker()
		done := make(chan struct{})
		// One goroutine per routed resource (not per tenant), for the life of the process if the informers never
		// sync.
		go func() {
			<-own.Done()
			<-nsChecker.Done()
			close(done)
		}()
		res.syncedChecker = doneChecker{name: fmt.Sprintf("tenancy view of %s", res.resource), done: done}
	})
	return res.syncedChecker
}

// doneChecker is a named channel, the shape client-go's cache.WaitFor takes.
type doneChecker struct {
	name string
	done <-chan struct{}
}

func (c doneChecker) Name() string          { return c.name }
func (c doneChecker) Done() <-chan struct{} { return c.done }
