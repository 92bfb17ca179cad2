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
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clienttesting "k8s.io/client-go/testing"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
	"github.com/multiproject/multiproject-controller-manager/pkg/sharding"
)

// TestShardRecordsItselfBeforeStartingAndReleasesWhatItNoLongerOwns: a shard writes status.shard, on the object it
// read, before its tenant's controllers start, and clears it once it has stopped a tenant it no longer owns (here
// its label was removed by hand), so that the sharder knows when the tenant is free again. A removed label alone
// does not clear the status: it does so only after the tenant's controllers returned.
func TestShardRecordsItselfBeforeStartingAndReleasesWhatItNoLongerOwns(t *testing.T) {
	probes := newProbes()
	f := newFixtureWith(t, fixtureConfig{workers: 1, probes: probes, shard: "me"})
	pc := providerConfig("a", "c-1")
	pc.Labels = map[string]string{sharding.ShardLabel: "me"}
	f.create(pc)
	f.waitFor("the tenant Ready", f.conditionIs("a", mpv1alpha1.ProviderConfigConditionReady, "True", ReasonAllControllersReady))

	var statusWrites []string
	for _, a := range f.mp.Actions() {
		if p, ok := a.(clienttesting.PatchActionImpl); ok && p.Subresource == "status" {
			statusWrites = append(statusWrites, string(p.Patch))
		}
	}
	if len(statusWrites) == 0 || !strings.Contains(statusWrites[0], `"resourceVersion"`) || !strings.Contains(statusWrites[0], `"shard":"me"`) ||
		strings.Contains(statusWrites[0], "conditions") {
		t.Fatalf("status writes %v: want the first to record the shard alone, on the version read", statusWrites)
	}

	f.update("a", func(pc *mpv1alpha1.ProviderConfig) { pc.Labels = nil })
	f.waitFor("the tenant stopped and released", func() bool {
		return len(f.manager.Running("a")) == 0 && f.get("a").Status.Shard == ""
	})
	if got := probes.most("a"); got != 1 {
		t.Errorf("%d instances ran at once, want 1", got)
	}
}

// fakeHolders is a ShardHolders whose live shards the test sets: shard name -> Lease expiry.
type fakeHolders struct {
	mu   sync.Mutex
	live map[string]time.Time
}

func (h *fakeHolders) set(shard string, expiry time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if expiry.IsZero() {
		delete(h.live, shard)
		return
	}
	h.live[shard] = expiry
}

func (h *fakeHolders) Holder(_ context.Context, pc *mpv1alpha1.ProviderConfig) (string, time.Time, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range []string{pc.Labels[sharding.ShardLabel], pc.Status.Shard} {
		if expiry, ok := h.live[s]; ok && expiry.After(time.Now()) {
			return s, expiry, nil
		}
	}
	return "", time.Time{}, nil
}

func (h *fakeHolders) HeldInCache(pc *mpv1alpha1.ProviderConfig) bool {
	s, _, _ := h.Holder(context.Background(), pc)
	return s != ""
}

