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

// TestObserveProviderConfig: one series per condition type and status, 1 for the status the condition has; a
// condition dropped from the status loses its series; the deletion timestamp is there only while deleting; a
// forgotten tenant has none left, and another tenant's stay.
func TestObserveProviderConfig(t *testing.T) {
	Register()
	const tenant = "tenant-status-metrics"
	ObserveProviderConfig("tenant-other", []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}}, nil)

	ObserveProviderConfig(tenant, []metav1.Condition{
		{Type: "Ready", Status: metav1.ConditionFalse},
		{Type: "NEGReady", Status: metav1.ConditionUnknown},
	}, nil)
	conds, deletion := series(t, tenant)
	want := "NEGReady/False=0 NEGReady/True=0 NEGReady/Unknown=1 Ready/False=1 Ready/True=0 Ready/Unknown=0"
	if got := strings.Join(conds, " "); got != want || deletion != "" {
		t.Errorf("series = %s, deletion %q; want %s and no deletion", got, deletion, want)
	}

	deleted := metav1.NewTime(time.Unix(1_800_000_000, 0))
	ObserveProviderConfig(tenant, []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}}, &deleted)
	conds, deletion = series(t, tenant)
	want = "Ready/False=0 Ready/True=1 Ready/Unknown=0"
	if got := strings.Join(conds, " "); got != want || deletion != "1.8e+09" {
		t.Errorf("series = %s, deletion %q; want %s and deletion 1.8e+09", got, deletion, want)
	}

	ForgetProviderConfig(tenant)
	if conds, deletion = series(t, tenant); len(conds) != 0 || deletion != "" {
		t.Errorf("a forgotten tenant keeps %v, deletion %q", conds, deletion)
	}
	if conds, _ = series(t, "tenant-other"); len(conds) != 3 {
		t.Errorf("forgetting a tenant left another with %v", conds)
	}
}
