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
	"net/netip"
	"path"
	"sync"
	"testing"
	"time"

	compute "google.golang.org/api/compute/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

// healthDelay is how long the fake's "health check" takes to report a new endpoint HEALTHY in the backend service.
const healthDelay = 2 * time.Second

// testRolloutBehindABackendService: a gated Deployment's NEGs are in a backend service the tenant allows, which
// reports a new endpoint UNHEALTHY until healthDelay after it is attached, then HEALTHY. Sampled throughout a
// rolling update (maxUnavailable 0), the backend service never reports fewer HEALTHY endpoints than the
// Deployment's replicas, and every new Pod passed the gate as LoadBalancerNegReady: on its health, neither at its
// attach (WithoutHealthCheck) nor at the timeout.
func testRolloutBehindABackendService(t *testing.T, gce *fakegce.Server) {
	const name, backend = "behind", "behind-web"
	var project string
	r := newRolloutWith(t, gce, name, true, netip.MustParsePrefix("10.244.0.0/24"), func(w *workload) {
		project = w.project
		if _, err := gce.InsertBackendService(w.project, "", &compute.BackendService{Name: backend,
			HealthChecks: []string{"global/healthChecks/hc"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.mp.MultiprojectV1alpha1().ProviderConfigs().Patch(w.ctx, w.tenant, types.MergePatchType,
			[]byte(`{"spec":{"gcp":{"backendServices":[{"name":"`+backend+`"}]}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, negapi.BackendServicesAnnotationKey,
		`{"backend_services":{"80":[{"name":"`+backend+`","max_rate_per_endpoint":100}]}}`)
	if _, err := r.w.kube.CoreV1().Services(r.w.appNS).Patch(r.w.ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	turnHealthyAfter(t, gce, project, healthDelay)

	client, err := gce.ComputeService(r.w.ctx)
	if err != nil {
		t.Fatal(err)
	}
	r.healthy = func() (int, error) {
		bs, ok := gce.BackendService(project, "", backend)
		if !ok {
			return 0, fmt.Errorf("no backend service %s", backend)
		}
		n := 0
		for _, b := range bs.Backends {
			h, err := client.BackendServices.GetHealth(project, backend, &compute.ResourceGroupReference{Group: b.Group}).Context(r.w.ctx).Do()
			if err != nil {
				return 0, err
			}
			for _, s := range h.HealthStatus {
				if s.HealthState == fakegce.HealthHealthy {
					n++
				}
			}
		}
		return n, nil
	}
	waitUntil(t, "the first revision's endpoints HEALTHY in the backend service", func() (bool, string) {
		n, err := r.healthy()
		return err == nil && n == rolloutReplicas, fmt.Sprintf("%d HEALTHY (%v)", n, err)
	})

	m := r.roll()
	t.Logf("behind a backend service: rollout complete in %s; HEALTHY endpoints in the backend service: min %d over %d samples",
		m.complete.Round(100*time.Millisecond), m.minHealthy, m.samples)
	if m.minHealthy < rolloutReplicas {
		t.Errorf("during the rollout the backend service reported only %d HEALTHY endpoints, want at least %d", m.minHealthy, rolloutReplicas)
	}
	for _, p := range r.pods() {
		if c := podCondition(&p, negReadyGate); c == nil || c.Status != corev1.ConditionTrue || c.Reason != reasonNEGReady {
			t.Errorf("Pod %s: gate condition %+v, want True %s (on its health)", p.Name, c, reasonNEGReady)
		}
	}
}

// turnHealthyAfter plays the health check of the project's backend services: every endpoint of its NEGs is set
// HEALTHY once it has been attached for delay (until then the fake reports it UNHEALTHY), until the test ends.
func turnHealthyAfter(t *testing.T, gce *fakegce.Server, project string, delay time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		firstSeen := map[string]time.Time{}
		ticker := time.NewTicker(100 * time.Millisecond)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			for _, n := range gce.NEGs(project) {
				zone := path.Base(n.Zone)
				eps, _ := gce.Endpoints(project, zone, n.Name)
				for _, ep := range eps {
					key := zone + "/" + n.Name + "/" + ep.IpAddress
					seen, ok := firstSeen[key]
					if !ok {
						firstSeen[key] = time.Now()
						continue
					}
					if time.Since(seen) >= delay {
						// Detached meanwhile (a Pod gone): nothing to report.
						_ = gce.SetEndpointHealth(project, zone, n.Name, ep.IpAddress, servicePort, fakegce.HealthHealthy)
					}
				}
			}
		}
	}()
}
