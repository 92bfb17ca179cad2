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
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/test/benchresult"
)

// BenchmarkPlannerTenantsCreated is the sharder's planning while tenants are created one by one (each added to the
// informer, then synced): the planner, which places a new tenant on its own, against a full Plan per tenant added,
// what the planner did before, in the same process. PLANNER_BENCH_TENANTS (default 10,000) tenants on three shards.
func BenchmarkPlannerTenantsCreated(b *testing.B) {
	n := 10000
	if v := os.Getenv("PLANNER_BENCH_TENANTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("PLANNER_BENCH_TENANTS=%q: want a positive count", v)
		}
	}
	live := []string{"shard-a", "shard-b", "shard-c"}
	names := randomNames(n, 29)
	var ours, full time.Duration
	for range b.N {
		pcs := make([]*mpv1alpha1.ProviderConfig, 0, n)
		list := func() ([]*mpv1alpha1.ProviderConfig, error) { return pcs, nil }
		var p planner
		p.want("", live, list) // the sharder's first sync, before any tenant
		start := time.Now()
		for _, name := range names {
			pcs = append(pcs, &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: name}})
			p.observe(name, nil, false)
			if want, _, _ := p.want(name, live, list); want == "" {
				b.Fatalf("%s planned on no shard", name)
			}
		}
		ours = time.Since(start)

		input := make(map[string]Placement, n)
		start = time.Now()
		for _, name := range names {
			input[name] = Placement{}
			if Plan(input, live)[name] == "" {
				b.Fatalf("%s planned on no shard", name)
			}
		}
		full = time.Since(start)
	}
	b.ReportMetric(ours.Seconds(), "planner-s")
	b.ReportMetric(full.Seconds(), "full-plan-each-s")
	fmt.Fprintf(os.Stderr, "BenchmarkPlannerTenantsCreated: %d tenants created on 3 shards: the planner %v, a full Plan per tenant %v (%.4f)\n",
		n, ours.Round(time.Microsecond), full.Round(time.Millisecond), ours.Seconds()/full.Seconds())
	if b.Failed() {
		return
	}
	benchresult.Record(b, benchresult.Row{
		ID: "sharding-planner-tenants-created", Benchmark: "BenchmarkPlannerTenantsCreated", Package: "pkg/sharding/sharder",
		What:     fmt.Sprintf("The sharder's planning CPU while %s tenants are created one by one on three shards, each observed and then synced", benchresult.Thousands(float64(n))),
		Baseline: "A full Plan of every tenant per tenant created (N²·S hashes), what the sharder did before, in the same process",
		Measures: []benchresult.Measure{{Ours: ours.Seconds(), Baseline: benchresult.Float(full.Seconds()), Unit: "CPU s", Goal: benchresult.Float(0.01)}},
		Notes:    "Single-threaded, so wall time is CPU time. The planner computes the plan once (the sharder's first sync) and places every new unlabeled tenant on its own in S hashes.",
		Command:  "go test -run '^$' -bench PlannerTenantsCreated -benchtime 1x ./pkg/sharding/sharder/",
		Settings: benchresult.GoTestSettings(map[string]string{"PLANNER_BENCH_TENANTS": strconv.Itoa(n)}),
		Doc:      "docs/sharding.md#placement-rendezvous-hashing-with-bounded-loads",
	})
}
