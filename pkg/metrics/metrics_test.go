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

package metrics

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
)

// series returns "type/status=value" of every condition series of the tenant, sorted, and its deletion timestamp
// series' value ("" without one).
func series(t *testing.T, tenant string) (conditions []string, deletion string) {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if !testutil.LabelsMatch(m, map[string]string{"provider_config": tenant}) {
				continue
			}
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch f.GetName() {
			case "multiproject_provider_config_condition":
				conditions = append(conditions, fmt.Sprintf("%s/%s=%g", labels["type"], labels["status"], m.GetGauge().GetValue()))
			case "multiproject_provider_config_deletion_timestamp_seconds":
				deletion = fmt.Sprintf("%g", m.GetGauge().GetValue())
			}
		}
	}
	sort.Strings(conditions)
	return conditions, deletion
}

// TestStatusSeriesFollowTheSources: at every scrape, one series per condition type and status of every
// ProviderConfig a source lists, 1 for the status the condition has; a condition dropped from the status has no
// series; the deletion timestamp is there only while deleting; a ProviderConfig no longer listed, and every one of
// a removed source, has none left, while another source's stay.
func TestStatusSeriesFollowTheSources(t *testing.T) {
	Register()
	const tenant = "tenant-status-metrics"
	other := AddTenantSource(TenantSource{Statuses: func() []ProviderConfigStatus {
		return []ProviderConfigStatus{{Name: "tenant-other", Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}}}}
	}})
	defer other()

	var mu sync.Mutex
	var listed []ProviderConfigStatus
	set := func(pcs ...ProviderConfigStatus) {
		mu.Lock()
		defer mu.Unlock()
		listed = pcs
	}
	remove := AddTenantSource(TenantSource{Statuses: func() []ProviderConfigStatus {
		mu.Lock()
		defer mu.Unlock()
		return listed
	}})
	defer remove()

	set(ProviderConfigStatus{Name: tenant, Conditions: []metav1.Condition{
		{Type: "Ready", Status: metav1.ConditionFalse},
		{Type: "NEGReady", Status: metav1.ConditionUnknown},
	}})
	conds, deletion := series(t, tenant)
	want := "NEGReady/False=0 NEGReady/True=0 NEGReady/Unknown=1 Ready/False=1 Ready/True=0 Ready/Unknown=0"
	if got := strings.Join(conds, " "); got != want || deletion != "" {
		t.Errorf("series = %s, deletion %q; want %s and no deletion", got, deletion, want)
	}

	deleted := metav1.NewTime(time.Unix(1_800_000_000, 0))
	set(ProviderConfigStatus{Name: tenant, Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}}, DeletionTimestamp: &deleted})
	conds, deletion = series(t, tenant)
	want = "Ready/False=0 Ready/True=1 Ready/Unknown=0"
	if got := strings.Join(conds, " "); got != want || deletion != "1.8e+09" {
		t.Errorf("series = %s, deletion %q; want %s and deletion 1.8e+09", got, deletion, want)
	}

	set()
	if conds, deletion = series(t, tenant); len(conds) != 0 || deletion != "" {
		t.Errorf("a ProviderConfig no longer listed keeps %v, deletion %q", conds, deletion)
	}
	if conds, _ = series(t, "tenant-other"); len(conds) != 3 {
		t.Errorf("another source's ProviderConfig has %v, want its three Ready series", conds)
	}
	other()
	if conds, _ = series(t, "tenant-other"); len(conds) != 0 {
		t.Errorf("a removed source's ProviderConfig keeps %v", conds)
	}
}

// TestGCESeriesCountCallsAndLatency: the counter has a series per result seen; the histogram puts a call on a
// bucket's bound in that bucket (le is inclusive) and one above every bound only in +Inf, with the count and the
// sum of every call; another tenant's calls are apart; a forgotten tenant has no series left, the other keeps its.
func TestGCESeriesCountCallsAndLatency(t *testing.T) {
	Register()
	const tenant, other, method = "tenant-gce-series", "tenant-gce-series-other", "networkEndpointGroups.get"
	ObserveGCERequest(tenant, method, "success", 5*time.Millisecond)
	ObserveGCERequest(tenant, method, "success", 200*time.Millisecond)
	ObserveGCERequest(tenant, method, "not_found", 2*time.Minute)
	ObserveGCERequest(other, method, "success", time.Second)

	results, err := testutil.GetCounterValuesFromGatherer(legacyregistry.DefaultGatherer, "multiproject_gce_requests_total",
		map[string]string{"provider_config": tenant, "method": method}, "result")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(results) != "map[not_found:1 success:2]" {
		t.Errorf("calls by result = %v, want 2 success and 1 not_found", results)
	}
	h := latencySeries(t, tenant)
	if h == nil {
		t.Fatal("no latency series")
	}
	if h.GetSampleCount() != 3 || h.GetSampleSum() != 0.005+0.2+120 {
		t.Errorf("count %d, sum %g; want 3 and %g", h.GetSampleCount(), h.GetSampleSum(), 0.005+0.2+120)
	}
	buckets := map[float64]uint64{}
	for _, b := range h.GetBucket() {
		buckets[b.GetUpperBound()] = b.GetCumulativeCount()
	}
	for bound, want := range map[float64]uint64{0.005: 1, 0.1: 1, 0.25: 2, 60: 2} {
		if buckets[bound] != want {
			t.Errorf("le=%g holds %d calls, want %d", bound, buckets[bound], want)
		}
	}

	ForgetProviderConfig(tenant)
	if h := latencySeries(t, tenant); h != nil {
		t.Error("a forgotten tenant still has a latency series")
	}
	if left, _ := testutil.GetCounterValuesFromGatherer(legacyregistry.DefaultGatherer, "multiproject_gce_requests_total",
		map[string]string{"provider_config": tenant}, "result"); len(left) != 0 {
		t.Errorf("a forgotten tenant still has call series %v", left)
	}
	if h := latencySeries(t, other); h.GetSampleCount() != 1 {
		t.Errorf("the other tenant's latency series: %v; want one call", h)
	}
	ForgetProviderConfig(other)
}

