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
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// write sets the Pod's condition with a strategic-merge patch of its status (conditions merge by type, so the
// kubelet's own are left alone; manifests/rbac grants pods/status patch and nothing more), with the Pod's UID as a
// precondition so that a Pod deleted and created again under the name is not given the old one's condition. A True
// condition is recorded as an Event on the Pod: Normal, or Warning for the timeout. The first False is not: it only
// says the Pod waits, as its condition shows.
func (r *Reflector) write(ctx context.Context, pod *corev1.Pod, current *corev1.PodCondition, v verdict) error {
	c := corev1.PodCondition{Type: r.keys.ReadinessGate, Status: v.status, Reason: v.reason, Message: v.message,
		LastTransitionTime: metav1.NewTime(r.now())}
	if current != nil && current.Status == v.status {
		c.LastTransitionTime = current.LastTransitionTime
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID},
		"status":   map[string]any{"conditions": []corev1.PodCondition{c}},
	})
	if err != nil {
		return err
	}
	if _, err := r.kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch,
		metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("setting the condition %s of Pod %s/%s: %w", r.keys.ReadinessGate, pod.Namespace, pod.Name, err)
	}
	if v.status == corev1.ConditionTrue {
		eventType := corev1.EventTypeNormal
		if v.reason == ReasonTimeout {
			eventType = corev1.EventTypeWarning
		}
		r.recorder.Event(pod, eventType, v.reason, v.message)
	}
	return nil
}
