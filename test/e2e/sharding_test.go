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
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"
	mpinformers "github.com/multiproject/client-go/informers/externalversions"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
	"github.com/multiproject/multiproject-controller-manager/pkg/sharding"
	"github.com/multiproject/multiproject-controller-manager/pkg/sharding/sharder"
)

// shardGroup is the managers' default --shard-group, the prefix and label of their shard Leases.
const shardGroup = "multiproject-controller-manager"

// TestShardedReplicas runs three replicas of the built binary with --sharding=true (as the manifests'
// ServiceAccount, with overlays/sharded's RBAC and the base's Lease policies) over 30 tenants, each with two neg
// Services, an Ingress and an app namespace, and shows the three claims on the real parts:
//
//   - every tenant runs on exactly one live shard, the one the sharder's Plan gives it (bounded loads), and converges;
//   - a replica killed with SIGKILL: each of its tenants runs on a survivor within the shard Lease duration + 2 s of
//     the kill, and every tenant converges with the changes made meanwhile;
//   - a rolling restart of all three replicas (a new one started, then an old one stopped with SIGTERM, three
//     times) under continuous endpoint churn ends with the fake GCE and the API exactly converged: no NEG, endpoint,
//     Translation, PangolinResource or namespace assignment missing or extra, and no NEG recreated;
//   - a tenant deleted while sharded is cleaned up by its shard: nothing of it is left in GCE or the API.
//
// Over the whole test it proves that no two replicas ever mutated one tenant's GCE project at once: the fake GCE
// records which replica made every mutating call (its User-Agent names the shard), and per project the replicas'
// runs of calls are disjoint in time and follow the order of the tenant's owners, as a watch of the
// ProviderConfigs' shard labels saw them.
func TestShardedReplicas(t *testing.T) {
	const tenants = 30
	resetLease(t)
	cleanupShardLeases(t)
	installShardedRBAC(t)
	calls := &mutatingCalls{byProject: map[string][]gceCall{}}
	gce := fakegce.New(fakegce.Options{OnCall: calls.record})
	gce.Start()
	t.Cleanup(gce.Close)

	ws := make([]*workload, tenants)
	byTenant := map[string]*workload{}
	for i := range ws {
		ws[i] = newWorkload(t, gce)
		byTenant[ws[i].tenant] = ws[i]
		ws[i].setService("svc-0", ws[i].endpoints(0, 0, 1))
		ws[i].setService("svc-1", ws[i].endpoints(1, 0, 1))
		// Hosts of its own: a host is published by one tenant only.
		ws[i].setIngress("ing-0", hosts(0, ws[i].tenant+"-a", ws[i].tenant+"-b")...)
		ws[i].addNamespace([]string{"alpha", "beta", "gamma"}[i%3])
	}
	owners := watchOwners(t, ws[0].mp, byTenant)

	kubeconfig := managerKubeconfig(t)
	le := leaderElection{leaseDuration: 6 * time.Second, renewDeadline: 4 * time.Second, retryPeriod: time.Second}
	start := func(name string) *manager {
		return startManager(t, name, kubeconfig, gce.Endpoint(), le, "--sharding=true")
	}
	live := []*manager{start("shard-a"), start("shard-b"), start("shard-c")}
	names := shardNames(t, live)
	shardOf := map[*manager]string{}
	for i, m := range live {
		shardOf[m] = names[i]
	}
	waitShardsRun(t, ws, names)
	logShares(t, ws, names)
	before := map[string]*observed{}
	for _, w := range ws {
		before[w.tenant] = w.waitConverged("three shards' start of " + w.tenant)
	}

	// SIGKILL a replica that owns tenants; the sharder's own death is the leader-election failover of
	// failover_test.go, so the victim is one of the others.
	sharderID, err := leaseHolder(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	victim := slices.IndexFunc(live, func(m *manager) bool {
		return m.identity() != sharderID && len(tenantsOn(t, ws, shardOf[m])) > 0
	})
	if victim < 0 {
		t.Fatalf("no replica but the sharder owns a tenant: %v", names)
	}
	killed := live[victim]
	moved := tenantsOn(t, ws, shardOf[killed])
	killed.signal(syscall.SIGKILL)
	killedAt := time.Now()
	var exitErr *exec.ExitError
	if err := killed.waitExit(time.Minute); !errors.As(err, &exitErr) || exitErr.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("replica %s exited with %v, want killed by SIGKILL", killed.name, err)
	}
	// Work for every tenant while the killed shard's tenants have no owner.
	for _, w := range ws {
		w.setService("svc-0", w.endpoints(0, 1, 2))
	}
	live = slices.Delete(live, victim, victim+1)
	names = namesOf(live, shardOf)
	movedAt := waitTenantsRun(t, moved, names, le.leaseDuration+2*time.Minute)
	took := movedAt.Sub(killedAt)
	t.Logf("SIGKILL of %s: its %d tenants ran on the survivors %s after the kill (shard Lease duration %s)",
		shardOf[killed], len(moved), took.Round(10*time.Millisecond), le.leaseDuration)
	if bound := le.leaseDuration + 2*time.Second; took > bound {
		t.Errorf("the killed shard's tenants ran elsewhere %s after the kill, more than the Lease duration + 2 s = %s", took, bound)
	}
	waitShardsRun(t, ws, names)
	for _, w := range ws {
		w.waitConverged("after the SIGKILL of a shard: " + w.tenant)
	}

	// The Deployment replaces the killed Pod.
	replacement := start("shard-d")
	shardOf[replacement] = shardNames(t, []*manager{replacement})[0]
	live = append(live, replacement)
	names = namesOf(live, shardOf)
	waitShardsRun(t, ws, names)

	// A rolling restart of all three replicas, one at a time as a Deployment with maxSurge 1 does it (the new Pod
	// first, then the old one stops), while endpoints keep changing.
	owners.mu.Lock()
	ownersBefore := map[string]int{}
	for tenant, h := range owners.history {
		ownersBefore[tenant] = len(h)
	}
	owners.mu.Unlock()
	churn := startChurn(t, ws)
	for i, next := range []string{"shard-e", "shard-f", "shard-g"} {
		m := start(next)
		shardOf[m] = shardNames(t, []*manager{m})[0]
		live = append(live, m)
		waitShardsRun(t, ws, namesOf(live, shardOf))
		old := live[0]
		old.signal(syscall.SIGTERM)
		if err := old.waitExit(2 * time.Minute); err != nil {
			t.Fatalf("replica %s exited with %v after SIGTERM, want 0", old.name, err)
		}
		live = live[1:]
		names = namesOf(live, shardOf)
		waitShardsRun(t, ws, names)
		t.Logf("rolling restart, step %d: %s joined, %s stopped; shards now %v", i+1, m.name, old.name, names)
	}
	changes := churn.stop()
	owners.mu.Lock()
	mostMoves := 0
	for tenant, h := range owners.history {
		mostMoves = max(mostMoves, len(h)-ownersBefore[tenant])
	}
	owners.mu.Unlock()
	t.Logf("rolling restart: %d endpoint changes made during it; a tenant moved at most %d times (3 replicas replaced)", changes, mostMoves)
	logShares(t, ws, names)
	for _, w := range ws {
		after := w.waitConverged("after the rolling restart: " + w.tenant)
		for key, id := range before[w.tenant].negs {
			if got, ok := after.negs[key]; ok && got != id {
				t.Errorf("%s: NEG %s was recreated (id %s, was %s)", w.tenant, key, got, id)
			}
		}
	}

	// A tenant's exit on a shard: its Services deleted, its Ingress moved to another class, then the ProviderConfig
	// deleted; its shard cleans up (NEGs deleted from GCE) and removes the finalizer. No replica keeps a series of
	// it, its workqueues' included: not its last owner, nor those it moved away from.
	metricsClient := adminHTTPClient(t)
	defer metricsClient.CloseIdleConnections()
	gone := ws[0].tenant
	owner := live[slices.Index(names, placements(t, ws)[gone].Shard)]
	if series := tenantSeries(t, metricsClient, owner, gone); !slices.ContainsFunc(series, func(s string) bool { return strings.HasPrefix(s, "workqueue_") }) {
		t.Errorf("the owner of %s exports no workqueue series of it before its exit: %v", gone, series)
	}
	ws[0].teardown()
	if err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		for _, m := range live {
			if len(tenantSeries(t, metricsClient, m, gone)) > 0 {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		for _, m := range live {
			t.Errorf("replica %s still exports series of the deleted tenant %s: %v", m.name, gone, tenantSeries(t, metricsClient, m, gone))
		}
	}

	// The proof of no overlap, over everything above.
	calls.mu.Lock()
	defer calls.mu.Unlock()
	owners.mu.Lock()
	defer owners.mu.Unlock()
	checked := 0
	for _, w := range ws {
		runs := replicaRuns(calls.byProject[w.project])
		if len(runs) == 0 {
			t.Errorf("%s: no mutating GCE call recorded", w.tenant)
			continue
		}
		checked += len(runs)
		if i := firstOverlap(runs); i > 0 {
			prev, next := runs[i-1], runs[i]
			t.Errorf("%s: replica %s mutated project %s until %s, after replica %s had started at %s",
				w.tenant, prev.shard, w.project, prev.end.Format(time.StampMicro), next.shard, next.start.Format(time.StampMicro))
		}
		if seq := shardsOf(runs); !isSubsequence(seq, owners.history[w.tenant]) {
			t.Errorf("%s: replicas mutated project %s in the order %v, not one its owners %v allow", w.tenant, w.project, seq, owners.history[w.tenant])
		}
	}
	t.Logf("no overlap: %d runs of mutating GCE calls by one replica over %d projects, disjoint and in owner order", checked, len(ws))
}

// gceCall is one mutating call the fake GCE answered: when it was served and by which shard it was made.
type gceCall struct {
	shard      string
	start, end time.Time
}

// mutatingCalls records the fake GCE's mutating calls by project, from its OnCall hook.
type mutatingCalls struct {
	mu        sync.Mutex
	byProject map[string][]gceCall
}

// shardInUserAgent finds the shard in a replica's User-Agent, "multiproject-controller-manager/<version> (<shard>)"
// after what the Google client library puts first.
var shardInUserAgent = regexp.MustCompile(`multiproject-controller-manager/\S+ \(([^)]+)\)`)

func (c *mutatingCalls) record(r fakegce.CallRecord) {
	switch r.Method {
	case fakegce.MethodInsert, fakegce.MethodDelete, fakegce.MethodAttachEndpoints, fakegce.MethodDetachEndpoints:
	default:
		return
	}
	shard := "(no shard in " + r.UserAgent + ")"
	if m := shardInUserAgent.FindStringSubmatch(r.UserAgent); m != nil {
		shard = m[1]
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byProject[r.Project] = append(c.byProject[r.Project], gceCall{shard: shard, start: r.Time, end: r.Time.Add(r.Duration)})
}

// run is a maximal sequence of one replica's mutating calls on one project, in the order the calls started.
type run struct {
	shard      string
	start, end time.Time
}

// replicaRuns sorts a project's calls by start and groups consecutive calls of one replica; a run ends when its
// last call ended (a call may end after a later one of the same replica started).
func replicaRuns(calls []gceCall) []run {
	calls = slices.Clone(calls)
	sort.SliceStable(calls, func(i, j int) bool { return calls[i].start.Before(calls[j].start) })
	var runs []run
	for _, c := range calls {
		if n := len(runs); n > 0 && runs[n-1].shard == c.shard {
			if c.end.After(runs[n-1].end) {
				runs[n-1].end = c.end
			}
			continue
		}
		runs = append(runs, run{shard: c.shard, start: c.start, end: c.end})
	}
	return runs
}

// firstOverlap returns the index of the first run that started before the previous one ended, or -1.
func firstOverlap(runs []run) int {
	for i := 1; i < len(runs); i++ {
		if runs[i-1].end.After(runs[i].start) {
			return i
		}
	}
	return -1
}

func shardsOf(runs []run) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.shard
	}
	return out
}

