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
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	"github.com/multiproject/multiproject-controller-manager/pkg/sharding"
)

// TestConfirmDeadChecksWhatTheListChecks: before a dead shard's tenants move, the sharder's read of its Lease by
// name applies the list's checks. A Lease of the shard's name without the group label is not the shard's: the shard
// is dead. A Lease outside the bounds is neither taken at its word (a year) nor as dead (a replica with a skewed
// clock may still run): it is live until the latest expiry a replica could have written, the lease duration after
// the skew past the first read, with a Warning Event on the tenant; then dead if not written again, live again if a
// replica renewed it.
func TestConfirmDeadChecksWhatTheListChecks(t *testing.T) {
	now := t0.Add(time.Minute)
	squatted, ahead, long, skewed := issue57Leases(now)
	client := fake.NewClientset(squatted, ahead, long, skewed)
	clk := testingclock.NewFakeClock(now)
	recorder := record.NewFakeRecorder(100)
	s := &Sharder{cfg: Config{Group: "mp", Namespace: "kube-system", KubeClient: client, Recorder: recorder,
		LeaseBounds: sharding.NewLeaseBounds(15*time.Second, 10*time.Second)}, clock: clk, dead: map[string]bool{}}
	pc := &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "t"}}
	latest := now.Add(5*time.Second + 15*time.Second)

	confirm := func(shard string, wantDead bool, wantRetry time.Time) {
		t.Helper()
		dead, retryAt, err := s.confirmDead(t.Context(), pc, shard)
		if err != nil {
			t.Fatal(err)
		}
		if dead != wantDead || (!dead && !retryAt.Equal(wantRetry)) {
			t.Errorf("%s at %s: dead %v, look again at %s; want dead %v, look again at %s", shard, clk.Now().Sub(now), dead, retryAt, wantDead, wantRetry)
		}
	}
	confirm("squatted", true, time.Time{})
	confirm("long", true, time.Time{}) // renewed an hour ago: 15 s at most
	confirm("ahead", false, latest)
	confirm("skewed", false, latest)
	var warnings int
	for len(recorder.Events) > 0 {
		if e := <-recorder.Events; strings.HasPrefix(e, "Warning "+EventShardLeaseOutOfBounds) {
			warnings++
		}
	}
	if warnings != 2 {
		t.Errorf("%d Warning Events %s, want one for each Lease outside the bounds that still counts (ahead, skewed)", warnings, EventShardLeaseOutOfBounds)
	}

	// The replica with the skewed clock renews; the forged Lease stays as it was.
	clk.SetTime(now.Add(2 * time.Second))
	renew(t, client, skewed, clk.Now().Add(10*time.Second), "2")
	clk.SetTime(latest)
	confirm("ahead", true, time.Time{})
	// Its new version, first read now, says renewed at 12 s: within the skew of this read, so taken at its word.
	confirm("skewed", false, now.Add(12*time.Second+15*time.Second))
}
