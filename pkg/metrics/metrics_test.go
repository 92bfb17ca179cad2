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