// isSubsequence reports whether seq is what remains of of after dropping some of its elements.
func isSubsequence(seq, of []string) bool {
	i := 0
	for _, s := range of {
		if i < len(seq) && seq[i] == s {
			i++
		}
	}
	return i == len(seq)
}

// ownerHistory is, per tenant, every shard the sharder assigned it to, in order, as a watch saw the label.
type ownerHistory struct {
	mu      sync.Mutex
	history map[string][]string
}

// watchOwners watches the tenants' ProviderConfigs until the test ends and records each new shard label. An
// informer delivers every change of an object in order, so no assignment is missed.
func watchOwners(t *testing.T, mp mpclientset.Interface, tenants map[string]*workload) *ownerHistory {
	t.Helper()
	h := &ownerHistory{history: map[string][]string{}}
	last := map[string]string{}
	factory := mpinformers.NewSharedInformerFactory(mp, 0)
	informer := factory.Multiproject().V1alpha1().ProviderConfigs().Informer()
	see := func(obj any) {
		pc, ok := obj.(*mpv1alpha1.ProviderConfig)
		if !ok || tenants[pc.Name] == nil {
			return
		}
		shard := pc.Labels[sharding.ShardLabel]
		h.mu.Lock()
		defer h.mu.Unlock()
		if shard != "" && shard != last[pc.Name] {
			h.history[pc.Name] = append(h.history[pc.Name], shard)
		}
		last[pc.Name] = shard
	}
	watchAddsAndUpdates(t, factory, informer, "ProviderConfig", see)
	return h
}

