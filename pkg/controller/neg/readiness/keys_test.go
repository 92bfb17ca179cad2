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

package readiness

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

// TestTheReflectorWritesTheConditionItIsGiven: with other keys in the tenant options, a Pod gated on the other
// condition that a Service annotated with the other key selects waits for its attach and then gets the other
// condition True; a Pod gated on ingress-gce's condition (another controller's) is never written, and a Service
// annotated with ingress-gce's key only asks the reflector for nothing.
func TestTheReflectorWritesTheConditionItIsGiven(t *testing.T) {
	const myAnnotation, myGate = "multiproject.io/neg", corev1.PodConditionType("multiproject.io/neg-ready")
	mine := negService("web")
	mine.Annotations = map[string]string{myAnnotation: `{"exposed_ports":{"80":{}}}`}
	theirs := negService("gke") // ingress-gce's key only
	myPod := gatedPod("web-1", "10.0.0.1", map[string]string{"app": "web"})
	myPod.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: myGate}}
	theirPod := gatedPod("gke-1", "10.0.0.2", map[string]string{"app": "web"}) // ingress-gce's gate
	theirWaitingPod := gatedPod("gke-2", "10.0.0.3", map[string]string{"app": "gke"})
	theirWaitingPod.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: myGate}}
	tr := translation("neg-v1-web-80", "neg-web", false, "10.0.0.1")
	h := newHarnessWith(t, tenant.Options{NEGKeys: negapi.Keys{Annotation: myAnnotation, ReadinessGate: myGate}},
		func(h *harness) { h.health.set("neg-web", "10.0.0.1", "HEALTHY") }, mine, theirs, tr, myPod, theirPod, theirWaitingPod)

	h.waitCondition("web-1", corev1.ConditionFalse, ReasonNotReady)
	// Selected only by a Service with ingress-gce's key, which asks this reflector for nothing: in no NEG, ready.
	h.waitCondition("gke-2", corev1.ConditionTrue, ReasonReady)
	markSynced(tr)
	tr.ResourceVersion = "2"
	if _, err := h.mp.MultiprojectV1alpha1().Translations(testNamespace).UpdateStatus(t.Context(), tr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitCondition("web-1", corev1.ConditionTrue, ReasonReady)
	h.waitFor("the queue to be idle", h.r.workers.Idle)
	if got := h.podWrites("gke-1"); len(got) != 0 {
		t.Errorf("the Pod gated on %s was written: %v", negapi.ReadinessGate, got)
	}
	pod, err := h.kube.CoreV1().Pods(testNamespace).Get(t.Context(), "web-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := negapi.DefaultKeys().Condition(pod); c != nil {
		t.Errorf("the Pod got ingress-gce's condition: %+v", c)
	}
}

// TestAPodGatedOnBothControllersIsWarnedAndServed: with its own keys, the reflector gives a Pod that also declares
// ingress-gce's readiness gate one Warning and sets only its own condition, once the endpoint is attached and
// healthy; a Pod with only the manager's gate gets no Warning.
func TestAPodGatedOnBothControllersIsWarnedAndServed(t *testing.T) {
	const myAnnotation, myGate = "multiproject.io/neg", corev1.PodConditionType("multiproject.io/neg-ready")
	mine := negService("web")
	mine.Annotations = map[string]string{myAnnotation: `{"exposed_ports":{"80":{}}}`}
	both := gatedPod("both", "10.0.0.1", map[string]string{"app": "web"})
	both.Spec.ReadinessGates = append(both.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: myGate})
	onlyMine := gatedPod("mine", "10.0.0.2", map[string]string{"app": "web"})
	onlyMine.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: myGate}}
	tr := translation("neg-v1-web-80", "neg-web", true, "10.0.0.1", "10.0.0.2")
	h := newHarnessWith(t, tenant.Options{NEGKeys: negapi.Keys{Annotation: myAnnotation, ReadinessGate: myGate}},
		func(h *harness) {
			h.health.set("neg-web", "10.0.0.1", "HEALTHY")
			h.health.set("neg-web", "10.0.0.2", "HEALTHY")
		}, mine, tr, both, onlyMine)

	h.waitCondition("both", corev1.ConditionTrue, ReasonReady)
	h.waitCondition("mine", corev1.ConditionTrue, ReasonReady)
	h.waitFor("the queue to be idle", h.r.workers.Idle)
	if got := h.events.With("Warning " + negapi.ReasonGatedOnBoth); len(got) != 1 || !strings.Contains(got[0], string(myGate)) {
		t.Errorf("Warnings %s: %q, want one (the Pod with both gates), naming %s", negapi.ReasonGatedOnBoth, got, myGate)
	}
	pod, err := h.kube.CoreV1().Pods(testNamespace).Get(t.Context(), "both", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := negapi.DefaultKeys().Condition(pod); c != nil {
		t.Errorf("the Pod got ingress-gce's condition, which only GKE's controller sets: %+v", c)
	}
	if _, both := negapi.DefaultKeys().GatedOnBoth(both); both {
		t.Error("with ingress-gce's keys, a Pod is said to be gated on two controllers")
	}
}
