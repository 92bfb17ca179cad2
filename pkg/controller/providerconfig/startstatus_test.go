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
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
)

// statusWrites counts the writes of the ProviderConfig's status subresource so far.
func (f *fixture) statusWrites(name string) int {
	n := 0
	for _, a := range f.mp.Actions() {
		if (a.GetVerb() == "patch" || a.GetVerb() == "update") && a.GetSubresource() == "status" && objectName(a) == name {
			n++
		}
	}
	return n
}

// A tenant's start writes two statuses: status.appliedSpec before its controllers start, and, once they have
// reported, the status that says they run. The condition "Starting" in between, true for the milliseconds a
// controller takes to sync its caches, is not written: it was a third of every cold start's writes.
func TestAStartWritesTheStatusOnceTheControllersHaveReported(t *testing.T) {
	ps := newProbes()
	ps.gate = make(chan struct{})
	f := newFixtureWith(t, fixtureConfig{workers: 1, probes: ps})
	f.create(providerConfig("a", "c-1"))
	f.waitFor("the probe to run", func() bool { return ps.latest("a") != nil })
	// One worker, in order: once the barrier's status.appliedSpec is written, every sync of a that its own writes
	// brought about is over.
	f.create(providerConfig("barrier", "c-2"))
	f.waitFor("the barrier's status.appliedSpec", func() bool { return f.get("barrier").Status.AppliedSpec != nil })
	if n := f.statusWrites("a"); n != 1 {
		t.Errorf("%d status writes before the controller reported, want 1 (status.appliedSpec)", n)
	}
	if conds := f.get("a").Status.Conditions; len(conds) > 0 {
		t.Errorf("the status says %+v before the controller reported", conds)
	}

	close(ps.gate)
	f.waitFor("Ready", f.conditionIs("a", mpv1alpha1.ProviderConfigConditionReady, metav1.ConditionTrue, ReasonAllControllersReady))
	if n := f.statusWrites("a"); n != 2 {
		t.Errorf("%d status writes for the start, want 2 (status.appliedSpec, then Ready)", n)
	}
	if pc := f.get("a"); pc.Status.ObservedGeneration != pc.Generation {
		t.Errorf("observedGeneration %d, want %d", pc.Status.ObservedGeneration, pc.Generation)
	}
}

// A controller that has not reported within the grace is reported Starting, so a slow start is visible.
func TestAControllerSlowToReportIsReportedStarting(t *testing.T) {
	ps := newProbes()
	ps.gate = make(chan struct{})
	f := newFixtureWith(t, fixtureConfig{workers: 1, probes: ps, startingGrace: 50 * time.Millisecond})
	f.create(providerConfig("slow", "c-1"))
	f.waitFor("the probe reported Starting", f.conditionIs("slow", mpv1alpha1.ProviderConfigConditionNamespaceProjectReady, metav1.ConditionUnknown, ReasonStarting))
	f.waitFor("Ready False", f.conditionIs("slow", mpv1alpha1.ProviderConfigConditionReady, metav1.ConditionFalse, ReasonControllersNotReady))
	close(ps.gate)
	f.waitFor("Ready", f.conditionIs("slow", mpv1alpha1.ProviderConfigConditionReady, metav1.ConditionTrue, ReasonAllControllersReady))
}

// What a tenant's start writes does not grow with the number of tenants: with 40 of them starting at once, each
// costs its finalizer and two status writes, and nothing else is written to any ProviderConfig.
func TestStartWritesPerTenantDoNotGrowWithTheTenants(t *testing.T) {
	const tenants = 40
	f := newFixture(t, 5)
	for i := range tenants {
		f.create(providerConfig(fmt.Sprintf("t-%02d", i), fmt.Sprintf("c-%d", i)))
	}
	for i := range tenants {
		name := fmt.Sprintf("t-%02d", i)
		f.waitFor(name+" Ready", f.conditionIs(name, mpv1alpha1.ProviderConfigConditionReady, metav1.ConditionTrue, ReasonAllControllersReady))
	}
	writes := map[string]map[string]int{}
	for _, a := range f.mp.Actions() {
		if a.GetVerb() == "get" || a.GetVerb() == "list" || a.GetVerb() == "watch" || objectName(a) == "" {
			continue
		}
		kind := a.GetVerb() + " " + a.GetSubresource()
		if writes[objectName(a)] == nil {
			writes[objectName(a)] = map[string]int{}
		}
		writes[objectName(a)][kind]++
	}
	want := map[string]int{"create ": 1, "patch ": 1, "patch status": 2} // the test's create, then the manager's
	for i := range tenants {
		name := fmt.Sprintf("t-%02d", i)
		if got := writes[name]; !maps.Equal(got, want) {
			t.Errorf("%s: writes %v, want %v", name, got, want)
		}
	}
}

// A new tenant's first sync puts the finalizer on, records status.appliedSpec and starts the controllers: it goes on
// with the object the finalizer patch returned instead of waiting for the informer to bring it back, a round trip
// that every tenant of a cold start waited for in turn.
func TestTheFirstSyncStartsTheControllers(t *testing.T) {
	f := newFixtureWith(t, fixtureConfig{workers: 1, manual: true})
	f.create(providerConfig("a", "c-1"))
	f.waitFor("the informer to show a", func() bool {
		_, err := f.controller.lister.Get("a")
		return err == nil
	})
	if _, err := f.controller.sync(f.ctx, "a"); err != nil {
		t.Fatal(err)
	}
	pc := f.get("a")
	if !slices.Contains(pc.Finalizers, mpv1alpha1.ProviderConfigCleanupFinalizer) || pc.Status.AppliedSpec == nil {
		t.Errorf("after one sync: finalizers %v, status.appliedSpec %+v; want the finalizer and the record", pc.Finalizers, pc.Status.AppliedSpec)
	}
	if f.probes.latest("a") == nil {
		t.Error("one sync did not start the tenant's controller")
	}
}
