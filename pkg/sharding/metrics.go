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

var (
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
		legacyregistry.MustRegister(ShardDrainDuration, ShardServerSideWatch, ShardSelectorChanges,
			ShardSelectorBuckets)
	})
}
