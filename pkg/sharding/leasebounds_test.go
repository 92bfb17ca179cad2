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
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"
)

// TestLeaseBoundsAdmitWhatAReplicaWrites: with the default flags (lease duration 15s, renew deadline 10s) a Lease
// may say at most 15 seconds and be renewed at most 5 seconds ahead of the sharder's clock; the zero bounds admit
// anything.
func TestLeaseBoundsAdmitWhatAReplicaWrites(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	bounds := NewLeaseBounds(15500*time.Millisecond, 10*time.Second)
	if want := (LeaseBounds{MaxDuration: 15 * time.Second, MaxSkew: 5500 * time.Millisecond}); bounds != want {
		t.Fatalf("NewLeaseBounds = %+v, want %+v (the duration in whole seconds, as written)", bounds, want)
	}
	bounds = NewLeaseBounds(15*time.Second, 10*time.Second)
	lease := func(seconds int32, renewed time.Time) *coordinationv1.Lease {
		l := shardLease("a", renewed)
		l.Spec.LeaseDurationSeconds = ptr.To(seconds)
		return l
	}
	for _, c := range []struct {
		what  string
		lease *coordinationv1.Lease
		want  bool
	}{
		{"renewed now for the lease duration", lease(15, now), true},
		{"released (1 second)", lease(1, now), true},
		{"renewed a while ago", lease(15, now.Add(-time.Hour)), true},
		{"renewed ahead by the tolerated skew", lease(15, now.Add(5*time.Second)), true},
		{"renewed ahead by more than the skew", lease(15, now.Add(5*time.Second+time.Millisecond)), false},
		{"renewed a day ahead", lease(15, now.Add(24*time.Hour)), false},
		{"longer than the lease duration", lease(16, now), false},
		{"a year long", lease(365*24*3600, now.Add(-time.Hour)), false},
		{"without times", &coordinationv1.Lease{}, true},
	} {
		if got := bounds.Admits(c.lease, now); got != c.want {
			t.Errorf("%s: Admits = %v, want %v", c.what, got, c.want)
		}
		if !(LeaseBounds{}).Admits(c.lease, now) {
			t.Errorf("%s: the zero bounds refuse it", c.what)
		}
	}
}
