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

package informerset

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// What the shared informers keep of each object. A field goes only if no controller reads it from the cache, and
// only from a resource that no controller writes back with an Update of a cached copy (that would remove the field
// from the object in the API server): Ingresses (status), Translations and PangolinResources keep everything but
// managedFields, which an Update without them leaves as they are.

// LastAppliedAnnotation is kubectl's record of the last applied manifest: a second copy of the object's
// configuration in an annotation, which no controller reads.
const LastAppliedAnnotation = corev1.LastAppliedConfigAnnotation

// DropLastApplied removes LastAppliedAnnotation.
func DropLastApplied(obj any) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	if a := m.GetAnnotations(); a != nil {
		if _, ok := a[LastAppliedAnnotation]; ok {
			delete(a, LastAppliedAnnotation)
			if len(a) == 0 {
				m.SetAnnotations(nil)
			}
		}
	}
}

// TrimNode keeps of a Node its metadata: the neg translator reads only its name and zone labels, and the Router its
// tenant label. Its status (images, conditions, addresses, volumes) is most of a Node, and changes on every
// heartbeat. A controller that comes to read a Node's spec or status must keep it here.
func TrimNode(obj any) {
	DropLastApplied(obj)
	if n, ok := obj.(*corev1.Node); ok {
		n.Spec = corev1.NodeSpec{}
		n.Status = corev1.NodeStatus{}
	}
}

// TrimPod keeps of a Pod what the neg translator and the NEG readiness reflector read: its name, namespace, UID,
// resourceVersion, labels (Service selectors), creation and deletion timestamps; spec.nodeName and
// spec.readinessGates; status.phase, status.podIP(s) and status.conditions. Its containers, volumes, annotations,
// owner references and container statuses go: they are most of a Pod, and the kubelet rewrites the statuses often.
// A controller that comes to read another field of a Pod must keep it here (TestTrimPodKeepsExactlyWhatIsRead).
func TrimPod(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	*p = corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:              p.Name,
			Namespace:         p.Namespace,
			UID:               p.UID,
			ResourceVersion:   p.ResourceVersion,
			Labels:            p.Labels,
			CreationTimestamp: p.CreationTimestamp,
			DeletionTimestamp: p.DeletionTimestamp,
		},
		Spec: corev1.PodSpec{NodeName: p.Spec.NodeName, ReadinessGates: p.Spec.ReadinessGates},
		Status: corev1.PodStatus{
			Phase:      p.Status.Phase,
			PodIP:      p.Status.PodIP,
			PodIPs:     p.Status.PodIPs,
			Conditions: p.Status.Conditions,
		},
	}
}

// transformFor returns the transform of the informer of gvr: managedFields go from every object, and the fields its
// Resources entry names (Trim) too.
func transformFor(gvr schema.GroupVersionResource) cache.TransformFunc {
	r, ok := LookupResource(gvr)
	if !ok || r.Trim == nil {
		return DropManagedFields
	}
	trim := r.Trim
	return func(obj any) (any, error) {
		obj, err := DropManagedFields(obj)
		if err == nil {
			trim(obj)
		}
		return obj, err
	}
}
