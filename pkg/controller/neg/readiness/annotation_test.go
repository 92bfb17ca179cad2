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
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

// TestABadAnnotationWithoutTranslationsSelectsNoPod: a Service whose annotation does not parse has no Translation
// (the translator makes none), so its Pods are in no NEG and are answered at once, not at the timeout. The
// annotation here is JSON with an exposed port, which the parse rejects (not a port number).
func TestABadAnnotationWithoutTranslationsSelectsNoPod(t *testing.T) {
	svc := negService("web")
	svc.Annotations[negapi.AnnotationKey] = `{"exposed_ports":{"http":{}}}`
	h := newHarness(t, 10*time.Minute, nil, svc, gatedPod("web-1", "10.0.0.1", map[string]string{"app": "web"}))

	c := h.waitCondition("web-1", corev1.ConditionTrue, ReasonReady)
	if c.Message != "The Pod is not in any NEG: no Service that asks for NEGs selects it" {
		t.Errorf("message = %q", c.Message)
	}
	if n := h.events.Count(corev1.EventTypeWarning, negapi.ReasonInvalidAnnotation); n != 0 {
		t.Errorf("%d %s Warnings on the Pod, want none", n, negapi.ReasonInvalidAnnotation)
	}
}

// TestAFrozenServiceKeepsItsPodsWaiting: a Service whose annotation stopped parsing keeps its Translations as they
// were (the translator freezes them), so a new Pod they do not list is never attached: it waits, with one Warning
// that says why, however often it is looked at again; answering True could let a rollout drain the NEG. Once the
// Service is fixed and its Translation lists and attaches the Pod, it is ready.
func TestAFrozenServiceKeepsItsPodsWaiting(t *testing.T) {
	svc := negService("web")
	svc.Annotations[negapi.AnnotationKey] = `exposed_ports: 80`
	tr := translation("neg-v1-web-80", "neg-web", true, "10.0.0.1")
	tr.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(svc, corev1.SchemeGroupVersion.WithKind("Service"))}
	h := newHarness(t, 10*time.Minute, func(h *harness) { h.health.set("neg-web", "10.0.0.2", "HEALTHY") },
		svc, tr, gatedPod("web-2", "10.0.0.2", map[string]string{"app": "web"}))

	c := h.waitCondition("web-2", corev1.ConditionFalse, ReasonNotReady)
	want := "Waiting for the annotation cloud.google.com/neg of Service web to be fixed: it does not parse, so the Service's NEGs stay as they were"
	if c.Message != want {
		t.Errorf("message = %q, want %q", c.Message, want)
	}
	h.waitFor("the Warning on the Pod", func() bool {
		return h.events.Count(corev1.EventTypeWarning, negapi.ReasonInvalidAnnotation) == 1
	})
	if got := h.events.With("Warning " + negapi.ReasonInvalidAnnotation + " Service web selects the Pod, but annotation cloud.google.com/neg: not valid JSON"); len(got) != 1 {
		t.Errorf("the Warning does not say why: %v", got)
	}

	// Another look at the Pod (a Service event of its namespace) records no second Warning.
	svc.Labels = map[string]string{"touched": "true"}
	svc.ResourceVersion = "2"
	if _, err := h.kube.CoreV1().Services(testNamespace).Update(t.Context(), svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the queue to be idle", h.r.workers.Idle)
	if n := h.events.Count(corev1.EventTypeWarning, negapi.ReasonInvalidAnnotation); n != 1 {
		t.Errorf("%d %s Warnings after another look, want 1", n, negapi.ReasonInvalidAnnotation)
	}
	if c := h.waitCondition("web-2", corev1.ConditionFalse, ReasonNotReady); !strings.Contains(c.Message, "to be fixed") {
		t.Errorf("message = %q", c.Message)
	}

	// Fixed: the translator lists the Pod and the pusher attaches it.
	svc.Annotations[negapi.AnnotationKey] = `{"exposed_ports":{"80":{}}}`
	svc.ResourceVersion = "3"
	if _, err := h.kube.CoreV1().Services(testNamespace).Update(t.Context(), svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	fixed := translation("neg-v1-web-80", "neg-web", true, "10.0.0.1", "10.0.0.2")
	fixed.OwnerReferences, fixed.ResourceVersion = tr.OwnerReferences, "2"
	if _, err := h.mp.MultiprojectV1alpha1().Translations(testNamespace).Update(t.Context(), fixed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitCondition("web-2", corev1.ConditionTrue, ReasonReady)
}
