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
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
)

// TestEndpointChangesDuringAWriteInFlightMakeOneMoreWrite: with --neg-endpoint-batch-period, five endpoint changes
// of a converged Service written in quick succession reach GCE for fewer Translation spec patches than changes on the
// real API server: the first change is written at once (no write in flight), the others come while it is in flight
// (the fake GCE takes 2 s to attach) and are written together; on a loaded machine the last may miss that window.
func TestEndpointChangesDuringAWriteInFlightMakeOneMoreWrite(t *testing.T) {
	const period, changes = 5 * time.Second, 5
	e := newEnvWith(t, envOptions{countCalls: true, batchPeriod: period})
	a := e.newTenant("a", projectA)
	ns := a.namespace()
	e.nodes(a.name, a.name, 1)
	eps := podsIn(a.name, 0, 1, 3, 2, 1)
	e.setSlices(ns, "web", "http", 8080, eps)
	services, translations := a.watchView(informerset.Services), a.watchView(informerset.Translations)
	a.start()
	e.service(ns, "web", `{"exposed_ports":{"80":{}}}`)
	e.waitConverged(projectA, ns, "web", 80, 8080, eps)
	e.waitFor("the neg-status annotation", 30*time.Second, func() (bool, error) {
		_, ok := e.negStatus(ns, "web")
		return ok, nil
	})
	a.settle(services, translations, ns, "web")

	// Long enough that every change after the first comes while the first is in flight, on a loaded machine too.
	e.gce.SetLatency(projectA, fakegce.MethodAttachEndpoints, 2*time.Second)
	before, start := e.calls.Snapshot(), time.Now()
	for i := range changes {
		eps[1].ip = fmt.Sprintf("10.99.0.%d", i+1)
		e.setSlices(ns, "web", "http", 8080, eps)
	}
	if took := time.Since(start); took >= period {
		t.Fatalf("writing the %d changes took %v, not inside the batch period %v", changes, took, period)
	}
	e.waitConverged(projectA, ns, "web", 80, 8080, eps)
	a.settle(services, translations, ns, "web")
	got := e.calls.Since(before)
	writes := maps.Clone(got)
	maps.DeleteFunc(writes, func(kind string, _ int) bool {
		return strings.HasPrefix(kind, "get ") || strings.HasPrefix(kind, "list ")
	})
	patches, statuses := writes["patch translations"], writes["update translations/status"]
	delete(writes, "patch translations")
	delete(writes, "update translations/status")
	// The pusher's status updates follow the spec's generations, one or more each (its declaration, then the result).
	if patches < 1 || patches > 3 || statuses < patches || len(writes) != 0 {
		t.Errorf("%d endpoint changes in quick succession: other writes %v, spec patches %d, status updates %d; want 1 to 3 patches, a status update for each, nothing else",
			changes, writes, patches, statuses)
	}
}
