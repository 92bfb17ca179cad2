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
// and the Pod readiness gate the readiness reflector sets (this file). The translator and the readiness reflector
// both import it, so that they read one annotation and one gate the same way; it imports nothing of the product.
package negapi

import (
	corev1 "k8s.io/api/core/v1"
)

// The keys, as ingress-gce names them.
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

// ReasonInvalidAnnotation is the reason of the Warning Event on a Service whose AnnotationKey does not parse, and on
// the Pods it selects that wait because of it.
const ReasonInvalidAnnotation = "InvalidNEGAnnotation"

// DeclaresGate says whether the Pod declares the NEG readiness gate.
func DeclaresGate(pod *corev1.Pod) bool {
	for _, gate := range pod.Spec.ReadinessGates {
		if gate.ConditionType == ReadinessGate {
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
func ReadyButForGate(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil || podCondition(pod, corev1.ContainersReady) != corev1.ConditionTrue {
		return false
	}
	for _, gate := range pod.Spec.ReadinessGates {
		if gate.ConditionType != ReadinessGate && podCondition(pod, gate.ConditionType) != corev1.ConditionTrue {
			return false
		}
	}
	return DeclaresGate(pod)
}

// Condition is the Pod's NEG readiness condition, or nil.
func Condition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == ReadinessGate {
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
