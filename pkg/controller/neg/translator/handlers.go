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
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/utils/ptr"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
)

// The translator's event handlers, one type per resource. Each is a single pointer, which an interface holds
// without an allocation: a ResourceEventHandlerFuncs of three method values costs about 80 bytes, for each handler
// of every tenant.
type (
	serviceEvents     struct{ t *Translator }
	sliceEvents       struct{ t *Translator }
	nodeEvents        struct{ t *Translator }
	translationEvents struct{ t *Translator }
)

func (e serviceEvents) OnAdd(obj any, _ bool)           { e.t.onService(obj) }
func (e serviceEvents) OnUpdate(oldObj, newObj any)     { e.t.onServiceUpdate(oldObj, newObj) }
func (e serviceEvents) OnDelete(obj any)                { e.t.onServiceDelete(obj) }
func (e sliceEvents) OnAdd(obj any, _ bool)             { e.t.onSlice(obj) }
func (e sliceEvents) OnUpdate(oldObj, newObj any)       { e.t.onSliceUpdate(oldObj, newObj) }
func (e sliceEvents) OnDelete(obj any)                  { e.t.onSlice(obj) }
func (e nodeEvents) OnAdd(obj any, initialList bool)    { e.t.onNodeAdd(obj, initialList) }
func (e nodeEvents) OnUpdate(oldObj, newObj any)        { e.t.onNodeUpdate(oldObj, newObj) }
func (e nodeEvents) OnDelete(obj any)                   { e.t.onNodeDelete(obj) }
func (e translationEvents) OnAdd(obj any, _ bool)       { e.t.onTranslation(obj) }
func (e translationEvents) OnUpdate(oldObj, newObj any) { e.t.onTranslationUpdate(oldObj, newObj) }
func (e translationEvents) OnDelete(obj any)            { e.t.onTranslationDelete(obj) }

// wantsNEGs says whether a Service is this controller's business: it asks for NEGs, or it carries a status from
// when it did (which must be removed).
func (t *Translator) wantsNEGs(svc *corev1.Service) bool {
	_, answered := svc.Annotations[t.keys.StatusAnnotation]
	return t.keys.Asks(svc) || answered
}

// onService records the custom NEG names a Service claims before it is synced, so that its sync and the other
// claimants' see the claim.
func (t *Translator) onService(obj any) {
	svc, ok := obj.(*corev1.Service)
	if !ok || !t.wantsNEGs(svc) {
		return
	}
	t.claimOf(svc)
	t.enqueue(svc.Namespace, svc.Name)
}

func (t *Translator) onServiceUpdate(oldObj, newObj any) {
	oldSvc, ok1 := oldObj.(*corev1.Service)
	newSvc, ok2 := newObj.(*corev1.Service)
	if !ok1 || !ok2 || (!t.wantsNEGs(oldSvc) && !t.wantsNEGs(newSvc)) {
		return
	}
	if worker.IsResync(oldSvc, newSvc) {
		return
	}
	t.claimOf(newSvc)
	t.enqueue(newSvc.Namespace, newSvc.Name)
}

// onServiceDelete releases the names of a Service that is gone, or that left the tenant (the tenant that gains it
// claims them again).
func (t *Translator) onServiceDelete(obj any) {
	obj = worker.LastState(obj)
	svc, ok := obj.(*corev1.Service)
	if !ok || !t.wantsNEGs(svc) {
		return
	}
	t.releaseClaims(svc)
	t.enqueue(svc.Namespace, svc.Name)
}

// onSlice enqueues the Service of a slice that appeared or went, as an endpoint change.
func (t *Translator) onSlice(obj any) {
	obj = worker.LastState(obj)
	if slice, ok := obj.(*discoveryv1.EndpointSlice); ok {
		t.sliceChanged(slice)
	}
}

func (t *Translator) onSliceUpdate(oldObj, newObj any) {
	oldSlice, ok1 := oldObj.(*discoveryv1.EndpointSlice)
	newSlice, ok2 := newObj.(*discoveryv1.EndpointSlice)
	if !ok1 || !ok2 {
		return
	}
	if worker.IsResync(oldSlice, newSlice) {
		return
	}
	if oldSlice.Labels[discoveryv1.LabelServiceName] != newSlice.Labels[discoveryv1.LabelServiceName] {
		t.sliceChanged(oldSlice)
	}
	t.sliceChanged(newSlice)
}

// sliceChanged enqueues the Service of a slice as an endpoint change, with the slice's trigger time (kube-proxy's
// change tracker remembers it on the event too: by the time of the sync the cache may show only a later change).
// Whether it is written at once or waits for the write in flight is its sync's to decide (groupCommit.begin).
func (t *Translator) sliceChanged(slice *discoveryv1.EndpointSlice) {
	if key, ok := t.sliceService(slice); ok {
		t.batch.endpointsChanged(key, sliceTriggerTime(slice))
		t.add(key)
	}
}

