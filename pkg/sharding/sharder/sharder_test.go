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
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	mpfake "github.com/multiproject/client-go/clientset/versioned/fake"
	mpinformers "github.com/multiproject/client-go/informers/externalversions/multiproject/v1alpha1"
	"github.com/multiproject/multiproject-controller-manager/pkg/sharding"
)

// TestSharderDeletesOnlyDeadLeasesThatNoTenantNames: a restarted replica is a new shard, so dead shards' Leases
// would pile up. The sharder deletes a Lease once it is expired or released and no ProviderConfig names its shard,
// each delete conditional on the version it saw; live Leases, dead ones that still have tenants, and Leases of
// another group are kept.
func TestSharderDeletesOnlyDeadLeasesThatNoTenantNames(t *testing.T) {
	now := t0.Add(time.Minute)
	released := shardLease("released", now.Add(-time.Second))
	released.Spec.HolderIdentity = nil
	otherGroup := shardLease("elsewhere", t0)
	otherGroup.Name = "other-group-elsewhere"
	leases := []*coordinationv1.Lease{
		shardLease("live", now.Add(-5*time.Second)),
		shardLease("dead-with-tenant", t0),
		shardLease("dead", t0),
		released,
		otherGroup,
	}
	var objs []runtime.Object
	for i, l := range leases {
		l.UID = types.UID("uid-" + l.Name)
		l.ResourceVersion = string(rune('1' + i))
		objs = append(objs, l)
	}
	w := newWorld(t, 0, 1, []string{"dead-with-tenant", "live"}, []string{"live"})
	client := fake.NewClientset(objs...)
	w.sharder.cfg.KubeClient = client
	w.sharder.clock = testingclock.NewFakeClock(now)
	for _, l := range leases {
		_ = w.leases.Add(l)
	}

	w.sharder.evaluateLeases(w.ctx)

	var deleted []string
	for _, a := range client.Actions() {
		if d, ok := a.(clienttesting.DeleteActionImpl); ok {
			deleted = append(deleted, d.Name)
			if p := d.DeleteOptions.Preconditions; p == nil || p.UID == nil || p.ResourceVersion == nil {
				t.Errorf("deleted %s without a UID and resourceVersion precondition", d.Name)
			}
		}
	}
	slices.Sort(deleted)
	if want := []string{sharding.LeaseName("mp", "dead"), sharding.LeaseName("mp", "released")}; !slices.Equal(deleted, want) {
		t.Errorf("deleted %v, want %v", deleted, want)
	}
	left, err := client.CoordinationV1().Leases("kube-system").List(w.ctx, metav1.ListOptions{LabelSelector: labels.Everything().String()})
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Items) != len(leases)-2 {
		t.Errorf("%d Leases left, want %d", len(left.Items), len(leases)-2)
	}

	// A Lease renewed since the cache saw it expired: the conditional delete fails with a conflict, and is not retried.
	client = fake.NewClientset()
	client.PrependReactor("delete", "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(coordinationv1.Resource("leases"), "mp-dead", nil)
	})
	w.sharder.cfg.KubeClient = client
	w.sharder.collectDeadLeases(w.ctx, []*coordinationv1.Lease{shardLease("dead", t0)}, nil, now)
	if n := len(client.Actions()); n != 1 {
		t.Errorf("%d calls, want the one conditional delete", n)
	}
}

// TestFailedTestIsTheAPIServersAnswerToAStaleCompareAndSwap: kube-apiserver answers a JSON patch whose test failed
// with 422, which the sharder retries quietly; anything else is an error worth a log line.
func TestFailedTestIsTheAPIServersAnswerToAStaleCompareAndSwap(t *testing.T) {
	gr := coordinationv1.Resource("leases")
	stale := apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "patch", gr, "t", "", 0, true)
	if !failedTest(fmt.Errorf("assign: %w", stale)) {
		t.Errorf("a 422 is not seen as a failed test: %v", stale)
	}
	for _, err := range []error{apierrors.NewConflict(gr, "t", nil), apierrors.NewForbidden(gr, "t", nil), fmt.Errorf("dial tcp: refused")} {
		if failedTest(err) {
			t.Errorf("%v is seen as a failed test", err)
		}
	}
}

// TestSharderCountsOnlyTheGroupsShardLeases: a Lease counts as a shard only when it carries the group label and is
// named after its holder; another component's Lease, or one whose holder is not the shard its name says, does not
// (a watch that delivered it unfiltered, or a Lease edited by hand, must not make the sharder assign tenants to it).
func TestSharderCountsOnlyTheGroupsShardLeases(t *testing.T) {
	w := newWorld(t, 0, 1, []string{"a"}, []string{"a"})
	impostor := shardLease("b", t0)
	impostor.Spec.HolderIdentity = ptr.To("someone-else")
	unlabeled := shardLease("c", t0)
	unlabeled.Labels = nil
	leader := shardLease("x", t0)
	leader.Name = "mp" // the leader-election Lease of a group named like the Leases' prefix, labeled by mistake
	for _, l := range []*coordinationv1.Lease{impostor, unlabeled, leader} {
		_ = w.leases.Add(l)
	}
	w.sharder.clock = testingclock.NewFakeClock(t0.Add(time.Second))
	w.sharder.evaluateLeases(w.ctx)
	if live := w.sharder.liveShards(); !slices.Equal(live, []string{"a"}) {
		t.Errorf("live shards %v, want only [a]", live)
	}
}

// TestSharderStoppedBeforeItsCachesSyncedIsNotAFailure: a replica elected just as it is told to stop (SIGTERM during
// a rollout) stops its sharder before the caches have synced; that is a stop, and the process must exit 0.
func TestSharderStoppedBeforeItsCachesSyncedIsNotAFailure(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	// An informer that is never started never syncs.
	pcs := mpinformers.NewProviderConfigInformer(mpfake.NewClientset(), 0, cache.Indexers{})
	s := New(Config{Group: "mp", Namespace: "kube-system", KubeClient: fake.NewClientset(), Client: mpfake.NewClientset(),
		ProviderConfigs: pcs, Recorder: record.NewFakeRecorder(1)})
	if err := s.Run(ctx, 1); err != nil {
		t.Errorf("Run stopped before its caches synced: %v, want nil", err)
	}
}