// placements reads the shard labels of every ProviderConfig. Where the sharder puts a tenant (sharder.Plan:
// rendezvous hashing with bounded loads) depends on where the tenants were, so the tests read its decisions, or ask
// the Plan of what they read, instead of recomputing rendezvous hashing.
func placements(tb testing.TB, ws []*workload) map[string]sharder.Placement {
	tb.Helper()
	list, err := ws[0].mp.MultiprojectV1alpha1().ProviderConfigs().List(tb.Context(), metav1.ListOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	return placementsOf(list.Items)
}

func placementsOf(pcs []mpv1alpha1.ProviderConfig) map[string]sharder.Placement {
	out := make(map[string]sharder.Placement, len(pcs))
	for _, pc := range pcs {
		out[pc.Name] = sharder.Placement{Shard: pc.Labels[sharding.ShardLabel], Draining: pc.Labels[sharding.DrainLabel] == "true"}
	}
	return out
}

// tenantsOn returns the workloads labeled with shard and not draining from it: the tenants the sharder gave it.
func tenantsOn(tb testing.TB, ws []*workload, shard string) []*workload {
	tb.Helper()
	at := placements(tb, ws)
	var out []*workload
	for _, w := range ws {
		if p := at[w.tenant]; p.Shard == shard && !p.Draining {
			out = append(out, w)
		}
	}
	return out
}

func namesOf(managers []*manager, shardOf map[*manager]string) []string {
	out := make([]string, len(managers))
	for i, m := range managers {
		out[i] = shardOf[m]
	}
	return out
}

// logShares logs how many tenants each shard runs.
func logShares(t *testing.T, ws []*workload, shards []string) {
	t.Helper()
	var parts []string
	for _, s := range shards {
		parts = append(parts, fmt.Sprintf("%s: %d", s, len(tenantsOn(t, ws, s))))
	}
	t.Logf("tenants per shard: %s", strings.Join(parts, ", "))
}

// waitTenantsRun polls the ProviderConfigs every 50 ms until each of ws runs on the shard the sharder's Plan over
// shards gives it (labeled with it, not draining, status.shard written by it, Ready) and the labels are a fixed point
// of the Plan (nothing moves any more), and returns when it first saw that; it fails the test after timeout. Polling from the kill measures the move without the test's own work.
func waitTenantsRun(t testing.TB, ws []*workload, shards []string, timeout time.Duration) time.Time {
	t.Helper()
	pcs := ws[0].mp.MultiprojectV1alpha1().ProviderConfigs()
	var at time.Time
	why := "not looked yet"
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := pcs.List(ctx, metav1.ListOptions{})
		if err != nil {
			why = err.Error()
			return false, nil
		}
		byName := map[string]*mpv1alpha1.ProviderConfig{}
		for i := range list.Items {
			byName[list.Items[i].Name] = &list.Items[i]
		}
		plan := sharder.Plan(placementsOf(list.Items), shards)
		for _, w := range ws {
			pc, want := byName[w.tenant], plan[w.tenant]
			if pc == nil {
				return false, fmt.Errorf("ProviderConfig %s is gone", w.tenant)
			}
			ready := meta.FindStatusCondition(pc.Status.Conditions, mpv1alpha1.ProviderConfigConditionReady)
			if !sharding.Owns(want, pc.Labels) || pc.Status.Shard != want || ready == nil || ready.Status != metav1.ConditionTrue {
				why = fmt.Sprintf("%s: labels %v, status.shard %q; want it on %s", w.tenant, pc.Labels, pc.Status.Shard, want)
				return false, nil
			}
		}
		at = time.Now()
		return true, nil
	})
	if err != nil {
		t.Fatalf("tenants not running on %v: %v: %s", shards, err, why)
	}
	return at
}

