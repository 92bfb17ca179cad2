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

package neg

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
)

// benchEndpointsPerZone is the endpoint count of each Service in each of the three zones.
const benchEndpointsPerZone = 40

// BenchmarkConvergence measures how long N annotated Services take to converge through the full neg controller
// (translator and pusher; Services created, Translations written, NEGs created and filled in the fake GCE), against
// a baseline in the same process: the same Translations written in a plain loop for the pusher alone. It reports
// both times, their ratio, and the GCE calls of the full flow against the fewest mutating calls the change needs
// (one insert per NEG plus one attach per 500 endpoints).
//
//	WHAT=./test/integration/neg hack/test-integration.sh -run '^$' -bench Convergence -benchtime 2x
func BenchmarkConvergence(b *testing.B) {
	for _, n := range []int{10, 40} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			e := newEnv(b)
			var fullTotal, baseTotal time.Duration
			var mutating, calls, minimum int
			for i := 0; i < b.N; i++ {
				full, m, c, min := e.convergeFull(b, n)
				base := e.convergeBaseline(b, n)
				fullTotal += full
				baseTotal += base
				mutating, calls, minimum = mutating+m, calls+c, minimum+min
			}
			b.ReportMetric(float64(fullTotal.Milliseconds())/float64(b.N), "full-ms")
			b.ReportMetric(float64(baseTotal.Milliseconds())/float64(b.N), "baseline-ms")
			b.ReportMetric(float64(fullTotal)/float64(baseTotal), "full/baseline")
			b.ReportMetric(float64(mutating)/float64(minimum), "mutating/min-calls")
			b.ReportMetric(float64(calls)/float64(minimum), "all/min-calls")
		})
	}
}

// convergeFull times n Services through the full controller and returns the time and the project's mutating
// calls, all calls, and the minimum of mutating calls.
func (e *env) convergeFull(b *testing.B, n int) (time.Duration, int, int, int) {
	b.StopTimer()
	project := fmt.Sprintf("bench-full-%d", time.Now().UnixNano()%1_000_000)
	a := e.newTenant("full", project)
	ns := a.namespace()
	e.nodes(a.name, a.name, 1)
	for k := range n {
		e.setSlices(ns, fmt.Sprintf("svc%d", k), "http", 8080, podsIn(a.name, 3*k, 1, benchEndpointsPerZone, benchEndpointsPerZone, benchEndpointsPerZone))
	}
	a.start()
	defer a.stop()
	b.StartTimer()

	start := time.Now()
	for k := range n {
		e.service(ns, fmt.Sprintf("svc%d", k), `{"exposed_ports":{"80":{}}}`)
	}
	e.waitAllSynced(b, ns, n)
	elapsed := time.Since(start)

	b.StopTimer()
	calls := 0
	for _, c := range e.gce.Calls(project) {
		calls += c
	}
	minimum := n * len(zones) * (1 + (benchEndpointsPerZone+499)/500)
	return elapsed, e.gce.MutatingCalls(project), calls, minimum
}

// convergeBaseline times the same Translations written directly, in a loop, for the pusher alone.
func (e *env) convergeBaseline(b *testing.B, n int) time.Duration {
	b.StopTimer()
	project := fmt.Sprintf("bench-base-%d", time.Now().UnixNano()%1_000_000)
	base := e.newPusherTenant("base", project)
	ns := base.namespace()
	base.start()
	defer base.stop()
	translations := make([]*mpv1alpha1.Translation, n)
	for k := range n {
		translations[k] = baselineTranslation(ns, base.name, k)
	}
	b.StartTimer()

	start := time.Now()
	for _, tr := range translations {
		if _, err := e.mp.MultiprojectV1alpha1().Translations(ns).Create(e.ctx, tr, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	e.waitAllSynced(b, ns, n)
	elapsed := time.Since(start)
	b.StopTimer()
	return elapsed
}

// baselineTranslation is what the translator writes for Service svc<k> port 80: three NEGs of
// benchEndpointsPerZone endpoints.
func baselineTranslation(ns, tenantName string, k int) *mpv1alpha1.Translation {
	tr := &mpv1alpha1.Translation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("neg-v1-svc%d-80", k),
		Labels:     map[string]string{labelKey: tenantName},
		Finalizers: []string{mpv1alpha1.TranslationDeleterFinalizer}}}
	eps := podsIn(tenantName, 3*k, 1, benchEndpointsPerZone, benchEndpointsPerZone, benchEndpointsPerZone)
	for zi, zone := range zones {
		params := &mpv1alpha1.NetworkEndpointGroupParameters{Network: "default"}
		for _, ep := range eps {
			if ep.zoneIndex == zi {
				params.Endpoints = append(params.Endpoints, mpv1alpha1.NetworkEndpoint{Instance: ep.node, IPAddress: ep.ip, Port: 8080})
			}
		}
		tr.Spec.Resources = append(tr.Spec.Resources, mpv1alpha1.BackendResource{
			Kind: mpv1alpha1.BackendResourceKindNetworkEndpointGroup, Name: fmt.Sprintf("base-svc%d-80", k), Zone: zone,
			Description: fmt.Sprintf(`{"bench":"%s/svc%d"}`, ns, k), NetworkEndpointGroup: params})
	}
	return tr
}

// waitAllSynced waits until the namespace holds n Translations, each pushed at its current generation with every
// NEG Ready and holding all its endpoints.
func (e *env) waitAllSynced(b *testing.B, ns string, n int) {
	err := wait.PollUntilContextTimeout(e.ctx, 20*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := e.admin.MultiprojectV1alpha1().Translations(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		done := 0
		for i := range list.Items {
			tr := &list.Items[i]
			if !synced(tr) || len(tr.Spec.Resources) != len(zones) {
				continue
			}
			ready := true
			for _, s := range tr.Status.Resources {
				ready = ready && s.State == mpv1alpha1.BackendResourceStateReady && s.EndpointCount == benchEndpointsPerZone
			}
			if ready {
				done++
			}
		}
		return done == n, nil
	})
	if err != nil {
		b.Fatalf("%d Services did not converge: %v", n, err)
	}
}
