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

package providerconfig

import (
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
)

// tenantSample is one series of a tenant: its metric, its labels and its value (gauges and counters).
type tenantSample struct {
	metric string
	labels map[string]string
	value  float64
}

// tenantSamples gathers every series of the registry labeled with the tenant as provider_config.
func tenantSamples(t *testing.T, tenant string) []tenantSample {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []tenantSample
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if !testutil.LabelsMatch(m, map[string]string{"provider_config": tenant}) {
				continue
			}
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			out = append(out, tenantSample{metric: f.GetName(), labels: labels, value: m.GetGauge().GetValue() + m.GetCounter().GetValue()})
		}
	}
	return out
}

// statusSeries returns the tenant's condition series as "type/status" → value, and its deletion timestamp series
// (nil without one).
func statusSeries(t *testing.T, tenant string) (map[string]float64, *float64) {
	t.Helper()
	conditions := map[string]float64{}
	var deletion *float64
	for _, s := range tenantSamples(t, tenant) {
		switch s.metric {
		case "multiproject_provider_config_condition":
			conditions[s.labels["type"]+"/"+s.labels["status"]] = s.value
		case "multiproject_provider_config_deletion_timestamp_seconds":
			deletion = &s.value
		}
	}
	return conditions, deletion
}

// runningSeries returns the controllers the tenant's controllers_running series name, sorted, each with its value.
func runningSeries(t *testing.T, tenant string) []string {
	t.Helper()
	var out []string
	for _, s := range tenantSamples(t, tenant) {
		if s.metric == "multiproject_controllers_running" {
			out = append(out, fmt.Sprintf("%s=%g", s.labels["controller"], s.value))
		}
	}
	slices.Sort(out)
	return out
}

// tenantSeries returns the names of the metrics that have a series of the tenant.
func tenantSeries(t *testing.T, tenant string) []string {
	t.Helper()
	var out []string
	for _, s := range tenantSamples(t, tenant) {
		out = append(out, s.metric)
	}
	return out
}

// readyIs says whether the Ready series of the tenant say status, as kube-state-metrics would: 1 for it, 0 for
// the other two.
func readyIs(conditions map[string]float64, status metav1.ConditionStatus) bool {
	for _, s := range []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown} {
		want := 0.0
		if s == status {
			want = 1
		}
		if v, ok := conditions[mpv1alpha1.ProviderConfigConditionReady+"/"+string(s)]; !ok || v != want {
			return false
		}
	}
	return true
}

// TestStatusMetricsFollowTheProviderConfig: the condition gauge says Ready True once the tenant converged and
// Ready False while its deletion waits for cleanup, the deletion gauge holds the deletionTimestamp meanwhile, the
// running gauge names the running controller, and every series of the tenant is gone once the ProviderConfig is,
// for good.
func TestStatusMetricsFollowTheProviderConfig(t *testing.T) {
	metrics.Register()
	const name = "status-metrics-a" // the registry is the process's: a name no other test uses
	f := newFixture(t, 1)
	f.create(providerConfig(name, "c-1"))
	f.waitFor("the gauge to say Ready True", func() bool {
		conditions, deletion := statusSeries(t, name)
		return readyIs(conditions, metav1.ConditionTrue) && deletion == nil
	})
	// The probe's own condition is exported too, not only Ready.
	if conditions, _ := statusSeries(t, name); conditions[mpv1alpha1.ProviderConfigConditionNamespaceProjectReady+"/True"] != 1 {
		t.Errorf("condition series %v lack the probe's %s True", conditions, mpv1alpha1.ProviderConfigConditionNamespaceProjectReady)
	}
	if running := runningSeries(t, name); !slices.Equal(running, []string{"probe=1"}) {
		t.Errorf("controllers_running series %v, want probe=1", running)
	}

	f.probes.setPending(name, "2 NEGs not deleted yet")
	f.markDeleted(name)
	deletedAt := float64(f.get(name).DeletionTimestamp.Unix())
	f.waitFor("the gauges to say Ready False and the deletion pending", func() bool {
		conditions, deletion := statusSeries(t, name)
		return readyIs(conditions, metav1.ConditionFalse) && deletion != nil && *deletion == deletedAt
	})

	f.probes.setPending(name, "")
	f.waitFor("the finalizer to go", func() bool {
		return !slices.Contains(f.get(name).Finalizers, mpv1alpha1.ProviderConfigCleanupFinalizer)
	})
	// The fake clientset keeps an object whose finalizers are gone; the API server would delete it.
	if err := f.mp.MultiprojectV1alpha1().ProviderConfigs().Delete(f.ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Every series, the sync counter's too: the sync that sees the object gone forgets it, and that sync may come
	// after the status series are gone.
	f.waitFor("the tenant's series to go", func() bool {
		conditions, deletion := statusSeries(t, name)
		return len(conditions) == 0 && deletion == nil && len(runningSeries(t, name)) == 0 && len(tenantSeries(t, name)) == 0
	})
	// Once the controller has returned, every sync has been counted: none may have made a series again.
	f.stop()
	if series := tenantSeries(t, name); len(series) > 0 {
		t.Errorf("the deleted tenant keeps series of %v", series)
	}
}
