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

package negapi

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Reasons of the Warning Events on objects that speak to both this controller and ingress-gce (GKE's own NEG
// controller) when the keys are not ingress-gce's. The manager serves such an object as any other, under its own
// keys only: it never reads ingress-gce's annotation nor writes its condition or status (docs/gke.md).
const (
	// ReasonGatedOnBoth: a Pod declares both readiness gates. The kubelet makes it Ready only once both are True, so
	// the manager's still holds it until its endpoint is in the tenant's NEGs; where no other controller sets
	// ingress-gce's, it never becomes Ready.
	ReasonGatedOnBoth = "NEGReadinessGatesOfTwoControllers"
	// ReasonAnnotatedForBoth: a Service carries both annotations, so GKE's controller also makes NEGs for it, in the
	// cluster's project.
	ReasonAnnotatedForBoth = "NEGAnnotationsOfTwoControllers"
)

// GatedOnBoth returns the message of the Warning for a Pod that declares both the manager's readiness gate and
// ingress-gce's (which differ), and false for any other Pod.
func (k Keys) GatedOnBoth(pod *corev1.Pod) (string, bool) {
	if k.ReadinessGate == ReadinessGate || !k.DeclaresGate(pod) || !(Keys{ReadinessGate: ReadinessGate}).DeclaresGate(pod) {
		return "", false
	}
	return fmt.Sprintf("The Pod declares the readiness gates %s (this manager's) and %s (ingress-gce's, GKE's own NEG "+
		"controller's); it is Ready only once both are True. This manager sets only %s; remove the other gate unless "+
		"GKE's controller is meant to gate this Pod too", k.ReadinessGate, ReadinessGate, k.ReadinessGate), true
}

// AnnotatedForBoth returns the message of the Warning for a Service that carries both the manager's NEG annotation
// and ingress-gce's (which differ), and false for any other Service.
func (k Keys) AnnotatedForBoth(svc *corev1.Service) (string, bool) {
	_, mine := svc.Annotations[k.Annotation]
	_, theirs := svc.Annotations[AnnotationKey]
	if k.Annotation == AnnotationKey || !mine || !theirs {
		return "", false
	}
	return fmt.Sprintf("The Service carries the annotations %s (this manager's) and %s (ingress-gce's): GKE's own NEG "+
		"controller also makes NEGs for it, in the cluster's project, and writes %s. This manager reads only %s and "+
		"writes only %s; remove %s unless both are meant", k.Annotation, AnnotationKey, StatusAnnotationKey,
		k.Annotation, k.StatusAnnotation, AnnotationKey), true
}

// ReasonPreviousAnnotation is the reason of the Warning on a Service that asks for NEGs only under the key of before
// a change of --neg-annotation-key (Keys.AskedOnlyWithPrevious): the operator still has to move it.
const ReasonPreviousAnnotation = "NEGAnnotationOfBefore"
