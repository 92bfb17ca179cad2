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
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
	"github.com/multiproject/multiproject-controller-manager/pkg/sharding"
	"github.com/multiproject/multiproject-controller-manager/pkg/sharding/sharder"
)

// TestMovingBetweenUnshardedAndSharded runs the move that docs/sharding.md describes, with the built binary, both
// ways, as a Deployment's rollout does it (the new Pods start before the old ones stop, so both kinds run at once
// and share the leader Lease), under continuous endpoint churn:
//
//   - unsharded → sharded: two unsharded replicas (the base) run every tenant; three sharded replicas join; the
//     unsharded ones stop (SIGTERM), the elected one last; the tenants end on their shards;
//   - a shard label removed by hand (a JSON patch, as `kubectl label ... multiproject.io/shard-` does) while its
//     tenant is being drained to a fourth shard that joins: the tenant ends on its shard all the same;
//   - sharded → unsharded: two unsharded replicas join; the shards stop one at a time, the one that leads (the
//     sharder) first, until an unsharded replica leads while shards still run their tenants: it runs the stopped
//     shards' tenants and leaves the others' alone until their shards stop; it ends running every tenant, and the
//     fake GCE and the API hold exactly what the workloads want.
//
// The fake GCE records which replica made every mutating call (its User-Agent names the shard, or the process
// unsharded), and per project no two replicas' calls overlap in time, and no replica comes back to a project after
// another one wrote it: every tenant has one writer at a time, in the one order its owners had.
func TestMovingBetweenUnshardedAndSharded(t *testing.T) {
	// 7, not 6: with bounded loads a fourth shard takes tenants only from a shard above the capacity ⌈7·1.05/4⌉ = 2,
	// and 7 tenants on three shards put 3 on one, so at least one tenant moves (6 would stay 2/2/2).
	const tenants = 7
	resetLease(t)
	cleanupShardLeases(t)
	installShardedRBAC(t)
	calls := &mutatingCalls{byProject: map[string][]gceCall{}}
	// Operations that take a while, as GCE's do: a shard's stop waits for the pushes under way, which keeps a drain
	// open long enough for the label to be removed in the middle of it.
	gce := fakegce.New(fakegce.Options{OnCall: calls.record, OperationDelay: 200 * time.Millisecond})
	gce.Start()
	t.Cleanup(gce.Close)
	ws := make([]*workload, tenants)
	for i := range ws {
		ws[i] = newWorkload(t, gce)
		ws[i].setService("svc-0", ws[i].endpoints(0, 0, 1))
		ws[i].setService("svc-1", ws[i].endpoints(1, 0, 1))
	}
	kubeconfig := managerKubeconfig(t)
	le := leaderElection{leaseDuration: 6 * time.Second, renewDeadline: 4 * time.Second, retryPeriod: time.Second}
	sharded := func(name string) *manager {
		return startManager(t, name, kubeconfig, gce.Endpoint(), le, "--sharding=true")
	}
	// stop sends SIGTERM and waits for a clean exit, as the kubelet does with an old Pod.
	stop := func(m *manager) {
		t.Helper()
		m.signal(syscall.SIGTERM)
		if err := m.waitExit(2 * time.Minute); err != nil {
			t.Fatalf("replica %s exited with %v after SIGTERM, want 0", m.name, err)
		}
	}
	// leaderFirst orders managers with the one that holds the leader Lease first.
	leaderFirst := func(ms []*manager) []*manager {
		t.Helper()
		holder, err := leaseHolder(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		out := slices.Clone(ms)
		slices.SortStableFunc(out, func(a, b *manager) int {
			switch {
			case a.identity() == holder:
				return -1
			case b.identity() == holder:
				return 1
			}
			return 0
		})
		return out
	}

	// The base: two unsharded replicas, one elected.
	u1 := startManager(t, "unsharded-a", kubeconfig, gce.Endpoint(), le)
	u2 := startManager(t, "unsharded-b", kubeconfig, gce.Endpoint(), le)
	waitRunningOn(t, ws, nil)
	for _, w := range ws {
		w.waitConverged("unsharded start of " + w.tenant)
	}
	churn := startChurn(t, ws)

	// Unsharded → sharded: the new Pods start, then the old ones stop, the standby first.
	shards := []*manager{sharded("shard-a"), sharded("shard-b"), sharded("shard-c")}
	names := shardNames(t, shards)
	for _, m := range slices.Backward(leaderFirst([]*manager{u1, u2})) {
		stop(m)
	}
	waitShardsRun(t, ws, names)
	t.Logf("unsharded → sharded: every tenant on its shard of %v", names)

	// A fourth shard joins; its tenants are drained to it, and a drained one loses its label by hand meanwhile. The
	// sharder's Plan of the settled labels over the four shards says which tenants move.
	settled := placements(t, ws)
	joining := sharded("shard-d")
	joined := shardNames(t, []*manager{joining})[0]
	all := append(slices.Clone(names), joined)
	predicted := sharder.Plan(settled, all)
	var moving *workload
	for _, w := range ws {
		if predicted[w.tenant] == joined {
			moving = w
			break
		}
	}
	if moving == nil {
		t.Fatalf("no tenant moves to %s: the plan of %v over %v leaves every tenant where it is", joined, settled, all)
	}
	if err := wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pc, err := moving.mp.MultiprojectV1alpha1().ProviderConfigs().Get(ctx, moving.tenant, metav1.GetOptions{})
		return err == nil && (pc.Labels[sharding.DrainLabel] == "true" || pc.Labels[sharding.ShardLabel] == joined), nil
	}); err != nil {
		t.Fatalf("%s was not drained towards %s: %v", moving.tenant, joined, err)
	}
	from := stripShardLabel(t, moving)
	shards = append(shards, joining)
	names = all
	waitShardsRun(t, ws, names)
	when := "during its drain"
	if from == joined {
		when = "after its move"
	}
	t.Logf("shard label %s of %s removed %s to %s: every tenant on its shard of %v", from, moving.tenant, when, joined, names)

	// Sharded → unsharded: the new Pods start, then the shards stop one at a time, the sharder (the leader) first,
	// until an unsharded replica leads while shards still run their tenants. The unsharded replicas retry the
	// leader Lease more often than the shards, so that one of them, not a shard, most likely takes it.
	fast := le
	fast.retryPeriod = 250 * time.Millisecond
	newUnsharded := []*manager{
		startManager(t, "unsharded-c", kubeconfig, gce.Endpoint(), fast),
		startManager(t, "unsharded-d", kubeconfig, gce.Endpoint(), fast),
	}
	shardOf := map[*manager]string{}
	for i, m := range shards {
		shardOf[m] = names[i]
	}
	remaining, ledBeside := slices.Clone(shards), 0
	for len(remaining) > 0 {
		next := leaderFirst(remaining)[0]
		stop(next)
		remaining = slices.DeleteFunc(remaining, func(m *manager) bool { return m == next })
		leader := waitLeaderAmong(t, append(slices.Clone(remaining), newUnsharded...)...)
		if !slices.Contains(newUnsharded, leader) || len(remaining) == 0 {
			continue
		}
		// An unsharded replica leads while shards run, under churn: it takes the tenants of the shards that have
		// stopped, and leaves the others' alone.
		ledBeside = max(ledBeside, len(remaining))
		running := make([]string, len(remaining))
		for i, m := range remaining {
			running[i] = shardOf[m]
		}
		onShards := waitRunningOn(t, ws, running)
		t.Logf("unsharded replica %s leads beside the running shards %v; it runs %d tenants, they run %d",
			leader.name, running, len(ws)-onShards, onShards)
	}
	if ledBeside == 0 {
		t.Errorf("no unsharded replica led while shards ran: the move back was not exercised")
	}
	waitRunningOn(t, ws, nil)
	changes := churn.stop()
	for _, w := range ws {
		w.waitConverged("sharded → unsharded: " + w.tenant)
	}
	t.Logf("sharded → unsharded: every tenant runs unsharded; %d endpoint changes during the moves", changes)

	calls.mu.Lock()
	defer calls.mu.Unlock()
	for _, w := range ws {
		runs := replicaRuns(calls.byProject[w.project])
		if i := firstOverlap(runs); i > 0 {
			t.Errorf("%s: replica %s mutated project %s until %s, after replica %s had started at %s",
				w.tenant, runs[i-1].shard, w.project, runs[i-1].end.Format(time.StampMicro), runs[i].shard, runs[i].start.Format(time.StampMicro))
		}
		if who, again := returning(runs); again {
			t.Errorf("%s: replica %s mutated project %s again after another replica had: runs %v", w.tenant, who, w.project, shardsOf(runs))
		}
		t.Logf("%s: writers in order %v", w.tenant, shardsOf(runs))
	}
}

