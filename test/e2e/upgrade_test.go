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

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/neg/translator"
	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
	"github.com/multiproject/multiproject-controller-manager/pkg/sharding"
	"github.com/multiproject/multiproject-controller-manager/pkg/sharding/sharder"
	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

// previousReleaseFile names the commit of the previous release on its last non-comment line.
const previousReleaseFile = "hack/previous-release"

// TestUpgradeAndRollbackKeepEveryNEG moves one tenant between the previous release (hack/previous-release, built
// from this repository's history) and this build the way a Deployment's rolling update does, and back:
//
//	a. the previous release's CRDs, the previous build converges the tenant;
//	b. this build takes over (started first, then the previous one stopped with SIGTERM) while a Deployment whose
//	   Pods declare the NEG readiness gate rolls out behind a NEG Service of a second tenant;
//	c. this build's CRDs are applied under the running manager;
//	d. the previous build takes over again, with this build's CRDs left in place;
//	e. this build takes over once more.
//
// After each switch an added endpoint reaches its NEG; after the upgrade a new Service gets a NEG, which the
// rollback must keep and the previous build must update (an older build once renamed a NEG a newer one had made);
// after the rollback a deleted Service's NEGs are collected, and so are those of a Service deleted on this build while
// a backend service used them (awaiting deletion: emptied, released, not kept or recreated by the previous build). A dual-stack Service made on this build's CRDs carries
// the endpoint fields this build added (pod, ipv6Address) through the rollback, which keeps them until its endpoints
// change and leaves its endpoints in GCE with both addresses, and through the roll-forward, which writes them back
// (docs/upgrade.md). A Service with a zone fixed ahead (no Node there), whose NEG in that zone a backend service uses
// (the operator's step before a rollback), keeps that NEG through the rollback, which drops the zone from the spec and
// whose deletes GCE refuses, and this build takes it back, empty and inactive, with its GCE id. A hybrid tenant's
// NEGs (layout h1, made after c) are left alone by the rollback, which cannot order that layout: no mutating call in
// its project, the same NEGs and endpoints, a scale-up not pushed until the roll-forward. Sampled every 200 ms
// throughout, and compared at each
// switch: no NEG that was wanted is deleted, renamed or recreated, none holds fewer endpoints than it held before
// the window, no PangolinResource is replaced or vanishes, no Translation loses or changes a field across a switch,
// no Pod's gate goes from True back to False, and a converged tenant costs no mutating GCE call at a switch.
func TestUpgradeAndRollbackKeepEveryNEG(t *testing.T) {
	// A zone without Nodes that svc-6 fixes ahead.
	const fixedZone = "europe-west1-f"
	commit := previousRelease(t)
	building := time.Now()
	previous := previousManagerBinary(t, commit)
	current := managerBinary(t)
	t.Logf("builds ready in %s (0 when an earlier test of this run built them)", time.Since(building).Round(100*time.Millisecond))
	previousCRDs, currentCRDs := previousReleaseCRDs(t, commit), workingTreeCRDs(t)
	logBuilds(t, commit, previous, current, previousCRDs, currentCRDs)
	// A test that stops before phase c must not leave the previous CRDs to the tests after it.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := framework.ApplyObjects(ctx, controlPlane.AdminConfig(), currentCRDs); err != nil {
			t.Errorf("re-applying this build's CRDs: %v", err)
		}
	})
	resetLease(t)

	calls := &gceCallLog{}
	// Operations that take about a second, as GCE's do: a switch in the middle of a push finds it under way.
	gce := fakegce.New(fakegce.Options{OperationDelay: time.Second, OnCall: calls.record})
	gce.Start()
	t.Cleanup(gce.Close)

	applyCRDs(t, "the previous release's", previousCRDs)
	w := newWorkload(t, gce)
	svc0, svc1 := w.endpoints(0, 0, 2), w.endpoints(1, 0, 1)
	w.setService("svc-0", svc0)
	// A custom NEG name and three hosts, each held by its one claimant: no switch, the rollback included, may move
	// them (this build keeps a name by who publishes it, the previous release by age alone).
	w.setNamedService("svc-1", "up-"+w.tenant, svc1)
	w.setIngress("web", "a.upgrade.example.com", "b.upgrade.example.com", "c.upgrade.example.com")
	w.addNamespace("alpha")
	gated := newRollout(t, gce, "gated", true, netip.MustParsePrefix("10.245.0.0/24"))
	s := startUpgradeSampler(t, gce, calls, []*workload{w}, gated)

	kubeconfig := managerKubeconfig(t)
	// A lease far longer than a handover: the new leader must get it by the old one's release, not by expiry.
	le := leaderElection{leaseDuration: 30 * time.Second, renewDeadline: 20 * time.Second, retryPeriod: 500 * time.Millisecond}

	s.begin("a  previous build, previous CRDs", nil)
	leader := startManagerBinary(t, previous, "previous-a", kubeconfig, gce.Endpoint(), le)
	waitLeader(t, leader.identity(), time.Minute)
	managers := []*manager{leader}
	w.waitConverged("a: previous build")
	gated.waitSettled("a: first revision on the previous build")
	s.end()

	// b: the rollout starts just before the switch, so the handover happens in the middle of it; its tenant's project
	// is not quiet (the rollout attaches and detaches), the other tenant's is.
	before := s.keep("before b")
	rollTemplate(t, gated, "2")
	s.begin("b  switch to this build", []string{w.project})
	leader = handOver(t, leader, current, "current-b", kubeconfig, gce.Endpoint(), le)
	managers = append(managers, leader)
	w.waitConverged("b: this build took over")
	gated.waitSettled("b: rollout across the upgrade")
	s.waitObserved(map[string]string{w.project: leader.identity(), gated.w.project: leader.identity()})
	s.end()
	compareKept(t, "the upgrade", before, s.keep("after b"))

	s.begin("b' scale-up, new Service", nil)
	svc0 = append(svc0, extraEndpoint(w, 0, 1))
	w.setService("svc-0", svc0)
	w.waitConverged("b': svc-0 scaled up on this build")
	w.setService("svc-2", w.endpoints(2, 0, 1))
	w.waitConverged("b': svc-2 created on this build")
	// A custom NEG name, which this build claims in the tenant's project and records there on the Translation
	// (multiproject.io/neg-project): the rollback must keep its NEG, as the previous build claims it once per cluster.
	w.setNamedService("svc-4", "named-"+w.tenant, w.endpoints(4, 0, 1))
	w.waitConverged("b': svc-4, with a custom NEG name, created on this build")
	s.end()

	before = s.keep("before c")
	s.begin("c  this build's CRDs applied", []string{w.project, gated.w.project})
	applyCRDs(t, "this build's", currentCRDs)
	w.waitConverged("c: this build's CRDs")
	s.end()
	compareKept(t, "this build's CRDs", before, s.keep("after c"))

	s.begin("c' scale-up", nil)
	svc1 = append(svc1, extraEndpoint(w, 1, 1))
	w.setService("svc-1", svc1)
	w.waitConverged("c': svc-1 scaled up")
	// A dual-stack Service whose slices name their Pods: its Translation carries the fields this build added
	// (pod, ipv6Address), which the rollback must keep.
	svc3 := w.endpoints(3, 0, 1)
	w.setService("svc-3", svc3)
	w.setPodSlice("svc-3", svc3)
	w.setIPv6Slice("svc-3", svc3)
	w.waitConverged("c': svc-3, dual-stack, created on this build")
	waitUntil(t, "c': svc-3's Translation to name each endpoint's Pod and IPv6 address", w.translationCarries("svc-3", true, len(svc3)))
	svc3NEGs := w.negIDs("svc-3")
	waitUntil(t, "c': svc-3's NEG endpoints to carry both addresses", w.negsHold(svc3NEGs, dualStackWant(svc3, len(svc3))))
	// A Service whose NEGs a backend service uses is deleted: this build empties them and releases its Translation,
	// leaving them to the sweep (NEGs awaiting deletion), which the rollback must neither keep nor recreate.
	w.setService("svc-5", w.endpoints(5, 0, 1))
	w.waitConverged("c': svc-5 created on this build")
	svc5NEGs := w.negIDs("svc-5")
	for key := range svc5NEGs {
		zone, name, _ := strings.Cut(key, "/")
		if err := gce.SetInUseBy(w.project, zone, name, "upgrade-backend"); err != nil {
			t.Fatal(err)
		}
	}
	s.expectAwaiting(w, "svc-5")
	w.deleteService("svc-5")
	waitUntil(t, "c': svc-5's NEGs emptied, awaiting deletion, and its Translation gone", w.awaitingDeletion("svc-5", svc5NEGs))
	// A Service with zone f fixed ahead, where the tenant has no Node: an empty NEG there beside its Nodes' zones.
	// The previous release knows no fixed zone: it drops f from the spec and deletes its NEG unless GCE refuses.
	// So the operator's step before a rollback (docs/upgrade.md): a backend service uses every NEG fixed ahead (or
	// kept without Nodes), as such a NEG is meant to be used.
	w.fixed = map[string][]string{"svc-6": {fixedZone}}
	w.setService("svc-6", w.endpoints(6, 0, 1))
	w.setAnnotation("svc-6", `{"exposed_ports":{"80":{}},"zones":["`+fixedZone+`"]}`)
	w.waitConverged("c': svc-6, with zone f fixed ahead, created on this build")
	svc6Fixed := fixedZone + "/" + w.translation(translationName("svc-6")).Spec.Resources[0].Name
	if err := gce.SetInUseBy(w.project, fixedZone, path.Base(svc6Fixed), "upgrade-backend-6"); err != nil {
		t.Fatal(err)
	}
	// A hybrid tenant (NON_GCP_PRIVATE_IP_PORT NEGs, its Nodes in racks), made on this build's CRDs: its Translation
	// is of layout h1, which the previous release cannot order, so the rollback leaves it and its NEGs alone
	// (docs/upgrade.md).
	hw := newWorkload(t, gce)
	hwRacks := map[string]string{}
	for zi := range zones {
		for i := range 2 {
			node, rack := hw.nodeName(zi, i), fmt.Sprintf("rack-%c", 'b'+zi)
			hw.setNodeZone(node, rack)
			hwRacks[node] = rack
		}
	}
	if _, err := hw.mp.MultiprojectV1alpha1().ProviderConfigs().Patch(hw.ctx, hw.tenant, types.MergePatchType, []byte(hybridMapping), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	svcH := hw.endpoints(7, 0, 2)
	hw.setService("svc-h", svcH)
	waitUntil(t, "c': the hybrid tenant's NEGs", hw.hybridNEGsHold(svcH, hwRacks))
	hybridIDs := hw.projectNEGIDs()
	s.end()

	before = s.keep("before d")
	// What the previous build does with svc-6 (above): its Translation without f, its NEG in f kept by GCE, each of
	// the previous build's deletes of it refused (NEGInUse on the Translation and the tenant), no other change.
	s.expectRefusedDeletes(w.project + "/" + svc6Fixed)
	w.fixed, w.deleteRefused = nil, true
	w.awaiting.Insert(svc6Fixed)
	delete(before.translations, w.appNS+"/"+translationName("svc-6"))
	s.begin("d  rollback to the previous build", []string{w.project, gated.w.project, hw.project})
	// A sweep period short enough for svc-5's NEGs to go within the scenario once GCE lets them.
	leader = handOver(t, leader, previous, "previous-d", kubeconfig, gce.Endpoint(), le, "--neg-gc-period=15s")
	managers = append(managers, leader)
	w.waitConverged("d: the previous build took over again")
	s.waitObserved(map[string]string{w.project: leader.identity(), gated.w.project: leader.identity()})
	s.end()
	compareKept(t, "the rollback", before, s.keep("after d"))
	if ok, why := w.awaitingDeletion("svc-5", svc5NEGs)(); !ok {
		t.Errorf("d: the previous build kept or recreated svc-5's NEGs awaiting deletion: %s", why)
	}
	if ok, why := w.negsHold(svc3NEGs, dualStackWant(svc3, len(svc3)))(); !ok {
		t.Errorf("d: the previous build changed svc-3's dual-stack endpoints: %s", why)
	}
	// The hybrid tenant: the previous build says it leaves the newer layout alone, writes no Translation of its own,
	// and its NEGs are the same ones, as they were (and its project saw no mutating call: quiet above).
	waitEvent(hw.ctx, t, "Service", hw.appNS, "svc-h", translator.ReasonNewerTranslation, "neg-h1-svc-h-80")
	hw.hybridUntouched(t, "d", svcH, hwRacks, hybridIDs)

	s.begin("d' scale-up of svc-2, svc-1 deleted, svc-5's NEGs let go", nil)
	// The backend service lets svc-5's NEGs go: the previous build's sweep deletes them, as garbage of this tenant.
	for key := range svc5NEGs {
		zone, name, _ := strings.Cut(key, "/")
		if err := gce.SetInUseBy(w.project, zone, name); err != nil {
			t.Fatal(err)
		}
	}
	w.setService("svc-2", append(w.endpoints(2, 0, 1), extraEndpoint(w, 2, 1)))
	w.waitConverged("d': svc-2, made by this build, scaled up by the previous build")
	s.expectGone(w, "svc-1")
	w.deleteService("svc-1")
	w.waitConverged("d': svc-1's NEGs collected by the previous build")
	waitUntil(t, "d': svc-5's NEGs deleted by the previous build's sweep", func() (bool, string) {
		left := w.negsIn(svc5NEGs)
		return len(left) == 0, fmt.Sprintf("still in GCE: %v", left)
	})
	w.awaiting = sets.New(svc6Fixed)
	// The previous release (bf30f57) knows pod and ipv6Address: it rewrites svc-3's spec with them, and keeps the
	// endpoints GCE holds with both addresses as they are. (A build before them rewrites the spec without them and
	// keeps the endpoints too: docs/upgrade.md.) The added Pod has an IPv4 address only, so that the roll-forward has
	// nothing to change in GCE.
	grown := append(slices.Clone(svc3), extraEndpoint(w, 3, 1))
	w.setService("svc-3", grown)
	w.setPodSlice("svc-3", grown)
	w.waitConverged("d': svc-3 scaled up by the previous build")
	waitUntil(t, "d': the previous build to write svc-3's Translation with each endpoint's Pod and the IPv6 addresses", w.translationCarries("svc-3", true, len(svc3)))
	waitUntil(t, "d': svc-3's old endpoints to keep both addresses, the new one IPv4 only", w.negsHold(svc3NEGs, dualStackWant(grown, len(svc3))))
	// The hybrid Service scales up: its NEGs do not follow on the previous build (checked once svc-3's scale-up,
	// asked later, has been pushed).
	grownH := append(slices.Clone(svcH), extraEndpoint(hw, 7, 1))
	hw.setService("svc-h", grownH)
	w.setService("svc-2", append(w.endpoints(2, 0, 1), extraEndpoint(w, 2, 1), extraEndpoint(w, 2, 2)))
	w.waitConverged("d': svc-2 scaled up again, after svc-h")
	hw.hybridUntouched(t, "d'", svcH, hwRacks, hybridIDs)
	s.end()

	before = s.keep("before e")
	// This build takes svc-6's NEG in f back into its spec: the same NEG, empty, Inactive.
	w.fixed, w.deleteRefused = map[string][]string{"svc-6": {fixedZone}}, false
	w.awaiting = nil
	delete(before.translations, w.appNS+"/"+translationName("svc-6"))
	s.begin("e  roll forward to this build", []string{w.project, gated.w.project})
	leader = handOver(t, leader, current, "current-e", kubeconfig, gce.Endpoint(), le)
	managers = append(managers, leader)
	w.waitConverged("e: this build took over again")
	s.waitObserved(map[string]string{w.project: leader.identity(), gated.w.project: leader.identity()})
	waitUntil(t, "e: svc-3's Translation to name each endpoint's Pod and IPv6 address again", w.translationCarries("svc-3", true, len(svc3)))
	waitUntil(t, "e: svc-3's endpoints in GCE to be as they were", w.negsHold(svc3NEGs, dualStackWant(grown, len(svc3))))
	waitUntil(t, "e: the hybrid NEGs to follow the endpoints again", hw.hybridNEGsHold(grownH, hwRacks))
	if got := hw.projectNEGIDs(); !maps.Equal(got, hybridIDs) {
		t.Errorf("e: the hybrid NEGs changed: GCE ids %v, were %v", got, hybridIDs)
	}
	s.end()
	compareKept(t, "the roll-forward", before, s.keep("after e"))
	if !leader.running() {
		t.Fatalf("manager %s exited: %v", leader.name, leader.waitErr)
	}
	waitUntil(t, "e: svc-6's NEG in f Inactive in the status, with its GCE id", func() (bool, string) {
		for _, r := range w.translation(translationName("svc-6")).Status.Resources {
			neg, ok := gce.NEG(w.project, r.Zone, r.Name)
			if r.Zone+"/"+r.Name == svc6Fixed {
				return ok && r.Lifecycle == mpv1alpha1.BackendResourceLifecycleInactive && r.ID == fmt.Sprint(neg.Id),
					fmt.Sprintf("status %+v", r)
			}
		}
		return false, "the status does not list " + svc6Fixed
	})

	s.keep("end")
	s.stop()
	s.check()
	s.report(managers...)
}

