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
	"testing"

	"k8s.io/component-base/metrics/testutil"
)

// TestSharderCountsTenantsWithoutALiveLease: tenants labeled with a shard whose Lease is not live are what the
// alert MultiprojectShardTenantsWithoutLease watches; tenants of live shards are not counted.
func TestSharderCountsTenantsWithoutALiveLease(t *testing.T) {
	Register()
	for _, tc := range []struct {
		name        string
		shards      []string
		live        []string
		wantWithout float64
	}{
		{"every tenant on a live shard", []string{"a"}, []string{"a"}, 0},
		{"tenants on a shard whose Lease is gone", []string{"gone", "a"}, []string{"a"}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, 0, 3, tc.shards, tc.live)
			w.sharder.evaluateLeases(w.ctx)
			got, err := testutil.GetGaugeMetricValue(ShardTenantsWithoutLease)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.wantWithout {
				t.Errorf("multiproject_shard_tenants_without_lease = %v, want %v", got, tc.wantWithout)
			}
		})
	}
}
