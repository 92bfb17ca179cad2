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
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/component-base/metrics"
)

// The GCE call series are counted in a compact record per tenant and method and made at scrape time. As a
// CounterVec and a HistogramVec, one method's series cost about 2 KiB per tenant, in Prometheus' label pairs and
// histogram state: the list calls of the NEG garbage sweep alone, which every tenant makes, were a tenth of an idle
// tenant's heap, and a busy tenant's eight methods about 16 KiB. The names, labels, help and buckets are those the
// vectors had.
var (
	gceRequestsDesc = metrics.NewDesc(metrics.BuildFQName("", subsystem, "gce_requests_total"),
		"HTTP calls to the Compute Engine API, by ProviderConfig, compute/v1 method and result (success, not_found, conflict, rate_limited, quota_exceeded, forbidden, client_error, server_error, canceled, timeout, transport_error).",
		[]string{"provider_config", "method", "result"}, nil, metrics.ALPHA, "")
	gceRequestDurationDesc = metrics.NewDesc(metrics.BuildFQName("", subsystem, "gce_request_duration_seconds"),
		"Latency of HTTP calls to the Compute Engine API, by ProviderConfig and compute/v1 method; rate-limiter waits excluded.",
		[]string{"provider_config", "method"}, nil, metrics.ALPHA, "")

	// GCERequestBuckets are the upper bounds of the latency histogram's buckets, in seconds.
	GCERequestBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
)

// gceMethodCalls is what the series of one tenant's method count. A tenant calls a handful of methods with a
// handful of results, so both are slices searched in order, smaller than maps.
type gceMethodCalls struct {
	method  string
	results []gceResultCount
	// inBucket counts the calls per latency bucket (not cumulated; the last is above every bound).
	inBucket [14]uint64
	count    uint64
	seconds  float64
}

type gceResultCount struct {
	result string
	n      uint64
}

// gceSeries holds the counts of every tenant's calls and exports them on each scrape.
type gceSeries struct {
	metrics.BaseStableCollector

	mu       sync.Mutex
	byTenant map[string][]*gceMethodCalls
}

var gceCollector = &gceSeries{}

func init() {
	if len(GCERequestBuckets)+1 != len(gceMethodCalls{}.inBucket) {
		panic("metrics: GCERequestBuckets and gceMethodCalls.inBucket disagree")
	}
}

// ObserveGCERequest records one HTTP call of a tenant's Compute Engine client: its result and how long it took.
// method is the compute/v1 method (networkEndpointGroups.insert, zoneOperations.wait, ...) and result a small fixed
// set derived from the error (pkg/gce/client), never the error's text, so that the series stay bounded. took
// excludes the wait for the tenant's client-side rate limiter; zoneOperations.wait blocks until the operation is
// done (GCE caps a wait at about two minutes), so its latency is the operation's.
func ObserveGCERequest(providerConfig, method, result string, took time.Duration) {
	gceCollector.observe(providerConfig, method, result, took.Seconds())
}

func (c *gceSeries) observe(providerConfig, method, result string, seconds float64) {
	bucket := sort.SearchFloat64s(GCERequestBuckets, seconds) // the first bound ≥ seconds: le is inclusive
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byTenant == nil {
		c.byTenant = map[string][]*gceMethodCalls{}
	}
	var calls *gceMethodCalls
	for _, m := range c.byTenant[providerConfig] {
		if m.method == method {
			calls = m
			break
		}
	}
	if calls == nil {
		calls = &gceMethodCalls{method: method}
		c.byTenant[providerConfig] = append(c.byTenant[providerConfig], calls)
	}
	counted := false
	for i := range calls.results {
		if calls.results[i].result == result {
			calls.results[i].n++
			counted = true
			break
		}
	}
	if !counted {
		calls.results = append(calls.results, gceResultCount{result: result, n: 1})
	}
	calls.inBucket[bucket]++
	calls.count++
	calls.seconds += seconds
}

// forget drops a tenant's series.
func (c *gceSeries) forget(providerConfig string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byTenant, providerConfig)
}

func (c *gceSeries) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- gceRequestsDesc
	ch <- gceRequestDurationDesc
}

func (c *gceSeries) CollectWithStability(ch chan<- metrics.Metric) {
	type series struct {
		tenant string
		calls  gceMethodCalls
	}
	c.mu.Lock()
	var all []series
	for tenant, methods := range c.byTenant {
		for _, calls := range methods {
			s := series{tenant: tenant, calls: *calls}
			s.calls.results = append([]gceResultCount(nil), calls.results...)
			all = append(all, s)
		}
	}
	c.mu.Unlock()

	histogramDesc := promDesc(gceRequestDurationDesc, 2)
	for _, s := range all {
		for _, r := range s.calls.results {
			ch <- metrics.NewLazyConstMetric(gceRequestsDesc, metrics.CounterValue, float64(r.n), s.tenant, s.calls.method, r.result)
		}
		if histogramDesc == nil {
			continue
		}
		cumulative := make(map[float64]uint64, len(GCERequestBuckets))
		var below uint64
		for i, bound := range GCERequestBuckets {
			below += s.calls.inBucket[i]
			cumulative[bound] = below
		}
		ch <- prometheus.MustNewConstHistogram(histogramDesc, s.calls.count, s.calls.seconds, cumulative, s.tenant, s.calls.method)
	}
}

// promDesc returns the Prometheus descriptor of a registered desc with n variable labels, or nil when the desc is
// hidden. component-base makes const counters and gauges (NewLazyConstMetric), not const histograms; the
// descriptor of a throwaway const metric is the one the registry knows, with the stability level in its help.
func promDesc(desc *metrics.Desc, labels int) *prometheus.Desc {
	m := metrics.NewLazyConstMetric(desc, metrics.UntypedValue, 0, make([]string, labels)...)
	if m == nil {
		return nil
	}
	return m.Desc()
}