// TestUpgradeAndRollbackOfShardedReplicasKeepsEveryNEG runs the sharded overlay (two replicas), on the manager's own
// NEG keys as beside GKE's NEG controller (--neg-annotation-key and its siblings), across the upgrade and back, one
// replica at a time as a rolling update with maxSurge 1 does it (the new replica joins, then an old
// one stops with SIGTERM): a replica of the previous release runs four tenants alone; a replica of this build joins
// and both hold shard Leases and run tenants side by side, an added endpoint reaching its NEG on either; a second
// replica of this build replaces the previous one, and a new Service gets its NEGs; then two replicas of the
// previous release replace this build's, and scale the new Service up. Sampled and compared as
// TestUpgradeAndRollbackKeepEveryNEG does: tenants moving between builds keep every NEG and PangolinResource, and a
// converged tenant costs no mutating GCE call when it moves.
func TestUpgradeAndRollbackOfShardedReplicasKeepsEveryNEG(t *testing.T) {
	// Four tenants: with bounded loads (capacity ⌈4·1.05/2⌉ = 3) each of two shards runs at least one.
	const tenants = 4
	commit := previousRelease(t)
	previous := previousManagerBinary(t, commit)
	current := managerBinary(t)
	resetLease(t)
	cleanupShardLeases(t)
	installShardedRBAC(t)
	calls := &gceCallLog{}
	gce := fakegce.New(fakegce.Options{OperationDelay: time.Second, OnCall: calls.record})
	gce.Start()
	t.Cleanup(gce.Close)

	ws := make([]*workload, tenants)
	var projects []string
	for i := range ws {
		ws[i] = newWorkload(t, gce)
		// Both builds on their own keys, as an installation beside GKE's NEG controller runs (docs/gke.md).
		ws[i].negAnnotation, ws[i].negStatus = myNEGAnnotation, myNEGStatus
		ws[i].setService("svc-0", ws[i].endpoints(0, 0, 1))
		ws[i].setService("svc-1", ws[i].endpoints(1, 0, 1))
		ws[i].setIngress("web", hosts(0, ws[i].tenant+"-a", ws[i].tenant+"-b")...)
		// A custom NEG name: the previous build records its claim under the name, this build under the project and
		// name; each build's records must keep the NEG through the upgrade and the rollback (docs/upgrade.md).
		ws[i].setNamedService("svc-3", "named-"+ws[i].tenant, ws[i].endpoints(3, 0, 1))
		projects = append(projects, ws[i].project)
	}
	s := startUpgradeSampler(t, gce, calls, ws, nil)
	kubeconfig := managerKubeconfig(t)
	le := leaderElection{leaseDuration: 6 * time.Second, renewDeadline: 4 * time.Second, retryPeriod: time.Second}
	var live, all []*manager
	shardOf := map[*manager]string{}
	join := func(binary, name string) *manager {
		t.Helper()
		m := startManagerBinary(t, binary, name, kubeconfig, gce.Endpoint(), le, append([]string{"--sharding=true"}, myNEGKeyFlags...)...)
		shardOf[m] = shardNames(t, []*manager{m})[0]
		live, all = append(live, m), append(all, m)
		waitShardsRun(t, ws, namesOf(live, shardOf))
		return m
	}
	replace := func(old *manager, binary, name string) *manager {
		t.Helper()
		m := join(binary, name)
		old.signal(syscall.SIGTERM)
		if err := old.waitExit(2 * time.Minute); err != nil {
			t.Fatalf("replica %s exited with %v after SIGTERM, want 0", old.name, err)
		}
		live = slices.DeleteFunc(live, func(r *manager) bool { return r == old })
		waitShardsRun(t, ws, namesOf(live, shardOf))
		return m
	}
	converge := func(what string) {
		t.Helper()
		for _, w := range ws {
			w.waitConverged(what + ": " + w.tenant)
		}
	}
	// readByNewOwners waits until the shard that runs each tenant that moved since the placements at was made has
	// read its NEGs (upgradeSampler.waitObserved).
	readByNewOwners := func(at map[string]sharder.Placement) {
		t.Helper()
		now, agents := placements(t, ws), map[string]string{}
		for _, w := range ws {
			if now[w.tenant].Shard != at[w.tenant].Shard {
				agents[w.project] = now[w.tenant].Shard
			}
		}
		t.Logf("%d of %d tenants moved", len(agents), len(ws))
		s.waitObserved(agents)
	}
	scaleUp := func(service string, serial, n int) {
		t.Helper()
		for _, w := range ws {
			w.setService(service, append(w.endpoints(serial, 0, 1), extraEndpoint(w, serial, n)))
		}
	}

	s.begin("previous replica alone", nil)
	previousA := join(previous, "previous-shard-a")
	converge("the previous replica alone")
	s.end()

	before, at := s.keep("previous alone"), placements(t, ws)
	s.begin("a replica of this build joins", projects)
	currentA := join(current, "current-shard-a")
	waitShardLeasesHeld(t, namesOf(live, shardOf))
	converge("previous and current side by side")
	readByNewOwners(at)
	s.end()
	compareKept(t, "a replica of this build joining", before, s.keep("side by side"))
	for _, m := range live {
		if len(tenantsOn(t, ws, shardOf[m])) == 0 {
			t.Fatalf("replica %s runs no tenant; the test needs both builds running tenants", m.name)
		}
	}

	s.begin("scale-up on both builds", nil)
	scaleUp("svc-0", 0, 1)
	converge("scale-up on both builds")
	s.end()

	before, at = s.keep("before the upgrade"), placements(t, ws)
	s.begin("the previous replica replaced", projects)
	currentB := replace(previousA, current, "current-shard-b")
	converge("this build's replicas")
	readByNewOwners(at)
	s.end()
	compareKept(t, "the upgrade", before, s.keep("this build"))

	s.begin("new Service on this build", nil)
	for _, w := range ws {
		w.setService("svc-2", w.endpoints(2, 0, 1))
	}
	converge("svc-2 created on this build")
	s.end()

	before, at = s.keep("before the rollback"), placements(t, ws)
	s.begin("rollback: this build's replicas replaced", projects)
	replace(currentA, previous, "previous-shard-b")
	replace(currentB, previous, "previous-shard-c")
	converge("the previous build's replicas again")
	readByNewOwners(at)
	s.end()
	compareKept(t, "the rollback", before, s.keep("previous again"))

	s.begin("scale-up of svc-2 on the previous build", nil)
	scaleUp("svc-2", 2, 1)
	converge("svc-2, made by this build, scaled up by the previous build")
	s.end()
	for _, m := range live {
		if !m.running() {
			t.Fatalf("replica %s exited: %v", m.name, m.waitErr)
		}
	}

	s.keep("end")
	s.stop()
	s.check()
	s.report(all...)
}

