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
	"cmp"
	"slices"
)

// LoadSlackPercent is ε of the bounded loads, in percent: a shard keeps the tenants it runs up to
// Capacity = ⌈N/S·(1+ε)⌉. Plain rendezvous hashing spreads 300 tenants over three shards about ±10 % (106/98/96 and
// 112/105/83 in two runs), and the busiest shard sets the cost of the busiest replica. New tenants are placed only
// below the even share ⌈N/S⌉, and a shard above Capacity sheds down to it, so the slack is never used to place; it
// is hysteresis: without it (ε = 0) deleting a single tenant can push a shard over the bound and make it drain one,
// a handshake that stops and restarts a tenant. 5 % keeps the busiest shard within 5 tenants of the even share at
// 300 tenants, and deleting 10 of 300 tenants moves nothing. An operator has no reason to tune it: a larger ε trades
// balance for fewer moves that only deletions cause.
const LoadSlackPercent = 5

// Placement is what Plan knows of a tenant: the shard it is labeled with ("" without one) and whether that shard is
// asked to drain it.
type Placement struct {
	Shard    string
	Draining bool
}

// Capacity is the most tenants Plan leaves on one of shards shards when there are n tenants: ⌈n/shards·(1+ε)⌉, in
// integers so that 300 tenants over three shards give exactly 105.
func Capacity(n, shards int) int {
	if shards <= 0 {
		return 0
	}
	return ceilDiv(n*(100+LoadSlackPercent), shards*100)
}

// Plan returns the shard every tenant belongs to among the live shards (rendezvous hashing with bounded loads), or
// "" for every tenant when no shard is live. It is a pure function of its arguments, deterministic whatever the
// order of the maps, so the sharder's decisions do not flap between passes:
//
//   - a tenant stays on its shard while the shard is live, the tenant is not draining from it, and the shard keeps
//     at most Capacity tenants; a shard above Capacity keeps only the even share ⌈N/S⌉, the tenants that rank it
//     highest (shedding to the bound alone would leave the old shards full and a joining one short: 105/105/90);
//   - every other tenant, in the order of their names, goes to its highest-ranked rendezvous shard that holds fewer
//     than the even share ⌈N/S⌉ (a draining tenant not to the shard it is leaving, unless no other has room).
//
// So adding a shard moves what the others hold above the even share, at most ⌈N/S⌉ tenants, and only to shards
// with room (the new one, when every other is full); removing one moves only its tenants; and a fresh start fills
// every shard to within S tenants of the even share. The plan is computed once per change of the tenants or the live shards, not per key:
// it costs N·S hashes.
func Plan(tenants map[string]Placement, live []string) map[string]string {
	plan := make(map[string]string, len(tenants))
	names := sortedPlacementKeys(tenants)
	if len(live) == 0 {
		for _, name := range names {
			plan[name] = ""
		}
		return plan
	}
	capacity, even := Capacity(len(tenants), len(live)), ceilDiv(len(tenants), len(live))
	load := make(map[string]int, len(live))
	staying := make(map[string][]string, len(live))
	for _, name := range names {
		if p := tenants[name]; !p.Draining && slices.Contains(live, p.Shard) {
			staying[p.Shard] = append(staying[p.Shard], name)
		}
	}
	for shard, stay := range staying {
		if len(stay) > capacity {
			slices.SortFunc(stay, func(a, b string) int { return byWeight(shard, a, b) })
			stay = stay[:even]
		}
		for _, name := range stay {
			plan[name] = shard
		}
		load[shard] = len(stay)
	}
	for _, name := range names {
		if _, placed := plan[name]; placed {
			continue
		}
		ranked := rank(name, live)
		// One shard always holds fewer than the even share while a tenant is unplaced (else the placed would
		// number at least N), so the second look always finds one.
		leaving := tenants[name]
		i := slices.IndexFunc(ranked, func(s string) bool {
			return load[s] < even && !(leaving.Draining && s == leaving.Shard)
		})
		if i < 0 {
			i = slices.IndexFunc(ranked, func(s string) bool { return load[s] < even })
		}
		plan[name] = ranked[i]
		load[ranked[i]]++
	}
	return plan
}

// rank returns shards ordered by their rendezvous weight for key, highest first (Rendezvous's order, so
// rank(key, shards)[0] == Rendezvous(key, shards)).
func rank(key string, shards []string) []string {
	ranked := slices.Clone(shards)
	weights := make(map[string]uint64, len(shards))
	for _, s := range shards {
		weights[s] = weight(s, key)
	}
	slices.SortFunc(ranked, func(a, b string) int {
		return cmp.Or(cmp.Compare(weights[b], weights[a]), cmp.Compare(a, b))
	})
	return ranked
}

// byWeight orders keys by their weight for shard, highest first, then by name.
func byWeight(shard, a, b string) int {
	return cmp.Or(cmp.Compare(weight(shard, b), weight(shard, a)), cmp.Compare(a, b))
}

func ceilDiv(a, b int) int {
	return (a + b - 1) / b
}

func sortedPlacementKeys(m map[string]Placement) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
