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
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
)

func TestFinalizerThenStartThenReady(t *testing.T) {
	f := newFixture(t, 2)
	f.createNamespace("apps-a", "a")
	f.createService("apps-a", "web")
	f.create(providerConfig("a", "c-1"))

	f.waitFor("the probe to run", func() bool { return f.probes.latest("a") != nil })
	if pc := f.get("a"); !slices.Contains(pc.Finalizers, mpv1alpha1.ProviderConfigCleanupFinalizer) {
		t.Fatalf("controller started before the finalizer was added: %v", pc.Finalizers)
	}
	f.waitFor("Ready", f.conditionIs("a", mpv1alpha1.ProviderConfigConditionReady, metav1.ConditionTrue, ReasonAllControllersReady))
	f.waitFor("the probe's own condition", f.conditionIs("a", mpv1alpha1.ProviderConfigConditionNamespaceProjectReady, metav1.ConditionTrue, "Running"))
	f.waitFor("the tenant's Service", func() bool { return f.probes.latest("a").sees("web") })
	if got := f.get("a").Status.ObservedGeneration; got != f.get("a").Generation {
		t.Errorf("observedGeneration %d, want %d", got, f.get("a").Generation)
	}
}

func TestTenantsSeeOnlyTheirObjects(t *testing.T) {
	f := newFixture(t, 2)
	f.createNamespace("apps-a", "a")
	f.createNamespace("apps-b", "b")
	f.create(providerConfig("a", "c-1"))
	f.create(providerConfig("b", "c-2"))
	f.waitFor("both probes", func() bool { return f.probes.latest("a") != nil && f.probes.latest("b") != nil })
	f.createService("apps-a", "only-a")
	f.createService("apps-b", "only-b")
	f.waitFor("each tenant's Service", func() bool {
		return f.probes.latest("a").sees("only-a") && f.probes.latest("b").sees("only-b")
	})
	if f.probes.latest("a").sees("only-b") || f.probes.latest("b").sees("only-a") {
		t.Error("a tenant saw another tenant's Service")
	}
}

func TestNoSectionRunsNothingAndIsReady(t *testing.T) {
	f := newFixture(t, 1)
	f.create(providerConfig("empty", ""))
	f.waitFor("Ready", f.conditionIs("empty", mpv1alpha1.ProviderConfigConditionReady, metav1.ConditionTrue, ReasonNoControllers))
	if n := f.probes.built("empty"); n != 0 {
		t.Errorf("built %d controllers for a tenant that configures none", n)
	}
}

func TestSpecChangeRestartsWithTheNewSpec(t *testing.T) {
	f := newFixture(t, 1)
	f.create(providerConfig("a", "c-1"))
	f.waitFor("the first probe", func() bool { return f.probes.latest("a") != nil })
	first := f.probes.latest("a")

	// A change that does not touch the section (a label) restarts nothing.
	f.update("a", func(pc *mpv1alpha1.ProviderConfig) { pc.Labels = map[string]string{"team": "x"} })
	f.update("a", func(pc *mpv1alpha1.ProviderConfig) { pc.Spec.Rancher.ClusterID = "c-2" })
	f.waitFor("the restarted probe", func() bool {
		p := f.probes.latest("a")
		return p != nil && p.section == "c-2"
	})
	if n := f.probes.built("a"); n != 2 {
		t.Errorf("built %d probes, want 2 (one per distinct section)", n)
	}
	// The router's count, not the manager's: the manager counts running instances only, and the old one is no longer
	// running before its handler is removed.
	f.waitFor("the old probe's handler to be removed", func() bool { return f.router.RegistrationCount() == 1 })
	_ = first

	// Removing the section stops the controller and drops its condition.
	f.update("a", func(pc *mpv1alpha1.ProviderConfig) { pc.Spec.Rancher = nil })
	f.waitFor("the controller to stop", func() bool { return len(f.manager.Running("a")) == 0 })
	f.waitFor("its condition to go", func() bool {
		return f.condition("a", mpv1alpha1.ProviderConfigConditionNamespaceProjectReady) == nil
	})
}

