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
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpfake "github.com/multiproject/client-go/clientset/versioned/fake"

	"github.com/multiproject/multiproject-controller-manager/pkg/sharding"
)

// TestUnshardedLeaderStartsAShardsTenantWhenItsLeaseIsReleased: the elected replica of an unsharded run leaves a
// tenant labeled with a live shard of its --shard-group alone, and starts it as soon as that shard releases its
// Lease (a shard's last act on SIGTERM), not only when the Lease would have expired (a minute here).
func TestUnshardedLeaderStartsAShardsTenantWhenItsLeaseIsReleased(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	const group = "mpcm"
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: sharding.LeaseName(group, "s1"), Labels: map[string]string{sharding.ShardGroupLabel: group}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("s1"), LeaseDurationSeconds: ptr.To[int32](60),
			RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}
	client := fake.NewClientset(lease)
	c := testConfig(client, leaderElection(15*time.Second, 10*time.Second, 2*time.Second))
	mp := mpfake.NewClientset(
		&mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "held", Labels: map[string]string{sharding.ShardLabel: "s1"}}},
		&mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "free", Labels: map[string]string{sharding.ShardLabel: "gone"}}})
	c.MultiprojectClient = mp
	c.Sharding.Group = group

	replica, err := NewReplica(c)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- runControllers(ctx, c, replica, NewControllerDescriptors(), &processState{}) }()
	started := func(name string) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			pc, err := mp.MultiprojectV1alpha1().ProviderConfigs().Get(ctx, name, metav1.GetOptions{})
			return err == nil && slices.Contains(pc.Finalizers, mpv1alpha1.ProviderConfigCleanupFinalizer), nil
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, started("free")); err != nil {
		t.Fatalf("the tenant of a dead shard did not start: %v", err)
	}
	if ok, _ := started("held")(ctx); ok {
		t.Fatal("the tenant of a live shard started")
	}

	released := lease.DeepCopy()
	released.Spec.HolderIdentity = nil
	if _, err := client.CoordinationV1().Leases("kube-system").Update(ctx, released, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, started("held")); err != nil {
		t.Errorf("the tenant did not start once its shard released its Lease: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("runControllers returned %v after a graceful stop", err)
	}
}
