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
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/multiproject/multiproject-controller-manager/pkg/sharding"
)

// TestShardedWatchReadsOnlyTheShardsNamespaces: two replicas with --sharding and --sharded-watch on kube-apiserver
// with the ShardedListAndWatch gate. The first runs every tenant; the second joins and takes its share through the
// drain handshake. Each says it reads through shard selectors, and each caches exactly the Services of the buckets
// of the namespaces of the tenants it has run (the first: all of them, since a selector only grows until its
// rebuild; the one that joined: its own); the moved tenants converge on the one that joined, with new endpoints and
// a deleted Service cleaned up from the fake GCE (the audit every end-to-end test ends with).
func TestShardedWatchReadsOnlyTheShardsNamespaces(t *testing.T) {
	const tenants = 6
	resetLease(t)
	cleanupShardLeases(t)
	installShardedRBAC(t)
	gce := startFakeGCE(t)
	ws := make([]*workload, tenants)
	for i := range ws {
		ws[i] = newWorkload(t, gce)
		ws[i].setService("svc-0", ws[i].endpoints(0, 0, 1))
		ws[i].setService("svc-1", ws[i].endpoints(1, 0, 1))
	}
	kubeconfig := managerKubeconfig(t)
	le := leaderElection{leaseDuration: 6 * time.Second, renewDeadline: 4 * time.Second, retryPeriod: time.Second}
	first := startManager(t, "watch-a", kubeconfig, gce.Endpoint(), le, "--sharding=true", "--sharded-watch=true")
	waitShardsRun(t, ws, shardNames(t, []*manager{first}))
	for _, w := range ws {
		w.waitConverged("one shard: " + w.tenant)
	}
	second := startManager(t, "watch-b", kubeconfig, gce.Endpoint(), le, "--sharding=true", "--sharded-watch=true")
	names := shardNames(t, []*manager{first, second})
	waitShardsRun(t, ws, names)
	moved := tenantsOn(t, ws, names[1])
	if len(moved) == 0 || len(moved) == tenants {
		t.Fatalf("the second shard took %d of %d tenants; the test needs a split (shards %v)", len(moved), tenants, names)
	}
	for _, m := range []*manager{first, second} {
		data, err := os.ReadFile(m.logPath)
		if err != nil || !strings.Contains(string(data), "the API server honours shard selectors") {
			t.Errorf("replica %s did not say it reads through shard selectors (%v); log:\n%s", m.name, err, m.logTail(20))
		}
	}

	// The moved tenants work on their new shard: new endpoints, then a deleted Service cleaned up.
	for _, w := range ws {
		w.setService("svc-0", w.endpoints(0, 1, 2))
	}
	moved[0].deleteService("svc-1")
	for _, w := range ws {
		w.waitConverged("two shards with --sharded-watch: " + w.tenant)
	}

	metricsClient := adminHTTPClient(t)
	defer metricsClient.CloseIdleConnections()
	wantFirst := servicesInBuckets(t, bucketsOf(t, ws))
	wantSecond := servicesInBuckets(t, bucketsOf(t, moved))
	if wantSecond >= wantFirst {
		t.Fatalf("the test needs the second shard's namespaces to hold fewer Services (%d) than all tenants' (%d)", wantSecond, wantFirst)
	}
	for m, want := range map[*manager]int{first: wantFirst, second: wantSecond} {
		var got float64
		err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			metrics := scrape(t, metricsClient, m)
			if on := metrics["multiproject_shard_server_side_watch"]; len(on) != 1 || on[0].Value != 1 {
				return false, nil
			}
			got = -1
			for _, s := range metrics["multiproject_shard_cached_objects"] {
				if s.Metric["resource"] == "services" {
					got = float64(s.Value)
				}
			}
			return got == float64(want), nil
		})
		if err != nil {
			t.Errorf("replica %s caches %v Services, want the %d of its buckets", m.name, got, want)
		}
	}
	stopManagers(t, first, second)
}

// bucketsOf is the buckets of the namespace hash of every namespace of the tenants' (labeled with them).
func bucketsOf(t *testing.T, ws []*workload) sets.Set[uint32] {
	t.Helper()
	out := sets.New[uint32]()
	for _, w := range ws {
		list, err := w.kube.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{LabelSelector: labelKey + "=" + w.tenant})
		if err != nil {
			t.Fatal(err)
		}
		for _, ns := range list.Items {
			out.Insert(sharding.NamespaceBucket(ns.Name))
		}
	}
	return out
}

// servicesInBuckets counts the Services of the whole cluster whose namespace is in buckets.
func servicesInBuckets(t *testing.T, buckets sets.Set[uint32]) int {
	t.Helper()
	list, err := controlPlane.AdminClient().CoreV1().Services(metav1.NamespaceAll).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range list.Items {
		if buckets.Has(sharding.NamespaceBucket(s.Namespace)) {
			n++
		}
	}
	return n
}