// A spec change never runs two instances of a tenant's controller: the new one starts only after the old one has
// returned, even when that takes longer than the stop timeout.
func TestSpecChangeNeverRunsTwoInstances(t *testing.T) {
	probes := newProbes()
	hold := make(chan struct{})
	probes.hold = hold
	f := newFixtureWith(t, fixtureConfig{workers: 1, stopTimeout: 50 * time.Millisecond, probes: probes})
	f.create(providerConfig("a", "c-1"))
	f.waitFor("the probe", func() bool { return f.probes.latest("a") != nil })

	f.update("a", func(pc *mpv1alpha1.ProviderConfig) { pc.Spec.Rancher.ClusterID = "c-2" })
	f.waitFor("the condition to say the old instance is stopping", f.conditionIs("a",
		mpv1alpha1.ProviderConfigConditionNamespaceProjectReady, metav1.ConditionUnknown, ReasonStopping))
	if n := f.probes.built("a"); n != 1 {
		t.Fatalf("built %d probes while the old one had not returned, want 1", n)
	}
	close(hold)
	f.waitFor("the new probe", func() bool {
		p := f.probes.latest("a")
		return p != nil && p.section == "c-2"
	})
	if got := f.probes.most("a"); got != 1 {
		t.Errorf("%d instances ran at once, want 1", got)
	}
}