// latencySeries returns the tenant's one GCE latency histogram, or nil.
func latencySeries(t *testing.T, tenant string) *dto.Histogram {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "multiproject_gce_request_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			if testutil.LabelsMatch(m, map[string]string{"provider_config": tenant}) {
				return m.GetHistogram()
			}
		}
	}
	return nil
}

// TestCompactVecsExportWhatTheyHold: a CompactVec's series are gathered with their labels, type and value; a
// deleted series, and every series of a deleted tenant, is gone while another tenant's stays.
func TestCompactVecsExportWhatTheyHold(t *testing.T) {
	Register()
	const tenant, other = "tenant-compact", "tenant-compact-other"
	Syncs.Inc(tenant, "neg", "success")
	Syncs.Add(2, tenant, "neg", "success")
	Syncs.Inc(tenant, "neg", "error")
	QueueDepth.Set(7, tenant, "neg", "translator")
	ProviderConfigSyncs.Inc(tenant, "success")
	ProviderConfigSyncs.Inc(other, "success")

	gathered := func(name, tenant string) map[string]string {
		families, err := legacyregistry.DefaultGatherer.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, f := range families {
			if f.GetName() != name {
				continue
			}
			for _, m := range f.GetMetric() {
				if !testutil.LabelsMatch(m, map[string]string{"provider_config": tenant}) {
					continue
				}
				var labels []string
				for _, l := range m.GetLabel() {
					labels = append(labels, l.GetName()+"="+l.GetValue())
				}
				value := m.GetCounter().GetValue()
				if f.GetType() == dto.MetricType_GAUGE {
					value = m.GetGauge().GetValue()
				}
				out[strings.Join(labels, ",")] = fmt.Sprintf("%s %g", f.GetType(), value)
			}
		}
		return out
	}
	want := map[string]string{
		"controller=neg,provider_config=tenant-compact,result=success": "COUNTER 3",
		"controller=neg,provider_config=tenant-compact,result=error":   "COUNTER 1",
	}
	if got := gathered("multiproject_controller_syncs_total", tenant); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("syncs = %v, want %v", got, want)
	}
	if got := gathered("multiproject_controller_queue_depth", tenant); fmt.Sprint(got) != "map[controller=neg,provider_config=tenant-compact,queue=translator:GAUGE 7]" {
		t.Errorf("queue depth = %v, want the gauge at 7", got)
	}

	ForgetQueue(tenant, "neg", "translator")
	ForgetController(tenant, "neg")
	ForgetProviderConfig(tenant)
	for _, name := range []string{"multiproject_controller_syncs_total", "multiproject_controller_queue_depth", "multiproject_provider_config_syncs_total"} {
		if got := gathered(name, tenant); len(got) != 0 {
			t.Errorf("%s of a forgotten tenant: %v", name, got)
		}
	}
	if got := gathered("multiproject_provider_config_syncs_total", other); len(got) != 1 {
		t.Errorf("the other tenant's ProviderConfig syncs: %v, want its one series", got)
	}
	ForgetProviderConfig(other)
}

// TestNEGReadinessSeriesGoWithTheTenant: a tenant's readiness series, the waiting gauge and the attach-to-ready
// histogram, are removed by ForgetProviderConfig, and another tenant's are kept.
func TestNEGReadinessSeriesGoWithTheTenant(t *testing.T) {
	Register()
	NEGReadinessPodsWaiting.Set(3, "ready-a")
	ObserveNEGReadiness("ready-a", 2*time.Second)
	ObserveNEGReadiness("ready-b", time.Second)
	ForgetProviderConfig("ready-a")
	if _, ok := NEGReadinessPodsWaiting.Value("ready-a"); ok {
		t.Error("a forgotten tenant still has its Pods waiting series")
	}
	count := func(tenant string) uint64 {
		families, err := legacyregistry.DefaultGatherer.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				if f.GetName() == "multiproject_neg_readiness_attach_to_ready_seconds" && m.GetLabel()[0].GetValue() == tenant {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
		return 0
	}
	if a, b := count("ready-a"), count("ready-b"); a != 0 || b != 1 {
		t.Errorf("attach-to-ready observations: forgotten tenant %d, other %d; want 0 and 1", a, b)
	}
	ForgetProviderConfig("ready-b")
}
