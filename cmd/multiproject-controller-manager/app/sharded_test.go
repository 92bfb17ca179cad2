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

package app

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/config"
	"github.com/multiproject/multiproject-controller-manager/pkg/sharding"
)

const testShard = "host-abcde"

func shardedConfig(client *fake.Clientset) config.CompletedConfig {
	c := testConfig(client, leaderElection(3*time.Second, time.Second, 100*time.Millisecond))
	c.Sharding = config.Sharding{Enabled: true, Group: "mp", Shard: testShard}
	return c
}

func shardLease(ctx context.Context, client *fake.Clientset) (*coordinationv1.Lease, error) {
	return client.CoordinationV1().Leases("kube-system").Get(ctx, sharding.LeaseName("mp", testShard), metav1.GetOptions{})
}

// TestShardedRunAssignsRunsAndReleases: one sharded replica holds its shard Lease (labeled with its group), is
// elected sharder, assigns a tenant to itself and runs it (status.shard); a graceful stop releases the shard Lease
// after the tenant stopped, so another shard would take it at once.
func TestShardedRunAssignsRunsAndReleases(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client := fake.NewClientset()
	c := shardedConfig(client)
	pcs := c.MultiprojectClient.MultiprojectV1alpha1().ProviderConfigs()
	if _, err := pcs.Create(ctx, &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "tenant-1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	done := make(chan error, 1)
	go func() { done <- Run(ctx, c, NewControllerDescriptors()) }()
	var why string
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		lease, err := shardLease(ctx, client)
		if err != nil {
			why = err.Error()
			return false, nil
		}
		pc, err := pcs.Get(ctx, "tenant-1", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		why = "lease holder " + holder(lease) + ", group label " + lease.Labels[sharding.ShardGroupLabel] +
			", tenant labels " + pc.Labels[sharding.ShardLabel] + ", status.shard " + pc.Status.Shard
		return holder(lease) == testShard && lease.Labels[sharding.ShardGroupLabel] == "mp" &&
			sharding.Owns(testShard, pc.Labels) && pc.Status.Shard == testShard, nil
	}); err != nil {
		t.Fatalf("the shard never ran its tenant: %v (%s)", err, why)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v after a graceful stop", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not return after a graceful stop")
	}
	lease, err := shardLease(context.Background(), client)
	if err != nil {
		t.Fatal(err)
	}
	if h := holder(lease); h != "" {
		t.Errorf("the shard Lease still names %q after a graceful stop", h)
	}
	if live := sharding.LiveShards([]*coordinationv1.Lease{lease}, time.Now()); len(live) != 0 {
		t.Errorf("the shard is still live after its release: %v", live)
	}
}

// TestShardedRunExitsAtOnceWhenItsLeaseIsLost: once the shard Lease cannot be renewed, Run returns within the
// renew deadline with sharding.ErrShardLeaseLost, before the Lease expires, without waiting for anything.
func TestShardedRunExitsAtOnceWhenItsLeaseIsLost(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client := fake.NewClientset()
	// Installed before Run: the fake's reactor chain must not change while it is in use.
	var failing atomic.Bool
	client.PrependReactor("update", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if failing.Load() && a.(clienttesting.UpdateAction).GetObject().(*coordinationv1.Lease).Name == sharding.LeaseName("mp", testShard) {
			return true, nil, errors.New("the API server is unreachable")
		}
		return false, nil, nil
	})
	c := shardedConfig(client)
	done := make(chan error, 1)
	go func() { done <- Run(ctx, c, NewControllerDescriptors()) }()
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		lease, err := shardLease(ctx, client)
		return err == nil && holder(lease) == testShard, nil
	}); err != nil {
		t.Fatalf("the shard Lease was never acquired: %v", err)
	}
	failing.Store(true)
	failedAt := time.Now()
	select {
	case err := <-done:
		if !errors.Is(err, sharding.ErrShardLeaseLost) {
			t.Errorf("Run returned %v, want the shard Lease lost", err)
		}
		// The last renewal was at most a retry period before failedAt; the Lease expires 3 s after it.
		if took := time.Since(failedAt); took > c.LeaderElection.LeaseDuration.Duration-c.LeaderElection.RetryPeriod.Duration {
			t.Errorf("Run returned %s after renewals began to fail: later than the Lease's expiry", took)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after the shard Lease was lost")
	}
}
