//go:build integration

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
	"slices"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/providerconfig"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
)

const (
	testLabelKey      = mpv1alpha1.DefaultProviderConfigLabelKey
	probeName         = "probe"
	probeConditionKey = "ProbeReady"
)

// probe watches its tenant's Services and reports True once its handler has synced. It leaves its handler
// registered when it stops: removing it is the Manager's job.
type probe struct {
	tctx *tenant.Context
	reg  cache.ResourceEventHandlerRegistration
}

func (p *probe) Run(ctx context.Context) {
	if cache.WaitForCacheSync(ctx.Done(), p.reg.HasSynced) {
		p.tctx.Condition.Report(metav1.ConditionTrue, "Running", "probe")
	}
	<-ctx.Done()
}

func newProbe(_ context.Context, c *tenant.Context) (tenant.Controller, error) {
	inf, err := c.Informers.Informer(informerset.Services)
	if err != nil {
		return nil, err
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{})
	if err != nil {
		return nil, err
	}
	return &probe{tctx: c, reg: reg}, nil
}

// probeFactory runs for spec.rancher and has a cleanup, so that its section is recorded in status.appliedSpec.
func probeFactory() providerconfig.NamedFactory {
	return providerconfig.NamedFactory{Name: probeName, Workers: 3, Factory: tenant.Factory{
		ConditionType: probeConditionKey,
		Section:       tenant.SectionOf(rancherSection),
		New:           newProbe,
		Cleanup:       newProbe,
		Pending:       func(context.Context, *tenant.Context) (string, error) { return "", nil },
		CopySection:   tenant.CopySectionOf(rancherSection),
	}}
}

func rancherTenant(name string) *mpv1alpha1.ProviderConfig {
	return &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: mpv1alpha1.ProviderConfigSpec{Rancher: &mpv1alpha1.RancherConfig{ClusterID: "c-" + name}}}
}

var controlPlane *ControlPlane

func TestMain(m *testing.M) {
	Main(m, Options{InstallProjectManifests: true}, &controlPlane)
}

// TestManagerRunsTenantsThroughTheProductionManager: a tenant started by the framework gets the finalizer and its
// section on record before its controller runs, with the tenant's own worker count; its condition is the one the
// ProviderConfig controller writes; Stop removes what the controller left registered and a restart builds a new
// Context; a tenant's own constructor replaces the factory's; and when the test ends the ProviderConfigs the
// framework created are gone, the finalizer is off the one it did not create, and nothing is registered.
func TestManagerRunsTenantsThroughTheProductionManager(t *testing.T) {
	env := controlPlane.NewEnv(t, EnvOptions{})
	mp := env.Admin
	existing, err := mp.MultiprojectV1alpha1().ProviderConfigs().Create(env.Ctx, rancherTenant("existing"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = mp.MultiprojectV1alpha1().ProviderConfigs().Delete(context.Background(), existing.Name, metav1.DeleteOptions{})
	})
	var tn *Tenancy

	t.Run("run", func(t *testing.T) {
		manager := StartManager(t, env, ManagerOptions{Controllers: []providerconfig.NamedFactory{probeFactory()},
			Served: []schema.GroupVersionResource{informerset.Services}})
		tn = manager.Tenancy()

		a := manager.Create(rancherTenant("tenant-a"), TenantOptions{Workers: 7})
		if _, ok := a.Condition(probeConditionKey); ok || a.Context(probeName) != nil {
			t.Fatal("a tenant not started has a condition or a Context")
		}
		a.Start()
		pc, err := mp.MultiprojectV1alpha1().ProviderConfigs().Get(env.Ctx, "tenant-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(pc.Finalizers, mpv1alpha1.ProviderConfigCleanupFinalizer) {
			t.Errorf("finalizers = %v, want the manager's", pc.Finalizers)
		}
		if pc.Status.AppliedSpec == nil || pc.Status.AppliedSpec.Rancher == nil || pc.Status.AppliedSpec.Rancher.ClusterID != "c-tenant-a" {
			t.Errorf("status.appliedSpec = %+v, want the rancher section on record", pc.Status.AppliedSpec)
		}
		first := a.Context(probeName)
		if first == nil || first.Workers != 7 || first.ProviderConfig.Name != "tenant-a" {
			t.Fatalf("Context = %+v, want tenant-a's with 7 workers", first)
		}
		waitFor(t, "tenant-a's condition True/Running", func() bool {
			c, ok := a.Condition(probeConditionKey)
			return ok && c.Status == metav1.ConditionTrue && c.Reason == "Running"
		})
		if tn.Router.RegistrationCount() == 0 {
			t.Error("the running probe holds no handler")
		}

		a.Stop()
		if n := tn.Router.RegistrationCount(); n != 0 {
			t.Errorf("%d handlers left registered after Stop", n)
		}
		if _, ok := a.Condition(probeConditionKey); ok {
			t.Error("a stopped tenant has a condition")
		}
		a.Start()
		if second := a.Context(probeName); second == nil || second == first {
			t.Error("a restart did not build a new Context")
		}

		var own atomic.Int32
		b := manager.Create(rancherTenant("tenant-b"), TenantOptions{Constructors: map[string]tenant.Constructor{
			probeName: func(ctx context.Context, c *tenant.Context) (tenant.Controller, error) {
				own.Add(1)
				return newProbe(ctx, c)
			}}})
		b.Start()
		if own.Load() != 1 || b.Context(probeName).Workers != 3 {
			t.Errorf("tenant-b: own constructor called %d times, workers %d; want 1 and the factory's 3", own.Load(), b.Context(probeName).Workers)
		}

		e := manager.Existing("existing", TenantOptions{})
		e.Start()
		if c := e.Context(probeName); c == nil || c.ProviderConfig.Name != "existing" {
			t.Errorf("Context of the existing tenant = %+v", c)
		}
	})

	ctx := context.Background()
	for _, name := range []string{"tenant-a", "tenant-b"} {
		if _, err := mp.MultiprojectV1alpha1().ProviderConfigs().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("ProviderConfig %s after the test: err = %v, want NotFound", name, err)
		}
	}
	pc, err := mp.MultiprojectV1alpha1().ProviderConfigs().Get(ctx, existing.Name, metav1.GetOptions{})
	if err != nil || slices.Contains(pc.Finalizers, mpv1alpha1.ProviderConfigCleanupFinalizer) {
		t.Errorf("the ProviderConfig the test created: %v, finalizers %v; want it kept, without the manager's finalizer", err, pc.Finalizers)
	}
	if n := tn.Router.RegistrationCount(); n != 0 {
		t.Errorf("%d handlers left registered after the test", n)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func rancherSection(spec *mpv1alpha1.ProviderConfigSpec) **mpv1alpha1.RancherConfig {
	return &spec.Rancher
}
