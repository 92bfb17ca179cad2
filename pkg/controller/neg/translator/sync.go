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
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

// Event reasons on Services. Translation updates (every endpoint change) are logged, not recorded as Events.
const (
	ReasonInvalidAnnotation  = negapi.ReasonInvalidAnnotation
	ReasonPortNotExposed     = "NEGPortNotExposed"
	ReasonTranslationCreated = "TranslationCreated"
	ReasonTranslationDeleted = "TranslationDeleted"
	ReasonEndpointsSkipped   = "NEGEndpointsSkipped"
	// ReasonIPv6EndpointsNotServed: ready IPv6 addresses without an IPv4 address of the same Pod (an IPv6-only
	// Service, or a Pod with only that family) are left out of the NEGs (leftOut.ipv6Only says why).
	ReasonIPv6EndpointsNotServed = "NEGIPv6EndpointsNotServed"
	// ReasonStaleTranslationDeleted: a Translation left by a former Service of the same name (deleted with
	// --cascade=orphan, so its Translations lost their owner reference and stayed) was deleted; a Translation of this
	// Service of the same name is created once the pusher has deleted the old NEGs and the old one is gone.
	ReasonStaleTranslationDeleted = "StaleTranslationDeleted"
	// ReasonNewerTranslation: a newer build of the manager made the Translation of a port (a rollback brought this
	// build back); this build leaves it and its NEGs as they are, so they stop following the endpoints until the
	// newer build runs again.
	ReasonNewerTranslation = "NEGOfNewerBuild"
)

// sync makes the Translations and the neg-status annotation of one Service match what it asks for. It reads only
// caches: the Service, its EndpointSlices and the tenant's Nodes from the tenant's views, its Translations from the
// unfiltered Translation cache, which also holds those labeled for another tenant (made before the Service moved
// here, or by a former Service of its name). A cache that does not show the translator's own last writes yet is
// waited for (errCacheLagging), and so is one that does not show yet a Translation a create meets (errWaiting).
func (t *Translator) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	svc, err := t.serviceLister.Services(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		t.warnings.Forget(key)
		return t.releaseDeparted(ctx, namespace, name)
	}
	if err != nil {
		return err
	}
	if svc.DeletionTimestamp != nil {
		// The garbage collector deletes the Translations; writing now would only race it.
		return nil
	}

	ports, _, err := t.keys.ExposedPorts(svc)
	if err != nil {
		// Leave the Translations (and so the NEGs) as they are: a typo must not take a working port down. The
		// readiness reflector keeps the Pods such frozen Translations do not list waiting (readiness.frozenService).
		t.warnings.Report(key, svc, tenant.Warning{Reason: ReasonInvalidAnnotation, Message: err.Error()})
		return nil
	}
	// Only a Service that asks for NEGs needs the topology: a tenant without one never builds or keeps it.
	var topo *topology
	if len(ports) > 0 {
		if topo, err = t.currentTopology(); err != nil {
			return err
		}
	}
	d, err := t.desiredTranslations(svc, ports, topo)
	if err != nil {
		return err
	}
	if msg, both := t.keys.AnnotatedForBoth(svc); both {
		// Served as any other: GKE's NEGs are in the cluster's project, and each controller writes its own status.
		d.warnings = append(d.warnings, tenant.Warning{Reason: negapi.ReasonAnnotatedForBoth, Message: msg})
	}
	if msg, before := t.keys.AskedOnlyWithPrevious(svc); before {
		d.warnings = append(d.warnings, tenant.Warning{Reason: negapi.ReasonPreviousAnnotation, Message: msg})
	}
	if t.writes.translationsPending(key, t.cachedTranslation(namespace)) {
		t.warnings.Report(key, svc, d.warnings...)
		return errCacheLagging
	}
	p := planTranslations(t.planInput(svc, d))
	d.deferTo(p.deferred, t.version)
	blocked, err := t.apply(ctx, svc, p)
	t.warnings.Report(key, svc, append(d.warnings, blocked...)...)
	if err != nil {
		return err
	}
	var want *negStatus
	if len(d.translations) > 0 {
		s := newNEGStatus(d.negs, d.zones)
		want = &s
	}
	return t.writeStatus(ctx, svc, want)
}

