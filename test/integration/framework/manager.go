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

package framework

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app"
	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/options"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/providerconfig"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/registry"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
)

// Scheme is the manager's: the built-in kinds and ours. The Manager records Events with it; a test that records
// Events itself uses it too, so that every kind resolves as it does in the binary.
var Scheme = providerconfig.Scheme

// Descriptor returns the binary's descriptor of the named controller (cmd/multiproject-controller-manager/app's
// table); it panics on an unknown name, a mistake in the test.
func Descriptor(name string) *registry.Descriptor {
	d, ok := app.NewControllerDescriptors().Get(name)
	if !ok {
		panic(fmt.Sprintf("framework: no controller named %q", name))
	}
	return d
}

// Enable returns the controller d as --controllers enables it, with --concurrent-<name>-syncs=workers (0: the
// controller's default).
func Enable(d *registry.Descriptor, workers int) providerconfig.NamedFactory {
	if workers <= 0 {
		workers = d.DefaultConcurrentSyncs
	}
	return providerconfig.NamedFactory{Name: d.Name, Workers: workers, Factory: d.Factory}
}

// ManagerOptions is what a test's manager runs and how it differs from the binary's defaults.
type ManagerOptions struct {
	// Controllers are the enabled controllers (see Enable), in start order: --controllers and
	// --concurrent-<name>-syncs. A test may wrap a Factory's New.
	Controllers []providerconfig.NamedFactory
	// Flags change the options as flags would (cluster name, GCE endpoint, client QPS, resync period, ...), after
	// the framework's: those of ManagerProcessConfig, the Controllers, --kube-api-qps-per-tenant=0 and
	// --resync-period=0 (the tests size their clients without per-tenant shares, and expect no resync; one that
	// measures either sets it here).
	Flags func(*options.Options)
	// Wrap, if set, wraps the transport of the manager's two shared clients, e.g. APICalls.Wrap.
	Wrap func(http.RoundTripper) http.RoundTripper
	// RateLimiter, if set, replaces the limiter of each of the manager's two shared clients with a new one of its
	// own, for a test that measures how long requests wait in it.
	RateLimiter func() flowcontrol.RateLimiter
	// Served are the optional APIs (CRDs) that StartManager waits for until they are served, synced and routed.
	Served []schema.GroupVersionResource
}

// Manager is the binary's controller manager run in process (app.CreateControllerContext and
// app.StartControllers on a config built by app.NewOptions and Options.Config): the shared informers, the tenancy
// Router, and the real ProviderConfig controller with its ControllersManager, which writes the finalizer,
// status.appliedSpec and the status and starts, restarts and stops every tenant's controllers. The process runs as
// a shard of its own, and the framework plays the sharder: a test says when a tenant runs here (Tenant.Start
// labels its ProviderConfig for the shard) and when it no longer does (Tenant.Stop removes the label: its
// controllers stop without cleanup, as when the tenant moves to another replica). Claims between replicas stay
// off, as without --sharding.
type Manager struct {
	t       testing.TB
	env     *Env
	shard   string
	tenancy *Tenancy
	enabled []providerconfig.NamedFactory

	mu      sync.Mutex
	tenants map[string]*Tenant
}

// StartManager runs the manager on env's control plane, as the manifests' ServiceAccount, until the test ends;
// it returns once the APIs of opts.Served are served.
func StartManager(t testing.TB, env *Env, opts ManagerOptions) *Manager {
	t.Helper()
	m := &Manager{t: t, env: env, shard: "framework-" + utilrand.String(5), enabled: opts.Controllers, tenants: map[string]*Tenant{}}
	var ds []*registry.Descriptor
	for _, f := range opts.Controllers {
		ds = append(ds, &registry.Descriptor{Name: f.Name, DefaultConcurrentSyncs: f.Workers, Factory: m.wrap(f).Factory})
	}
	descriptors, err := registry.New(ds...)
	if err != nil {
		t.Fatal(err)
	}
	c := env.cp.ManagerProcessConfig(t, env.Ctx, ManagerProcess{Descriptors: descriptors, Wrap: opts.Wrap, RateLimiter: opts.RateLimiter,
		Flags: func(o *options.Options) {
			o.Controllers = nil
			for _, f := range opts.Controllers {
				o.Controllers = append(o.Controllers, f.Name)
			}
			o.KubeAPIQPSPerTenant = 0
			o.ResyncPeriod.Duration = 0
			if opts.Flags != nil {
				opts.Flags(o)
			}
		}})
	// Sharded for its ProviderConfigs only: the informer holds, and the controller runs, the tenants labeled for
	// m.shard. --sharding would also turn on claims; the config leaves them off.
	c.Sharding.Enabled, c.Sharding.Shard = true, m.shard
	// The shard's Lease is never acquired here: the framework plays the sharder, and the Replica only attaches
	// the ProviderConfig controller to the shard (its Drainer).
	replica, err := app.NewReplica(c)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := app.CreateControllerContext(env.Ctx, c, replica)
	if err != nil {
		t.Fatal(err)
	}
	c.EventBroadcaster.StartRecordingToSink(c.EventSink)
	ctx, cancel := context.WithCancel(env.Ctx)
	done := make(chan error, 1)
	// The command's term: StartControllers closes the claims and the informers once the controllers have stopped.
	go func() { done <- app.StartControllers(ctx, cc, descriptors, nil) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("framework: the manager returned %v", err)
		}
		c.EventBroadcaster.Shutdown()
	})
	m.tenancy = servedTenancy(t, env.Ctx, cc.Informers, opts.Served)
	return m
}

// Tenancy is the manager's shared informers and Router.
func (m *Manager) Tenancy() *Tenancy { return m.tenancy }

// wrap makes the factory's constructors apply the tenant's TenantOptions and remember the Context they were given.
func (m *Manager) wrap(f providerconfig.NamedFactory) providerconfig.NamedFactory {
	build := func(original tenant.Constructor, cleanup bool) tenant.Constructor {
		if original == nil {
			return nil
		}
		return func(ctx context.Context, c *tenant.Context) (tenant.Controller, error) {
			tn := m.lookup(c.Name())
			if tn == nil {
				return original(ctx, c)
			}
			constructor := original
			if tn.opts.Workers > 0 {
				c.Workers = tn.opts.Workers
			}
			if own, ok := tn.opts.Constructors[f.Name]; ok && !cleanup {
				constructor = own
			}
			tn.setContext(f.Name, c)
			controller, err := constructor(ctx, c)
			if err == nil && !cleanup {
				tn.built(f.Name)
			}
			return controller, err
		}
	}
	f.New = build(f.New, false)
	f.Cleanup = build(f.Cleanup, true)
	return f
}

func (m *Manager) lookup(name string) *Tenant {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tenants[name]
}

// TenantOptions vary one tenant's controllers from what the process configures for all of them.
type TenantOptions struct {
	// Workers, if positive, replaces the worker count (--concurrent-<name>-syncs) of the tenant's controllers.
	Workers int
	// Constructors replace, by controller name, how the tenant's controller is built (not its cleanup), e.g. to run
	// only a half of it.
	Constructors map[string]tenant.Constructor
}

// stopWait bounds the wait for a tenant's controllers to start or to stop: the default
// --controller-shutdown-timeout, and as long again for the ProviderConfig controller to get there.
const stopWait = time.Minute
