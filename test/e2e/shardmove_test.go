//go:build integration

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

package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpinformers "github.com/multiproject/client-go/informers/externalversions"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/providerconfig"
	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
)

// TestAMovedShardLabelWaitsForTheOldShardsRelease: a tenant's shard label moved by hand from shard A, which runs it,
// to shard B does not start it on B while A may still run it. A is frozen (SIGSTOP, its Leases still live) when the
// label moves, so it can neither stop nor release the tenant: B leaves it alone and says so (Event HeldByShard), and
// status.shard still names A. Once A runs again it stops the tenant and clears status.shard, and only then does B
// record itself and start it: status.shard never goes from A to B directly.
func TestAMovedShardLabelWaitsForTheOldShardsRelease(t *testing.T) {
	resetLease(t)
	cleanupShardLeases(t)
	installShardedRBAC(t)
	gce := fakegce.New(fakegce.Options{})
	gce.Start()
	t.Cleanup(gce.Close)
	w := newWorkload(t, gce)
	w.setService("svc-0", w.endpoints(0, 0, 1))
	recorded := watchRecordedShard(t, w)

	kubeconfig := managerKubeconfig(t)
	// Leases long enough that the seconds A is frozen cost it neither its shard Lease nor the leader Lease.
	le := leaderElection{leaseDuration: 30 * time.Second, renewDeadline: 20 * time.Second, retryPeriod: 2 * time.Second}
	// A starts alone: it leads (the sharder is frozen with it) and runs the tenant, which stays there when B joins
	// (bounded loads move a tenant only off a shard above capacity).
	a := startManager(t, "shard-a", kubeconfig, gce.Endpoint(), le, "--sharding=true")
	shardA := shardNames(t, []*manager{a})[0]
	waitShardsRun(t, []*workload{w}, []string{shardA})
	b := startManager(t, "shard-b", kubeconfig, gce.Endpoint(), le, "--sharding=true")
	shardB := shardNames(t, []*manager{b})[0]
	if got := waitLeaderAmong(t, a, b); got != a {
		t.Fatalf("shard B leads; the test needs the sharder frozen with A")
	}
	waitShardsRun(t, []*workload{w}, []string{shardA, shardB})
	if got := w.providerConfig().Status.Shard; got != shardA {
		t.Fatalf("status.shard %q, want %s to run the tenant before the move", got, shardA)
	}

	a.signal(syscall.SIGSTOP)
	t.Cleanup(func() { a.signal(syscall.SIGCONT) })
	patch := fmt.Sprintf(`[{"op":"test","path":"/metadata/labels/multiproject.io~1shard","value":%q},`+
		`{"op":"replace","path":"/metadata/labels/multiproject.io~1shard","value":%q}]`, shardA, shardB)
	if _, err := w.mp.MultiprojectV1alpha1().ProviderConfigs().Patch(t.Context(), w.tenant, types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// B decides within a second or two: it either waits (the Event) or starts the tenant (status.shard B).
	if err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		return len(events(ctx, t, "ProviderConfig", "", w.tenant, providerconfig.EventHeldByShard)) > 0 ||
			w.providerConfig().Status.Shard == shardB, nil
	}); err != nil {
		t.Fatalf("shard B neither waited for A nor started the tenant: %v", err)
	}
	if got := w.providerConfig().Status.Shard; got != shardA {
		t.Fatalf("status.shard %q while shard A, frozen, may still run the tenant: B started it without A's release", got)
	}

	a.signal(syscall.SIGCONT)
	waitShardsRun(t, []*workload{w}, []string{shardA, shardB})
	w.waitConverged("the tenant after its move to " + shardB)
	history := recorded.history()
	if i := slices.Index(history, shardA); i < 0 || i+1 >= len(history) || history[i+1] != "" {
		t.Errorf("status.shard went %q: want %s cleared (released) before another shard recorded itself", history, shardA)
	}
	if history[len(history)-1] != shardB {
		t.Errorf("status.shard went %q, want it to end on %s", history, shardB)
	}
}

// recordedShard is the sequence of values of status.shard of one ProviderConfig, as a watch saw them.
type recordedShard struct {
	mu     sync.Mutex
	values []string
}

func (r *recordedShard) history() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.values)
}

// watchRecordedShard records every change of the tenant's status.shard until the test ends.
func watchRecordedShard(t *testing.T, w *workload) *recordedShard {
	t.Helper()
	r := &recordedShard{}
	factory := mpinformers.NewSharedInformerFactory(w.mp, 0)
	informer := factory.Multiproject().V1alpha1().ProviderConfigs().Informer()
	watchAddsAndUpdates(t, factory, informer, "ProviderConfig", func(obj any) {
		pc, ok := obj.(*mpv1alpha1.ProviderConfig)
		if !ok || pc.Name != w.tenant {
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if n := len(r.values); n == 0 || r.values[n-1] != pc.Status.Shard {
			r.values = append(r.values, pc.Status.Shard)
		}
	})
	return r
}