func TestVanishedProviderConfigStopsItsControllers(t *testing.T) {
	f := newFixture(t, 1)
	f.create(providerConfig("a", "c-1"))
	f.waitFor("the probe", func() bool { return len(f.manager.Running("a")) == 1 })
	// Finalizer stripped by hand and the object gone: no cleanup is possible, but nothing may keep running.
	if err := f.mp.MultiprojectV1alpha1().ProviderConfigs().Delete(f.ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitFor("the tenant to be forgotten and its handlers removed", func() bool {
		return !slices.Contains(f.manager.Tenants(), "a") && f.router.RegistrationCount() == 0
	})
}

func TestMissingAPIWaitsThenStarts(t *testing.T) {
	f := newFixture(t, 1, extraAPI)
	f.create(providerConfig("a", "c-1"))
	f.waitFor("APINotServed", f.conditionIs("a", mpv1alpha1.ProviderConfigConditionNamespaceProjectReady, metav1.ConditionFalse, ReasonAPINotServed))
	if n := f.probes.built("a"); n != 0 {
		t.Fatalf("built %d probes before the API was served", n)
	}
	f.serveAPI(extraAPI)
	f.waitFor("the probe to start", func() bool { return f.probes.latest("a") != nil })
	f.waitFor("Ready", f.conditionIs("a", mpv1alpha1.ProviderConfigConditionReady, metav1.ConditionTrue, ""))
}

// TestOptionalAPIServedRestarts: a controller built while an API it reads when served (Factory.OptionalAPIs) was
// not is restarted once it is, so it reads it; served from the start, it is built once.
func TestOptionalAPIServedRestarts(t *testing.T) {
	f := newFixtureWith(t, fixtureConfig{workers: 1, optional: []schema.GroupVersionResource{extraAPI}})
	f.create(providerConfig("a", "c-1"))
	f.waitFor("the probe to start", func() bool { return f.probes.latest("a") != nil })
	f.serveAPI(extraAPI)
	f.waitFor("the probe to be built again", func() bool { return f.probes.built("a") == 2 })
	f.waitFor("Ready", f.conditionIs("a", mpv1alpha1.ProviderConfigConditionReady, metav1.ConditionTrue, ""))
	f.controller.EnqueueAll()
	f.create(providerConfig("barrier", ""))
	f.waitFor("the barrier", f.conditionIs("barrier", mpv1alpha1.ProviderConfigConditionReady, metav1.ConditionTrue, ""))
	if n := f.probes.built("a"); n != 2 {
		t.Errorf("built %d probes, want 2: one before the API was served, one after", n)
	}
}

func TestFailingTenantDoesNotBlockOthers(t *testing.T) {
	f := newFixture(t, 2)
	f.probes.mu.Lock()
	f.probes.failFor["bad"] = errBoom
	f.probes.mu.Unlock()
	f.create(providerConfig("bad", "c-1"))
	f.create(providerConfig("good", "c-2"))
	f.waitFor("the good tenant to be Ready", f.conditionIs("good", mpv1alpha1.ProviderConfigConditionReady, metav1.ConditionTrue, ""))
	f.waitFor("the bad tenant to say why", f.conditionIs("bad", mpv1alpha1.ProviderConfigConditionNamespaceProjectReady, metav1.ConditionFalse, ReasonFailedToStart))

	// Once the cause goes away, the retry with backoff starts it.
	f.probes.mu.Lock()
	delete(f.probes.failFor, "bad")
	f.probes.mu.Unlock()
	f.waitFor("the bad tenant to recover", func() bool { return f.probes.latest("bad") != nil })
}

func TestConvergedTenantWritesNothing(t *testing.T) {
	f := newFixture(t, 1)
	f.create(providerConfig("a", "c-1"))
	f.waitFor("Ready", f.conditionIs("a", mpv1alpha1.ProviderConfigConditionReady, metav1.ConditionTrue, ""))
	before := len(f.mp.Actions())
	f.controller.Enqueue("a")
	f.controller.Enqueue("a")
	// The queue drains in order; a second tenant's sync is a barrier that proves "a" was processed.
	f.create(providerConfig("barrier", ""))
	f.waitFor("the barrier", f.conditionIs("barrier", mpv1alpha1.ProviderConfigConditionReady, metav1.ConditionTrue, ""))
	for _, a := range f.mp.Actions()[before:] {
		if a.GetVerb() == "list" || a.GetVerb() == "watch" || a.GetVerb() == "get" {
			continue
		}
		if name := objectName(a); name == "a" {
			t.Errorf("a converged ProviderConfig was written: %s %s", a.GetVerb(), a.GetSubresource())
		}
	}
	// The last status write is kept only until the cache shows it: a converged tenant keeps none.
	f.waitFor("the last status writes to be forgotten", func() bool {
		f.controller.lastWritesMu.Lock()
		defer f.controller.lastWritesMu.Unlock()
		return len(f.controller.lastWrites) == 0
	})
}

// TestCreateDeleteCyclesLeaveNothingBehind is the leak test of invariant 2: after many tenant lifecycles,
// goroutines, handler registrations and tenants return to their baseline.
func TestCreateDeleteCyclesLeaveNothingBehind(t *testing.T) {
	f := newFixture(t, 2)
	f.createNamespace("apps", "warm")
	f.create(providerConfig("warm", "c-0"))
	f.waitFor("warm-up", func() bool { return len(f.manager.Running("warm")) == 1 })
	baseRegistrations := f.router.RegistrationCount()
	baseGoroutines := runtime.NumGoroutine()

	for i := range 50 {
		name := "t" + strconv.Itoa(i)
		f.create(providerConfig(name, "c-1"))
		f.waitFor("start of "+name, func() bool { return len(f.manager.Running(name)) == 1 })
		if err := f.mp.MultiprojectV1alpha1().ProviderConfigs().Delete(f.ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// The manager forgets the tenant before it stops the runs and removes their handlers: wait for both, so a
		// handler left behind by any cycle fails here.
		f.waitFor("stop of "+name+" and its handlers removed", func() bool {
			return !slices.Contains(f.manager.Tenants(), name) && f.router.RegistrationCount() == baseRegistrations
		})
	}
	if got := f.manager.Tenants(); !slices.Equal(got, []string{"warm"}) {
		t.Errorf("tenants left: %v", got)
	}
	// Goroutines of stopped controllers and broadcasters end asynchronously; allow a small slack for the runtime.
	f.waitFor("goroutines back to baseline", func() bool { return runtime.NumGoroutine() <= baseGoroutines+2 })
}

// A tenant whose ProviderConfig vanished while one of its controllers had not returned, and that is re-created
// under the same name, waits for that instance: two never run at once.
func TestRecreatedTenantWaitsForItsPredecessor(t *testing.T) {
	probes := newProbes()
	hold := make(chan struct{})
	probes.hold = hold
	f := newFixtureWith(t, fixtureConfig{workers: 1, stopTimeout: 50 * time.Millisecond, probes: probes})
	f.create(providerConfig("a", "c-1"))
	f.waitFor("the probe", func() bool { return len(f.manager.Running("a")) == 1 })
	if err := f.mp.MultiprojectV1alpha1().ProviderConfigs().Delete(f.ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitFor("the controller to be detached", func() bool { return len(f.manager.Running("a")) == 0 })

	f.create(providerConfig("a", "c-2"))
	f.waitFor("the condition to say the old instance is stopping", f.conditionIs("a",
		mpv1alpha1.ProviderConfigConditionNamespaceProjectReady, metav1.ConditionUnknown, ReasonStopping))
	if n := f.probes.built("a"); n != 1 {
		t.Fatalf("built %d probes while the predecessor had not returned, want 1", n)
	}
	close(hold)
	f.waitFor("the new tenant's probe", func() bool {
		p := f.probes.latest("a")
		return p != nil && p.section == "c-2"
	})
	if got := f.probes.most("a"); got != 1 {
		t.Errorf("%d instances ran at once, want 1", got)
	}
}

// TestRestartOfAConvergedTenantSaysNothing: a new leader that starts the controllers of a tenant whose status
// already says Ready at its generation writes no ControllersStarted Event (a restart of a converged manager must
// write nothing a user needs), while a tenant that was not Ready still gets one.
func TestRestartOfAConvergedTenantSaysNothing(t *testing.T) {
	first := newFixture(t, 1)
	first.create(providerConfig("converged", "c-1"))
	first.waitFor("Ready", first.conditionIs("converged", mpv1alpha1.ProviderConfigConditionReady, metav1.ConditionTrue, ReasonAllControllersReady))
	converged := first.get("converged")
	first.stop()

	notReady := providerConfig("not-ready", "c-2")
	notReady.Finalizers = []string{mpv1alpha1.ProviderConfigCleanupFinalizer}
	notReady.Status.Conditions = []metav1.Condition{{Type: mpv1alpha1.ProviderConfigConditionReady, Status: metav1.ConditionFalse,
		Reason: ReasonControllersNotReady, LastTransitionTime: metav1.Now()}}
	second := newFixtureWith(t, fixtureConfig{workers: 1, objects: []*mpv1alpha1.ProviderConfig{converged, notReady}})
	for _, name := range []string{"converged", "not-ready"} {
		second.waitFor(name+" Ready", second.conditionIs(name, mpv1alpha1.ProviderConfigConditionReady, metav1.ConditionTrue, ReasonAllControllersReady))
	}
	if got := second.events.With("Normal " + EventControllersStarted); len(got) != 1 {
		t.Errorf("ControllersStarted Events after the restart: %q; want one, for the tenant that was not Ready", got)
	}
}

// TestRestartOfAConvergedTenantWritesNoStatus: until a restarted controller reports, the tenant's status keeps what
// the previous leader observed at this generation, instead of flipping to Starting (Ready False) and back, which
// would write every tenant's status twice per failover.
func TestRestartOfAConvergedTenantWritesNoStatus(t *testing.T) {
	first := newFixture(t, 1)
	first.create(providerConfig("converged", "c-1"))
	first.waitFor("Ready", first.conditionIs("converged", mpv1alpha1.ProviderConfigConditionReady, metav1.ConditionTrue, ReasonAllControllersReady))
	converged := first.get("converged")
	first.stop()

	ps := newProbes()
	ps.gate = make(chan struct{})
	second := newFixtureWith(t, fixtureConfig{workers: 1, objects: []*mpv1alpha1.ProviderConfig{converged}, probes: ps})
	second.waitFor("the restarted probe", func() bool { return ps.latest("converged") != nil })
	// One worker, in order: once the barrier has its finalizer, the converged tenant's first sync (whose probe has
	// not reported) is over.
	second.create(providerConfig("barrier", "c-2"))
	second.waitFor("the barrier's finalizer", func() bool {
		return slices.Contains(second.get("barrier").Finalizers, mpv1alpha1.ProviderConfigCleanupFinalizer)
	})
	close(ps.gate)
	second.waitFor("the barrier Ready", second.conditionIs("barrier", mpv1alpha1.ProviderConfigConditionReady, metav1.ConditionTrue, ReasonAllControllersReady))
	for _, a := range second.mp.Actions() {
		if a.GetVerb() == "list" || a.GetVerb() == "watch" || a.GetVerb() == "get" {
			continue
		}
		if objectName(a) == "converged" {
			t.Errorf("the converged tenant was written after the restart: %s %s", a.GetVerb(), a.GetSubresource())
		}
	}
	if got := second.get("converged").Status; !apiequality.Semantic.DeepEqual(got, converged.Status) {
		t.Errorf("status changed across the restart:\nbefore %+v\nafter  %+v", converged.Status, got)
	}
}

// TestIdleTenantsCostTheirControllersOnly: a running tenant costs its controllers' own goroutines (the probe: one)
// and nothing per tenant besides; Events of every tenant go through one broadcaster.
func TestIdleTenantsCostTheirControllersOnly(t *testing.T) {
	f := newFixture(t, 2)
	f.create(providerConfig("warm", "c-0"))
	f.waitFor("the first tenant Ready", f.conditionIs("warm", mpv1alpha1.ProviderConfigConditionReady, metav1.ConditionTrue, ReasonAllControllersReady))
	base := runtime.NumGoroutine()
	const tenants = 40
	for i := range tenants {
		f.create(providerConfig("idle-"+strconv.Itoa(i), "c-1"))
	}
	for i := range tenants {
		name := "idle-" + strconv.Itoa(i)
		f.waitFor(name+" Ready", f.conditionIs(name, mpv1alpha1.ProviderConfigConditionReady, metav1.ConditionTrue, ReasonAllControllersReady))
	}
	// The probe's Run is its one goroutine; a few more may be passing through the runtime.
	if got, most := runtime.NumGoroutine()-base, tenants+5; got > most {
		t.Errorf("%d idle tenants added %d goroutines, want at most %d (one per controller)", tenants, got, most)
	}
}

// TestControllersKeepNoManagedFields: the ProviderConfig a tenant controller keeps for its life has no status, no
// managedFields and no kubectl last-applied copy (the manager may hand it the API server's answer to a status
// write, which carries all three), and keeps the rest of its metadata and its spec.
func TestControllersKeepNoManagedFields(t *testing.T) {
	f := newFixture(t, 1)
	pc := providerConfig("a", "c-1")
	pc.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}}}
	pc.Annotations = map[string]string{corev1.LastAppliedConfigAnnotation: `{"kind":"ProviderConfig"}`, "team": "payments"}
	f.create(pc)

	f.waitFor("the probe to run", func() bool { return f.probes.latest("a") != nil })
	kept := f.probes.latest("a").tctx.ProviderConfig
	if len(kept.ManagedFields) != 0 {
		t.Errorf("the controller keeps %d managedFields entries, want none", len(kept.ManagedFields))
	}
	if _, ok := kept.Annotations[corev1.LastAppliedConfigAnnotation]; ok {
		t.Errorf("the controller keeps the last-applied annotation")
	}
	if !apiequality.Semantic.DeepEqual(kept.Status, mpv1alpha1.ProviderConfigStatus{}) {
		t.Errorf("the controller keeps the status %+v, want none", kept.Status)
	}
	if kept.Annotations["team"] != "payments" || kept.Spec.Rancher == nil || kept.Spec.Rancher.ClusterID != "c-1" {
		t.Errorf("the controller's copy lost what it may read: annotations %v, spec %+v", kept.Annotations, kept.Spec)
	}
}

