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
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestNetworkProgrammingLatencyIsExported: an EndpointSlice change that carries the trigger-time annotation, as the
// EndpointSlice controller writes it, is observed by the built binary in
// multiproject_neg_network_programming_duration_seconds on its /metrics, from that time to the endpoint in GCE.
func TestNetworkProgrammingLatencyIsExported(t *testing.T) {
	resetLease(t)
	gce := startFakeGCE(t)
	w := newWorkload(t, gce)
	w.setService("web", w.endpoints(0, 0, 2))
	le := leaderElection{leaseDuration: 15 * time.Second, renewDeadline: 10 * time.Second, retryPeriod: time.Second}
	m := startManager(t, "netprog", managerKubeconfig(t), gce.Endpoint(), le)
	w.waitConverged("before the change")

	// The change was made 2 s before the slice is written: the latency observed counts from then.
	const before = 2 * time.Second
	eps := w.endpoints(0, 0, 3)
	slice := endpointSlice(w.appNS, "web", eps)
	slice.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: time.Now().Add(-before).UTC().Format(time.RFC3339Nano)}
	current, err := w.kube.DiscoveryV1().EndpointSlices(w.appNS).Get(w.ctx, slice.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slice.ResourceVersion = current.ResourceVersion
	written := time.Now()
	if _, err := w.kube.DiscoveryV1().EndpointSlices(w.appNS).Update(w.ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	w.services["web"] = eps
	w.mu.Unlock()
	w.waitConverged("after the change")
	took := time.Since(written)

	client := adminHTTPClient(t)
	defer client.CloseIdleConnections()
	const family = "multiproject_neg_network_programming_duration_seconds"
	var count, sum float64
	err = wait.PollUntilContextTimeout(w.ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		metrics := scrape(t, client, m)
		count, sum = 0, 0
		for _, s := range metrics[family+"_count"] {
			count += float64(s.Value)
		}
		for _, s := range metrics[family+"_sum"] {
			sum += float64(s.Value)
		}
		return count >= 1, nil
	})
	if err != nil {
		t.Fatalf("%s_count on /metrics stayed 0 after a slice change with a trigger time reached GCE", family)
	}
	// One observation per Translation generation; the converged start's slices carried no trigger time.
	if count != 1 {
		t.Errorf("%s_count = %v, want 1 (one write carried a trigger time)", family, count)
	}
	if sum < before.Seconds() || sum > (before+took).Seconds() {
		t.Errorf("%s_sum = %.3f s, want between %v (the change's age when written) and %v (plus the way to GCE)", family, sum, before, before+took)
	}
}