// sliceService returns the key of a slice's Service if it asks for NEGs; slices of other Services cost a map
// lookup. A Service not seen yet is enqueued by its own Add event.
func (t *Translator) sliceService(slice *discoveryv1.EndpointSlice) (string, bool) {
	name := slice.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return "", false
	}
	svc, err := t.serviceLister.Services(slice.Namespace).Get(name)
	if err != nil || !t.wantsNEGs(svc) {
		return "", false
	}
	return slice.Namespace + "/" + name, true
}

// sliceTriggerTime is the slice's endpoints.kubernetes.io/last-change-trigger-time, zero for none.
func sliceTriggerTime(slice *discoveryv1.EndpointSlice) time.Time {
	at, _ := negapi.TriggerTime(slice.Annotations, negapi.SliceTriggerTime)
	return at
}

// onNodeAdd counts a Node that appeared for the tenant. A Node without a zone changes nothing: its endpoints are
// left out either way. The initial list enqueues nothing: every Service is enqueued by its own initial Add.
func (t *Translator) onNodeAdd(obj any, isInInitialList bool) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	zone := t.nodeZone(n)
	if zone == "" {
		return
	}
	t.nodeGeneration.Add(1)
	newZone := t.zones.add(zone)
	if !isInInitialList {
		t.nodeChanged(n.Name, newZone)
	}
}

func (t *Translator) onNodeUpdate(oldObj, newObj any) {
	oldNode, ok1 := oldObj.(*corev1.Node)
	newNode, ok2 := newObj.(*corev1.Node)
	if !ok1 || !ok2 {
		return
	}
	// Nodes update their status every few seconds; only the zone matters here.
	oldZone, newZone := t.nodeZone(oldNode), t.nodeZone(newNode)
	if oldZone == newZone {
		return
	}
	t.nodeGeneration.Add(1)
	zonesChanged := oldZone != "" && t.zones.remove(oldZone)
	if newZone != "" && t.zones.add(newZone) {
		zonesChanged = true
	}
	t.nodeChanged(newNode.Name, zonesChanged)
}

func (t *Translator) onNodeDelete(obj any) {
	obj = worker.LastState(obj)
	n, ok := obj.(*corev1.Node)
	if !ok {
		// Which zone it was in is unknown: every Service looks again.
		t.nodeGeneration.Add(1)
		t.enqueueAllServices()
		return
	}
	if zone := t.nodeZone(n); zone != "" {
		t.nodeGeneration.Add(1)
		t.nodeChanged(n.Name, t.zones.remove(zone))
	}
}

// nodeChanged enqueues the Services a Node's appearance, disappearance or zone change concerns: all of them when
// the tenant's set of zones changed (one NEG per zone, and the zones in neg-status), otherwise those with an
// endpoint on the Node (whether it counts, and in which zone, depends on the Node).
func (t *Translator) nodeChanged(node string, zonesChanged bool) {
	if zonesChanged {
		t.enqueueAllServices()
		return
	}
	endpointSlices, err := t.sliceLister.List(labels.Everything())
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	for _, s := range endpointSlices {
		if !slices.ContainsFunc(s.Endpoints, func(ep discoveryv1.Endpoint) bool { return ptr.Deref(ep.NodeName, "") == node }) {
			continue
		}
		if key, ok := t.sliceService(s); ok {
			t.batch.otherChange(key, sliceTriggerTime(s))
			t.add(key)
		}
	}
}

func (t *Translator) enqueueAllServices() {
	services, err := t.serviceLister.List(labels.Everything())
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	for _, svc := range services {
		if t.wantsNEGs(svc) {
			t.enqueue(svc.Namespace, svc.Name)
		}
	}
}

// onTranslation enqueues the Service of a Translation of ours that appeared, so that one edited by hand, of another
// version or left without its Service is dealt with.
func (t *Translator) onTranslation(obj any) {
	if tr, ok := obj.(*mpv1alpha1.Translation); ok {
		t.enqueueOwner(tr)
	}
}

// onTranslationDelete enqueues the Service of a Translation of ours that disappeared: one deleted by hand is put
// back, and a Service waiting for a predecessor's Translation of the same name to go creates its own.
func (t *Translator) onTranslationDelete(obj any) {
	obj = worker.LastState(obj)
	if tr, ok := obj.(*mpv1alpha1.Translation); ok {
		service, _ := serviceOf(tr)
		t.writes.translationGone(tr.Namespace, service, tr.Name, tr.UID)
		t.enqueueOwner(tr)
	}
}

