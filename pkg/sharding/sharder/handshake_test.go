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

package sharder

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpfake "github.com/multiproject/client-go/clientset/versioned/fake"
	mplisters "github.com/multiproject/client-go/listers/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/sharding"
	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
)

func shardLease(shard string, renew time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: sharding.LeaseName("mp", shard), Labels: map[string]string{sharding.ShardGroupLabel: "mp"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(shard), LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime: &metav1.MicroTime{Time: renew}},
	}
}

// world is the API server and each actor's cache. Each actor reads only its own cache, which lags the API server
// until the actor refreshes it, and a refresh only moves it forward, as an informer does.
type world struct {
	t       *testing.T
	ctx     context.Context
	client  *mpfake.Clientset
	sharder *Sharder
	caches  map[string]cache.Indexer // "sharder" and each shard
	// informers hold each shard's cache, as the Drainer reads it; they never run: refresh fills their caches.
	informers map[string]cache.SharedIndexInformer
	shards    []string
	drain     map[string]*sharding.Drainer
	// running is which shards run which tenant: what the invariant is about.
	running map[string]map[string]bool
	rand    *rand.Rand
	leases  cache.Indexer
	// pending shards become live at a random step.
	pending []string
	// inStop lets a Stop interleave other steps while it runs, once (no nesting).
	inStop bool
	log    []string
}

func newWorld(t *testing.T, seed int64, tenants int, shards []string, live []string) *world {
	ctx := context.Background()
	clk := testingclock.NewFakeClock(t0)
	var objs []runtime.Object
	for i := range tenants {
		objs = append(objs, &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("tenant-%d", i),
			Labels: map[string]string{sharding.ShardLabel: shards[0]}}})
	}
	leaseIndexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	var leaseObjs []runtime.Object
	for _, s := range live {
		l := shardLease(s, t0)
		leaseObjs = append(leaseObjs, l)
		_ = leaseIndexer.Add(l)
	}
	w := &world{t: t, ctx: ctx, client: mpfake.NewClientset(objs...), caches: map[string]cache.Indexer{},
		informers: map[string]cache.SharedIndexInformer{},
		shards:    shards, drain: map[string]*sharding.Drainer{}, running: map[string]map[string]bool{}, rand: rand.New(rand.NewSource(seed)),
		leases: leaseIndexer}
	for _, s := range shards {
		if !slices.Contains(live, s) {
			w.pending = append(w.pending, s)
		}
	}
	for _, name := range append([]string{"sharder"}, shards...) {
		w.caches[name] = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
		if name != "sharder" {
			w.informers[name] = cache.NewSharedIndexInformer(&cache.ListWatch{}, &mpv1alpha1.ProviderConfig{}, 0, cache.Indexers{})
			w.caches[name] = w.informers[name].GetIndexer()
		}
		w.refresh(name)
	}
	w.sharder = &Sharder{
		cfg: Config{Group: "mp", Namespace: "kube-system", KubeClient: fake.NewClientset(leaseObjs...), Client: w.client,
			Recorder: record.NewFakeRecorder(1 << 20)},
		clock: clk, leases: coordinationlisters.NewLeaseLister(leaseIndexer), pcs: mplisters.NewProviderConfigLister(w.caches["sharder"]),
		queue:  worker.New(worker.Config{Controller: "sharder", Retry: &worker.Retry{Clock: clk}}),
		gauged: map[string]bool{}, dead: map[string]bool{}, waiting: map[string]string{},
	}
	t.Cleanup(func() { w.sharder.queue.Close(ctx) })
	for _, shard := range shards {
		w.running[shard] = map[string]bool{}
		w.drain[shard] = w.drainer(shard, w.stopper(shard), clk)
	}
	// Every tenant starts where it is assigned.
	for _, shard := range shards {
		w.startOwned(shard)
	}
	return w
}

// drainer is shard's Drainer, reading the shard's cache, stopping its tenants with stop.
func (w *world) drainer(shard string, stop func(context.Context, string) error, clk clock.WithDelayedExecution) *sharding.Drainer {
	return sharding.NewDrainer(sharding.DrainerConfig{Shard: shard, Client: w.client, ProviderConfigs: w.informers[shard],
		Stop: stop, Clock: clk})
}