// returning reports a replica that has two runs of calls on one project, i.e. that wrote it again after another
// replica had: in TestMovingBetweenUnshardedAndSharded no tenant ever goes back to a replica it left.
func returning(runs []run) (string, bool) {
	seen := map[string]bool{}
	for _, r := range runs {
		if seen[r.shard] {
			return r.shard, true
		}
		seen[r.shard] = true
	}
	return "", false
}

// stripShardLabel removes the tenant's shard label with a JSON patch, as `kubectl label providerconfig <name>
// multiproject.io/shard-` does, as soon as it has one (a tenant between the acknowledgement of its drain and its
// new assignment has none), and returns the shard it named.
func stripShardLabel(t *testing.T, w *workload) string {
	t.Helper()
	pcs := w.mp.MultiprojectV1alpha1().ProviderConfigs()
	var stripped string
	err := wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pc, err := pcs.Get(ctx, w.tenant, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		shard := pc.Labels[sharding.ShardLabel]
		if shard == "" {
			return false, nil
		}
		patch := fmt.Sprintf(`[{"op":"test","path":"/metadata/labels/multiproject.io~1shard","value":%q},`+
			`{"op":"remove","path":"/metadata/labels/multiproject.io~1shard"}]`, shard)
		if _, err := pcs.Patch(ctx, w.tenant, types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			// The label changed since the read: look again.
			return false, nil
		}
		stripped = shard
		return true, nil
	})
	if err != nil {
		t.Fatalf("removing the shard label of %s: %v", w.tenant, err)
	}
	return stripped
}

