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

package informerset_test

import (
	"fmt"
	"testing"

	"github.com/multiproject/multiproject-controller-manager/test/benchresult"
)

// The rows of docs/benchmarks.md these benchmarks measure, from their last iteration.

const informersetDoc = "docs/tenancy.md#benchmarks"

func recordInformerRows(b *testing.B, objects, bare, one, many float64) {
	if b.Failed() {
		return
	}
	command := "go test -run '^$' -bench InformerMemory -benchtime 1x ./pkg/informerset/"
	cluster := fmt.Sprintf("%d namespaces of %d Services with one EndpointSlice each, %d Nodes, a Rancher Project per app owner and %d tunnels",
		benchNamespaces, benchServicesPerNS, benchNodes, benchTunnels)
	benchresult.Record(b, benchresult.Row{
		ID: "informerset-heap-per-object", Benchmark: "BenchmarkInformerMemory", Package: "pkg/informerset",
		What: fmt.Sprintf("heap per cached object of the manager's shared informers and tenancy (1 tenant), %s objects shaped as the API server returns them (managedFields, last-applied annotation)",
			benchresult.Thousands(objects)),
		Baseline: "plain client-go informers of the same resources over the same objects",
		Measures: []benchresult.Measure{{Ours: one / objects, Baseline: benchresult.Float(bare / objects), Unit: "B", Goal: benchresult.Float(0.8)}},
		Notes:    "The objects: " + cluster + ".",
		Command:  command, Settings: benchresult.GoTestSettings(nil), Doc: informersetDoc,
	})
	benchresult.Record(b, benchresult.Row{
		ID: "tenancy-heap-1000-tenants", Benchmark: "BenchmarkInformerMemory", Package: "pkg/informerset",
		What: "heap of the tenancy layer with 1,000 tenants (views with a handler on Services, EndpointSlices, Nodes and " +
			"Namespaces, an Interest in a Project and a tunnel each), same objects",
		Baseline: "the same objects with 1 tenant",
		Measures: []benchresult.Measure{{Ours: many / 1e6, Baseline: benchresult.Float(one / 1e6), Unit: "MB", Goal: benchresult.Float(1.3)}},
		Command:  command, Settings: benchresult.GoTestSettings(nil), Doc: informersetDoc,
	})
}

func recordPodRow(b *testing.B, bare, manager float64) {
	if b.Failed() {
		return
	}
	benchresult.Record(b, benchresult.Row{
		ID: "informerset-heap-per-pod", Benchmark: "BenchmarkPodInformerMemory", Package: "pkg/informerset",
		What: fmt.Sprintf("heap per cached Pod, %s Pods of a Deployment shaped as the API server returns them, trimmed "+
			"to what the translator and the readiness reflector read (TrimPod)", benchresult.Thousands(benchPods)),
		Baseline: "a plain client-go Pod informer",
		Measures: []benchresult.Measure{{Ours: manager / benchPods, Baseline: benchresult.Float(bare / benchPods), Unit: "B"}},
		Command:  "go test -run '^$' -bench PodInformerMemory -benchtime 1x ./pkg/informerset/",
		Settings: benchresult.GoTestSettings(nil), Doc: informersetDoc,
	})
}
