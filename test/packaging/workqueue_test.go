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

package packaging

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
)

// queueProbeRuns numbers the runs of TestTenantQueuesAreNamedOnMetrics in this process.
var queueProbeRuns atomic.Int32

// TestTenantQueuesAreNamedOnMetrics pins what the rules, the dashboard and docs/monitoring.md rely on: with the
// workqueue metrics provider the binary registers (this package imports the command), a tenant's queue built by
// worker.New appears on /metrics as workqueue_*{name="<tenant>-<controller>[-<queue>]"}.
func TestTenantQueuesAreNamedOnMetrics(t *testing.T) {
	exportedMetrics(t) // the command's registrations, as the binary makes them
	// The registry is the process's: each run (go test -count) names its queues afresh, since a closed queue's
	// series stay.
	tenant := fmt.Sprintf("queue-probe%d", queueProbeRuns.Add(1))
	queues := map[string]worker.Config{
		// neg's two halves, as pkg/controller/neg builds them.
		tenant + "-neg-translator": {Tenant: tenant, Controller: "neg", Queue: "translator"},
		tenant + "-neg-pusher":     {Tenant: tenant, Controller: "neg", Queue: "pusher"},
		tenant + "-ingress-tunnel": {Tenant: tenant, Controller: "ingress-tunnel"},
		// The process-wide ProviderConfig controller has no tenant.
		"providerconfig-" + tenant: {Controller: "providerconfig-" + tenant},
	}
	for name, cfg := range queues {
		w := worker.New(cfg)
		w.Add("a")
		w.Add("b")
		t.Cleanup(func() { w.Close(context.Background()) })
		for _, family := range []string{"workqueue_adds_total", "workqueue_depth"} {
			values := valuesByQueue(t, family)
			if got := values[name]; got != 2 {
				t.Errorf("%s{name=%q} = %v, want 2 (queues on /metrics: %v)", family, name, got, values)
			}
		}
	}
}

// valuesByQueue returns the values of a counter or gauge family of the registry by their name label.
func valuesByQueue(t *testing.T, family string) map[string]float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != family {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" {
					out[l.GetValue()] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}
