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
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"

	"k8s.io/client-go/kubernetes/fake"
)

// t0 is the tests' start on a fake clock.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

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

// syncsCounted returns how many syncs of a process-wide controller the runtime has counted with result.
func syncsCounted(controller, result string) float64 {
	metrics.Register()
	n, _ := metrics.Syncs.Value("", controller, result)
	return n
}

// runInBackground runs run until the test ends.
func runInBackground(t *testing.T, run func(context.Context) error) context.Context {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return ctx
}

// poll waits for cond, for up to 10 seconds.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