// onTranslationUpdate ignores most of the pusher's status and finalizer writes: the spec (generation), labels,
// owner references (the garbage collector removes them when the Service is deleted with --cascade=orphan) and the
// deletion mark are the translator's business, and so is a Translation of this version becoming synced while one of
// another version for the same Service port waits for it, or while its Service has endpoint changes held for that
// (groupCommit). A new spec of a Service with changes held waits with them.
func (t *Translator) onTranslationUpdate(oldObj, newObj any) {
	oldTr, ok1 := oldObj.(*mpv1alpha1.Translation)
	newTr, ok2 := newObj.(*mpv1alpha1.Translation)
	if !ok1 || !ok2 {
		return
	}
	if t.synced(newTr) && !t.synced(oldTr) && t.writeDone(newTr) {
		return
	}
	sameMeta := oldTr.DeletionTimestamp.Equal(newTr.DeletionTimestamp) && maps.Equal(oldTr.Labels, newTr.Labels) &&
		apiequality.Semantic.DeepEqual(oldTr.OwnerReferences, newTr.OwnerReferences)
	if oldTr.Generation == newTr.Generation && sameMeta &&
		(t.synced(oldTr) || !t.synced(newTr) || !t.hasPredecessorVersion(newTr)) {
		return
	}
	if sameMeta && oldTr.Generation != newTr.Generation {
		if service, ok := serviceOf(newTr); ok && IsOurs(newTr) &&
			t.writes.ownSpecPatchArrived(newTr.Namespace+"/"+service, newTr.Name, newTr.UID, newTr.Generation) {
			// The translator's own patch coming back, with no sync waiting for it: a sync now would find nothing to do.
			return
		}
	}
	if sameMeta && oldTr.Generation != newTr.Generation {
		// A new spec is nearly always the translator's own patch coming back. Synced at once, the Service would
		// write the endpoint changes held for this very write: they wait for its end in GCE, or the ceiling.
		if service, ok := serviceOf(newTr); ok && IsOurs(newTr) && t.batch.isHeld(newTr.Namespace+"/"+service) {
			return
		}
	}
	t.enqueueOwner(newTr)
}

// onPushed hears from the pusher that a Translation's generation is done in GCE before its status says so
// (pushed.Generations): what its status update would have done here, the write in flight ended or a predecessor
// version's Translation deleted, is done now. A generation the cache has already left ends nothing: the write in
// flight is the newer one.
func (t *Translator) onPushed(tr *mpv1alpha1.Translation) {
	obj, exists, err := t.translationIndex.GetByKey(tr.Namespace + "/" + tr.Name)
	if err != nil || !exists {
		return
	}
	if current, ok := obj.(*mpv1alpha1.Translation); !ok || current.UID != tr.UID || current.Generation != tr.Generation {
		return
	}
	if !t.writeDone(tr) && t.hasPredecessorVersion(tr) {
		t.enqueueOwner(tr)
	}
}

// writeDone ends the write in flight of the Service of a Translation of ours now synced: the changes held for it
// make the next write, now. It says whether it enqueued the Service.
func (t *Translator) writeDone(tr *mpv1alpha1.Translation) bool {
	if !IsOurs(tr) {
		return false
	}
	service, ok := serviceOf(tr)
	if !ok || !t.batch.writeDone(tr.Namespace+"/"+service) {
		return false
	}
	t.add(tr.Namespace + "/" + service)
	return true
}

// enqueueOwner enqueues the Service a Translation of ours was made for: the one its controller reference names or,
// once the reference is gone, the one its name names.
func (t *Translator) enqueueOwner(tr *mpv1alpha1.Translation) {
	if !IsOurs(tr) {
		return
	}
	if service, ok := serviceOf(tr); ok {
		t.enqueue(tr.Namespace, service)
	}
}

// hasPredecessorVersion says whether the tenant's view holds a Translation of another version for the same Service
// port as tr, a Translation of this version (which waits for tr to be synced before it is deleted).
func (t *Translator) hasPredecessorVersion(tr *mpv1alpha1.Translation) bool {
	version, service, port, ok := parseTranslationName(tr.Name)
	if !ok || version != t.version {
		return false
	}
	for _, other := range t.translationsNaming(tr.Namespace, service) {
		if v, _, p, ok := parseTranslationName(other.Name); ok && p == port && v != t.version {
			return true
		}
	}
	return false
}

// enqueue enqueues the Service for a change other than an endpoint change: its sync is not held.
func (t *Translator) enqueue(namespace, name string) {
	t.enqueueKey(namespace + "/" + name)
}

// enqueueKey is enqueue of a Service key (the claims' call when a custom NEG name's holder changes).
func (t *Translator) enqueueKey(key string) {
	t.batch.otherChange(key, time.Time{})
	t.add(key)
}
