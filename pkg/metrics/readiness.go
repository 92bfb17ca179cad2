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
	"time"

	"k8s.io/component-base/metrics"
)

var (
	// NEGReadinessPodsWaiting is how many of a tenant's Pods declare the NEG readiness gate and wait for its
	// condition to turn True: not yet attached, or not yet healthy in a NEG.
	NEGReadinessPodsWaiting = NewCompactGaugeVec("neg_readiness_pods_waiting",
		"Pods of a tenant that declare the readiness gate cloud.google.com/load-balancer-neg-ready and whose condition is not True yet.",
		"provider_config")

	// NEGReadinessAttachToReady is how long a Pod waited from the first time the reflector saw its endpoint
	// attached to a NEG until the condition was set True because of it (healthy, or attached where nothing health
	// checks): the time the load balancer's health checks took. A Prometheus histogram, made for a tenant by its
	// first observation only, so a tenant without the gate costs nothing.
	NEGReadinessAttachToReady = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      subsystem,
		Name:           "neg_readiness_attach_to_ready_seconds",
		Help:           "Seconds from a Pod's endpoint seen attached to a NEG to its condition cloud.google.com/load-balancer-neg-ready set True, by ProviderConfig.",
		Buckets:        []float64{0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
		StabilityLevel: metrics.ALPHA,
	}, []string{"provider_config"})
)

// ObserveNEGReadiness records the wait of one Pod whose gate turned True after its endpoint was attached.
func ObserveNEGReadiness(providerConfig string, waited time.Duration) {
	NEGReadinessAttachToReady.WithLabelValues(providerConfig).Observe(waited.Seconds())
}