// waitRunningOn waits until every tenant is Ready and runs either on one of shards (labeled with it, not draining,
// and named by status.shard) or unsharded (an empty status.shard: an unsharded replica writes no shard there, and a
// shard that stops on SIGTERM leaves its name), and returns how many run on shards.
func waitRunningOn(t *testing.T, ws []*workload, shards []string) int {
	t.Helper()
	pcs := ws[0].mp.MultiprojectV1alpha1().ProviderConfigs()
	why, onShards := "not looked yet", 0
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, convergeTimeout, true, func(ctx context.Context) (bool, error) {
		list, err := pcs.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		byName := map[string]*mpv1alpha1.ProviderConfig{}
		for i := range list.Items {
			byName[list.Items[i].Name] = &list.Items[i]
		}
		onShards = 0
		for _, w := range ws {
			pc := byName[w.tenant]
			if pc == nil {
				return false, fmt.Errorf("ProviderConfig %s is gone", w.tenant)
			}
			ready := meta.FindStatusCondition(pc.Status.Conditions, mpv1alpha1.ProviderConfigConditionReady)
			onShard := pc.Status.Shard != "" && slices.Contains(shards, pc.Status.Shard) && sharding.Owns(pc.Status.Shard, pc.Labels)
			if (!onShard && pc.Status.Shard != "") || ready == nil || ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != pc.Generation {
				why = fmt.Sprintf("%s: labels %v, status.shard %q, Ready %+v; want it on one of %v or unsharded", w.tenant, pc.Labels, pc.Status.Shard, ready, shards)
				return false, nil
			}
			if onShard {
				onShards++
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("tenants not running: %v: %s", err, why)
	}
	return onShards
}

// waitLeaderAmong waits until one of ms holds the leader Lease, and returns it.
func waitLeaderAmong(t *testing.T, ms ...*manager) *manager {
	t.Helper()
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.identity()
	}
	var leader *manager
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		holder, err := leaseHolder(ctx)
		if i := slices.Index(ids, holder); err == nil && i >= 0 {
			leader = ms[i]
			return true, nil
		}
		return false, nil
	}); err != nil {
		t.Fatalf("none of %d replicas took the leader Lease: %v", len(ms), err)
	}
	return leader
}
