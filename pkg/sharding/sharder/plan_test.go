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
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	"github.com/multiproject/multiproject-controller-manager/pkg/sharding"
)

// randomNames returns n distinct random tenant names (a fixed seed: the same names every run).
func randomNames(n int, seed uint64) []string {
	r := rand.New(rand.NewPCG(seed, seed))
	seen := map[string]bool{}
	for len(seen) < n {
		seen[fmt.Sprintf("t-%08x", r.Uint32())] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

func unplaced(names []string) map[string]Placement {
	out := make(map[string]Placement, len(names))
	for _, n := range names {
		out[n] = Placement{}
	}
	return out
}

func placed(plan map[string]string) map[string]Placement {
	out := make(map[string]Placement, len(plan))
	for n, s := range plan {
		out[n] = Placement{Shard: s}
	}
	return out
}

func loads(plan map[string]string) map[string]int {
	out := map[string]int{}
	for _, s := range plan {
		out[s]++
	}
	return out
}

func TestCapacity(t *testing.T) {
	for _, c := range []struct{ n, shards, want int }{
		{300, 3, 105}, {1000, 3, 350}, {290, 3, 102}, {300, 4, 79}, {1, 3, 1}, {0, 3, 0}, {5, 0, 0},
	} {
		if got := Capacity(c.n, c.shards); got != c.want {
			t.Errorf("Capacity(%d, %d) = %d, want %d", c.n, c.shards, got, c.want)
		}
	}
}

// TestPlanSpreadsEvenlyFromAFreshStart: with 300 and 1,000 random names over three shards no shard gets more than
// the even share ⌈N/S⌉ (so never more than Capacity), where plain rendezvous hashing is off by several percent.
func TestPlanSpreadsEvenlyFromAFreshStart(t *testing.T) {
	live := []string{"shard-a", "shard-b", "shard-c"}
	for _, n := range []int{300, 1000} {
		for seed := range uint64(5) {
			names := randomNames(n, seed)
			plan := Plan(unplaced(names), live)
			got := loads(plan)
			even := ceilDiv(n, len(live))
			plain := map[string]int{}
			for _, name := range names {
				plain[Rendezvous(name, live)]++
			}
			for _, s := range live {
				if got[s] > even || got[s] < n-(len(live)-1)*even {
					t.Errorf("%d names, seed %d: %s holds %d, want %d (plain rendezvous: %v)", n, seed, s, got[s], even, plain)
				}
			}
			if len(plan) != n || got[""] != 0 {
				t.Errorf("%d names, seed %d: %d planned, %d on no shard", n, seed, len(plan), got[""])
			}
			if again := Plan(placed(plan), live); !maps.Equal(again, plan) {
				t.Errorf("%d names, seed %d: the plan is not a fixed point: applied and planned again, it moves tenants", n, seed)
			}
		}
	}
}

// moves counts the tenants whose shard differs between two plans and the shards they moved to.
func moves(before, after map[string]string) (int, map[string]int) {
	to := map[string]int{}
	n := 0
	for name, s := range after {
		if before[name] != s {
			n++
			to[s]++
		}
	}
	return n, to
}

// TestPlanAddingAShardMovesOnlyToItAndNoMoreThanItsShare: the old shards, above the new capacity, keep the even
// share; the rest goes to the new shard only: at most ⌈N/4⌉ tenants move, what plain rendezvous hashing moves on
// average, and every shard ends at the even share or below.
func TestPlanAddingAShardMovesOnlyToItAndNoMoreThanItsShare(t *testing.T) {
	three := []string{"shard-a", "shard-b", "shard-c"}
	four := append(slices.Clone(three), "shard-d")
	for _, n := range []int{300, 1000} {
		names := randomNames(n, 7)
		before := Plan(unplaced(names), three)
		after := Plan(placed(before), four)
		moved, to := moves(before, after)
		plainMoved := 0
		for _, name := range names {
			if Rendezvous(name, three) != Rendezvous(name, four) {
				plainMoved++
			}
		}
		even := ceilDiv(n, len(four))
		if moved != to["shard-d"] || moved > even {
			t.Errorf("%d names: %d moved, to %v; want only to shard-d and at most %d", n, moved, to, even)
		}
		for s, l := range loads(after) {
			if l > even {
				t.Errorf("%d names: %s holds %d, above the even share %d", n, s, l, even)
			}
		}
		t.Logf("%d names, a fourth shard: %d moved (plain rendezvous: %d); loads %v", n, moved, plainMoved, loads(after))
	}
}

// TestPlanRemovingAShardMovesOnlyItsTenants: the others stay (the capacity only grows), the removed shard's tenants
// are spread over the rest within capacity.
func TestPlanRemovingAShardMovesOnlyItsTenants(t *testing.T) {
	four := []string{"shard-a", "shard-b", "shard-c", "shard-d"}
	for _, n := range []int{300, 1000} {
		before := Plan(unplaced(randomNames(n, 11)), four)
		after := Plan(placed(before), four[:3])
		for name, s := range after {
			if before[name] != "shard-d" && before[name] != s {
				t.Errorf("%d names: %s moved from %s to %s, though only shard-d went", n, name, before[name], s)
			}
		}
		for s, l := range loads(after) {
			if l > Capacity(n, 3) || s == "shard-d" {
				t.Errorf("%d names: %s holds %d (capacity %d)", n, s, l, Capacity(n, 3))
			}
		}
	}
}

// TestPlanDeletionsWithinTheSlackMoveNothing: ε is hysteresis; losing a few tenants moves none of the others.
func TestPlanDeletionsWithinTheSlackMoveNothing(t *testing.T) {
	live := []string{"shard-a", "shard-b", "shard-c"}
	names := randomNames(300, 3)
	plan := Plan(unplaced(names), live)
	for _, gone := range names[:10] {
		delete(plan, gone)
	}
	if after := Plan(placed(plan), live); !maps.Equal(after, plan) {
		n, to := moves(plan, after)
		t.Errorf("after 10 deletions %d tenants moved, to %v", n, to)
	}
}

// TestPlanTable pins the rule case by case.
func TestPlanTable(t *testing.T) {
	live := []string{"shard-a", "shard-b", "shard-c"}
	names := keys(6)
	// Every tenant on shard-a, above the capacity ⌈6·1.05/3⌉ = 3: the even share, the two that rank shard-a highest,
	// stay.
	crowded := map[string]Placement{}
	for _, n := range names {
		crowded[n] = Placement{Shard: "shard-a"}
	}
	plan := Plan(crowded, live)
	stay := slices.Clone(names)
	slices.SortFunc(stay, func(a, b string) int { return byWeight("shard-a", a, b) })
	for i, n := range stay {
		if (plan[n] == "shard-a") != (i < 2) {
			t.Errorf("crowded: %s (rank %d for shard-a) planned on %s", n, i, plan[n])
		}
	}
	if l := loads(plan); l["shard-b"] != 2 || l["shard-c"] != 2 {
		t.Errorf("crowded: loads %v, want the four others on shard-b and shard-c, the even share 2 each", l)
	}
	// A tenant on a dead shard, on no shard, or draining is placed again; a draining one never on the shard it leaves.
	for _, n := range names {
		p := map[string]Placement{n: {Shard: "shard-a", Draining: true}}
		if got := Plan(p, live)[n]; got == "shard-a" {
			t.Errorf("%s draining from shard-a planned back on it", n)
		}
		if got := Plan(map[string]Placement{n: {Shard: "dead"}}, live)[n]; got != Rendezvous(n, live) {
			t.Errorf("%s of a dead shard: planned on %s, want its rendezvous shard %s", n, got, Rendezvous(n, live))
		}
		if got := Plan(map[string]Placement{n: {Shard: "shard-c"}}, live)[n]; got != "shard-c" {
			t.Errorf("%s on a live shard with room moved to %s", n, got)
		}
	}
	if got := Plan(crowded, nil); len(got) != len(names) || slices.ContainsFunc(names, func(n string) bool { return got[n] != "" }) {
		t.Errorf("no live shard: %v, want every tenant on none", got)
	}
}

// TestPlannerComputesOncePerChange: the sharder's plan is computed again only when a tenant goes, is labeled other
// than the plan says, or the live shards change; a tenant landing where the plan puts it leaves it as it is.
func TestPlannerComputesOncePerChange(t *testing.T) {
	live := []string{"shard-a", "shard-b"}
	pcs := []*mpv1alpha1.ProviderConfig{}
	for _, n := range keys(4) {
		pcs = append(pcs, &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	lists := 0
	list := func() ([]*mpv1alpha1.ProviderConfig, error) { lists++; return pcs, nil }
	var p planner
	want, _, _ := p.want("tenant-0", live, list)
	p.observe("tenant-0", map[string]string{sharding.ShardLabel: want}, false)
	p.observe("tenant-1", nil, false)
	p.want("tenant-1", live, list)
	if lists != 1 {
		t.Fatalf("listed %d times, want once: landing where the plan says must not recompute it", lists)
	}
	other := live[0]
	if other == want {
		other = live[1]
	}
	// Drained from another shard towards the plan's: the move the plan asked for.
	p.observe("tenant-0", map[string]string{sharding.ShardLabel: other, sharding.DrainLabel: "true"}, false)
	p.want("tenant-0", live, list)
	if lists != 1 {
		t.Fatalf("listed %d times, want once: a drain towards the plan's shard must not recompute it", lists)
	}
	p.observe("tenant-0", map[string]string{sharding.ShardLabel: other}, false)
	p.want("tenant-0", live, list)
	if lists != 2 {
		t.Fatalf("listed %d times, want twice: a label other than the plan's must recompute it", lists)
	}
	pcs = pcs[1:]
	p.observe("tenant-0", nil, true)
	if _, _, _ = p.want("tenant-1", live, list); lists != 3 {
		t.Fatalf("listed %d times, want 3: a deletion must recompute the plan", lists)
	}
	p.want("tenant-1", append(slices.Clone(live), "shard-c"), list)
	if lists != 4 {
		t.Fatalf("listed %d times, want 4: a new live shard must recompute the plan", lists)
	}
}

// TestPlannerPlacesANewTenantWithoutComputingAgain: tenants created while the sharder runs are placed one by one,
// without a full computation each, within the even share, and once they are labeled where they were placed a full
// computation moves none of them.
func TestPlannerPlacesANewTenantWithoutComputingAgain(t *testing.T) {
	live := []string{"shard-a", "shard-b", "shard-c"}
	names := randomNames(600, 11)
	first, later := names[:300], names[300:]
	pcs := []*mpv1alpha1.ProviderConfig{}
	for _, n := range first {
		pcs = append(pcs, &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	lists := 0
	list := func() ([]*mpv1alpha1.ProviderConfig, error) { lists++; return pcs, nil }
	var p planner
	labeled := map[string]Placement{}
	for _, n := range first {
		want, _, err := p.want(n, live, list)
		if err != nil || want == "" {
			t.Fatalf("%s: planned on %q (%v)", n, want, err)
		}
		p.observe(n, map[string]string{sharding.ShardLabel: want}, false)
		labeled[n] = Placement{Shard: want}
	}
	for i, n := range later {
		p.observe(n, nil, false)
		want, changed, err := p.want(n, live, list)
		if err != nil || !slices.Contains(live, want) || len(changed) != 0 {
			t.Fatalf("%s: planned on %q, changed %v (%v)", n, want, changed, err)
		}
		even := ceilDiv(300+i+1, len(live))
		for shard, l := range loads(p.plan) {
			if l > even {
				t.Fatalf("after %d new tenants %s holds %d, above the even share %d", i+1, shard, l, even)
			}
		}
		p.observe(n, map[string]string{sharding.ShardLabel: want}, false)
		labeled[n] = Placement{Shard: want}
	}
	if lists != 1 {
		t.Fatalf("listed %d times, want once: a new unlabeled tenant must be placed without computing the plan again", lists)
	}
	if again := Plan(labeled, live); !maps.Equal(again, p.plan) {
		n, _ := moves(p.plan, again)
		t.Fatalf("a full computation over the labeled tenants moves %d of them", n)
	}
	// A new tenant that arrives labeled (created so, or labeled before this sharder saw it) is not placed on its
	// own: the plan is computed again, and keeps it where it is while it fits.
	p.observe("t-labeled", map[string]string{sharding.ShardLabel: "shard-b"}, false)
	pcs = append(pcs, &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "t-labeled", Labels: map[string]string{sharding.ShardLabel: "shard-b"}}})
	if want, _, _ := p.want("t-labeled", live, list); lists != 2 || want != "shard-b" {
		t.Fatalf("a labeled new tenant: listed %d times (want 2), planned on %q (want shard-b)", lists, want)
	}
	// With no live shard, a new tenant is placed on none.
	var none planner
	none.want(first[0], nil, list)
	none.observe("t-new", nil, false)
	if want, _, _ := none.want("t-new", nil, list); want != "" {
		t.Fatalf("no live shard: planned on %q", want)
	}
}

// TestPlanAThirdShardJoiningTwoGetsItsShare is BenchmarkShardedReplicas's join: 300 tenants on two shards (150
// each), a third joins. The two are above the new capacity (105) and shed to the even share, so it ends 100/100/100;
// shedding only to the capacity would leave 105/105/90.
func TestPlanAThirdShardJoiningTwoGetsItsShare(t *testing.T) {
	three := []string{"shard-a", "shard-b", "shard-c"}
	before := Plan(unplaced(randomNames(300, 5)), three[:2])
	after := Plan(placed(before), three)
	if got := loads(after); got["shard-a"] != 100 || got["shard-b"] != 100 || got["shard-c"] != 100 {
		t.Errorf("tenants per shard %v, want 100 each", got)
	}
	if moved, to := moves(before, after); moved != 100 || to["shard-c"] != 100 {
		t.Errorf("%d moved, to %v; want 100, all to shard-c", moved, to)
	}
}