// TestObservedGenerationOnlyOnceTheSpecRuns: status.observedGeneration names a generation only once the controllers
// its spec configures run, built from it; while the new spec waits (the previous instance stopping, an API not
// served) or cannot run here (disabled by --controllers) it stays where it was, and the controller's condition says
// why.
func TestObservedGenerationOnlyOnceTheSpecRuns(t *testing.T) {
	observed := func(f *fixture, name string) int64 { return f.get(name).Status.ObservedGeneration }
	withGeneration := func(pc *mpv1alpha1.ProviderConfig, generation int64) *mpv1alpha1.ProviderConfig {
		pc.Generation = generation // the fake clientset does not count generations
		return pc
	}

	t.Run("PreviousInstanceStopping", func(t *testing.T) {
		probes := newProbes()
		hold := make(chan struct{})
		probes.hold = hold
		f := newFixtureWith(t, fixtureConfig{workers: 1, stopTimeout: 50 * time.Millisecond, probes: probes})
		f.create(withGeneration(providerConfig("a", "c-1"), 1))
		f.waitFor("generation 1 observed", func() bool { return observed(f, "a") == 1 })

		f.update("a", func(pc *mpv1alpha1.ProviderConfig) { pc.Spec.Rancher.ClusterID = "c-2"; pc.Generation = 2 })
		f.waitFor("PreviousInstanceStopping", f.conditionIs("a", mpv1alpha1.ProviderConfigConditionNamespaceProjectReady, metav1.ConditionUnknown, ReasonStopping))
		if got := observed(f, "a"); got != 1 {
			t.Errorf("observedGeneration %d while generation 2 has not started, want 1", got)
		}
		close(hold)
		f.waitFor("generation 2 observed once its controller runs", func() bool { return observed(f, "a") == 2 })
	})

	t.Run("APINotServed", func(t *testing.T) {
		f := newFixture(t, 1, extraAPI)
		f.create(withGeneration(providerConfig("a", "c-1"), 1))
		f.waitFor("APINotServed", f.conditionIs("a", mpv1alpha1.ProviderConfigConditionNamespaceProjectReady, metav1.ConditionFalse, ReasonAPINotServed))
		if got := observed(f, "a"); got != 0 {
			t.Errorf("observedGeneration %d while the API is not served, want 0", got)
		}
		f.serveAPI(extraAPI)
		f.waitFor("generation 1 observed once the API is served", func() bool { return observed(f, "a") == 1 })
	})

	t.Run("ControllerDisabled", func(t *testing.T) {
		f := newFixtureWith(t, fixtureConfig{workers: 1, disabled: true})
		f.create(withGeneration(providerConfig("a", "c-1"), 1))
		f.waitFor("ControllerDisabled", f.conditionIs("a", mpv1alpha1.ProviderConfigConditionNamespaceProjectReady, metav1.ConditionUnknown, ReasonControllerDisable))
		if got := observed(f, "a"); got != 0 {
			t.Errorf("observedGeneration %d for a spec this manager cannot run, want 0", got)
		}
		// Without the section nothing is left to run: the generation is observed.
		f.update("a", func(pc *mpv1alpha1.ProviderConfig) { pc.Spec.Rancher = nil; pc.Generation = 2 })
		f.waitFor("generation 2 observed", func() bool { return observed(f, "a") == 2 })
	})
}
