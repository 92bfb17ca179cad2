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

// networkProgrammingBuckets span a change done at once (tens of ms) to one held back by GCE for minutes, finer
// around the seconds an endpoint usually takes, as kube-proxy's network_programming_duration_seconds does.
var networkProgrammingBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 20, 30, 60, 120, 300}

var (
	// NEGNetworkProgramming is the network programming latency of NEGs: from the trigger time of the endpoint
	// change a Translation write carries (the EndpointSlice's endpoints.kubernetes.io/last-change-trigger-time, as
	// kube-proxy's network_programming_duration_seconds reads it) to the pusher having done that write's attaches and
	// detaches in GCE. A write that carries no trigger time is not observed.
	NEGNetworkProgramming = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      subsystem,
		Name:           "neg_network_programming_duration_seconds",
		Help:           "Seconds from an EndpointSlice change (its endpoints.kubernetes.io/last-change-trigger-time) to its endpoints attached or detached in GCE, by ProviderConfig.",
		Buckets:        networkProgrammingBuckets,
		StabilityLevel: metrics.ALPHA,
	}, []string{"provider_config"})

	// NEGReadinessProgramming is the same latency to the readiness reflector's condition written True on a Pod.
	NEGReadinessProgramming = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      subsystem,
		Name:           "neg_readiness_programming_duration_seconds",
		Help:           "Seconds from an EndpointSlice change (its endpoints.kubernetes.io/last-change-trigger-time) to the condition cloud.google.com/load-balancer-neg-ready written True on a Pod of it, by ProviderConfig.",
		Buckets:        networkProgrammingBuckets,
		StabilityLevel: metrics.ALPHA,
	}, []string{"provider_config"})
)

// ObserveNEGNetworkProgramming records a Translation write done in GCE whose change was triggered at trigger.
func ObserveNEGNetworkProgramming(providerConfig string, trigger, done time.Time) {
	NEGNetworkProgramming.WithLabelValues(providerConfig).Observe(done.Sub(trigger).Seconds())
}

// ObserveNEGReadinessProgramming records a readiness condition written True for a change triggered at trigger.
func ObserveNEGReadinessProgramming(providerConfig string, trigger, written time.Time) {
	NEGReadinessProgramming.WithLabelValues(providerConfig).Observe(written.Sub(trigger).Seconds())
}
