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

package translator

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/utils/ptr"

	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
)

// endpointReady says whether an endpoint of a slice of namespace counts as ready: it is ready (unset counts as
// ready, as the API says), or it is not terminating and it is for a Pod of the tenant's view (the same one: its UID,
// when the reference has one) that is ready but for the NEG readiness gate. A reference to a Pod of another
// namespace is not followed: that Pod may be another tenant's. awaitsIPv6 says, of an endpoint that counts only
// through the gate, whether its Pod has an IPv6 address: a dual-stack Service's IPv6 slice will list it, and the
// endpoint waits for that (endpointsByZone); a Pod with none (an IPv4-only Node pool of a PreferDualStack Service, a
// hostNetwork Pod there) never will, and its IPv4 address is its endpoint.
func (t *Translator) endpointReady(namespace string, ep *discoveryv1.Endpoint) (counts, awaitsIPv6 bool) {
	if ptr.Deref(ep.Conditions.Ready, true) {
		return true, false
	}
	ref := ep.TargetRef
	if ptr.Deref(ep.Conditions.Terminating, false) || ref == nil || ref.Kind != "Pod" ||
		(ref.Namespace != "" && ref.Namespace != namespace) {
		return false, false
	}
	pod, err := t.podLister.Pods(namespace).Get(ref.Name)
	if err != nil || (ref.UID != "" && ref.UID != pod.UID) || !t.keys.ReadyButForGate(pod) {
		return false, false
	}
	return true, hasIPv6(pod)
}

// hasIPv6 says whether the Pod's status lists an IPv6 address.
func hasIPv6(pod *corev1.Pod) bool {
	for _, ip := range pod.Status.PodIPs {
		if addr, err := netip.ParseAddr(ip.IP); err == nil && addr.Is6() && !addr.Is4In6() {
			return true
		}
	}
	return false
}

// podEvents are the translator's handlers of the tenant's Pods (see handlers.go).
type podEvents struct{ t *Translator }

// OnAdd skips the initial list: every Service is enqueued by its own initial Add, and no worker syncs before every
// handler has synced.
func (e podEvents) OnAdd(obj any, isInInitialList bool) {
	if !isInInitialList {
		e.t.onPod(nil, obj)
	}
}
func (e podEvents) OnUpdate(oldObj, newObj any) { e.t.onPod(oldObj, newObj) }
func (e podEvents) OnDelete(obj any)            { e.t.onPod(worker.LastState(obj), nil) }

// onPod enqueues the Services with an endpoint of the Pod when whether it is ready but for the NEG readiness gate
// changed: only then can a not-ready endpoint of it start or stop counting. It is an endpoint change, so the group
// commit decides when it is synced, as for a slice's. Every other change of the Pod (most are of its status) costs two passes
// over its conditions.
func (t *Translator) onPod(oldObj, newObj any) {
	oldPod, _ := oldObj.(*corev1.Pod)
	newPod, _ := newObj.(*corev1.Pod)
	if oldPod != nil && newPod != nil && worker.IsResync(oldPod, newPod) {
		return
	}
	was, is := oldPod != nil && t.keys.ReadyButForGate(oldPod), newPod != nil && t.keys.ReadyButForGate(newPod)
	if was == is {
		return
	}
	pod := newPod
	if pod == nil {
		pod = oldPod
	}
	objs, err := t.sliceIndex.ByIndex(informerset.EndpointSlicesByPod, informerset.PodKey(pod.Namespace, pod.Name))
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	for _, obj := range objs {
		if slice, ok := obj.(*discoveryv1.EndpointSlice); ok {
			t.sliceChanged(slice)
		}
	}
}
