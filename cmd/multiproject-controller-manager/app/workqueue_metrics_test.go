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

package app

import (
	"strings"
	"testing"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"

	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
)

// workqueueSeries counts the workqueue_* series of the queue named name.
func workqueueSeries(t *testing.T, name string) int {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if strings.HasPrefix(f.GetName(), "workqueue_") &&
				testutil.LabelsMatch(m, map[string]string{"name": name}) {
				n++
			}
		}
	}
	return n
}

// TestWorkqueueSeriesOfAStoppedControllerAreDeleted: with the command's packages linked (component-base's
// workqueue provider among them, through k8s.io/apiserver), client-go's queues report to pkg/metrics/workqueue,
// so the series of a stopped controller's queue are deleted (metrics.ForgetQueue) and a deleted tenant leaves none.
func TestWorkqueueSeriesOfAStoppedControllerAreDeleted(t *testing.T) {
	const name = "tenant-gone-neg-pusher"
	queue := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: name})
	queue.Add("key")
	if n := workqueueSeries(t, name); n < 6 {
		t.Fatalf("a live queue has %d workqueue_* series, want the 6 of a plain queue", n)
	}
	queue.ShutDown()
	metrics.ForgetQueue("tenant-gone", "neg", name)
	if n := workqueueSeries(t, name); n != 0 {
		t.Errorf("a stopped controller's queue keeps %d workqueue_* series, want none", n)
	}
}
