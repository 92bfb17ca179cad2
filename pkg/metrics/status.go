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
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics"
)

// The series that describe state (which controllers run, the status) are made at scrape time from the tenants a
// replica runs, the way kube-state-metrics exports an object's conditions: a tenant's series cost nothing between
// scrapes (as gauges they held about 8 KB per tenant, a fifth of an idle tenant's heap), they can never outlive
// what they describe, and a scrape sees the status as the cache holds it.
var (
	controllersRunningDesc = metrics.NewDesc(metrics.BuildFQName("", subsystem, "controllers_running"),
		"1 while the named per-tenant controller runs for the ProviderConfig.",
		[]string{"provider_config", "controller"}, nil, metrics.ALPHA, "")
	providerConfigConditionDesc = metrics.NewDesc(metrics.BuildFQName("", subsystem, "provider_config_condition"),
		"The conditions of a ProviderConfig's status: 1 for the status (True, False, Unknown) the condition of that type has, 0 for the others.",
		[]string{"provider_config", "type", "status"}, nil, metrics.ALPHA, "")
	providerConfigDeletionDesc = metrics.NewDesc(metrics.BuildFQName("", subsystem, "provider_config_deletion_timestamp_seconds"),
		"Unix time of a ProviderConfig's deletionTimestamp, while it is being deleted (its cleanup has not finished).",
		[]string{"provider_config"}, nil, metrics.ALPHA, "")
)

// conditionStatuses are the statuses a condition series exists for; every condition has all three.
var conditionStatuses = []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown}

// ProviderConfigStatus is what the status series show of one ProviderConfig.
type ProviderConfigStatus struct {
	Name              string
	Conditions        []metav1.Condition
	DeletionTimestamp *metav1.Time
}

// TenantSource tells a scrape about the tenants a ProviderConfig controller runs.
type TenantSource struct {
	// Statuses lists the ProviderConfigs the controller runs, with their status.
	Statuses func() []ProviderConfigStatus
	// Running lists the controllers that run, by ProviderConfig.
	Running func() map[string][]string
}

// statusSeries exports what every added source tells. There is one source per running ProviderConfig
// controller: one in the binary, several in a test process.
type statusSeries struct {
	metrics.BaseStableCollector

	mu      sync.Mutex
	sources map[*TenantSource]struct{}
}

var statusCollector = &statusSeries{sources: map[*TenantSource]struct{}{}}

// AddTenantSource makes every scrape export what source tells (either func may be nil), until the returned
// function is called.
func AddTenantSource(source TenantSource) (remove func()) {
	key := &source
	statusCollector.mu.Lock()
	statusCollector.sources[key] = struct{}{}
	statusCollector.mu.Unlock()
	return func() {
		statusCollector.mu.Lock()
		delete(statusCollector.sources, key)
		statusCollector.mu.Unlock()
	}
}

func (c *statusSeries) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- controllersRunningDesc
	ch <- providerConfigConditionDesc
	ch <- providerConfigDeletionDesc
}

func (c *statusSeries) CollectWithStability(ch chan<- metrics.Metric) {
	c.mu.Lock()
	sources := make([]TenantSource, 0, len(c.sources))
	for source := range c.sources {
		sources = append(sources, *source)
	}
	c.mu.Unlock()
	for _, source := range sources {
		if source.Running != nil {
			for providerConfig, controllers := range source.Running() {
				for _, controller := range controllers {
					ch <- metrics.NewLazyConstMetric(controllersRunningDesc, metrics.GaugeValue, 1, providerConfig, controller)
				}
			}
		}
		if source.Statuses != nil {
			for _, pc := range source.Statuses() {
				collectStatus(ch, pc)
			}
		}
	}
}

func collectStatus(ch chan<- metrics.Metric, pc ProviderConfigStatus) {
	for _, cond := range pc.Conditions {
		for _, status := range conditionStatuses {
			value := 0.0
			if cond.Status == status {
				value = 1
			}
			ch <- metrics.NewLazyConstMetric(providerConfigConditionDesc, metrics.GaugeValue, value, pc.Name, cond.Type, string(status))
		}
	}
	if pc.DeletionTimestamp != nil {
		ch <- metrics.NewLazyConstMetric(providerConfigDeletionDesc, metrics.GaugeValue, float64(pc.DeletionTimestamp.Unix()), pc.Name)
	}
}
