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

package sharding

import (
	"sync"
	"sync/atomic"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
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

	// ShardDrainDuration is how long a shard took to stop a draining tenant and acknowledge the drain.
	ShardDrainDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem:      "multiproject",
		Name:           "shard_drain_duration_seconds",
		Help:           "Time a shard took to stop a draining tenant's controllers and acknowledge the drain.",
		Buckets:        []float64{0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120},
		StabilityLevel: metrics.ALPHA,
	})
)

var (
	// ShardServerSideWatch says whether the API server filters this replica's namespaced informers by its shard
	// selector (--sharded-watch): 1 when it does, 0 when the replica filters on the client (the flag is off, or the
	// server ignores the selector: the ShardedListAndWatch feature gate of kube-apiserver is off).
	ShardServerSideWatch = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      "multiproject",
		Name:           "shard_server_side_watch",
		Help:           "1 when the API server filters this replica's namespaced informers by its shard selector, 0 when the replica filters on the client.",
		StabilityLevel: metrics.ALPHA,
	})

	// ShardSelectorChanges counts the changes of this replica's shard selector, each a LIST of its share.
	ShardSelectorChanges = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "multiproject",
		Name:           "shard_selector_changes_total",
		Help:           "Changes of this replica's shard selector, by reason (grow: a tenant's namespace was not covered; rebuild: narrowed to what its tenants need).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})

	// ShardSelectorBuckets is how many buckets of the namespace hash this replica's shard selector holds.
	ShardSelectorBuckets = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      "multiproject",
		Name:           "shard_selector_buckets",
		Help:           "Buckets of the namespace hash (of 4096) that this replica's shard selector holds.",
		StabilityLevel: metrics.ALPHA,
	})
)

// cachedObjectsDesc describes what a replica's scoped informers hold (RegisterScope).
var cachedObjectsDesc = metrics.NewDesc("multiproject_shard_cached_objects",
	"Objects in this replica's informers of namespaced resources, by resource: with --sharded-watch, those of the namespaces its shard selector holds.",
	[]string{"resource"}, nil, metrics.ALPHA, "")

// cachedObjects is a collector that counts, at scrape time, the objects of the latest ShardScope's informers.
type cachedObjects struct {
	metrics.BaseStableCollector
	scope atomic.Pointer[informerset.ShardScope]
}

func (c *cachedObjects) DescribeWithStability(ch chan<- *metrics.Desc) { ch <- cachedObjectsDesc }

func (c *cachedObjects) CollectWithStability(ch chan<- metrics.Metric) {
	scope := c.scope.Load()
	if scope == nil {
		return
	}
	for gvr, n := range scope.Cached() {
		ch <- metrics.NewLazyConstMetric(cachedObjectsDesc, metrics.GaugeValue, float64(n), gvr.Resource)
	}
}

var (
	scopeCollector    = &cachedObjects{}
	registerScopeOnce sync.Once
)

// RegisterScope counts multiproject_shard_cached_objects from scope, registering the series with the legacy
// registry the first time. A process has one scope; a later one (a test that runs several replicas) replaces it.
func RegisterScope(scope *informerset.ShardScope) {
	scopeCollector.scope.Store(scope)
	registerScopeOnce.Do(func() { legacyregistry.CustomMustRegister(scopeCollector) })
}

var registerOnce sync.Once

// Register adds the sharding series to the legacy registry served on /metrics. It is idempotent.
func Register() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(ShardTenants, ShardTenantsWithoutLease, ShardLeasesOutOfBounds, ShardMoves, ShardDrainDuration, ShardServerSideWatch, ShardSelectorChanges,
			ShardSelectorBuckets)
	})
}
