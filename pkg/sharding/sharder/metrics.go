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
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Reasons of a move, the values of the reason label of ShardMoves.
const (
	ReasonAssigned  = "assigned"   // an unassigned tenant (new, or acknowledged by its old shard) got a shard
	ReasonDrain     = "drain"      // a live shard was asked to give a tenant up (the first half of a move)
	ReasonShardDead = "shard_dead" // a dead shard's tenant was reassigned at once
)

var (
	// ShardTenants is the number of ProviderConfigs labeled with each live shard, as the sharder sees them.
	ShardTenants = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      "multiproject",
		Name:           "shard_tenants",
		Help:           "ProviderConfigs assigned to each live shard, as the sharder sees them.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"shard"})

	// ShardTenantsWithoutLease is the number of ProviderConfigs labeled with a shard that holds no live Lease:
	// tenants no replica runs. The sharder moves them at once, so it stays above 0 only while no shard is live or
	// the sharder cannot write.
	ShardTenantsWithoutLease = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      "multiproject",
		Name:           "shard_tenants_without_lease",
		Help:           "ProviderConfigs labeled with a shard that holds no live Lease, as the sharder sees them: tenants no replica runs.",
		StabilityLevel: metrics.ALPHA,
	})

	// ShardLeasesOutOfBounds is the number of the group's shard Leases whose timings no replica writes (LeaseBounds):
	// the sharder counts none of them as a live shard.
	ShardLeasesOutOfBounds = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      "multiproject",
		Name:           "shard_leases_out_of_bounds",
		Help:           "Shard Leases of the group whose timings no replica writes (a renewTime too far ahead, a duration too long), as the sharder sees them: none of them counts as a live shard.",
		StabilityLevel: metrics.ALPHA,
	})

	// ShardMoves counts the sharder's label writes by reason.
	ShardMoves = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "multiproject",
		Name:           "shard_moves_total",
		Help:           "Assignments written by the sharder, by reason (assigned, drain, shard_dead).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
)

var registerOnce sync.Once

// Register adds the sharder's series to the legacy registry served on /metrics. It is idempotent.
func Register() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(ShardTenants, ShardTenantsWithoutLease, ShardLeasesOutOfBounds, ShardMoves)
	})
}
