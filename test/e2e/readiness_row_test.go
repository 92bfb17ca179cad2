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
	"fmt"
	"sync"
	"testing"

	"github.com/multiproject/multiproject-controller-manager/test/benchresult"
)

// rolloutRow gathers TestNEGReadinessGate's two rollouts, which run in parallel, into the neg-readiness-rollout
// row: the test is the benchmark (make bench runs it with BENCH_RESULTS_DIR set), so the row is measured by the
// same code that asserts the gate's guarantee, not by a copy of it.
type rolloutRow struct {
	mu                 sync.Mutex
	gated, plain       rolloutMeasure
	hasGated, hasPlain bool
}

func (r *rolloutRow) set(gated bool, m rolloutMeasure) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if gated {
		r.gated, r.hasGated = m, true
	} else {
		r.plain, r.hasPlain = m, true
	}
}

// record writes the row once both rollouts ran and the test passed.
func (r *rolloutRow) record(t *testing.T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.Failed() || !r.hasGated || !r.hasPlain {
		t.Logf("benchmark row neg-readiness-rollout not recorded: a rollout did not run or the test failed")
		return
	}
	benchresult.Record(t, readinessRolloutRow(r.gated, r.plain))
}

// readinessRolloutRow compares the rollout with the gate (ours) to the same rollout without it (the baseline). The
// guarantee is measured as the serving endpoints the NEG was short of the replicas at its worst sample: 0 with the
// gate is the goal. The other two measures are the gate's price: the rollout waits for each attach.
func readinessRolloutRow(gated, plain rolloutMeasure) benchresult.Row {
	short := func(m rolloutMeasure) float64 { return float64(max(0, rolloutReplicas-m.minServing)) }
	shortfall := benchresult.Measure{Label: fmt.Sprintf("serving endpoints short of the %d replicas, worst sample", rolloutReplicas),
		Ours: short(gated), Goal: benchresult.Float(0)}
	notes := fmt.Sprintf("Samples every 100 ms: %d with the gate, %d without.", gated.samples, plain.samples)
	if short(plain) > 0 {
		shortfall.Baseline = benchresult.Float(short(plain))
	} else {
		shortfall.Goal = nil
		notes += " This run's rollout without the gate never fell short at a sample (the window is a few seconds), so the shortfall has no baseline to divide by."
	}
	return benchresult.Row{
		ID: "neg-readiness-rollout", Benchmark: "TestNEGReadinessGate", Package: "test/e2e",
		What: fmt.Sprintf("a %d-replica maxUnavailable: 0 rollout behind a NEG Service with the NEG readiness gate: "+
			"kube-controller-manager's deployment, replicaset and endpointslice controllers, a stand-in kubelet, the built "+
			"binary, fake GCE operations of %s", rolloutReplicas, gceOperationDelay),
		Baseline: "the same rollout without the gate, in the same run",
		Measures: []benchresult.Measure{
			shortfall,
			{Label: "rollout complete", Ours: gated.complete.Seconds(), Baseline: benchresult.Float(plain.complete.Seconds()), Unit: "s"},
			{Label: "new Pods all in the NEG", Ours: gated.converged.Seconds(), Baseline: benchresult.Float(plain.converged.Seconds()), Unit: "s"},
		},
		Notes:    notes,
		Command:  "make bench BENCH=NEGReadinessGate",
		Settings: benchresult.GoTestSettings(map[string]string{"gceOperationDelay": gceOperationDelay.String(), "negReadinessTimeout": negReadinessTimeout.String()}),
		Doc:      "docs/neg.md#pod-readiness-gate",
	}
}