// desired is what a Service asks for: its Translations, the NEG of each port, the custom NEG names they declare, and
// the warnings about the ports it asks for in vain.
type desired struct {
	translations []*mpv1alpha1.Translation
	negs         map[int32]string
	// zones are the zones of the Translations' NEGs, sorted: the neg-status annotation's.
	zones []string
	// custom maps a Translation's name to the custom NEG name it declares.
	custom map[string]string
	// unsettled are the custom NEG names whose answer the claim records must confirm before apply writes.
	unsettled []unsettledName
	warnings  []tenant.Warning
}

// deferTo makes the neg-status name the NEGs of the Translations a newer build made, which this build leaves alone,
// and says so on the Service.
func (d *desired) deferTo(newer []*mpv1alpha1.Translation, current string) {
	for _, tr := range newer {
		version, _, port, _ := parseTranslationName(tr.Name)
		d.negs[port] = negNameOf(tr)
		d.warnings = append(d.warnings, tenant.Warning{Reason: ReasonNewerTranslation, Message: fmt.Sprintf(
			"Translation %s of port %d was made by a newer build of the manager (layout %s; this build writes %s): "+
				"its NEG %s is left as it is and does not follow the endpoints until a build of layout %s or later runs",
			tr.Name, port, version, current, negNameOf(tr), version)})
	}
}

// desiredTranslations builds the Translation of each exposed port that is a port of the Service and whose custom
// NEG name, if any, no other Service holds. It reads only caches and the claims' memory: an answer the claim
// records must confirm is planned as it stands and settled by apply.
func (t *Translator) desiredTranslations(svc *corev1.Service, ports []negapi.ExposedPort, topo *topology) (desired, error) {
	d := desired{negs: map[int32]string{}, custom: map[string]string{}}
	var fixed []string
	if len(ports) > 0 {
		fixed, d.warnings = t.fixedZones(svc)
	}
	joins := t.backendServiceAsks(svc, ports)
	d.warnings = append(d.warnings, joins.warnings...)
	for _, p := range ports {
		servicePort := findServicePort(svc, p.Port)
		if servicePort == nil {
			d.warnings = append(d.warnings, tenant.Warning{Reason: ReasonPortNotExposed, Message: fmt.Sprintf(
				"Port %d in annotation %s is not a port of the Service; no NEG is made for it", p.Port, t.keys.Annotation)})
			continue
		}
		if p.CustomName != "" {
			// A name another Service claimed first is not this Service's: the port is left out, so a Translation of
			// it (made while this Service held the name) is deleted, and the holder waits for that.
			answer, err := t.nameAnswer(svc, p.CustomName)
			if err != nil {
				return desired{}, err
			}
			if !answer.Settled() {
				d.unsettled = append(d.unsettled, unsettledName{name: p.CustomName, answer: answer, port: p.Port})
			}
			if !answer.IsSelf {
				if answer.Settled() {
					// Unsettled, the warning waits for the live read that confirms the holder (settleNames).
					d.warnings = append(d.warnings, tenant.Warning{Reason: ReasonNameConflict,
						Message: nameConflictMessage(p.CustomName, t.gcp.ProjectID, p.Port, t.names.Describe(answer.Holder))})
				}
				continue
			}
			d.custom[versionedTranslationName(t.version, svc.Name, p.Port)] = p.CustomName
		}
		id := t.negIdentity(svc, p)
		zones := t.negZones(svc, p.Port, id.name, fixed, topo)
		tr, left, err := t.translation(svc, servicePort, id, topo, zones, fixed)
		if err != nil {
			return desired{}, err
		}
		t.setBackendServices(tr, p.Port, joins)
		d.warnings = append(d.warnings, left.warnings(p.Port)...)
		d.translations = append(d.translations, tr)
		d.negs[p.Port] = id.name
		d.zones = sortedZones(append(d.zones, zones...))
	}
	return d, nil
}

func findServicePort(svc *corev1.Service, port int32) *corev1.ServicePort {
	i := slices.IndexFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == port })
	if i < 0 {
		return nil
	}
	return &svc.Spec.Ports[i]
}

