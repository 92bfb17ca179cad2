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
	"slices"
	"sync"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	"github.com/multiproject/multiproject-controller-manager/pkg/sharding"
)

// planner keeps the sharder's Plan of every tenant. Plan costs N·S hashes, so it is computed once per change that
// can alter it (a tenant deleted, labeled other than the plan says, a change of the live shards), not once per key;
// a tenant that is drained towards where the plan says, loses its label at the end of that drain, or lands there
// leaves the plan as it is, which keeps the sharder's decisions from flapping while its own moves are under way.
//
// A new unlabeled tenant is placed on its own, in S hashes: on its highest-ranked live shard below the new even
// share, as Plan places an unplaced tenant. A full computation per tenant added would make creating N tenants cost
// N²·S hashes (10,000 tenants on three shards: 17 CPU s instead of about 10 ms, BenchmarkPlannerTenantsCreated).
// Adding tenants never moves a placed one (Capacity only grows), so the plan stays a fixed point of Plan once the
// new tenants are labeled.
type planner struct {
	mu sync.Mutex
	// plan is the last Plan, computed for live from input; nil until the first sync.
	plan  map[string]string
	input map[string]Placement
	live  []string
	// load counts the plan's tenants per live shard.
	load  map[string]int
	stale bool
}

func placementOf(labels map[string]string) Placement {
	return Placement{Shard: labels[sharding.ShardLabel], Draining: labels[sharding.DrainLabel] == "true"}
}

// observe notes a ProviderConfig the informer delivered (added, updated, or deleted when gone).
func (p *planner) observe(name string, labels map[string]string, gone bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.plan == nil || p.stale {
		return
	}
	want, planned := p.plan[name]
	switch now := placementOf(labels); {
	case !gone && !planned && now.Shard == "":
		p.place(name)
	case gone || !planned:
		p.stale = true
	case now == p.input[name]:
	case now.Shard == "" || (!now.Draining && now.Shard == want) || (now.Draining && now.Shard != want):
		// Unlabeled (it waits to be assigned to want), where the plan puts it, or draining towards it: the plan
		// holds. Computed again in the middle of a move, it would see the tenants not yet drained from a shard
		// that sheds to the even share as staying within Capacity, and keep them there (104/104/92 instead of
		// 100/100/100 when a third shard joins two).
		p.input[name] = now
	default:
		p.stale = true
	}
}

// want returns the shard the tenant name belongs to among live ("" when it is not in the plan or no shard is live),
// computing the plan again from list when it is stale or live changed, and the names whose entry that changed, which
// the sharder must look at again.
func (p *planner) want(name string, live []string, list func() ([]*mpv1alpha1.ProviderConfig, error)) (string, []string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.plan != nil && !p.stale && slices.Equal(live, p.live) {
		return p.plan[name], nil, nil
	}
	pcs, err := list()
	if err != nil {
		return "", nil, err
	}
	input := make(map[string]Placement, len(pcs))
	for _, pc := range pcs {
		input[pc.Name] = placementOf(pc.Labels)
	}
	plan := Plan(input, live)
	var changed []string
	if p.plan != nil {
		for n, shard := range plan {
			if old, ok := p.plan[n]; ok && old != shard {
				changed = append(changed, n)
			}
		}
		slices.Sort(changed)
	}
	p.plan, p.input, p.live, p.stale = plan, input, slices.Clone(live), false
	p.load = map[string]int{}
	for _, shard := range plan {
		p.load[shard]++
	}
	return plan[name], changed, nil
}

// place puts a new unlabeled tenant into the plan without computing it again: on its highest-ranked live shard
// holding fewer than the even share of the tenants with it, as Plan places every unplaced tenant. One live shard
// always holds fewer (else the plan's tenants would number at least N). With no live shard, on none.
func (p *planner) place(name string) {
	p.input[name] = Placement{}
	if len(p.live) == 0 {
		p.plan[name] = ""
		return
	}
	even := ceilDiv(len(p.plan)+1, len(p.live))
	ranked := rank(name, p.live)
	shard := ranked[slices.IndexFunc(ranked, func(s string) bool { return p.load[s] < even })]
	p.plan[name] = shard
	p.load[shard]++
}