// TestUnshardedReplicaYieldsToLiveShards: a replica that runs unsharded does not start, nor write, a tenant whose
// shard label or status.shard names a live shard, says so once in an Event, and starts it once the shard has
// released it (an event) or its Lease has expired (no event: the look again at the expiry), while the tenants no
// live shard holds run at once.
func TestUnshardedReplicaYieldsToLiveShards(t *testing.T) {
	holders := &fakeHolders{live: map[string]time.Time{}}
	holders.set("s1", time.Now().Add(time.Hour))
	holders.set("s2", time.Now().Add(time.Hour))
	objects := []*mpv1alpha1.ProviderConfig{providerConfig("labeled", "c-1"), providerConfig("recorded", "c-2"), providerConfig("free", "c-3")}
	objects[0].Labels = map[string]string{sharding.ShardLabel: "s1"}
	objects[1].Status.Shard = "s2"
	objects[2].Labels = map[string]string{sharding.ShardLabel: "dead"}
	f := newFixtureWith(t, fixtureConfig{workers: 2, holders: holders, objects: objects})

	f.waitFor("the tenant no live shard holds Ready", f.conditionIs("free", mpv1alpha1.ProviderConfigConditionReady, "True", ReasonAllControllersReady))
	f.waitFor("an Event for each held tenant", func() bool { return f.events.Count(corev1.EventTypeNormal, EventHeldByShard) == 2 })
	f.controller.EnqueueAll()
	for _, name := range []string{"labeled", "recorded"} {
		if running := f.manager.Running(name); len(running) > 0 {
			t.Errorf("%s is held by a live shard but runs %v here", name, running)
		}
		if pc := f.get(name); len(pc.Finalizers) > 0 || len(pc.Status.Conditions) > 0 {
			t.Errorf("%s is held by a live shard but was written: %v %+v", name, pc.Finalizers, pc.Status)
		}
	}

	// s1 releases its Lease: the Lease event enqueues every tenant.
	holders.set("s1", time.Time{})
	f.controller.EnqueueAll()
	f.waitFor("the released tenant Ready", f.conditionIs("labeled", mpv1alpha1.ProviderConfigConditionReady, "True", ReasonAllControllersReady))
	// s2's Lease expires unrenewed: no event, the controller looks again at the expiry.
	holders.set("s2", time.Now().Add(300*time.Millisecond))
	f.controller.Enqueue("recorded")
	f.waitFor("the tenant of the expired shard Ready", f.conditionIs("recorded", mpv1alpha1.ProviderConfigConditionReady, "True", ReasonAllControllersReady))
	if got := f.get("recorded").Status.Shard; got != "" {
		t.Errorf("status.shard %q after an unsharded replica took the tenant, want empty", got)
	}
	if n := f.events.Count(corev1.EventTypeNormal, EventHeldByShard); n != 2 {
		t.Errorf("%d HeldByShard Events, want one per held tenant", n)
	}
}

// TestShardWaitsForTheReleaseOfAnotherLiveShard: a tenant labeled with this shard whose status.shard names another
// live shard (its label moved by hand while that shard still runs it) is neither started nor written here; the
// user is told once, and the shard starts it once the other has released it (cleared status.shard).
func TestShardWaitsForTheReleaseOfAnotherLiveShard(t *testing.T) {
	holders := &fakeHolders{live: map[string]time.Time{}}
	holders.set("other", time.Now().Add(time.Hour))
	pc := providerConfig("moved", "c-1")
	pc.Labels = map[string]string{sharding.ShardLabel: "me"}
	pc.Status.Shard = "other"
	f := newFixtureWith(t, fixtureConfig{workers: 1, shard: "me", holders: holders, objects: []*mpv1alpha1.ProviderConfig{pc}})

	f.waitFor("the Event", func() bool { return f.events.Count(corev1.EventTypeNormal, EventHeldByShard) == 1 })
	if running := f.manager.Running("moved"); len(running) > 0 {
		t.Errorf("another live shard still runs the tenant, but it runs %v here too", running)
	}
	if got := f.get("moved"); got.Status.Shard != "other" || len(got.Finalizers) > 0 {
		t.Errorf("the tenant was written while another live shard holds it: status.shard %q, finalizers %v", got.Status.Shard, got.Finalizers)
	}

	// The other shard stops the tenant and releases it.
	f.update("moved", func(pc *mpv1alpha1.ProviderConfig) { pc.Status.Shard = "" })
	f.waitFor("the tenant Ready here", f.conditionIs("moved", mpv1alpha1.ProviderConfigConditionReady, "True", ReasonAllControllersReady))
	if got := f.get("moved").Status.Shard; got != "me" {
		t.Errorf("status.shard %q once started, want me", got)
	}
	if n := f.events.Count(corev1.EventTypeNormal, EventHeldByShard); n != 1 {
		t.Errorf("%d HeldByShard Events, want 1", n)
	}
}

