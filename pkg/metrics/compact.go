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
	"sync"

	"k8s.io/component-base/metrics"
)

// maxLabels is the most labels a CompactVec has.
const maxLabels = 3

type labelValues [maxLabels]string

// CompactVec is a vector of counters or gauges labeled by tenant first, kept as one number per series and exported
// at scrape time. A series of a Prometheus vector holds its label pairs and a metric object, about half a kilobyte;
// with a series or two per tenant in every vector, that was a noticeable part of an idle tenant's heap. Here a
// series is a map entry.
type CompactVec struct {
	metrics.BaseStableCollector

	desc      *metrics.Desc
	valueType metrics.ValueType
	labels    int

	mu     sync.Mutex
	values map[labelValues]float64
}

// NewCompactCounterVec describes a counter vector; its first label must be provider_config.
func NewCompactCounterVec(name, help string, labels ...string) *CompactVec {
	return newCompactVec(metrics.CounterValue, name, help, labels)
}

// NewCompactGaugeVec describes a gauge vector; its first label must be provider_config.
func NewCompactGaugeVec(name, help string, labels ...string) *CompactVec {
	return newCompactVec(metrics.GaugeValue, name, help, labels)
}

func newCompactVec(valueType metrics.ValueType, name, help string, labels []string) *CompactVec {
	if len(labels) == 0 || len(labels) > maxLabels || labels[0] != "provider_config" {
		panic(fmt.Sprintf("metrics: %s: want provider_config and at most %d labels, have %v", name, maxLabels-1, labels))
	}
	return &CompactVec{
		desc:      metrics.NewDesc(metrics.BuildFQName("", subsystem, name), help, labels, nil, metrics.ALPHA, ""),
		valueType: valueType,
		labels:    len(labels),
	}
}

func (v *CompactVec) key(lvs []string) labelValues {
	if len(lvs) != v.labels {
		panic(fmt.Sprintf("metrics: %s takes %d label values, got %v", v.desc, v.labels, lvs))
	}
	var k labelValues
	copy(k[:], lvs)
	return k
}

// Add adds delta to the series of the label values (a counter's delta must not be negative).
func (v *CompactVec) Add(delta float64, lvs ...string) {
	k := v.key(lvs)
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.values == nil {
		v.values = map[labelValues]float64{}
	}
	v.values[k] += delta
}

// Inc adds one.
func (v *CompactVec) Inc(lvs ...string) { v.Add(1, lvs...) }

// Set sets a gauge's series.
func (v *CompactVec) Set(value float64, lvs ...string) {
	k := v.key(lvs)
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.values == nil {
		v.values = map[labelValues]float64{}
	}
	v.values[k] = value
}

// Value returns the series' value and whether it exists.
func (v *CompactVec) Value(lvs ...string) (float64, bool) {
	k := v.key(lvs)
	v.mu.Lock()
	defer v.mu.Unlock()
	value, ok := v.values[k]
	return value, ok
}

// Delete removes one series.
func (v *CompactVec) Delete(lvs ...string) {
	k := v.key(lvs)
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.values, k)
}

// DeleteTenant removes every series of a tenant.
func (v *CompactVec) DeleteTenant(providerConfig string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for k := range v.values {
		if k[0] == providerConfig {
			delete(v.values, k)
		}
	}
}

func (v *CompactVec) DescribeWithStability(ch chan<- *metrics.Desc) { ch <- v.desc }

func (v *CompactVec) CollectWithStability(ch chan<- metrics.Metric) {
	v.mu.Lock()
	series := make(map[labelValues]float64, len(v.values))
	for k, value := range v.values {
		series[k] = value
	}
	v.mu.Unlock()
	for k, value := range series {
		ch <- metrics.NewLazyConstMetric(v.desc, v.valueType, value, k[:v.labels]...)
	}
}
