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
	"fmt"
	"testing"

	"github.com/multiproject/multiproject-controller-manager/test/benchresult"
	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

// BenchmarkEndpointChangeCost runs TestEndpointChangeCostsNoReadsAndOneWrite's scenario (the same code, which
// fails on any read or unexpected write) and records its counts as the neg-endpoint-change-cost row, so that
// make bench measures the row the README shows. Its figures are counts of requests, not times: the machine's noise
// does not move them.
func BenchmarkEndpointChangeCost(b *testing.B) {
	const changes = 3
	var costs []map[string]int
	for range b.N {
		costs = endpointChangeCost(b, changes)
	}
	if b.Failed() || len(costs) == 0 {
		return
	}
	var reads, specWrites, statusWrites, all int
	for _, c := range costs {
		reads += framework.Reads(c)
		specWrites += c["patch translations"]
		statusWrites += c["update translations/status"]
		for _, n := range c {
			all += n
		}
	}
	perChange := func(n int) float64 { return float64(n) / float64(len(costs)) }
	b.ReportMetric(perChange(reads), "reads/change")
	b.ReportMetric(perChange(specWrites), "translation-writes/change")
	benchresult.Record(b, benchresult.Row{
		ID: "neg-endpoint-change-cost", Benchmark: "BenchmarkEndpointChangeCost", Package: "test/integration/neg",
		What: "API requests of the whole neg controller for one endpoint change of a converged Service, real API server, " +
			fmt.Sprintf("mean of %d changes", len(costs)),
		Baseline: "the fewest the change needs: the translator's one write of the Translation's spec",
		Measures: []benchresult.Measure{
			{Label: "API reads", Ours: perChange(reads)},
			{Label: "translator writes (the Translation's spec patch)", Ours: perChange(specWrites), Baseline: benchresult.Float(1), Goal: benchresult.Float(1)},
			{Label: "pusher writes (the Translation's status)", Ours: perChange(statusWrites)},
			{Label: "all requests", Ours: perChange(all)},
		},
		Notes: "Before the translator read its Translations from the cache (2026-11-23), the same change cost 2 " +
			"Translation LISTs besides the same writes. The run fails on any read or any write but these, as the test does.",
		Command:  "make bench BENCH=EndpointChangeCost",
		Settings: benchresult.GoTestSettings(nil),
		Doc:      "docs/neg.md#what-a-sync-costs",
	})
}
