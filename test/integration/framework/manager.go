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
	"slices"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"

	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/providerconfig"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/registry"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
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

// ManagerOptions is what cmd/multiproject-controller-manager/app gives providerconfig.NewManager, for a test.
type ManagerOptions struct {
	// Tenancy holds the shared informers and the router (StartTenancy); the informers it holds are the APIs the
	// cluster serves, as far as the controllers are concerned.
	Tenancy *Tenancy
	// KubeClient and MultiprojectClient are the manager's (its ServiceAccount's): controllers act with them, and the
	// tenant's finalizer and status are written with them.
	KubeClient         kubernetes.Interface
	MultiprojectClient mpclientset.Interface
	// Admin creates and deletes the tests' ProviderConfigs, as a tenant administrator would.
	Admin    mpclientset.Interface
	LabelKey string
	// Controllers are the enabled controllers (see Enable), in start order; the others are unknown to the Manager.
	// A test may wrap a Factory's New.
	Controllers []providerconfig.NamedFactory
	Options     tenant.Options
	// StopTimeout is --controller-shutdown-timeout; 0 means its default, 30 s. A controller that does not return
	// within it fails the test.
	StopTimeout time.Duration
}

// Manager runs tenants' controllers through the production ControllersManager (providerconfig.Manager), wired as
// cmd/multiproject-controller-manager/app wires it: its tracked informers (every handler removed on stop), its
// per-controller Event broadcasters, its condition reporting and its start and stop. Where the binary's
// ProviderConfig controller reacts to informer events, a test says when a tenant starts and stops (Tenant.Start,
// Tenant.Stop); each start syncs the ProviderConfig as that controller does (finalizer, then status.appliedSpec,
// then Manager.Sync). A condition change re-syncs the tenant, as in the binary.
type Manager struct {
	t    testing.TB
	ctx  context.Context
	opts ManagerOptions
	pcm  *providerconfig.Manager
	// resyncs holds the tenants whose controllers reported a new condition, or whose stopped instance returned.
	resyncs *worker.Queue

	mu      sync.Mutex
	tenants map[string]*Tenant
}

// resyncWorkers is how many tenants are re-synced at once after condition changes.
const resyncWorkers = 2

// StartManager builds the Manager on ctx (the leader's context in the binary) and stops every tenant's controllers
// when the test ends.
func StartManager(t testing.TB, ctx context.Context, opts ManagerOptions) *Manager {
	t.Helper()
	if opts.Tenancy == nil || opts.KubeClient == nil || opts.MultiprojectClient == nil || opts.Admin == nil || opts.LabelKey == "" {
		t.Fatal("framework: StartManager needs Tenancy, KubeClient, MultiprojectClient, Admin and LabelKey")
	}
	m := &Manager{t: t, ctx: ctx, opts: opts, tenants: map[string]*Tenant{}}
	m.resyncs = worker.New(worker.Config{
		Controller: "framework-resync",
		KeyName:    "providerConfig",
		Workers:    resyncWorkers,
		Sync: func(_ context.Context, name string) (worker.Result, error) {
			m.resync(name)
			return worker.Result{}, nil
		},
		Observe: func(string, error) {},
	})
	cfg := providerconfig.ManagerConfig{
		KubeClient:         opts.KubeClient,
		MultiprojectClient: opts.MultiprojectClient,
		Router:             opts.Tenancy.Router,
		// The binary's rules: every resource it always watches, the optional ones once served, synced and routed.
		Shared:            opts.Tenancy.Production.Shared,
		APIServed:         opts.Tenancy.Production.Served,
		LabelKey:          opts.LabelKey,
		Options:           opts.Options,
		EventSink:         &typedcorev1.EventSinkImpl{Interface: opts.KubeClient.CoreV1().Events("")},
		StopTimeout:       opts.StopTimeout,
		OnConditionChange: m.resyncs.Add,
	}
	for _, f := range opts.Controllers {
		cfg.Enabled = append(cfg.Enabled, m.wrap(f))
	}
	m.pcm = providerconfig.NewManager(cfg)

	resyncCtx, stopResyncs := context.WithCancel(ctx)
	resyncsDone := make(chan struct{})
	go func() {
		defer close(resyncsDone)
		m.resyncs.Run(resyncCtx, worker.RunOptions{})
	}()
	t.Cleanup(func() {
		stopResyncs()
		<-resyncsDone
		m.pcm.StopAll(ctx)
	})
	return m
}