func (w *world) tenants() []string {
	pcs, err := w.client.MultiprojectV1alpha1().ProviderConfigs().List(w.ctx, metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	var names []string
	for _, pc := range pcs.Items {
		names = append(names, pc.Name)
	}
	return names
}

func (w *world) refresh(actor string) {
	pcs, err := w.client.MultiprojectV1alpha1().ProviderConfigs().List(w.ctx, metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	items := make([]any, 0, len(pcs.Items))
	for i := range pcs.Items {
		items = append(items, &pcs.Items[i])
	}
	if err := w.caches[actor].Replace(items, ""); err != nil {
		w.t.Fatal(err)
	}
}

// stopper is the Manager's Stop as the Drainer sees it: it stops the tenant, and while it runs other actors act.
func (w *world) stopper(shard string) func(context.Context, string) error {
	return func(_ context.Context, tenant string) error {
		w.running[shard][tenant] = false
		w.check("stop " + shard + "/" + tenant)
		if !w.inStop {
			w.inStop = true
			for range w.rand.Intn(6) {
				w.step()
			}
			w.inStop = false
		}
		return nil
	}
}

// startOwned is the replica's tenant lifecycle: from its own cache, it runs what it owns and stops what it does not.
func (w *world) startOwned(shard string) {
	for _, obj := range w.caches[shard].List() {
		pc := obj.(*mpv1alpha1.ProviderConfig)
		w.running[shard][pc.Name] = sharding.Owns(shard, pc.Labels)
	}
}

func (w *world) step() {
	names := w.tenants()
	tenant := names[w.rand.Intn(len(names))]
	shard := w.shards[w.rand.Intn(len(w.shards))]
	var what string
	switch w.rand.Intn(6) {
	case 5:
		if len(w.pending) == 0 || w.rand.Intn(4) != 0 {
			return
		}
		what = "shard live " + w.pending[0]
		_ = w.leases.Add(shardLease(w.pending[0], t0))
		w.pending = w.pending[1:]
	case 0:
		actor := append([]string{"sharder"}, w.shards...)[w.rand.Intn(len(w.shards)+1)]
		what = "refresh " + actor
		w.refresh(actor)
	case 1:
		what = "sharder " + tenant
		_ = w.sharder.sync(w.ctx, tenant)
	case 2:
		what = "drainer " + shard + "/" + tenant
		if !w.inStop {
			_ = w.drain[shard].Sync(w.ctx, tenant)
		}
	default:
		what = "lifecycle " + shard
		w.startOwned(shard)
	}
	w.check(what)
}

// check is the invariant: no tenant runs on two shards.
func (w *world) check(after string) {
	w.log = append(w.log, after)
	onShards := map[string][]string{}
	for _, shard := range w.shards {
		for tenant, running := range w.running[shard] {
			if running {
				onShards[tenant] = append(onShards[tenant], shard)
			}
		}
	}
	for tenant, on := range onShards {
		if len(on) > 1 {
			tail := w.log[max(0, len(w.log)-20):]
			w.t.Fatalf("%s runs on %v after %q; last steps:\n%v", tenant, on, after, tail)
		}
	}
}

// settle lets every actor catch up and act until nothing changes.
func (w *world) settle() {
	for _, s := range w.pending {
		_ = w.leases.Add(shardLease(s, t0))
	}
	w.pending = nil
	// The clock stands still, so a round that changes nothing (the API server's objects, what runs where, the
	// sharder's memory) is a fixed point: every later round would do the same nothing.
	for round := 0; ; round++ {
		before := w.state()
		if round == 10 {
			w.t.Fatalf("not settled after %d rounds; last steps:\n%v", round, w.log[max(0, len(w.log)-20):])
		}
		for _, tenant := range w.tenants() {
			w.refresh("sharder")
			_ = w.sharder.sync(w.ctx, tenant)
			w.check("settle sharder " + tenant)
			for _, shard := range w.shards {
				w.refresh(shard)
				_ = w.drain[shard].Sync(w.ctx, tenant)
				w.startOwned(shard)
				w.check("settle " + shard)
			}
		}
		if w.state() == before {
			return
		}
	}
}

// state prints what an actor's next step can depend on: the tenants' objects, what runs where and the sharder's
// memory (fmt prints maps in key order).
func (w *world) state() string {
	pcs, err := w.client.MultiprojectV1alpha1().ProviderConfigs().List(w.ctx, metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	var b strings.Builder
	for _, pc := range pcs.Items {
		fmt.Fprintf(&b, "%s %v %v %+v\n", pc.Name, pc.Labels, pc.Annotations, pc.Status)
	}
	fmt.Fprintf(&b, "%v %v %v", w.running, w.sharder.waiting, w.sharder.dead)
	return b.String()
}

// TestHandshakeNeverRunsATenantOnTwoShards starts with every tenant on shard-a, two live shards, and a third that
// becomes live at a random step, and lets the sharder, the drainers and the replicas' lifecycles act in random
// orders on caches that lag independently, including steps taken while a Stop is in progress. No tenant may ever run on two shards, and all must end where the sharder's plan puts them
// (a fixed point of Plan), running exactly there.
func TestHandshakeNeverRunsATenantOnTwoShards(t *testing.T) {
	shards := []string{"shard-a", "shard-b", "shard-c"}
	for seed := int64(0); seed < 100; seed++ {
		w := newWorld(t, seed, 3, shards, shards[:2])
		for range 150 {
			w.step()
		}
		w.settle()
		// Where a tenant belongs depends on where it was (bounded loads keep it there within capacity): the settled
		// labels must be the sharder's plan, and a fixed point of Plan, so that nothing moves any more.
		settled := map[string]Placement{}
		for _, tenant := range w.tenants() {
			pc, err := w.client.MultiprojectV1alpha1().ProviderConfigs().Get(w.ctx, tenant, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			settled[tenant] = placementOf(pc.Labels)
		}
		again := Plan(settled, shards)
		for _, tenant := range w.tenants() {
			pc, err := w.client.MultiprojectV1alpha1().ProviderConfigs().Get(w.ctx, tenant, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want := w.sharder.planner.plan[tenant]
			if again[tenant] != want {
				t.Fatalf("seed %d: %s settled on %s, but Plan of the settled labels moves it to %s", seed, tenant, want, again[tenant])
			}
			if pc.Labels[sharding.ShardLabel] != want || pc.Labels[sharding.DrainLabel] != "" {
				t.Fatalf("seed %d: %s settled with labels %v, want shard %s", seed, tenant, pc.Labels, want)
			}
			for _, shard := range shards {
				if w.running[shard][tenant] != (shard == want) {
					t.Fatalf("seed %d: %s running on %s: %v", seed, tenant, shard, w.running[shard][tenant])
				}
			}
		}
	}
}

// TestSharderWaitsWhileADrainIsInProgress pins the interleaving by hand: the sharder re-evaluates while the old
// shard stops the tenant, once on a fresh cache and once on a cache from before the drain; neither assigns it.
func TestSharderWaitsWhileADrainIsInProgress(t *testing.T) {
	shards := []string{"shard-a", "shard-b"}
	var tenant string
	for _, k := range keys(50) {
		if Rendezvous(k, shards) == "shard-b" {
			tenant = k
			break
		}
	}
	w := newWorld(t, 0, 50, shards, shards)
	stale := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, o := range w.caches["sharder"].List() {
		_ = stale.Add(o)
	}
	if err := w.sharder.sync(w.ctx, tenant); err != nil {
		t.Fatal(err)
	}
	w.refresh("shard-a")
	w.drain["shard-a"] = w.drainer("shard-a", func(context.Context, string) error {
		w.running["shard-a"][tenant] = false
		for _, c := range []cache.Indexer{w.caches["sharder"], stale} {
			w.refresh("sharder")
			w.sharder.pcs = mplisters.NewProviderConfigLister(c)
			_ = w.sharder.sync(w.ctx, tenant)
		}
		pc, _ := w.client.MultiprojectV1alpha1().ProviderConfigs().Get(w.ctx, tenant, metav1.GetOptions{})
		if pc.Labels[sharding.ShardLabel] != "shard-a" || pc.Labels[sharding.DrainLabel] != "true" {
			t.Errorf("while shard-a stops the tenant, the sharder wrote %v", pc.Labels)
		}
		return nil
	}, testingclock.NewFakeClock(t0))
	if err := w.drain["shard-a"].Sync(w.ctx, tenant); err != nil {
		t.Fatal(err)
	}
	w.sharder.pcs = mplisters.NewProviderConfigLister(w.caches["sharder"])
	w.refresh("sharder")
	if err := w.sharder.sync(w.ctx, tenant); err != nil {
		t.Fatal(err)
	}
	pc, _ := w.client.MultiprojectV1alpha1().ProviderConfigs().Get(w.ctx, tenant, metav1.GetOptions{})
	if pc.Labels[sharding.ShardLabel] != "shard-b" {
		t.Errorf("after the acknowledgement: %v, want shard-b", pc.Labels)
	}
}

// TestStaleSharderCacheCannotReassignARunningTenant pins the race the compare-and-swap patches exist for: the
// sharder assigns a tenant, a shard becomes live, and the sharder decides again on a cache that has not yet seen
// its own assignment. The second assignment must fail instead of moving a running tenant without a drain.
func TestStaleSharderCacheCannotReassignARunningTenant(t *testing.T) {
	shards := []string{"shard-a", "shard-b", "shard-c"}
	var tenant string
	for _, k := range keys(100) {
		if Rendezvous(k, shards[:2]) == "shard-b" && Rendezvous(k, shards) == "shard-c" {
			tenant = k
			break
		}
	}
	w := newWorld(t, 0, 100, shards, shards[:2])
	// The tenant is unassigned (shard-a acknowledged a drain), and every cache has seen that.
	if _, err := w.client.MultiprojectV1alpha1().ProviderConfigs().Patch(w.ctx, tenant, "application/json-patch+json",
		[]byte(`[{"op":"remove","path":"/metadata/labels"}]`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	w.running["shard-a"][tenant] = false
	for _, c := range append([]string{"sharder"}, shards...) {
		w.refresh(c)
	}
	if err := w.sharder.sync(w.ctx, tenant); err != nil {
		t.Fatal(err)
	}
	w.refresh("shard-b")
	w.startOwned("shard-b")
	_ = w.leases.Add(shardLease("shard-c", t0))
	_ = w.sharder.sync(w.ctx, tenant) // the sharder's cache still says unassigned
	w.refresh("shard-c")
	w.startOwned("shard-c")
	w.check("stale sharder")
	pc, _ := w.client.MultiprojectV1alpha1().ProviderConfigs().Get(w.ctx, tenant, metav1.GetOptions{})
	if pc.Labels[sharding.ShardLabel] != "shard-b" {
		t.Errorf("labels %v, want still shard-b (the stale assignment must fail)", pc.Labels)
	}
}

// TestSharderReassignsADeadShardsTenantAtOnceOnlyWhenTheAPIServerAgrees: the sharder's Lease cache says shard-a
// expired. When a fresh read of the Lease agrees, the tenant moves without a drain (Event ShardReassigned, a
// shard_dead move); when the fresh read shows a renewal the cache missed, nothing moves.
func TestSharderReassignsADeadShardsTenantAtOnceOnlyWhenTheAPIServerAgrees(t *testing.T) {
	for _, apiAgrees := range []bool{true, false} {
		t.Run(fmt.Sprintf("api server agrees=%v", apiAgrees), func(t *testing.T) {
			w := newWorld(t, 0, 1, []string{"shard-a", "shard-b"}, []string{"shard-b"})
			w.sharder.clock.(*testingclock.FakeClock).SetTime(t0.Add(10 * time.Second))
			expired := shardLease("shard-a", t0.Add(-10*time.Second))
			_ = w.leases.Add(expired)
			apiLease := expired
			if !apiAgrees {
				apiLease = shardLease("shard-a", t0.Add(9*time.Second))
			}
			w.sharder.cfg.KubeClient = fake.NewClientset(apiLease)
			recorder := record.NewFakeRecorder(10)
			w.sharder.cfg.Recorder = recorder
			before := testutilCounter(t, ReasonShardDead)
			if err := w.sharder.sync(w.ctx, "tenant-0"); err != nil {
				t.Fatal(err)
			}
			pc, _ := w.client.MultiprojectV1alpha1().ProviderConfigs().Get(w.ctx, "tenant-0", metav1.GetOptions{})
			moved := testutilCounter(t, ReasonShardDead) - before
			if !apiAgrees {
				if pc.Labels[sharding.ShardLabel] != "shard-a" || moved != 0 || len(recorder.Events) != 0 {
					t.Errorf("a shard the API server shows live lost its tenant: labels %v, moves %v", pc.Labels, moved)
				}
				return
			}
			if pc.Labels[sharding.ShardLabel] != "shard-b" || pc.Labels[sharding.DrainLabel] != "" || moved != 1 {
				t.Errorf("labels %v, moves %v: want shard-b at once, one shard_dead move", pc.Labels, moved)
			}
			if e := <-recorder.Events; e != "Normal ShardReassigned Shard shard-a is dead (its Lease expired or was released); reassigned to shard shard-b" {
				t.Errorf("event %q", e)
			}
		})
	}
}

func testutilCounter(t *testing.T, reason string) float64 {
	t.Helper()
	Register()
	v, err := testutil.GetCounterMetricValue(ShardMoves.WithLabelValues(reason))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestSharderBalancesWithBoundedLoads: 90 tenants all on shard-a of three live shards, above its Capacity (32).
// Plain rendezvous hashing would leave 34/28/28; the sharder keeps the even share (30) on shard-a, drains only the
// rest, and every shard ends with 30.
func TestSharderBalancesWithBoundedLoads(t *testing.T) {
	shards := []string{"shard-a", "shard-b", "shard-c"}
	w := newWorld(t, 0, 90, shards, shards)
	w.settle()
	counts := map[string]int{}
	for _, tenant := range w.tenants() {
		pc, err := w.client.MultiprojectV1alpha1().ProviderConfigs().Get(w.ctx, tenant, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pc.Labels[sharding.DrainLabel] != "" || !w.running[pc.Labels[sharding.ShardLabel]][tenant] {
			t.Fatalf("%s not settled: labels %v", tenant, pc.Labels)
		}
		counts[pc.Labels[sharding.ShardLabel]]++
	}
	if counts["shard-a"] != 30 || counts["shard-b"] != 30 || counts["shard-c"] != 30 {
		t.Errorf("tenants per shard %v; want 30 on each", counts)
	}
}
