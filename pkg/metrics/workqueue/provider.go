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

// Package workqueue owns the series client-go's workqueues report (workqueue_*), as their metrics provider. They
// carry the names, labels, help and buckets of component-base's provider (k8s.io/component-base/metrics/prometheus/
// workqueue), which every Kubernetes dashboard and rule reads. What that provider cannot do is forget a queue: a
// tenant's queues are named after the tenant, and with it a deleted tenant's series stayed until the process
// restarted, a few KB of series for every tenant ever deleted. Forget deletes them once the queue's controller
// has stopped.
package workqueue

import (
	"sync"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const workqueueSubsystem = "workqueue"

var (
	workqueueDepth = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem: workqueueSubsystem, Name: "depth", StabilityLevel: metrics.BETA,
		Help: "Current depth of workqueue",
	}, []string{"name"})
	workqueueAdds = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: workqueueSubsystem, Name: "adds_total", StabilityLevel: metrics.BETA,
		Help: "Total number of adds handled by workqueue",
	}, []string{"name"})
	workqueueLatency = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem: workqueueSubsystem, Name: "queue_duration_seconds", StabilityLevel: metrics.BETA,
		Help:    "How long in seconds an item stays in workqueue before being requested.",
		Buckets: metrics.ExponentialBuckets(10e-9, 10, 10),
	}, []string{"name"})
	workqueueWorkDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem: workqueueSubsystem, Name: "work_duration_seconds", StabilityLevel: metrics.BETA,
		Help:    "How long in seconds processing an item from workqueue takes.",
		Buckets: metrics.ExponentialBuckets(10e-9, 10, 10),
	}, []string{"name"})
	workqueueUnfinished = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem: workqueueSubsystem, Name: "unfinished_work_seconds", StabilityLevel: metrics.BETA,
		Help: "How many seconds of work has done that is in progress and hasn't been observed by work_duration. " +
			"Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
	}, []string{"name"})
	workqueueLongestRunning = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem: workqueueSubsystem, Name: "longest_running_processor_seconds", StabilityLevel: metrics.BETA,
		Help: "How many seconds has the longest running processor for workqueue been running.",
	}, []string{"name"})
	workqueueRetries = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: workqueueSubsystem, Name: "retries_total", StabilityLevel: metrics.BETA,
		Help: "Total number of retries handled by workqueue",
	}, []string{"name"})

	workqueueVectors = []interface{ DeleteLabelValues(...string) bool }{
		workqueueDepth, workqueueAdds, workqueueLatency, workqueueWorkDuration, workqueueUnfinished,
		workqueueLongestRunning, workqueueRetries,
	}
)

// client-go keeps the first provider set and ignores later ones. The binary also links component-base's provider
// (k8s.io/apiserver imports it), whose init sets it too. Go initializes, of the packages whose imports are
// initialized, the first by import path; this package imports no more than component-base's provider does, so it
// is ready when that one is and comes first ("github.com/..." sorts before "k8s.io/..."). It must keep its imports
// that few. TestWorkqueueSeriesOfAStoppedControllerAreDeleted, in the command's package, checks the binary's order.
func init() {
	workqueue.SetProvider(workqueueMetricsProvider{})
}

var registerOnce sync.Once

// register adds the series to the legacy registry; until then a vector makes no series.
func register() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(workqueueDepth, workqueueAdds, workqueueLatency, workqueueWorkDuration,
			workqueueUnfinished, workqueueLongestRunning, workqueueRetries)
	})
}

type workqueueMetricsProvider struct{}

func (workqueueMetricsProvider) NewDepthMetric(name string) workqueue.GaugeMetric {
	register()
	return workqueueDepth.WithLabelValues(name)
}

func (workqueueMetricsProvider) NewAddsMetric(name string) workqueue.CounterMetric {
	register()
	return workqueueAdds.WithLabelValues(name)
}

func (workqueueMetricsProvider) NewLatencyMetric(name string) workqueue.HistogramMetric {
	register()
	return workqueueLatency.WithLabelValues(name)
}

func (workqueueMetricsProvider) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	register()
	return workqueueWorkDuration.WithLabelValues(name)
}

func (workqueueMetricsProvider) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	register()
	return workqueueUnfinished.WithLabelValues(name)
}

func (workqueueMetricsProvider) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	register()
	return workqueueLongestRunning.WithLabelValues(name)
}

func (workqueueMetricsProvider) NewRetriesMetric(name string) workqueue.CounterMetric {
	register()
	return workqueueRetries.WithLabelValues(name)
}

// Forget deletes every series of the queue named name. Call it once the queue is shut down and will not be made
// again under that name by the same controller.
func Forget(name string) {
	// No queue has been made yet: the vectors are unregistered, and deleting from one would dereference nil.
	if !workqueueDepth.IsCreated() {
		return
	}
	for _, v := range workqueueVectors {
		v.DeleteLabelValues(name)
	}
}
