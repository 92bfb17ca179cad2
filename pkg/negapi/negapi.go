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

// Package negapi owns the vocabulary the neg controller shares with its users and with ingress-gce: the Service
// annotation that asks for NEGs and its parse (annotation.go), the status annotation the translator answers with,
// and the Pod readiness gate the readiness reflector sets (this file), as one Keys value that the flags set and
// the tenant options carry whole (tenant.Options.NEGKeys). The translator and the readiness reflector both import
// it, so that they read one annotation and one gate the same way. It imports nothing of the product, and sits
// below pkg/controller, so that the tenant package can carry its Keys.
package negapi

import (
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The keys, as ingress-gce names them: the defaults of Keys.
const (
	// AnnotationKey is the Service annotation of the user's request: {"exposed_ports":{"80":{}}} asks for
	// standalone NEGs of port 80.
	AnnotationKey = "cloud.google.com/neg"
	// StatusAnnotationKey is the Service annotation of the controller's answer: which NEG serves which port, in
	// which zones.
	StatusAnnotationKey = "cloud.google.com/neg-status"
	// ReadinessGate is the readiness gate of container-native load balancing: a Pod that declares it is not Ready
	// until the readiness reflector sets this condition True, once its endpoint is in its NEGs.
	ReadinessGate corev1.PodConditionType = "cloud.google.com/load-balancer-neg-ready"
)

// builtinPodConditions are the Pod conditions Kubernetes itself sets (k8s.io/api/core/v1's PodConditionTypes): a
// readiness gate of that name would be a condition two writers fight over.
var builtinPodConditions = []corev1.PodConditionType{
	corev1.PodReady, corev1.ContainersReady, corev1.PodInitialized, corev1.PodScheduled, corev1.DisruptionTarget,
	corev1.PodReadyToStartContainers, corev1.PodResizePending, corev1.PodResizeInProgress, corev1.AllContainersRestarting,
}

// ReasonInvalidAnnotation is the reason of the Warning Event on a Service whose annotation does not parse, and on
// the Pods it selects that wait because of it.
const ReasonInvalidAnnotation = "InvalidNEGAnnotation"

// Keys are the names the neg controller reads and writes (--neg-annotation-key, --neg-status-annotation-key,
// --neg-readiness-gate): ingress-gce's by default, others where another NEG controller (GKE's) answers those. The
// translator and the readiness reflector of a tenant hold the same value.
type Keys struct {
	// Annotation is the Service annotation that asks for NEGs.
	Annotation string
	// StatusAnnotation is the Service annotation the translator answers with.
	StatusAnnotation string
	// ReadinessGate is the Pod condition the readiness reflector sets, and the readiness gate a Pod declares.
	ReadinessGate corev1.PodConditionType
	// PreviousAnnotation, during a change of Annotation, is the key Services asked with before
	// (--neg-previous-annotation-key): a Service without Annotation that carries it is read as if it carried
	// Annotation, so that its NEGs stay until the operator has moved it (docs/gke.md). Empty: none.
	PreviousAnnotation string
}

// DefaultKeys are ingress-gce's keys.
func DefaultKeys() Keys {
	return Keys{Annotation: AnnotationKey, StatusAnnotation: StatusAnnotationKey, ReadinessGate: ReadinessGate}
}

// OrDefaults returns k with each empty key replaced by ingress-gce's.
func (k Keys) OrDefaults() Keys {
	d := DefaultKeys()
	if k.Annotation == "" {
		k.Annotation = d.Annotation
	}
	if k.StatusAnnotation == "" {
		k.StatusAnnotation = d.StatusAnnotation
	}
	if k.ReadinessGate == "" {
		k.ReadinessGate = d.ReadinessGate
	}
	return k
}

// Validate says what is wrong with k: each annotation key must be a valid annotation key and the condition type a
// valid readiness gate (all three are qualified names, as the API server checks them); the two annotations must
// differ, and neither may be ingress-gce's other one (the manager would write GKE's request, or read GKE's answer
// as a request); the gate must not be a built-in Pod condition. The names are the flags'.
func (k Keys) Validate() error {
	var errs []error
	for _, key := range []struct{ flag, value string }{
		{"--neg-annotation-key", k.Annotation},
		{"--neg-status-annotation-key", k.StatusAnnotation},
		{"--neg-readiness-gate", string(k.ReadinessGate)},
	} {
		for _, msg := range validation.IsQualifiedName(key.value) {
			errs = append(errs, fmt.Errorf("%s %q is not a valid qualified name: %s", key.flag, key.value, msg))
		}
	}
	if k.Annotation == k.StatusAnnotation {
		errs = append(errs, fmt.Errorf("--neg-annotation-key and --neg-status-annotation-key are both %q", k.Annotation))
	} else if k.StatusAnnotation == AnnotationKey {
		errs = append(errs, fmt.Errorf("--neg-status-annotation-key %q is ingress-gce's request annotation, which GKE's own NEG "+
			"controller reads, while --neg-annotation-key is %q: the manager would overwrite the requests users make to GKE's controller",
			k.StatusAnnotation, k.Annotation))
	} else if k.Annotation == StatusAnnotationKey {
		errs = append(errs, fmt.Errorf("--neg-annotation-key %q is ingress-gce's status annotation, which GKE's own NEG "+
			"controller writes, while --neg-status-annotation-key is %q: the manager would take GKE's answers for requests",
			k.Annotation, k.StatusAnnotation))
	}
	if slices.Contains(builtinPodConditions, k.ReadinessGate) {
		errs = append(errs, fmt.Errorf("--neg-readiness-gate %q is a Pod condition the kubelet or the scheduler sets, not a readiness "+
			"gate: the readiness reflector and they would overwrite each other's condition (--neg-readiness-gate names a "+
			"condition of its own, such as %q)", k.ReadinessGate, ReadinessGate))
	}
	if k.PreviousAnnotation != "" {
		for _, msg := range validation.IsQualifiedName(k.PreviousAnnotation) {
			errs = append(errs, fmt.Errorf("--neg-previous-annotation-key %q is not a valid qualified name: %s", k.PreviousAnnotation, msg))
		}
		if k.PreviousAnnotation == k.Annotation || k.PreviousAnnotation == k.StatusAnnotation {
			errs = append(errs, fmt.Errorf("--neg-previous-annotation-key %q is --neg-annotation-key or --neg-status-annotation-key", k.PreviousAnnotation))
		}
	}
	return errors.Join(errs...)
}

// DeclaresGate says whether the Pod declares the NEG readiness gate.
func (k Keys) DeclaresGate(pod *corev1.Pod) bool {
	for _, gate := range pod.Spec.ReadinessGates {
		if gate.ConditionType == k.ReadinessGate {
			return true
		}
	}
	return false
}

// ReadyButForGate says whether a Pod is ready in every respect the NEG readiness gate does not decide: it is not
// terminating, its containers are ready, it declares the gate, and every other readiness gate it declares is True.
// Such a Pod is not Ready, so its endpoint is not ready either, until its endpoint is in the NEGs: the translator
// must attach it, or it would never become ready (ingress-gce does the same). The gate's own condition is not read,
// so setting it True changes nothing here.
func (k Keys) ReadyButForGate(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil || podCondition(pod, corev1.ContainersReady) != corev1.ConditionTrue {
		return false
	}
	for _, gate := range pod.Spec.ReadinessGates {
		if gate.ConditionType != k.ReadinessGate && podCondition(pod, gate.ConditionType) != corev1.ConditionTrue {
			return false
		}
	}
	return k.DeclaresGate(pod)
}

// Condition is the Pod's NEG readiness condition, or nil.
func (k Keys) Condition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == k.ReadinessGate {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

func podCondition(pod *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return pod.Status.Conditions[i].Status
		}
	}
	return corev1.ConditionUnknown
}