// waitShardLeasesHeld waits until each shard holds its shard Lease.
func waitShardLeasesHeld(t *testing.T, shards []string) {
	t.Helper()
	why := "not looked yet"
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, shard := range shards {
			lease, err := controlPlane.AdminClient().CoordinationV1().Leases(leaseNamespace).Get(ctx, sharding.LeaseName(shardGroup, shard), metav1.GetOptions{})
			if err != nil {
				why = err.Error()
				return false, nil
			}
			if h := lease.Spec.HolderIdentity; h == nil || *h != shard {
				why = fmt.Sprintf("the Lease of shard %s names %q", shard, ptr.Deref(h, ""))
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("shard Leases of %v not held: %v: %s", shards, err, why)
	}
}

// handOver replaces the leading manager old with a new process of binary as a Deployment's rolling update does: the
// new Pod starts first and campaigns for the Lease, then the old one gets SIGTERM, releases the Lease and exits 0;
// it returns the new process once it leads.
func handOver(t *testing.T, old *manager, binary, name, kubeconfig, gceEndpoint string, le leaderElection, extraArgs ...string) *manager {
	t.Helper()
	next := startManagerBinary(t, binary, name, kubeconfig, gceEndpoint, le, extraArgs...)
	id := next.identity()
	assertLeader(t, old.identity())
	old.signal(syscall.SIGTERM)
	if err := old.waitExit(2 * time.Minute); err != nil {
		t.Fatalf("manager %s exited with %v after SIGTERM, want 0", old.name, err)
	}
	waitLeader(t, id, le.leaseDuration/2)
	return next
}

// rollTemplate starts a rollout of the Deployment to a new revision, and returns without waiting for it.
func rollTemplate(t *testing.T, r *rollout, revision string) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"revision":%q}}}}}`, revision)
	_, err := r.w.kube.AppsV1().Deployments(r.w.appNS).Patch(r.w.ctx, r.name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// extraEndpoint is the n-th endpoint added to Service number serial, in the first zone, at addresses endpoints
// never gives (third octet 200), so adding it is a scale-up by exactly one.
func extraEndpoint(w *workload, serial, n int) endpoint {
	return endpoint{ip: fmt.Sprintf("10.%d.200.%d", serial, n), node: w.nodeName(0, 0), zone: 0}
}

// --- the previous release ----------------------------------------------------------------------------------------

// previousRelease is the commit on the last non-comment line of hack/previous-release. A clone without it (a
// shallow one) fails the test: skipping would let an upgrade break unnoticed.
func previousRelease(t testing.TB) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(controlPlane.RepoRoot(), previousReleaseFile))
	if err != nil {
		t.Fatal(err)
	}
	var commit string
	for _, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			commit = line
		}
	}
	if commit == "" {
		t.Fatalf("%s names no commit", previousReleaseFile)
	}
	if _, err := git("cat-file", "-e", commit+"^{commit}"); err != nil {
		t.Fatalf("the commit %s named in %s is not in this clone's history (a shallow clone? run `git fetch --unshallow`): %v",
			commit, previousReleaseFile, err)
	}
	return commit
}

// git runs git on the repository and returns its standard output.
func git(args ...string) ([]byte, error) {
	cmd := exec.Command("git", append([]string{"-C", controlPlane.RepoRoot()}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

var (
	previousBuildOnce sync.Once
	previousBuildErr  error
	previousPath      string
)

// previousManagerBinary builds the commit's ./cmd/multiproject-controller-manager once per test run, into the
// control plane's directory like managerBinary, from the commit's source tree (previousSourceTree). The staging
// modules are wired with relative replace directives, so that tree builds on its own; its own hack/version.sh
// stamps it, given the version and commit since the tree has no .git.
func previousManagerBinary(t testing.TB, commit string) string {
	t.Helper()
	previousBuildOnce.Do(func() {
		previousPath = filepath.Join(controlPlane.Dir(), "bin", "multiproject-controller-manager-previous")
		previousBuildErr = buildCommit(commit, previousPath)
	})
	if previousBuildErr != nil {
		t.Fatalf("building the previous release %s: %v", commit, previousBuildErr)
	}
	return previousPath
}

func buildCommit(commit, binary string) error {
	src, err := previousSourceTree(commit)
	if err != nil {
		return err
	}
	env := append(os.Environ(), "VERSION=v0.0.0-previous+"+commit[:min(12, len(commit))], "GIT_COMMIT="+commit, "GOWORK=off",
		// No repository around the tree (a home directory under git) may lend hack/version.sh its state.
		"GIT_DIR="+filepath.Join(src, ".git"))
	version := exec.Command(filepath.Join(src, "hack", "version.sh"))
	version.Env = env
	ldflags, err := version.Output()
	if err != nil {
		return fmt.Errorf("the previous release's hack/version.sh: %w", err)
	}
	// -buildvcs=false: the tree is no repository of its own; the version is the ldflags'. Static and -trimpath as
	// hack/release.sh builds (and managerBinary), so that the dependencies compile once for all three.
	build := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags", strings.TrimSpace(string(ldflags)),
		"-o", binary, "./cmd/multiproject-controller-manager")
	build.Dir, build.Env = src, append(env, "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/multiproject-controller-manager in %s: %w\n%s", src, err, out)
	}
	return nil
}

// previousSourceTree returns the commit's source tree, extracted with `git archive` (neither the working tree nor
// .git changes) once per machine, under the cache hack/build-controlplane.sh uses. The go command keys the build of
// a main-module package on its directory, so a tree at a stable path is compiled once (about a minute on two
// cores) and linked on later runs. A tree is extracted beside its final name and renamed into place, so a
// concurrent run or an interrupted one never leaves a partial tree under that name.
func previousSourceTree(commit string) (string, error) {
	root := os.Getenv("CONTROLPLANE_CACHE")
	if root == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return "", err
		}
		root = filepath.Join(cache, "multiproject-controller-manager")
	}
	dir := filepath.Join(root, "previous-release", commit)
	if _, err := os.Stat(dir); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), commit+".partial-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp) // nothing left once renamed
	archive, err := git("archive", "--format=tar", commit)
	if err != nil {
		return "", err
	}
	extract := exec.Command("tar", "-x", "-C", tmp)
	extract.Stdin = bytes.NewReader(archive)
	if out, err := extract.CombinedOutput(); err != nil {
		return "", fmt.Errorf("extracting git archive %s: %w\n%s", commit, err, out)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, statErr := os.Stat(dir); statErr == nil {
			return dir, nil // another run put it there first
		}
		return "", err
	}
	return dir, nil
}

// previousReleaseCRDs reads the commit's manifests/crds from the repository's history.
func previousReleaseCRDs(t testing.TB, commit string) []*unstructured.Unstructured {
	t.Helper()
	list, err := git("ls-tree", "--name-only", commit, framework.ProjectCRDDir+"/")
	if err != nil {
		t.Fatal(err)
	}
	var crds []*unstructured.Unstructured
	for _, file := range strings.Fields(string(list)) {
		if ext := filepath.Ext(file); ext != ".yaml" && ext != ".yml" && ext != ".json" {
			continue
		}
		data, err := git("show", commit+":"+file)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := framework.DecodeManifests(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s at %s: %v", file, commit, err)
		}
		crds = append(crds, objs...)
	}
	if len(crds) == 0 {
		t.Fatalf("no CRD in %s at %s", framework.ProjectCRDDir, commit)
	}
	return crds
}

// workingTreeCRDs reads this build's manifests/crds.
func workingTreeCRDs(t testing.TB) []*unstructured.Unstructured {
	t.Helper()
	crds, err := framework.ReadManifestDir(filepath.Join(controlPlane.RepoRoot(), framework.ProjectCRDDir))
	if err != nil {
		t.Fatal(err)
	}
	return crds
}

// applyCRDs server-side applies the CRDs as the framework installed them (same field manager, so a field one set
// has and the other lacks is removed, not left behind) and waits until they are Established.
func applyCRDs(t testing.TB, which string, crds []*unstructured.Unstructured) {
	t.Helper()
	if err := framework.ApplyObjects(t.Context(), controlPlane.AdminConfig(), crds); err != nil {
		t.Fatalf("applying %s CRDs: %v", which, err)
	}
	t.Logf("applied %s CRDs", which)
}

// logBuilds logs what the suite moves between: both builds' --version and whether the CRDs differ.
func logBuilds(t *testing.T, commit, previous, current string, previousCRDs, currentCRDs []*unstructured.Unstructured) {
	t.Helper()
	version := func(binary string) string {
		out, err := exec.Command(binary, "--version").CombinedOutput()
		if err != nil {
			t.Fatalf("%s --version: %v\n%s", filepath.Base(binary), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	byName := func(objs []*unstructured.Unstructured) map[string]map[string]any {
		out := map[string]map[string]any{}
		for _, o := range objs {
			out[o.GetName()] = o.Object
		}
		return out
	}
	prev, cur := byName(previousCRDs), byName(currentCRDs)
	var differ []string
	for name := range prev {
		if !reflect.DeepEqual(prev[name], cur[name]) {
			differ = append(differ, name)
		}
	}
	for name := range cur {
		if _, ok := prev[name]; !ok {
			differ = append(differ, name)
		}
	}
	slices.Sort(differ)
	crds := "identical"
	if len(differ) > 0 {
		crds = "differ in " + strings.Join(differ, ", ")
	}
	t.Logf("previous release %s: %s; this build: %s; CRDs: %s", commit, version(previous), version(current), crds)
}
