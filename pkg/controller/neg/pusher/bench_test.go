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

package pusher

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/test/benchresult"
)

// callScenarios are the changes of a 1,200-endpoint NEG the benchmark makes; label names each in the table.
var callScenarios = []struct {
	name, label    string
	attach, detach int
}{
	{"replace-10", "replace 10", 10, 10},
	{"replace-100", "replace 100", 100, 100},
	{"add-600", "add 600", 600, 0},
	{"remove-600", "remove 600", 0, 600},
	{"replace-1200", "replace 1,200", 1200, 1200},
}

// recordCallsRow records the benchmark's row once every scenario ran; the goal is no call over the minimum.
func recordCallsRow(b *testing.B, figures *benchresult.Figures) {
	if b.Failed() {
		return
	}
	var measures []benchresult.Measure
	for _, sc := range callScenarios {
		v, missing := figures.Get(sc.name+"/calls", sc.name+"/minimum")
		if missing != "" {
			b.Logf("benchmark row not recorded: %s did not run", missing)
			return
		}
		measures = append(measures, benchresult.Measure{Label: sc.label, Ours: v[0], Baseline: benchresult.Float(v[1]), Unit: "calls", Goal: benchresult.Float(1)})
	}
	benchresult.Record(b, benchresult.Row{
		ID: "pusher-calls-per-change", Benchmark: "BenchmarkCallsPerEndpointChange", Package: "pkg/controller/neg/pusher",
		What:     "GCE calls the pusher makes for an endpoint change of a 1,200-endpoint NEG, operations completing at once",
		Baseline: "the fewest calls the change needs: one attach per 500 new endpoints, one detach per 500 removed ones",
		Measures: measures, Command: "go test -run '^$' -bench CallsPerEndpointChange -benchtime 10x ./pkg/controller/neg/pusher/",
		Settings: benchresult.GoTestSettings(nil), Doc: "docs/neg-pusher.md#tests-and-benchmark",
		Notes: "With real GCE each mutating call adds at least one zoneOperations.wait, which the minimum does not count.",
	})
}

// BenchmarkCallsPerEndpointChange measures the GCE calls the pusher makes for a change of a 1,200-endpoint NEG
// against the fewest calls that change needs (one attach per 500 new endpoints, one detach per 500 removed ones),
// and reports their ratio. 1.00 means no call was wasted: no re-read, no retry, no per-endpoint call.
func BenchmarkCallsPerEndpointChange(b *testing.B) {
	var figures benchresult.Figures
	defer recordCallsRow(b, &figures)
	for _, sc := range callScenarios {
		b.Run(sc.name, func(b *testing.B) {
			const zone = "us-central1-a"
			tr := translation("web", map[string]int{zone: 1200}, true)
			h := newHarness(b, nil, tr)
			h.waitSynced("web", metav1.ConditionTrue)
			minimum := (sc.attach+499)/500 + (sc.detach+499)/500
			next := 1_000_000 // fresh IPs for attached endpoints
			b.ResetTimer()
			total := 0
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				cur := h.get("web")
				eps := cur.Spec.Resources[0].NetworkEndpointGroup.Endpoints
				before := append([]mpv1alpha1.NetworkEndpoint(nil), eps...)
				eps = eps[sc.detach:]
				for j := 0; j < sc.attach; j++ {
					eps = append(eps, negResource("web", zone, 1).NetworkEndpointGroup.Endpoints[0])
					eps[len(eps)-1].IPAddress = fmt.Sprintf("10.%d.%d.%d", 100+next/62500, next/250%250, next%250+1)
					next++
				}
				cur.Spec.Resources[0].NetworkEndpointGroup.Endpoints = eps
				cur.Generation++
				h.gce.ResetCalls()
				b.StartTimer()
				if _, err := h.client.MultiprojectV1alpha1().Translations(testNamespace).Update(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
					b.Fatal(err)
				}
				h.waitSynced("web", metav1.ConditionTrue)
				b.StopTimer()
				for _, n := range h.gce.Calls(testProject) {
					total += n
				}
				if sc.attach != sc.detach {
					// Restore the NEG's size outside the measurement, so every iteration changes a 1,200-endpoint NEG
					// (growing it without end would also hit GCE's per-NEG endpoint limit).
					back := h.get("web")
					back.Spec.Resources[0].NetworkEndpointGroup.Endpoints = before
					back.Generation++
					if _, err := h.client.MultiprojectV1alpha1().Translations(testNamespace).Update(context.Background(), back, metav1.UpdateOptions{}); err != nil {
						b.Fatal(err)
					}
					h.waitSynced("web", metav1.ConditionTrue)
				}
				b.StartTimer()
			}
			b.StopTimer()
			calls := float64(total) / float64(b.N)
			b.ReportMetric(calls, "gce-calls/op")
			b.ReportMetric(float64(minimum), "min-calls/op")
			b.ReportMetric(calls/float64(minimum), "ratio")
			figures.Set(sc.name+"/calls", calls)
			figures.Set(sc.name+"/minimum", float64(minimum))
		})
	}
}
