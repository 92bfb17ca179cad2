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
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpfake "github.com/multiproject/client-go/clientset/versioned/fake"
	mpinformers "github.com/multiproject/client-go/informers/externalversions/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
)

// syncsCounted returns how many syncs of a process-wide controller the runtime has counted with result.
func syncsCounted(controller, result string) float64 {
	metrics.Register()
	n, _ := metrics.Syncs.Value("", controller, result)
	return n
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

// TestDrainerRetriesOnItsClockAndCountsItsSyncs: the drainer runs on the worker runtime. A failed Stop is retried
// after the runtime's backoff for a first failure (5 ms) on the drainer's clock, and its syncs are counted as every
// controller's are, with provider_config="" and controller="shard-drainer".
func TestDrainerRetriesOnItsClockAndCountsItsSyncs(t *testing.T) {
	failedBefore, succeededBefore := syncsCounted("shard-drainer", "error"), syncsCounted("shard-drainer", "success")
	client := mpfake.NewClientset(&mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "tenant-0",
		Labels: map[string]string{ShardLabel: "shard-a", DrainLabel: "true"}}})
	informer := mpinformers.NewProviderConfigInformer(client, 0, cache.Indexers{})
	clk := testingclock.NewFakeClock(t0)
	var stops atomic.Int32
	d := NewDrainer(DrainerConfig{Shard: "shard-a", Client: client, ProviderConfigs: informer, Clock: clk,
		Stop: func(context.Context, string) error {
			if stops.Add(1) == 1 {
				return errors.New("the tenant has not stopped yet")
			}
			return nil
		}})
	ctx := runInBackground(t, func(ctx context.Context) error { return d.Run(ctx, 1) })
	go informer.Run(ctx.Done())

	poll(t, "a failed drain waiting for its retry", func() bool { return stops.Load() == 1 && clk.HasWaiters() })
	clk.Step(4 * time.Millisecond)
	if n := stops.Load(); n != 1 || !clk.HasWaiters() {
		t.Fatalf("retried before the backoff had passed on the drainer's clock: %d stops", n)
	}
	clk.Step(time.Millisecond)
	poll(t, "the drain acknowledged", func() bool {
		pc, err := client.MultiprojectV1alpha1().ProviderConfigs().Get(ctx, "tenant-0", metav1.GetOptions{})
		return err == nil && len(pc.Labels) == 0
	})
	poll(t, "both syncs counted", func() bool {
		return syncsCounted("shard-drainer", "error")-failedBefore == 1 && syncsCounted("shard-drainer", "success")-succeededBefore == 1
	})
}