// endpointSlicesOf returns the tenant's EndpointSlices of the Service, from the cache's index by Service.
func (t *Translator) endpointSlicesOf(svc *corev1.Service) ([]*discoveryv1.EndpointSlice, error) {
	objs, err := t.sliceIndex.ByIndex(informerset.EndpointSlicesByService, informerset.ServiceKey(svc.Namespace, svc.Name))
	if err != nil {
		return nil, err
	}
	out := make([]*discoveryv1.EndpointSlice, 0, len(objs))
	for _, obj := range objs {
		if slice, ok := obj.(*discoveryv1.EndpointSlice); ok {
			out = append(out, slice)
		}
	}
	return out, nil
}

// translation builds the desired Translation of one Service port: one NEG per zone of zones (negZones), in zone
// order, each named and marked as id says, and holding the ready endpoints of that zone (none in a zone without the
// tenant's Nodes). A generated name is recorded in an annotation, so that every later build keeps it (negIdentity);
// a custom name's project in another, so that it is held there (heldNEGNames); the zones fixed ahead in a third, so
// that a zone taken off the list is told from one that lost its Nodes (decideZones).
func (t *Translator) translation(svc *corev1.Service, servicePort *corev1.ServicePort, id negID, topo *topology, zones, fixed []string) (*mpv1alpha1.Translation, leftOut, error) {
	endpointSlices, err := t.endpointSlicesOf(svc)
	if err != nil {
		return nil, leftOut{}, err
	}
	byZone, left := endpointsByZone(endpointSlices, servicePort, topo, t.endpointReady)
	tr := &mpv1alpha1.Translation{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: svc.Namespace,
			Name:      versionedTranslationName(t.version, svc.Name, servicePort.Port),
			Labels: map[string]string{
				t.labelKey:                             t.tenant,
				mpv1alpha1.TranslationOwnerUIDLabelKey: string(svc.UID),
			},
			OwnerReferences: []metav1.OwnerReference{ownerReference(svc)},
			Finalizers:      []string{mpv1alpha1.TranslationDeleterFinalizer},
		},
	}
	if id.generated {
		tr.Annotations = map[string]string{mpv1alpha1.TranslationGeneratedNEGNameAnnotationKey: id.name}
	} else {
		// A custom name is held in the project it is declared in (heldNEGNames).
		tr.Annotations = map[string]string{mpv1alpha1.TranslationNEGProjectAnnotationKey: t.gcp.ProjectID}
	}
	if len(fixed) > 0 {
		tr.Annotations[mpv1alpha1.TranslationNEGFixedZonesAnnotationKey] = fixedZonesAnnotation(fixed)
	}
	for _, zone := range zones {
		tr.Spec.Resources = append(tr.Spec.Resources, mpv1alpha1.BackendResource{
			Kind:                 mpv1alpha1.BackendResourceKindNetworkEndpointGroup,
			Name:                 id.name,
			Zone:                 zone,
			Description:          id.description,
			NetworkEndpointGroup: t.negParameters(byZone[zone]),
		})
	}
	return tr, left, nil
}

// ownerReference makes the Service the Translation's controller; blockOwnerDeletion makes a foreground delete of
// the Service wait until the Translation, and so its NEGs, are gone.
func ownerReference(svc *corev1.Service) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID,
		Controller: &yes, BlockOwnerDeletion: &yes}
}

// writeStatus patches the neg-status annotation when it differs from want (nil: absent). The cached Service is
// compared only once it shows the translator's last patch: until then it would ask for the same patch again.
func (t *Translator) writeStatus(ctx context.Context, svc *corev1.Service, want *negStatus) error {
	key := svc.Namespace + "/" + svc.Name
	if t.writes.statusPending(key, svc.UID, svc.ResourceVersion) {
		return errCacheLagging
	}
	current, present := svc.Annotations[t.keys.StatusAnnotation]
	if !statusNeedsWrite(current, present, want) {
		return nil
	}
	value := "null"
	if want != nil {
		value = fmt.Sprintf("%q", want.encode())
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, t.keys.StatusAnnotation, value)
	out, err := t.kube.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("writing annotation %s: %w", t.keys.StatusAnnotation, err)
	}
	// A patch that changed nothing (the cache lagged behind someone else's write of the same value) makes no new
	// version, and no event: there is nothing to wait for.
	if out.ResourceVersion != svc.ResourceVersion {
		t.writes.patchedStatus(key, out.UID, svc.ResourceVersion)
	}
	return nil
}
