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
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/testutil"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/multiproject/multiproject-controller-manager/pkg/sharding"
)

// TestSharderIgnoresAShardLeaseOutsideItsBounds: issue 42's forged shard, a Lease renewed a day ahead (or lasting a
// year), is not a live shard, so no tenant is planned onto it; and its Lease is not deleted as a dead shard's.
// multiproject_shard_leases_out_of_bounds counts both.
func TestSharderIgnoresAShardLeaseOutsideItsBounds(t *testing.T) {
	Register()
	w := newWorld(t, 0, 1, []string{"a"}, []string{"a"})
	w.sharder.cfg.LeaseBounds = sharding.NewLeaseBounds(15*time.Second, 10*time.Second)
	ahead := shardLease("ahead", t0.Add(24*time.Hour))
	long := shardLease("long", t0)
	long.Spec.LeaseDurationSeconds = ptr.To[int32](365 * 24 * 3600)
	within := shardLease("within", t0.Add(2*time.Second))
	for _, l := range []*coordinationv1.Lease{ahead, long, within} {
		_ = w.leases.Add(l)
		if _, err := w.sharder.cfg.KubeClient.CoordinationV1().Leases(l.Namespace).Create(w.ctx, l, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w.sharder.clock = testingclock.NewFakeClock(t0.Add(time.Second))
	w.sharder.evaluateLeases(w.ctx)
	if live := w.sharder.liveShards(); !slices.Equal(live, []string{"a", "within"}) {
		t.Errorf("live shards %v, want [a within]: a Lease outside the bounds counted", live)
	}
	if n, err := testutil.GetGaugeMetricValue(ShardLeasesOutOfBounds); err != nil || n != 2 {
		t.Errorf("multiproject_shard_leases_out_of_bounds = %v (%v), want 2", n, err)
	}
	for _, l := range []*coordinationv1.Lease{ahead, long} {
		if _, err := w.sharder.cfg.KubeClient.CoordinationV1().Leases(l.Namespace).Get(w.ctx, l.Name, metav1.GetOptions{}); err != nil {
			t.Errorf("the Lease %s outside the bounds: %v, want it left alone", l.Name, err)
		}
	}
}