// churn changes the endpoints of one tenant's Service after another until stopped.
type churn struct {
	stopCh chan struct{}
	done   chan struct{}
	n      int
}

// startChurn gives svc-1 of the workloads new endpoints, one tenant every 20 ms (or as fast as the API server
// takes them), round robin, until stop.
func startChurn(t *testing.T, ws []*workload) *churn {
	c := &churn{stopCh: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-c.stopCh:
				return
			case <-t.Context().Done():
				return
			case <-tick.C:
			}
			w := ws[c.n%len(ws)]
			c.n++
			// Generations 2 to 21 (0 and 1 were used before the churn; the generation is an octet of the IPs), so
			// each change of a tenant gives it other endpoints than its last.
			w.setService("svc-1", w.endpoints(1, 2+(c.n/len(ws))%20, 1+c.n%2))
		}
	}()
	t.Cleanup(func() { c.stop() })
	return c
}

// stop ends the churn and returns the number of changes it made.
func (c *churn) stop() int {
	select {
	case <-c.stopCh:
	default:
		close(c.stopCh)
	}
	<-c.done
	return c.n
}

// cleanupShardLeases deletes the shard Leases of the managers' group now and when the test ends: replicas killed by
// the test's end leave theirs behind.
func cleanupShardLeases(t *testing.T) {
	t.Helper()
	deleteNowAndAtEnd(t, "the shard Leases", func(ctx context.Context) error {
		return controlPlane.AdminClient().CoordinationV1().Leases(leaseNamespace).DeleteCollection(ctx, metav1.DeleteOptions{},
			metav1.ListOptions{LabelSelector: sharding.ShardGroupLabel + "=" + shardGroup})
	})
}