// wrap makes the factory's constructors apply the tenant's TenantOptions and remember the Context they were given.
func (m *Manager) wrap(f providerconfig.NamedFactory) providerconfig.NamedFactory {
	build := func(original tenant.Constructor, cleanup bool) tenant.Constructor {
		if original == nil {
			return nil
		}
		return func(ctx context.Context, c *tenant.Context) (tenant.Controller, error) {
			constructor := original
			if tn := m.lookup(c.Name()); tn != nil {
				if tn.opts.Workers > 0 {
					c.Workers = tn.opts.Workers
				}
				if own, ok := tn.opts.Constructors[f.Name]; ok && !cleanup {
					constructor = own
				}
				tn.setContext(f.Name, c)
			}
			return constructor(ctx, c)
		}
	}
	f.New = build(f.New, false)
	f.Cleanup = build(f.Cleanup, true)
	return f
}

// ControllersManager is the production Manager the tenants run in, e.g. for Running or Registrations.
func (m *Manager) ControllersManager() *providerconfig.Manager { return m.pcm }

func (m *Manager) lookup(name string) *Tenant {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tenants[name]
}

// resync syncs a tenant again after a condition change, as the ProviderConfig controller does: a controller that
// waited for its previous instance to return starts then.
func (m *Manager) resync(name string) {
	tn := m.lookup(name)
	if tn == nil {
		return
	}
	tn.mu.Lock()
	defer tn.mu.Unlock()
	if !tn.active {
		return
	}
	if _, err := m.pcm.Sync(m.ctx, tn.pc); err != nil {
		klog.FromContext(m.ctx).Error(err, "framework: re-syncing the tenant after a condition change failed", "providerConfig", name)
	}
}

// TenantOptions vary one tenant's controllers from what the process configures for all of them.
type TenantOptions struct {
	// Workers, if positive, replaces the worker count (--concurrent-<name>-syncs) of the tenant's controllers.
	Workers int
	// Constructors replace, by controller name, how the tenant's controller is built (not its cleanup), e.g. to run
	// only a half of it.
	Constructors map[string]tenant.Constructor
}

// Tenant is one ProviderConfig whose controllers the Manager runs.
type Tenant struct {
	m    *Manager
	Name string
	opts TenantOptions

	// mu serialises the Manager's calls for the tenant, as the ProviderConfig controller's queue does.
	mu sync.Mutex
	// active is true from Start to Stop; pc is the ProviderConfig last synced.
	active bool
	pc     *mpv1alpha1.ProviderConfig

	contextsMu sync.Mutex
	contexts   map[string]*tenant.Context
}

// Create creates the ProviderConfig as the admin and returns its tenant, not started. When the test ends the
// tenant is stopped and the ProviderConfig deleted.
func (m *Manager) Create(pc *mpv1alpha1.ProviderConfig, opts TenantOptions) *Tenant {
	m.t.Helper()
	if _, err := m.opts.Admin.MultiprojectV1alpha1().ProviderConfigs().Create(m.ctx, pc, metav1.CreateOptions{}); err != nil {
		m.t.Fatalf("framework: creating ProviderConfig %s: %v", pc.Name, err)
	}
	return m.add(pc.Name, opts, true)
}

// Existing returns the tenant of a ProviderConfig the test created itself (e.g. from docs/examples), not started.
// When the test ends the tenant is stopped and the manager's finalizer removed; the ProviderConfig stays.
func (m *Manager) Existing(name string, opts TenantOptions) *Tenant {
	m.t.Helper()
	return m.add(name, opts, false)
}

func (m *Manager) add(name string, opts TenantOptions, created bool) *Tenant {
	m.t.Helper()
	tn := &Tenant{m: m, Name: name, opts: opts, contexts: map[string]*tenant.Context{}}
	m.mu.Lock()
	_, exists := m.tenants[name]
	if !exists {
		m.tenants[name] = tn
	}
	m.mu.Unlock()
	if exists {
		m.t.Fatalf("framework: tenant %s already exists in this test", name)
	}
	m.t.Cleanup(func() { tn.remove(created) })
	return tn
}

// Start syncs the tenant's ProviderConfig as the ProviderConfig controller does, which starts its configured
// controllers with empty queues; it fails the test when a controller cannot be built. The tenant is stopped when
// the test ends, if it still runs.
func (tn *Tenant) Start() {
	t := tn.m.t
	t.Helper()
	tn.mu.Lock()
	defer tn.mu.Unlock()
	pc, err := tn.prepare()
	if err != nil {
		t.Fatalf("framework: tenant %s: %v", tn.Name, err)
	}
	tn.pc, tn.active = pc, true
	t.Cleanup(tn.Stop)
	if _, err := tn.m.pcm.Sync(tn.m.ctx, pc); err != nil {
		t.Fatalf("framework: starting the controllers of tenant %s: %v", tn.Name, err)
	}
}

