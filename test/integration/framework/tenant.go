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
	"encoding/json"
	"maps"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/providerconfig"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/sharding"
)

// Tenant is one ProviderConfig whose controllers the Manager runs while the test says so.
type Tenant struct {
	m    *Manager
	Name string
	opts TenantOptions

	// mu serialises Start and Stop; active is true from Start to Stop.
	mu     sync.Mutex
	active bool

	contextsMu sync.Mutex
	contexts   map[string]*tenant.Context
	// builds counts, per controller, the instances built for the tenant (not its cleanups).
	builds map[string]int
}

// Create creates the ProviderConfig as the admin and returns its tenant, not started. When the test ends the
// tenant is stopped and the ProviderConfig deleted.
func (m *Manager) Create(pc *mpv1alpha1.ProviderConfig, opts TenantOptions) *Tenant {
	m.t.Helper()
	if _, err := m.env.Admin.MultiprojectV1alpha1().ProviderConfigs().Create(m.env.Ctx, pc, metav1.CreateOptions{}); err != nil {
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
	tn := &Tenant{m: m, Name: name, opts: opts, contexts: map[string]*tenant.Context{}, builds: map[string]int{}}
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

// Start assigns the tenant to the manager, as the sharder assigns a tenant to a shard, and waits until the
// ProviderConfig controller has built every enabled controller the spec configures (with empty queues); it fails
// the test when they are not built within a minute. The tenant is stopped when the test ends, if it still runs.
func (tn *Tenant) Start() {
	t := tn.m.t
	t.Helper()
	tn.mu.Lock()
	defer tn.mu.Unlock()
	pc, err := tn.m.env.Admin.MultiprojectV1alpha1().ProviderConfigs().Get(tn.m.env.Ctx, tn.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("framework: tenant %s: %v", tn.Name, err)
	}
	if pc.DeletionTimestamp != nil {
		t.Fatalf("framework: ProviderConfig %s is being deleted; the framework starts only live tenants", tn.Name)
	}
	before := tn.buildCounts()
	var expected []string
	for _, f := range tn.m.enabled {
		if f.Section(&pc.Spec) != nil {
			expected = append(expected, f.Name)
		}
	}
	tn.assign(tn.m.shard)
	tn.active = true
	t.Cleanup(tn.Stop)
	err = wait.PollUntilContextTimeout(tn.m.env.Ctx, 10*time.Millisecond, stopWait, true, func(context.Context) (bool, error) {
		after := tn.buildCounts()
		return !slices.ContainsFunc(expected, func(name string) bool { return after[name] == before[name] }), nil
	})
	if err != nil {
		t.Fatalf("framework: the controllers %v of tenant %s were not built: %v; its conditions: %+v", expected, tn.Name, err, tn.conditions())
	}
}

// Stop takes the tenant from the manager (its controllers stop without cleanup, as when the tenant moves to
// another replica) and waits until the ProviderConfig controller has released it, which it does once every
// controller of the tenant has returned; a no-op when the tenant does not run. A controller that has not returned
// within the stop timeout fails the test.
func (tn *Tenant) Stop() {
	t := tn.m.t
	t.Helper()
	tn.mu.Lock()
	defer tn.mu.Unlock()
	if !tn.active {
		return
	}
	tn.active = false
	tn.assign("")
	ctx := context.WithoutCancel(tn.m.env.Ctx)
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, stopWait, true, func(ctx context.Context) (bool, error) {
		pc, err := tn.m.env.Admin.MultiprojectV1alpha1().ProviderConfigs().Get(ctx, tn.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && pc.Status.Shard != tn.m.shard, err
	})
	if err != nil {
		t.Errorf("framework: tenant %s was not released (a controller did not return within the stop timeout?): %v", tn.Name, err)
	}
}

// assign sets the shard label of the tenant's ProviderConfig to shard, or removes it when shard is empty.
func (tn *Tenant) assign(shard string) {
	var value any
	if shard != "" {
		value = shard
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{sharding.ShardLabel: value}}})
	if err != nil {
		panic(err)
	}
	ctx := context.WithoutCancel(tn.m.env.Ctx)
	_, err = tn.m.env.Admin.MultiprojectV1alpha1().ProviderConfigs().Patch(ctx, tn.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !(shard == "" && apierrors.IsNotFound(err)) {
		tn.m.t.Fatalf("framework: labeling ProviderConfig %s for shard %q: %v", tn.Name, shard, err)
	}
}

// remove stops the tenant, takes the manager's finalizer off its ProviderConfig and, if the framework created it,
// deletes it.
func (tn *Tenant) remove(created bool) {
	tn.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := tn.m.env.Admin
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pc, err := client.MultiprojectV1alpha1().ProviderConfigs().Get(ctx, tn.Name, metav1.GetOptions{})
		if err != nil || !slices.Contains(pc.Finalizers, mpv1alpha1.ProviderConfigCleanupFinalizer) {
			return err
		}
		_, err = providerconfig.PatchFinalizer(ctx, client, pc, false)
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		tn.m.t.Errorf("framework: removing the finalizer of ProviderConfig %s: %v", tn.Name, err)
	}
	if !created {
		return
	}
	err = client.MultiprojectV1alpha1().ProviderConfigs().Delete(ctx, tn.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		tn.m.t.Errorf("framework: deleting ProviderConfig %s: %v", tn.Name, err)
	}
}

// Condition returns the tenant's condition of the given type (e.g. NEGReady) as the ProviderConfig's status shows
// it, which the ProviderConfig controller writes after each change a controller reports: a test waits for it. It
// returns false when the tenant does not run or the condition is absent.
func (tn *Tenant) Condition(conditionType string) (metav1.Condition, bool) {
	tn.mu.Lock()
	active := tn.active
	tn.mu.Unlock()
	if !active {
		return metav1.Condition{}, false
	}
	c := meta.FindStatusCondition(tn.conditions(), conditionType)
	if c == nil {
		return metav1.Condition{}, false
	}
	return *c, true
}

func (tn *Tenant) conditions() []metav1.Condition {
	pc, err := tn.m.env.Admin.MultiprojectV1alpha1().ProviderConfigs().Get(context.WithoutCancel(tn.m.env.Ctx), tn.Name, metav1.GetOptions{})
	if err != nil {
		tn.m.t.Errorf("framework: reading ProviderConfig %s: %v", tn.Name, err)
		return nil
	}
	return pc.Status.Conditions
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

func (tn *Tenant) built(controller string) {
	tn.contextsMu.Lock()
	defer tn.contextsMu.Unlock()
	tn.builds[controller]++
}

func (tn *Tenant) buildCounts() map[string]int {
	tn.contextsMu.Lock()
	defer tn.contextsMu.Unlock()
	return maps.Clone(tn.builds)
}