// TestHeldByShardIsToldAgainForARecreatedTenant: the controller forgets what it told about a deleted tenant, so a
// tenant recreated under the same name, and held again, gets its Event again (and nothing is kept per name).
func TestHeldByShardIsToldAgainForARecreatedTenant(t *testing.T) {
	holders := &fakeHolders{live: map[string]time.Time{}}
	holders.set("s1", time.Now().Add(time.Hour))
	f := newFixtureWith(t, fixtureConfig{workers: 1, holders: holders})
	held := func() *mpv1alpha1.ProviderConfig {
		pc := providerConfig("t", "c-1")
		pc.Labels = map[string]string{sharding.ShardLabel: "s1"}
		return pc
	}
	f.create(held())
	f.waitFor("the Event", func() bool { return f.events.Count(corev1.EventTypeNormal, EventHeldByShard) == 1 })
	if err := f.mp.MultiprojectV1alpha1().ProviderConfigs().Delete(f.ctx, "t", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitFor("the informer to drop it", func() bool { _, err := f.controller.lister.Get("t"); return err != nil })
	if _, err := f.controller.sync(f.ctx, "t"); err != nil {
		t.Fatal(err)
	}
	f.create(held())
	f.waitFor("the Event for the recreated tenant", func() bool { return f.events.Count(corev1.EventTypeNormal, EventHeldByShard) == 2 })
}

// TestOnlyOwnedTenantsRunAndAreWritten: a sharded replica runs, and writes the finalizer and status of, only the
// ProviderConfigs it owns; a drained one stops without cleanup (its finalizer stays for the next owner), and
// StopUnowned refuses a tenant that is still owned.
func TestOnlyOwnedTenantsRunAndAreWritten(t *testing.T) {
	metrics.Register()
	f := newFixtureWith(t, fixtureConfig{workers: 2, shard: "me"})
	for name, labels := range map[string]map[string]string{"mine": {sharding.ShardLabel: "me"}, "theirs": {sharding.ShardLabel: "other"}, "unassigned": nil} {
		pc := providerConfig(name, "c-1")
		pc.Labels = labels
		f.create(pc)
	}
	f.waitFor("the owned tenant Ready", f.conditionIs("mine", mpv1alpha1.ProviderConfigConditionReady, metav1.ConditionTrue, ReasonAllControllersReady))
	if got := f.get("mine").Status.Shard; got != "me" {
		t.Errorf("status.shard = %q, want the shard that runs it", got)
	}
	f.waitFor("a finished sync of each tenant it does not own", func() bool {
		for _, name := range []string{"theirs", "unassigned"} {
			if n, _ := metrics.ProviderConfigSyncs.Value(name, "success"); n == 0 {
				return false
			}
		}
		return true
	})
	for _, name := range []string{"theirs", "unassigned"} {
		if pc := f.get(name); len(pc.Finalizers) > 0 || len(pc.Status.Conditions) > 0 || pc.Status.AppliedSpec != nil {
			t.Errorf("%s is not owned but was written: finalizers %v, status %+v", name, pc.Finalizers, pc.Status)
		}
		if running := f.manager.Running(name); len(running) > 0 {
			t.Errorf("%s is not owned but runs %v", name, running)
		}
	}
	for _, a := range f.mp.Actions() {
		if n := objectName(a); a.GetVerb() == "patch" && (n == "theirs" || n == "unassigned") {
			t.Errorf("wrote a ProviderConfig it does not own: %s %s", a.GetVerb(), n)
		}
	}
	if err := f.controller.StopUnowned(f.ctx, "mine"); err == nil {
		t.Error("StopUnowned stopped a tenant that is still owned")
	}
	if len(f.manager.Running("mine")) == 0 {
		t.Fatal("the owned tenant stopped")
	}

	f.update("mine", func(pc *mpv1alpha1.ProviderConfig) { pc.Labels[sharding.DrainLabel] = "true" })
	f.waitFor("the drained tenant to stop", func() bool { return len(f.manager.Running("mine")) == 0 })
	if err := f.controller.StopUnowned(f.ctx, "mine"); err != nil {
		t.Errorf("StopUnowned of a drained tenant: %v", err)
	}
	if pc := f.get("mine"); !slices.Contains(pc.Finalizers, mpv1alpha1.ProviderConfigCleanupFinalizer) {
		t.Errorf("a drain removed the finalizer: the next owner could not clean up (%v)", pc.Finalizers)
	}
	if n := f.probes.cleanups("mine"); n != 0 {
		t.Errorf("a drain ran %d cleanups; the tenant only moves", n)
	}
}

// TestStopUnownedWaitsForADetachedController: a drained tenant's controller that outlives the stop timeout is
// detached but still acts, so StopUnowned keeps failing (the Drainer does not acknowledge, and no other shard may
// start the tenant) until it has returned.
func TestStopUnownedWaitsForADetachedController(t *testing.T) {
	probes := newProbes()
	hold := make(chan struct{})
	probes.hold = hold
	f := newFixtureWith(t, fixtureConfig{workers: 1, stopTimeout: 50 * time.Millisecond, probes: probes, shard: "me"})
	pc := providerConfig("a", "c-1")
	pc.Labels = map[string]string{sharding.ShardLabel: "me"}
	f.create(pc)
	f.waitFor("the probe", func() bool { return len(f.manager.Running("a")) == 1 })

	f.update("a", func(pc *mpv1alpha1.ProviderConfig) { pc.Labels[sharding.DrainLabel] = "true" })
	f.waitFor("the drain to reach the informer", func() bool {
		got, err := f.controller.lister.Get("a")
		return err == nil && got.Labels[sharding.DrainLabel] == "true"
	})
	for range 2 {
		if err := f.controller.StopUnowned(f.ctx, "a"); err == nil {
			t.Fatal("StopUnowned succeeded while the tenant's controller still runs")
		}
	}
	close(hold)
	f.waitFor("StopUnowned to succeed once the controller returned", func() bool {
		return f.controller.StopUnowned(f.ctx, "a") == nil
	})
	if got := f.probes.most("a"); got != 1 {
		t.Errorf("%d instances ran at once, want 1", got)
	}
}

// fakeCoverage is a TenantCoverage whose covered tenants the test sets.
type fakeCoverage struct {
	mu      sync.Mutex
	covered map[string]bool
	refused map[string]int
}

func (c *fakeCoverage) Covers(tenant string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.covered[tenant] {
		c.refused[tenant]++
	}
	return c.covered[tenant]
}

func (c *fakeCoverage) refusals(tenant string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refused[tenant]
}

func (c *fakeCoverage) cover(tenant string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.covered[tenant] = true
}

// TestShardStartsATenantOnlyOnceItsNamespacesAreRead: with --sharded-watch a shard's informers read only the
// namespaces its selector holds, so a tenant that has just been assigned is neither started nor written until the
// coverage says they have been read; then it starts.
func TestShardStartsATenantOnlyOnceItsNamespacesAreRead(t *testing.T) {
	coverage := &fakeCoverage{covered: map[string]bool{"read": true}, refused: map[string]int{}}
	objects := []*mpv1alpha1.ProviderConfig{providerConfig("read", "c-1"), providerConfig("unread", "c-2")}
	for _, pc := range objects {
		pc.Labels = map[string]string{sharding.ShardLabel: "me"}
	}
	f := newFixtureWith(t, fixtureConfig{workers: 2, shard: "me", coverage: coverage, objects: objects})

	f.waitFor("the covered tenant Ready", f.conditionIs("read", mpv1alpha1.ProviderConfigConditionReady, "True", ReasonAllControllersReady))
	// The shard asked, and was told to wait; nothing of the tenant runs or was written.
	f.waitFor("the uncovered tenant refused", func() bool { return coverage.refusals("unread") > 0 })
	if running := f.manager.Running("unread"); len(running) > 0 {
		t.Errorf("the uncovered tenant runs %v", running)
	}
	if pc := f.get("unread"); len(pc.Finalizers) > 0 || pc.Status.Shard != "" {
		t.Errorf("the uncovered tenant was written: %v %+v", pc.Finalizers, pc.Status)
	}

	coverage.cover("unread")
	f.controller.Enqueue("unread")
	f.waitFor("the tenant Ready once covered", f.conditionIs("unread", mpv1alpha1.ProviderConfigConditionReady, "True", ReasonAllControllersReady))
}