// TestOverlapCheckFindsInterleavedReplicas pins the proof's logic on made-up calls: two replicas whose calls on one
// project interleave, or overlap at a handover, or come in an order the owners never had, are caught.
func TestOverlapCheckFindsInterleavedReplicas(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(1000+int64(s), 0) }
	call := func(shard string, from, to int) gceCall { return gceCall{shard: shard, start: at(from), end: at(to)} }
	for _, tc := range []struct {
		name      string
		calls     []gceCall
		owners    []string
		wantClean bool
	}{
		{"a handover", []gceCall{call("b", 5, 6), call("a", 1, 2), call("a", 2, 3)}, []string{"a", "b"}, true},
		{"back to an earlier owner", []gceCall{call("a", 1, 2), call("b", 3, 4), call("a", 5, 6)}, []string{"a", "b", "a"}, true},
		{"interleaved", []gceCall{call("a", 1, 2), call("b", 3, 4), call("a", 5, 6)}, []string{"a", "b"}, false},
		{"overlapping at the handover", []gceCall{call("a", 1, 5), call("b", 4, 6)}, []string{"a", "b"}, false},
		{"a replica that never owned it", []gceCall{call("c", 1, 2)}, []string{"a"}, false},
	} {
		runs := replicaRuns(tc.calls)
		clean := firstOverlap(runs) < 0 && isSubsequence(shardsOf(runs), tc.owners)
		if clean != tc.wantClean {
			t.Errorf("%s: runs %v judged clean=%t, want %t", tc.name, shardsOf(runs), clean, tc.wantClean)
		}
	}
}

// informerFactory is what watchAddsAndUpdates needs of a generated shared informer factory.
type informerFactory interface {
	Start(stopCh <-chan struct{})
	Shutdown()
}

// watchAddsAndUpdates calls see with every object the informer adds or updates, from a factory started until the
// test ends, and returns once the informer's cache has synced.
func watchAddsAndUpdates(t *testing.T, factory informerFactory, informer cache.SharedIndexInformer, what string, see func(obj any)) {
	t.Helper()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    see,
		UpdateFunc: func(_, obj any) { see(obj) },
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	if !cache.WaitForCacheSync(t.Context().Done(), informer.HasSynced) {
		t.Fatalf("the %s informer did not sync", what)
	}
}
