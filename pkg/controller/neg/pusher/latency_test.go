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

package pusher

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

const networkProgrammingMetric = "multiproject_neg_network_programming_duration_seconds"

// TestNetworkProgrammingIsObservedOncePerGeneration pins what the histogram counts: one observation per Translation
// generation done in GCE, however many NEGs (zones) it touches, however many syncs it took (a failed attach retried),
// and none for a sync of a generation already observed (the verify period's requeue, an informer resync).
func TestNetworkProgrammingIsObservedOncePerGeneration(t *testing.T) {
	trigger := time.Now().Add(-2 * time.Second)
	tr := translation("web", map[string]int{"us-central1-a": 2, "us-central1-b": 2}, true)
	tr.Annotations = map[string]string{negapi.TriggerTimeAnnotation: negapi.FormatTriggerTime(trigger)}
	before := programmingObservations(t)
	h := newHarness(t, nil, tr)

	h.waitSynced("web", metav1.ConditionTrue)
	h.waitQuiet("web")
	if n := programmingObservations(t) - before; n != 1 {
		t.Fatalf("generation 1, two NEGs created with their endpoints: %s observed %d times, want 1", networkProgrammingMetric, n)
	}

	// The same generation synced again, as the verify period's requeue and an informer resync do: nothing more.
	h.pusher.workers.Add(testNamespace + "/web")
	h.waitQuiet("web")
	if n := programmingObservations(t) - before; n != 1 {
		t.Fatalf("generation 1 synced again: %s observed %d times in all, want 1", networkProgrammingMetric, n)
	}

	// Generation 2 adds an endpoint in both zones; its first attach fails (503) and the key is retried.
	h.gce.InjectFault(testProject, fakegce.MethodAttachEndpoints, fakegce.Fault{Code: http.StatusServiceUnavailable, Times: 1})
	next := h.get("web")
	next.Generation = 2
	next.Spec.Resources = []mpv1alpha1.BackendResource{negResource("web", "us-central1-a", 3), negResource("web", "us-central1-b", 3)}
	next.Annotations[negapi.TriggerTimeAnnotation] = negapi.FormatTriggerTime(time.Now())
	if _, err := h.client.MultiprojectV1alpha1().Translations(testNamespace).Update(context.Background(), next, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitSynced("web", metav1.ConditionTrue)
	h.waitQuiet("web")
	if failed := h.gce.Errors(testProject)[fakegce.MethodAttachEndpoints]; failed != 1 {
		t.Fatalf("%d attach calls failed, want the 1 injected (the retry this test is about)", failed)
	}
	for _, zone := range []string{"us-central1-a", "us-central1-b"} {
		if n := h.endpointCount(zone, "k8s1-web"); n != 3 {
			t.Fatalf("zone %s has %d endpoints, want generation 2's 3", zone, n)
		}
	}
	if n := programmingObservations(t) - before; n != 2 {
		t.Fatalf("generation 2, two NEGs attached to after a failed attach and a retry: %s observed %d times in all, want 2", networkProgrammingMetric, n)
	}
}

// programmingObservations is how many times the network programming histogram of the harness's tenant has observed.
func programmingObservations(t *testing.T) uint64 {
	t.Helper()
	hist, err := testutil.GetHistogramVecFromGatherer(legacyregistry.DefaultGatherer, networkProgrammingMetric,
		map[string]string{"provider_config": "tenant-a"})
	if err != nil {
		if strings.Contains(err.Error(), "not found") {
			return 0
		}
		t.Fatal(err)
	}
	return hist.GetAggregatedSampleCount()
}

// TestAGenerationWithoutATriggerTimeIsNotObserved pins docs/monitoring.md's rule: a Translation write whose slices
// carried no trigger time (the translator writes the annotation empty) is done in GCE without an observation.
func TestAGenerationWithoutATriggerTimeIsNotObserved(t *testing.T) {
	tr := translation("web", map[string]int{"us-central1-a": 2}, true)
	tr.Annotations = map[string]string{negapi.TriggerTimeAnnotation: ""}
	before := programmingObservations(t)
	h := newHarness(t, nil, tr)

	h.waitSynced("web", metav1.ConditionTrue)
	h.waitQuiet("web")
	if n := h.endpointCount("us-central1-a", "k8s1-web"); n != 2 {
		t.Fatalf("zone us-central1-a has %d endpoints, want the generation's 2", n)
	}
	if n := programmingObservations(t) - before; n != 0 {
		t.Fatalf("a generation without a trigger time: %s observed %d times, want 0", networkProgrammingMetric, n)
	}
}
