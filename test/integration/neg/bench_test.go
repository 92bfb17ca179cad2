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
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
	"github.com/multiproject/multiproject-controller-manager/test/benchresult"
	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

// benchEndpointsPerZone is the endpoint count of each Service in each of the three zones.
const benchEndpointsPerZone = 40

// BenchmarkConvergence measures how long N annotated Services take to converge through the full neg controller
// (translator and pusher; Services created, Translations written, NEGs created and filled in the fake GCE), against
// a baseline in the same process that makes the same API writes in a plain loop (for each Service: its creation,
// the Translation the translator would write, and the neg-status patch it would make) for the pusher alone. The
// Services are headless in both: the test control plane's Service range is small, and a cluster IP's allocation is
// the user's cost, not the controller's. It reports both times, their ratio, and the GCE calls of the full flow
// against the fewest mutating calls the change needs (one insert per NEG plus one attach per 500 endpoints), and
// records the row neg-convergence.
//
//	WHAT=./test/integration/neg hack/test-integration.sh -race=false -run '^$' -bench Convergence -benchtime 3x
func BenchmarkConvergence(b *testing.B) {
	row := benchresult.Row{
		ID: "neg-convergence", Benchmark: "BenchmarkConvergence", Package: "test/integration/neg",
		What: "N annotated headless Services (3 zones × 40 endpoints each) created at once converge through the full neg " +
			"controller (every Translation synced, every NEG Ready and full in the fake GCE), real API server",
		Baseline: "the same API writes in a plain loop (create the Service, create its Translation, patch its neg-status) " +
			"for the pusher alone, in the same run",
		Command: "WHAT=./test/integration/neg hack/test-integration.sh -race=false -run '^$' -bench Convergence -benchtime 3x",
		Doc:     "docs/neg.md#benchmark",
		Notes:   os.Getenv("BENCH_NOTES"),
	}
	sizes := []int{10, 40}
	// Go runs a sub-benchmark's function once with b.N = 1 before the run with -benchtime's N: the last run's
	// measures are the row's.
	measures := map[int][]benchresult.Measure{}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			e := newEnvWith(b, envOptions{logger: ktesting.NewLogger(b, ktesting.NewConfig(ktesting.Verbosity(2)))})
			var fullTotal, baseTotal time.Duration
			var mutating, calls, minimum int
			for i := 0; i < b.N; i++ {
				full, m, c, min := e.convergeFull(b, n)
				base := e.convergeBaseline(b, n)
				fullTotal += full
				baseTotal += base
				mutating, calls, minimum = mutating+m, calls+c, minimum+min
			}
			fullMS := float64(fullTotal.Microseconds()) / 1000 / float64(b.N)
			baseMS := float64(baseTotal.Microseconds()) / 1000 / float64(b.N)
			b.ReportMetric(fullMS, "full-ms")
			b.ReportMetric(baseMS, "baseline-ms")
			b.ReportMetric(float64(fullTotal)/float64(baseTotal), "full/baseline")
			b.ReportMetric(float64(mutating)/float64(minimum), "mutating/min-calls")
			b.ReportMetric(float64(calls)/float64(minimum), "all/min-calls")
			measures[n] = []benchresult.Measure{
				{Label: fmt.Sprintf("%d Services", n), Ours: fullMS, Baseline: benchresult.Float(baseMS), Unit: "ms",
					Goal: benchresult.Float(1.5)},
				{Label: fmt.Sprintf("%d Services, mutating GCE calls", n), Ours: float64(mutating) / float64(b.N),
					Baseline: benchresult.Float(float64(minimum) / float64(b.N))}}
		})
	}
	for _, n := range sizes {
		if measures[n] == nil {
			return // a -bench pattern that ran only some sizes records nothing
		}
		row.Measures = append(row.Measures, measures[n]...)
	}
	benchresult.Record(b, row)
}

