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

package apibudget

import (
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// TenantWait is how long each of a tenant's API requests waited for a token of the tenant's own bucket (the wait
// for the shared bucket that follows is client-go's rest_client_rate_limiter_duration_seconds, which covers both).
// A tenant whose requests wait here is at its share of the budget; one whose requests do not, but whose
// rest_client_rate_limiter_duration_seconds grows, waits for the whole client.
var TenantWait = metrics.NewHistogramVec(&metrics.HistogramOpts{
	Subsystem: "multiproject",
	Name:      "api_budget_tenant_wait_seconds",
	Help: "Time an API request of a tenant's controllers waited for the tenant's share of the client-side budget " +
		"(--kube-api-qps-per-tenant), by ProviderConfig.",
	// 1 ms to about a minute: from no wait to a backlog of hundreds of requests at a few per second.
	Buckets:        metrics.ExponentialBuckets(0.001, 4, 9),
	StabilityLevel: metrics.ALPHA,
}, []string{"provider_config"})

var registerOnce sync.Once

// Register adds the series to the legacy registry served on /metrics. It is idempotent.
func Register() {
	registerOnce.Do(func() { legacyregistry.MustRegister(TenantWait) })
}

func observeWait(name string, waited time.Duration) {
	TenantWait.WithLabelValues(name).Observe(waited.Seconds())
}

func forgetSeries(name string) {
	// An unregistered (lazy) vector has no series, and deleting from it would dereference nil.
	if !TenantWait.IsCreated() {
		return
	}
	TenantWait.DeleteLabelValues(name)
}