// prepare reads the ProviderConfig as the manager would and brings it to what Manager.Sync expects, as the
// ProviderConfig controller does: the finalizer first, then the sections about to start on record in
// status.appliedSpec.
func (tn *Tenant) prepare() (*mpv1alpha1.ProviderConfig, error) {
	ctx := tn.m.ctx
	pc, err := tn.m.opts.MultiprojectClient.MultiprojectV1alpha1().ProviderConfigs().Get(ctx, tn.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if pc.DeletionTimestamp != nil {
		return nil, fmt.Errorf("ProviderConfig %s is being deleted; the framework starts only live tenants", tn.Name)
	}
	client := tn.m.opts.MultiprojectClient
	if !slices.Contains(pc.Finalizers, mpv1alpha1.ProviderConfigCleanupFinalizer) {
		if pc, err = providerconfig.PatchFinalizer(ctx, client, pc, true); err != nil || pc == nil {
			return nil, fmt.Errorf("adding the finalizer: %v (or the ProviderConfig is gone)", err)
		}
	}
	if pc, err = providerconfig.RecordAppliedSpec(ctx, client, tn.m.pcm, pc); err != nil || pc == nil {
		return nil, fmt.Errorf("recording status.appliedSpec: %v (or the ProviderConfig is gone)", err)
	}
	return pc, nil
}

// Stop stops every controller of the tenant through the Manager (as when its ProviderConfig vanishes: no cleanup
// runs) and waits for them; a no-op when the tenant does not run. A controller that has not returned within the
// stop timeout fails the test.
func (tn *Tenant) Stop() {
	t := tn.m.t
	t.Helper()
	tn.mu.Lock()
	defer tn.mu.Unlock()
	if !tn.active {
		return
	}
	tn.active = false
	tn.m.pcm.Stop(tn.m.ctx, tn.Name)
	// The Manager keeps a stopped tenant only while one of its instances has not returned.
	if slices.Contains(tn.m.pcm.Tenants(), tn.Name) {
		t.Errorf("framework: a controller of tenant %s did not return within the stop timeout", tn.Name)
	}
}

// remove stops the tenant, takes the manager's finalizer off its ProviderConfig and, if the framework created it,
// deletes it.
func (tn *Tenant) remove(created bool) {
	tn.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pc, err := tn.m.opts.MultiprojectClient.MultiprojectV1alpha1().ProviderConfigs().Get(ctx, tn.Name, metav1.GetOptions{})
		if err != nil || !slices.Contains(pc.Finalizers, mpv1alpha1.ProviderConfigCleanupFinalizer) {
			return err
		}
		_, err = providerconfig.PatchFinalizer(ctx, tn.m.opts.MultiprojectClient, pc, false)
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		tn.m.t.Errorf("framework: removing the finalizer of ProviderConfig %s: %v", tn.Name, err)
	}
	if !created {
		return
	}
	err = tn.m.opts.Admin.MultiprojectV1alpha1().ProviderConfigs().Delete(ctx, tn.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		tn.m.t.Errorf("framework: deleting ProviderConfig %s: %v", tn.Name, err)
	}
}

// Condition returns the tenant's condition of the given type (e.g. NEGReady) as the Manager reports it for the
// ProviderConfig's status: a sync now, as the ProviderConfig controller makes on a condition change, sees every
// report made before the call. It returns false when the tenant does not run or the condition is absent.
func (tn *Tenant) Condition(conditionType string) (metav1.Condition, bool) {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	if !tn.active {
		return metav1.Condition{}, false
	}
	out, err := tn.m.pcm.Sync(tn.m.ctx, tn.pc)
	if err != nil {
		tn.m.t.Errorf("framework: syncing tenant %s: %v", tn.Name, err)
	}
	for _, c := range out.Conditions {
		if c.Type == conditionType {
			return c, true
		}
	}
	return metav1.Condition{}, false
}

// Context returns the Context the tenant's controller (or its cleanup) was last built with, or nil.
func (tn *Tenant) Context(controller string) *tenant.Context {
	tn.contextsMu.Lock()
	defer tn.contextsMu.Unlock()
	return tn.contexts[controller]
}

func (tn *Tenant) setContext(controller string, c *tenant.Context) {
	tn.contextsMu.Lock()
	defer tn.contextsMu.Unlock()
	tn.contexts[controller] = c
}
