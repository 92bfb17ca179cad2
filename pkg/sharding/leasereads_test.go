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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
)

// The Leases of issue 57 that a read by name met: an unlabeled one a neighbour made under a dead shard's name, one
// renewed a year ahead, one a year long, and one a replica whose clock runs 10 s ahead keeps renewing.
func issue57Leases(now time.Time) (squatted, ahead, long, skewed *coordinationv1.Lease) {
	squatted = shardLease("squatted", now.Add(365*24*time.Hour))
	squatted.Labels = nil
	ahead = shardLease("ahead", now.Add(365*24*time.Hour))
	long = shardLease("long", now.Add(-time.Hour))
	long.Spec.LeaseDurationSeconds = ptr.To[int32](365 * 24 * 3600)
	skewed = shardLease("skewed", now.Add(10*time.Second))
	return squatted, ahead, long, skewed
}

// renew writes the Lease again as its replica would, renewed at renewed (a new resourceVersion).
func renew(t *testing.T, client *fake.Clientset, lease *coordinationv1.Lease, renewed time.Time, version string) {
	t.Helper()
	lease = lease.DeepCopy()
	lease.ResourceVersion = version
	lease.Spec.RenewTime = &metav1.MicroTime{Time: renewed}
	if _, err := client.CoordinationV1().Leases(lease.Namespace).Update(t.Context(), lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestHoldersCheckWhatTheListChecks: an unsharded leader (Holders) reads a shard's Lease as the sharder does: from
// its cache or the API server, a Lease of the shard's name without the group label holds no tenant, and one
// outside the bounds holds it only until the latest expiry a replica could have written.
func TestHoldersCheckWhatTheListChecks(t *testing.T) {
	now := t0.Add(time.Minute)
	squatted, ahead, long, skewed := issue57Leases(now)
	client := fake.NewClientset(squatted, ahead, long, skewed)
	clk := testingclock.NewFakeClock(now)
	h := NewHolders(HoldersConfig{Group: "mp", Namespace: "kube-system", KubeClient: client, Clock: clk,
		LeaseBounds: NewLeaseBounds(15*time.Second, 10*time.Second)})
	for _, l := range []*coordinationv1.Lease{squatted, ahead, long, skewed} {
		_ = h.informer.GetIndexer().Add(l)
	}
	latest := now.Add(5*time.Second + 15*time.Second)
	holder := func(shard, want string, wantUntil time.Time) {
		t.Helper()
		pc := &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "t", Labels: map[string]string{ShardLabel: shard}}}
		got, until, err := h.Holder(t.Context(), pc)
		if err != nil {
			t.Fatal(err)
		}
		if got != want || (got != "" && !until.Equal(wantUntil)) {
			t.Errorf("%s at %s: held by %q until %s, want %q until %s", shard, clk.Now().Sub(now), got, until, want, wantUntil)
		}
	}
	holder("squatted", "", time.Time{})
	holder("long", "", time.Time{})
	holder("ahead", "ahead", latest)
	holder("skewed", "skewed", latest)

	clk.SetTime(latest)
	holder("ahead", "", time.Time{})
}