// benchService creates a headless Service annotated for NEGs on port 80 (http → 8080).
func (e *env) benchService(ns, name string) {
	e.t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Annotations: map[string]string{negapi.AnnotationKey: `{"exposed_ports":{"80":{}}}`}},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}},
	}
	if _, err := e.adminKube.CoreV1().Services(ns).Create(e.ctx, svc, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
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
		e.benchService(ns, fmt.Sprintf("svc%d", k))
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

// convergeBaseline times the same API writes made in a loop, for the pusher alone: each Service created, its
// Translation created, its neg-status patched, as the translator does them.
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
	status := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, negapi.StatusAnnotationKey,
		`{"network_endpoint_groups":{"80":"base"},"zones":["europe-west1-b","europe-west1-c","europe-west1-d"]}`))
	b.StartTimer()

	start := time.Now()
	for k, tr := range translations {
		name := fmt.Sprintf("svc%d", k)
		e.benchService(ns, name)
		if _, err := e.mp.MultiprojectV1alpha1().Translations(ns).Create(e.ctx, tr, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		if _, err := e.kube.CoreV1().Services(ns).Patch(e.ctx, name, types.MergePatchType, status, metav1.PatchOptions{}); err != nil {
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

// BenchmarkEndpointChurn measures what endpoint changes of converged Services cost the API server: 1,000 changes
// (one endpoint moved to a new IP) over 100 Services, in 10 rounds each written concurrently, through the full
// neg controller. It reports the controller's API requests per change (reads, Translation LISTs and PUTs, the
// pusher's status writes, writes answered 409 Conflict) and, as its time ratio, how long the controller took to
// converge against the time the changes took to write (the baseline: the input alone, in the same process).
//
//	WHAT=./test/integration/neg hack/test-integration.sh -run '^$' -bench EndpointChurn -benchtime 1x
func BenchmarkEndpointChurn(b *testing.B) {
	const services, rounds = 100, 10
	e := newEnvWith(b, envOptions{countCalls: true})
	cfg := controlPlane.AdminConfig()
	cfg.QPS, cfg.Burst = 1000, 1000
	writer, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	var converge, input time.Duration
	totals := map[string]int{}
	conflicts := 0
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		a := e.newTenant("churn", fmt.Sprintf("churn-%d", time.Now().UnixNano()%1_000_000))
		ns := a.namespace()
		e.nodes(a.name, a.name, 1)
		slices := make([]*discoveryv1.EndpointSlice, services)
		for k := range services {
			s, err := writer.DiscoveryV1().EndpointSlices(ns).Create(e.ctx, churnSlice(ns, a.name, k, 0), metav1.CreateOptions{})
			if err != nil {
				b.Fatal(err)
			}
			slices[k] = s
		}
		a.start()
		for k := range services {
			e.service(ns, fmt.Sprintf("svc%d", k), `{"exposed_ports":{"80":{}}}`)
		}
		e.waitChurnConverged(b, ns, services, 0)
		a.waitIdle()

		before := e.calls.Snapshot()
		b.StartTimer()
		start := time.Now()
		for r := 1; r <= rounds; r++ {
			// A round's changes go out concurrently, as the EndpointSlice controller's would in a rollout.
			var wg sync.WaitGroup
			errs := make([]error, services)
			for k := range services {
				wg.Go(func() {
					next := churnSlice(ns, a.name, k, r)
					next.ResourceVersion = slices[k].ResourceVersion
					slices[k], errs[k] = writer.DiscoveryV1().EndpointSlices(ns).Update(e.ctx, next, metav1.UpdateOptions{})
				})
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				b.Fatal(err)
			}
		}
		input += time.Since(start)
		e.waitChurnConverged(b, ns, services, rounds)
		converge += time.Since(start)
		b.StopTimer()
		a.waitIdle()
		for kind, n := range e.calls.Since(before) {
			totals[kind] += n
		}
		conflicts += e.calls.ConflictsSince(before)
		a.stop()
	}
	changes := float64(b.N * services * rounds)
	b.Logf("API requests over %d changes: %v (%d answered 409 Conflict)", int(changes), totals, conflicts)
	b.ReportMetric(float64(converge.Milliseconds())/float64(b.N), "converge-ms")
	b.ReportMetric(float64(input.Milliseconds())/float64(b.N), "input-ms")
	b.ReportMetric(float64(converge)/float64(input), "converge/input")
	b.ReportMetric(float64(framework.Reads(totals))/changes, "reads/change")
	b.ReportMetric(float64(totals["list translations"])/changes, "translation-lists/change")
	b.ReportMetric(float64(totals["update translations"]+totals["patch translations"])/changes, "translation-writes/change")
	b.ReportMetric(float64(totals["update translations/status"])/changes, "status-puts/change")
	b.ReportMetric(float64(conflicts)/changes, "conflicts/change")
}

// churnSlice is Service svc<k>'s EndpointSlice after round r: one endpoint per zone, the zone-b one at an address
// of round r.
func churnSlice(ns, nodePrefix string, k, r int) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("svc%d-http", k),
			Labels: map[string]string{discoveryv1.LabelServiceName: fmt.Sprintf("svc%d", k)}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for zi := range zones {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{churnIP(k, r, zi)},
			NodeName: ptr.To(fmt.Sprintf("%s-%c-0", nodePrefix, 'b'+zi)), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return s
}

// churnIP is the address of Service k's endpoint in zone zi after round r; only the zone-b one changes.
func churnIP(k, r, zi int) string {
	if zi != 0 {
		r = 0
	}
	return fmt.Sprintf("10.%d.%d.%d", 100+k, r, zi+1)
}

// waitChurnConverged waits until every Service's Translation declares the endpoints of round r and is synced.
func (e *env) waitChurnConverged(b *testing.B, ns string, services, r int) {
	err := wait.PollUntilContextTimeout(e.ctx, 20*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := e.admin.MultiprojectV1alpha1().Translations(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		done := 0
		for i := range list.Items {
			tr := &list.Items[i]
			var k int
			if _, err := fmt.Sscanf(tr.Name, "neg-v1-svc%d-80", &k); err != nil || !synced(tr) || len(tr.Spec.Resources) != len(zones) {
				continue
			}
			if eps := tr.Spec.Resources[0].NetworkEndpointGroup.Endpoints; len(eps) == 1 && eps[0].IPAddress == churnIP(k, r, 0) {
				done++
			}
		}
		return done == services, nil
	})
	if err != nil {
		b.Fatalf("the %d Services did not converge on round %d: %v", services, r, err)
	}
}
