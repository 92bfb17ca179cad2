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

package providerconfig

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
)

var extraAPI = schema.GroupVersionResource{Group: "example.io", Version: "v1", Resource: "widgets"}

// probe is a per-tenant controller for tests: it watches its tenant's Services, remembers the spec section it was
// built with and reports its condition once synced. It deliberately leaves its handler registered when it stops:
// removing it is the manager's job, whatever a controller forgets.
type probe struct {
	owner    *probes
	tctx     *tenant.Context
	section  string
	cleanup  bool
	informer cache.SharedIndexInformer
	reg      cache.ResourceEventHandlerRegistration

	mu   sync.Mutex
	seen map[string]bool
}

func (p *probe) Run(ctx context.Context) {
	p.owner.enter(p.tctx.Name())
	defer p.owner.leave(p.tctx.Name())
	if cache.WaitForCacheSync(ctx.Done(), p.reg.HasSynced) {
		p.owner.mu.Lock()
		gate := p.owner.gate
		p.owner.mu.Unlock()
		if gate != nil {
			select {
			case <-gate:
			case <-ctx.Done():
				return
			}
		}
		p.tctx.Condition.Report(metav1.ConditionTrue, "Running", "probe "+p.section)
		<-ctx.Done()
	}
	// A controller that takes its time to return (a pusher draining): the test releases it.
	p.owner.mu.Lock()
	hold := p.owner.hold
	p.owner.mu.Unlock()
	if hold != nil {
		<-hold
	}
}

func (p *probe) sees(name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[name]
}

// probes records the probes a factory built, by tenant.
type probes struct {
	mu      sync.Mutex
	byName  map[string][]*probe
	failFor map[string]error
	pending map[string]string
	// hold, when set, keeps every probe from returning after its context ended until it is closed.
	hold chan struct{}
	// gate, when set, keeps every probe from reporting its condition until it is closed.
	gate chan struct{}
	// active counts the probes of each tenant inside Run; maxActive is the most seen at once.
	active, maxActive map[string]int
	abandoned         map[string]int
}

func (ps *probes) enter(tenantName string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.active[tenantName]++
	ps.maxActive[tenantName] = max(ps.maxActive[tenantName], ps.active[tenantName])
}

func (ps *probes) leave(tenantName string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.active[tenantName]--
}

func (ps *probes) most(tenantName string) int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.maxActive[tenantName]
}

func newProbes() *probes {
	return &probes{byName: map[string][]*probe{}, failFor: map[string]error{}, pending: map[string]string{},
		active: map[string]int{}, maxActive: map[string]int{}, abandoned: map[string]int{}}
}

func (ps *probes) latest(tenantName string) *probe {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	all := ps.byName[tenantName]
	if len(all) == 0 {
		return nil
	}
	return all[len(all)-1]
}

func (ps *probes) built(tenantName string) int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return len(ps.byName[tenantName])
}

// cleanups is how many cleanup probes were built for the tenant.
func (ps *probes) cleanups(tenantName string) int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	n := 0
	for _, p := range ps.byName[tenantName] {
		if p.cleanup {
			n++
		}
	}
	return n
}

func (ps *probes) setPending(tenantName, what string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.pending[tenantName] = what
}

// factory is a probe controller configured by spec.rancher (its section is the cluster ID).
func (ps *probes) factory(required ...schema.GroupVersionResource) NamedFactory {
	return NamedFactory{Name: "probe", Workers: 1, Factory: tenant.Factory{
		ConditionType: mpv1alpha1.ProviderConfigConditionNamespaceProjectReady,
		Section:       tenant.SectionOf(rancherSection),
		RequiredAPIs:  tenant.APIs(required...),
		New:           ps.build(false),
		Cleanup:       ps.build(true),
		CopySection:   tenant.CopySectionOf(rancherSection),
		Abandon: func(ctx context.Context, c *tenant.Context) (string, error) {
			ps.mu.Lock()
			defer ps.mu.Unlock()
			ps.abandoned[c.Name()]++
			return "2 widgets in " + c.ProviderConfig.Spec.Rancher.ClusterID, nil
		},
		Pending: func(ctx context.Context, c *tenant.Context) (string, error) {
			ps.mu.Lock()
			defer ps.mu.Unlock()
			return ps.pending[c.Name()], nil
		},
	}}
}

// build returns the constructor of the probe controller, or of its cleanup.
func (ps *probes) build(cleanup bool) tenant.Constructor {
	return func(ctx context.Context, c *tenant.Context) (tenant.Controller, error) {
		ps.mu.Lock()
		err := ps.failFor[c.Name()]
		ps.mu.Unlock()
		if err != nil {
			return nil, err
		}
		informer, err := c.Informers.Informer(informerset.Services)
		if err != nil {
			return nil, err
		}
		p := &probe{owner: ps, tctx: c, section: c.ProviderConfig.Spec.Rancher.ClusterID, cleanup: cleanup, informer: informer, seen: map[string]bool{}}
		record := func(obj any, present bool) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			svc := obj.(*corev1.Service)
			p.mu.Lock()
			p.seen[svc.Name] = present
			p.mu.Unlock()
		}
		p.reg, err = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { record(obj, true) },
			UpdateFunc: func(_, obj any) { record(obj, true) },
			DeleteFunc: func(obj any) { record(obj, false) },
		})
		if err != nil {
			return nil, err
		}
		ps.mu.Lock()
		ps.byName[c.Name()] = append(ps.byName[c.Name()], p)
		ps.mu.Unlock()
		return p, nil
	}
}
