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

package neg

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"
	mplisters "github.com/multiproject/client-go/listers/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/claims"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
)

// translatorName names the translator in logs, queue names and metrics.
const translatorName = "neg-translator"

// Event reasons on Services. Translation updates (every endpoint change) are logged, not recorded as Events.
const (
	ReasonInvalidAnnotation  = "InvalidNEGAnnotation"
	ReasonPortNotExposed     = "NEGPortNotExposed"
	ReasonTranslationCreated = "TranslationCreated"
	ReasonTranslationDeleted = "TranslationDeleted"
	ReasonEndpointsSkipped   = "NEGEndpointsSkipped"
	// ReasonStaleTranslationDeleted: a Translation left by a former Service of the same name (deleted with
	// --cascade=orphan, so its Translations lost their owner reference and stayed) was deleted; a Translation of this
	// Service of the same name is created once the pusher has deleted the old NEGs and the old one is gone.
	ReasonStaleTranslationDeleted = "StaleTranslationDeleted"
)

// errWaiting says a sync must be retried because a Translation it wants to write still exists in another form (being
// deleted, or another tenant's): nothing failed, so it is not logged as an error.
var errWaiting = errors.New("waiting for an old Translation of the same name to be deleted")

// translator is one tenant's Kubernetes half of the neg controller: Services, EndpointSlices and Nodes in,
// Translations and the neg-status annotation out.
type translator struct {
	tenant   string
	labelKey string
	cluster  string
	gcp      mpv1alpha1.GCPConfig

	kube kubernetes.Interface
	mp   mpclientset.Interface

	services          cache.SharedIndexInformer
	slices            cache.SharedIndexInformer
	nodes             cache.SharedIndexInformer
	translations      cache.SharedIndexInformer
	serviceLister     corelisters.ServiceLister
	sliceLister       discoverylisters.EndpointSliceLister
	nodeLister        corelisters.NodeLister
	translationLister mplisters.TranslationLister

	// allTranslations is the unfiltered Translation informer: a custom NEG name is used once in the cluster, so
	// every tenant's Translations count when a name is taken over.
	allTranslations cache.SharedIndexInformer

	queue    workqueue.TypedRateLimitingInterface[string]
	recorder record.EventRecorder
	workers  int
	// onSynced is called once the caches have synced and the workers run.
	onSynced func()

	warnings *warningMemory
	// names is the translator's membership in the process's claims of custom NEG names, from Run on.
	names *claims.Member

	// deleting holds the UIDs of the Translations this translator asked to delete whose deletion the tenant's view
	// has not shown yet: they count as leaving, so a lagging view causes neither a second delete nor a second Event.
	// An entry goes when the view drops the Translation.
	deleting sync.Map // types.UID → struct{}
}

func newTranslator(c *tenant.Context, onSynced func()) (*translator, error) {
	if c.ProviderConfig == nil || c.ProviderConfig.Spec.GCP == nil {
		return nil, errors.New("neg: the ProviderConfig has no spec.gcp")
	}
	t := &translator{
		tenant:   c.Name(),
		labelKey: c.ProviderConfigLabelKey,
		cluster:  c.Options.ClusterName,
		gcp:      *c.ProviderConfig.Spec.GCP.DeepCopy(),
		kube:     c.KubeClient,
		mp:       c.MultiprojectClient,
		recorder: c.EventRecorder,
		workers:  max(c.Workers, 1),
		onSynced: onSynced,
		warnings: &warningMemory{m: map[string]map[string]bool{}},
	}
	var err error
	if t.services, err = c.Informers.Informer(informerset.Services); err != nil {
		return nil, fmt.Errorf("neg: %w", err)
	}
	if t.slices, err = c.Informers.Informer(informerset.EndpointSlices); err != nil {
		return nil, fmt.Errorf("neg: %w", err)
	}
	if t.nodes, err = c.Informers.Informer(informerset.Nodes); err != nil {
		return nil, fmt.Errorf("neg: %w", err)
	}
	if t.translations, err = c.Informers.Informer(informerset.Translations); err != nil {
		return nil, fmt.Errorf("neg: %w", err)
	}
	if t.allTranslations, err = c.Informers.Shared(informerset.Translations); err != nil {
		return nil, fmt.Errorf("neg: %w", err)
	}
	t.serviceLister = corelisters.NewServiceLister(t.services.GetIndexer())
	t.sliceLister = discoverylisters.NewEndpointSliceLister(t.slices.GetIndexer())
	t.nodeLister = corelisters.NewNodeLister(t.nodes.GetIndexer())
	t.translationLister = mplisters.NewTranslationLister(t.translations.GetIndexer())
	t.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: t.tenant + "-" + translatorName})
	return t, nil
}

// Run translates until ctx ends. On return its handlers are removed, its queue is shut down and its workers are
// gone.
func (t *translator) Run(ctx context.Context) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx).WithValues("controller", translatorName)
	ctx = klog.NewContext(ctx, logger)

	var workers sync.WaitGroup
	var removers []func()
	defer func() {
		t.queue.ShutDown()
		workers.Wait()
		for _, remove := range removers {
			remove()
		}
		// After the handlers: the tenant's names are released once, and no late Service event claims them again.
		if t.names != nil {
			t.names.Leave()
		}
		metrics.ForgetController(t.tenant, translatorName)
	}()

	// Joined before the Service handler is added, which claims the tenant's NEG names from its initial list on.
	names, err := claims.Join(claimKind, t.allTranslations, translationHolding, t.tenant, t.queue.Add)
	if err != nil {
		logger.Error(err, "Could not join the process's NEG name claims")
		return
	}
	t.names = names

	handlers := []struct {
		kind     string
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}{
		{"Service", t.services, cache.ResourceEventHandlerFuncs{AddFunc: t.onService, UpdateFunc: t.onServiceUpdate, DeleteFunc: t.onServiceDelete}},
		{"EndpointSlice", t.slices, cache.ResourceEventHandlerFuncs{AddFunc: t.onSlice, UpdateFunc: t.onSliceUpdate, DeleteFunc: t.onSlice}},
		{"Node", t.nodes, cache.ResourceEventHandlerFuncs{AddFunc: t.onNode, UpdateFunc: t.onNodeUpdate, DeleteFunc: t.onNode}},
		{"Translation", t.translations, cache.ResourceEventHandlerFuncs{AddFunc: t.onTranslation, UpdateFunc: t.onTranslationUpdate, DeleteFunc: t.onTranslationDelete}},
	}
	synced := []cache.InformerSynced{}
	for _, h := range handlers {
		registration, err := h.informer.AddEventHandler(h.handler)
		if err != nil {
			logger.Error(err, "Could not watch", "kind", h.kind)
			return
		}
		informer, kind := h.informer, h.kind
		removers = append(removers, func() {
			if err := informer.RemoveEventHandler(registration); err != nil {
				logger.Error(err, "Could not remove an event handler", "kind", kind)
			}
		})
		synced = append(synced, h.informer.HasSynced, registration.HasSynced)
	}
	synced = append(synced, t.names.HasSynced)

	logger.Info("Starting NEG translator", "workers", t.workers, "cluster", t.cluster)
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return
	}
	for range t.workers {
		workers.Go(func() { wait.UntilWithContext(ctx, t.runWorker, time.Second) })
	}
	if t.onSynced != nil {
		t.onSynced()
	}
	<-ctx.Done()
	logger.Info("Stopping NEG translator")
}

// wantsNEGs says whether a Service is this controller's business: it asks for NEGs, or it carries a status from
// when it did (which must be removed).
func wantsNEGs(svc *corev1.Service) bool {
	_, asked := svc.Annotations[NEGAnnotationKey]
	_, answered := svc.Annotations[NEGStatusAnnotationKey]
	return asked || answered
}

// onService records the custom NEG names a Service claims before it is synced, so that its sync and the other
// claimants' see the claim.
func (t *translator) onService(obj any) {
	svc, ok := obj.(*corev1.Service)
	if !ok || !wantsNEGs(svc) {
		return
	}
	t.claimOf(svc)
	t.enqueue(svc.Namespace, svc.Name)
}

func (t *translator) onServiceUpdate(oldObj, newObj any) {
	oldSvc, ok1 := oldObj.(*corev1.Service)
	newSvc, ok2 := newObj.(*corev1.Service)
	if !ok1 || !ok2 || (!wantsNEGs(oldSvc) && !wantsNEGs(newSvc)) {
		return
	}
	t.claimOf(newSvc)
	t.enqueue(newSvc.Namespace, newSvc.Name)
}

// onServiceDelete releases the names of a Service that is gone, or that left the tenant (the tenant that gains it
// claims them again).
func (t *translator) onServiceDelete(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	svc, ok := obj.(*corev1.Service)
	if !ok || !wantsNEGs(svc) {
		return
	}
	t.releaseClaims(svc)
	t.enqueue(svc.Namespace, svc.Name)
}

func (t *translator) onSlice(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if slice, ok := obj.(*discoveryv1.EndpointSlice); ok {
		t.enqueueSliceService(slice)
	}
}

func (t *translator) onSliceUpdate(oldObj, newObj any) {
	oldSlice, ok1 := oldObj.(*discoveryv1.EndpointSlice)
	newSlice, ok2 := newObj.(*discoveryv1.EndpointSlice)
	if !ok1 || !ok2 {
		return
	}
	if oldSlice.ResourceVersion == newSlice.ResourceVersion {
		// A resync: the Service's own resync covers it.
		return
	}
	if oldSlice.Labels[discoveryv1.LabelServiceName] != newSlice.Labels[discoveryv1.LabelServiceName] {
		t.enqueueSliceService(oldSlice)
	}
	t.enqueueSliceService(newSlice)
}

// enqueueSliceService enqueues the Service of a slice if it asks for NEGs; slices of other Services cost a map
// lookup.
func (t *translator) enqueueSliceService(slice *discoveryv1.EndpointSlice) {
	name := slice.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return
	}
	svc, err := t.serviceLister.Services(slice.Namespace).Get(name)
	if err != nil || !wantsNEGs(svc) {
		// Not seen yet: its own Add event enqueues it.
		return
	}
	t.enqueue(slice.Namespace, name)
}

// onNode reacts to a Node appearing or disappearing for the tenant: zones and the endpoints that count may change,
// for every Service.
func (t *translator) onNode(any) { t.enqueueAllServices() }

func (t *translator) onNodeUpdate(oldObj, newObj any) {
	oldNode, ok1 := oldObj.(*corev1.Node)
	newNode, ok2 := newObj.(*corev1.Node)
	// Nodes update their status every few seconds; only the zone matters here.
	if ok1 && ok2 && nodeZone(oldNode) == nodeZone(newNode) {
		return
	}
	t.enqueueAllServices()
}

func (t *translator) enqueueAllServices() {
	services, err := t.serviceLister.List(labels.Everything())
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	for _, svc := range services {
		if wantsNEGs(svc) {
			t.enqueue(svc.Namespace, svc.Name)
		}
	}
}

// onTranslation enqueues the Service of a Translation of ours that appeared, so that one edited by hand, of another
// version or left without its Service is dealt with.
func (t *translator) onTranslation(obj any) {
	if tr, ok := obj.(*mpv1alpha1.Translation); ok {
		t.enqueueOwner(tr)
	}
}

// onTranslationDelete enqueues the Service of a Translation of ours that disappeared: one deleted by hand is put
// back, and a Service waiting for a predecessor's Translation of the same name to go creates its own.
func (t *translator) onTranslationDelete(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if tr, ok := obj.(*mpv1alpha1.Translation); ok {
		t.deleting.Delete(tr.UID)
		t.enqueueOwner(tr)
	}
}

// onTranslationUpdate ignores most of the pusher's status and finalizer writes: the spec (generation), labels,
// owner references (the garbage collector removes them when the Service is deleted with --cascade=orphan) and the
// deletion mark are the translator's business, and so is a Translation of this version becoming synced while one of
// another version for the same Service port waits for it.
func (t *translator) onTranslationUpdate(oldObj, newObj any) {
	oldTr, ok1 := oldObj.(*mpv1alpha1.Translation)
	newTr, ok2 := newObj.(*mpv1alpha1.Translation)
	if !ok1 || !ok2 {
		return
	}
	if oldTr.Generation == newTr.Generation && oldTr.DeletionTimestamp.Equal(newTr.DeletionTimestamp) &&
		labels.Equals(oldTr.Labels, newTr.Labels) &&
		apiequality.Semantic.DeepEqual(oldTr.OwnerReferences, newTr.OwnerReferences) &&
		(isSynced(oldTr) || !isSynced(newTr) || !t.hasPredecessorVersion(newTr)) {
		return
	}
	t.enqueueOwner(newTr)
}

// enqueueOwner enqueues the Service a Translation of ours was made for: the one its controller reference names or,
// once the reference is gone, the one its name names.
func (t *translator) enqueueOwner(tr *mpv1alpha1.Translation) {
	if !isOurs(tr) {
		return
	}
	if service, ok := serviceOf(tr); ok {
		t.enqueue(tr.Namespace, service)
	}
}

// hasPredecessorVersion says whether the tenant's view holds a Translation of another version for the same Service
// port as tr, a Translation of this version (which waits for tr to be synced before it is deleted).
func (t *translator) hasPredecessorVersion(tr *mpv1alpha1.Translation) bool {
	version, service, port, ok := parseTranslationName(tr.Name)
	if !ok || version != translationVersion {
		return false
	}
	for _, other := range t.translationsNaming(tr.Namespace, service) {
		if v, _, p, ok := parseTranslationName(other.Name); ok && p == port && v != translationVersion {
			return true
		}
	}
	return false
}

func (t *translator) enqueue(namespace, name string) {
	t.queue.Add(namespace + "/" + name)
}

func (t *translator) runWorker(ctx context.Context) {
	for t.processNextWorkItem(ctx) {
	}
}

func (t *translator) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := t.queue.Get()
	if shutdown {
		return false
	}
	defer t.queue.Done(key)

	logger := klog.FromContext(ctx).WithValues("service", key)
	err := t.sync(klog.NewContext(ctx, logger), key)
	metrics.ObserveSync(t.tenant, translatorName, t.tenant+"-"+translatorName, err, t.queue.Len())
	switch {
	case err == nil:
		t.queue.Forget(key)
	case errors.Is(err, errWaiting) || apierrors.IsConflict(err):
		logger.V(4).Info("Retrying", "reason", err)
		t.queue.AddRateLimited(key)
	default:
		logger.Error(err, "Sync failed; retrying with backoff")
		t.queue.AddRateLimited(key)
	}
	return true
}

// sync makes the Translations and the neg-status annotation of one Service match what it asks for.
func (t *translator) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	svc, err := t.serviceLister.Services(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		t.warnings.forget(key)
		return t.releaseDeparted(ctx, namespace, name)
	}
	if err != nil {
		return err
	}
	if svc.DeletionTimestamp != nil {
		// The garbage collector deletes the Translations; writing now would only race it.
		return nil
	}

	value, annotated := svc.Annotations[NEGAnnotationKey]
	var ports []exposedPort
	if annotated {
		if ports, err = parseNEGAnnotation(value); err != nil {
			// Leave the Translations (and so the NEGs) as they are: a typo must not take a working port down.
			t.warnings.report(t.recorder, key, svc, []warning{{ReasonInvalidAnnotation, err.Error()}})
			return nil
		}
	}

	nodes, err := t.nodeLister.List(labels.Everything())
	if err != nil {
		return err
	}
	topo := newTopology(nodes)
	var warnings []warning
	var desired []*mpv1alpha1.Translation
	negs := map[int32]string{}
	custom := map[string]string{} // Translation name → the custom NEG name it declares
	for _, p := range ports {
		servicePort := findServicePort(svc, p.Port)
		if servicePort == nil {
			warnings = append(warnings, warning{ReasonPortNotExposed, fmt.Sprintf(
				"Port %d in annotation %s is not a port of the Service; no NEG is made for it", p.Port, NEGAnnotationKey)})
			continue
		}
		if p.CustomName != "" {
			// A name another Service claimed first is not this Service's: the port is left out, so a Translation of
			// it (made while this Service held the name) is deleted, and the holder waits for that.
			if holder, taken := t.nameHolder(svc, p.CustomName); taken {
				warnings = append(warnings, warning{ReasonNameConflict, nameConflictMessage(p.CustomName, p.Port, holder)})
				continue
			}
			custom[translationName(svc.Name, p.Port)] = p.CustomName
		}
		tr, skipped, err := t.translation(svc, servicePort, p, topo)
		if err != nil {
			return err
		}
		if skipped > 0 {
			// No count in the message: it would make every endpoint change a new Event.
			warnings = append(warnings, warning{ReasonEndpointsSkipped, fmt.Sprintf(
				"Some ready endpoints of port %d run on Nodes this tenant does not have, or that have no zone; "+
					"they are left out of the NEGs", p.Port)})
		}
		desired = append(desired, tr)
		negs[p.Port] = negNameFor(t, svc, p)
	}
	blocked, err := t.reconcileTranslations(ctx, svc, desired, custom)
	t.warnings.report(t.recorder, key, svc, append(warnings, blocked...))
	if err != nil {
		return err
	}
	var want *negStatus
	if len(desired) > 0 {
		s := newNEGStatus(negs, topo.zones)
		want = &s
	}
	return t.writeStatus(ctx, svc, want)
}

func findServicePort(svc *corev1.Service, port int32) *corev1.ServicePort {
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Port == port {
			return &svc.Spec.Ports[i]
		}
	}
	return nil
}

func negNameFor(t *translator, svc *corev1.Service, p exposedPort) string {
	if p.CustomName != "" {
		return p.CustomName
	}
	return negName(translationVersion, t.cluster, t.tenant, svc.Namespace, svc.Name, p.Port)
}

// translation builds the desired Translation of one Service port: one NEG per zone of the tenant's Nodes, in zone
// order, each with the ready endpoints of that zone.
func (t *translator) translation(svc *corev1.Service, servicePort *corev1.ServicePort, p exposedPort, topo *topology) (*mpv1alpha1.Translation, int, error) {
	selector := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: svc.Name})
	endpointSlices, err := t.sliceLister.EndpointSlices(svc.Namespace).List(selector)
	if err != nil {
		return nil, 0, err
	}
	byZone, skipped := endpointsByZone(endpointSlices, servicePort, topo)
	name := negNameFor(t, svc, p)
	description := negDescription(t.cluster, t.tenant, svc.Namespace, svc.Name, string(svc.UID), p.Port)
	tr := &mpv1alpha1.Translation{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: svc.Namespace,
			Name:      translationName(svc.Name, p.Port),
			Labels: map[string]string{
				t.labelKey:                             t.tenant,
				mpv1alpha1.TranslationOwnerUIDLabelKey: string(svc.UID),
			},
			OwnerReferences: []metav1.OwnerReference{ownerReference(svc)},
			Finalizers:      []string{mpv1alpha1.TranslationDeleterFinalizer},
		},
	}
	for _, zone := range topo.zones {
		tr.Spec.Resources = append(tr.Spec.Resources, mpv1alpha1.BackendResource{
			Kind:        mpv1alpha1.BackendResourceKindNetworkEndpointGroup,
			Name:        name,
			Zone:        zone,
			Description: description,
			NetworkEndpointGroup: &mpv1alpha1.NetworkEndpointGroupParameters{
				Network:    t.gcp.Network,
				Subnetwork: t.gcp.Subnetwork,
				Endpoints:  byZone[zone],
			},
		})
	}
	return tr, skipped, nil
}

// ownerReference makes the Service the Translation's controller; blockOwnerDeletion makes a foreground delete of
// the Service wait until the Translation, and so its NEGs, are gone.
func ownerReference(svc *corev1.Service) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID,
		Controller: &yes, BlockOwnerDeletion: &yes}
}

func isOurs(tr *mpv1alpha1.Translation) bool {
	return len(tr.Name) > len(translationPrefix) && tr.Name[:len(translationPrefix)] == translationPrefix
}

// serviceOf is the name of the Service a Translation of ours was made for: its controller reference's or, when it
// has none (the garbage collector removed it after a delete with --cascade=orphan), the one in its name.
func serviceOf(tr *mpv1alpha1.Translation) (string, bool) {
	if ref := metav1.GetControllerOf(tr); ref != nil && ref.Kind == "Service" && ref.APIVersion == "v1" {
		return ref.Name, true
	}
	_, service, _, ok := parseTranslationName(tr.Name)
	return service, ok
}

// ownerUID is the UID of the Service a Translation was made for: its owner-UID label's or, without the label, its
// controller reference's. It outlives the reference, which a delete with --cascade=orphan removes.
func ownerUID(tr *mpv1alpha1.Translation) types.UID {
	if uid := tr.Labels[mpv1alpha1.TranslationOwnerUIDLabelKey]; uid != "" {
		return types.UID(uid)
	}
	if ref := metav1.GetControllerOf(tr); ref != nil {
		return ref.UID
	}
	return ""
}

// isSynced says whether the pusher has pushed the Translation's current spec: its NEGs exist as declared.
func isSynced(tr *mpv1alpha1.Translation) bool {
	c := meta.FindStatusCondition(tr.Status.Conditions, mpv1alpha1.TranslationConditionSynced)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == tr.Generation
}

// translationsNaming returns the Translations of ours in the tenant's view, labeled for the tenant, that were made
// for a Service of that namespace and name, whatever its UID. It reads the cache only.
func (t *translator) translationsNaming(namespace, service string) []*mpv1alpha1.Translation {
	list, err := t.translationLister.Translations(namespace).List(labels.SelectorFromSet(labels.Set{t.labelKey: t.tenant}))
	if err != nil {
		return nil
	}
	var out []*mpv1alpha1.Translation
	for _, tr := range list {
		if s, ok := serviceOf(tr); ok && s == service && isOurs(tr) {
			out = append(out, tr)
		}
	}
	return out
}

// leaving says whether a Translation is on its way out: marked for deletion, or deleted by this translator and not
// yet seen so by the view.
func (t *translator) leaving(tr *mpv1alpha1.Translation) bool {
	if tr.DeletionTimestamp != nil {
		return true
	}
	_, asked := t.deleting.Load(tr.UID)
	return asked
}

// sharesNEGs says whether two Translations list a NEG of the same zone and name. Generated names differ between
// versions and Service ports; a custom name (the annotation's "name") is the same in every version.
func sharesNEGs(a, b *mpv1alpha1.Translation) bool {
	type zoneName struct{ zone, name string }
	names := map[zoneName]bool{}
	for _, r := range a.Spec.Resources {
		names[zoneName{r.Zone, r.Name}] = true
	}
	for _, r := range b.Spec.Resources {
		if names[zoneName{r.Zone, r.Name}] {
			return true
		}
	}
	return false
}

// reconcileTranslations makes the Service's Translations in the API exactly desired. It lists them from the API
// server by the owner-UID label rather than from the tenant's view, which would miss one labeled for another tenant
// (the Service moved) and may lag behind the translator's own writes.
//
// Translations that are going (stale ones it deletes, ones already being deleted, and ones left by a former Service
// of the same name) hold back the creation of a desired Translation that has the same name or lists one of the same
// NEGs: a NEG belongs to one Translation at a time, so the old one's deletion never takes the new one's NEG. So does
// a Translation of another Service, of any tenant, that declares a custom NEG name (custom: by Translation name) the
// desired one declares; the NEGNameConflict warnings that says so are returned.
func (t *translator) reconcileTranslations(ctx context.Context, svc *corev1.Service, desired []*mpv1alpha1.Translation, custom map[string]string) ([]warning, error) {
	logger := klog.FromContext(ctx)
	client := t.mp.MultiprojectV1alpha1().Translations(svc.Namespace)
	selector := labels.Set{mpv1alpha1.TranslationOwnerUIDLabelKey: string(svc.UID)}.AsSelector().String()
	list, err := client.List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("listing the Service's Translations: %w", err)
	}
	wanted := map[string]*mpv1alpha1.Translation{}
	for _, tr := range desired {
		wanted[tr.Name] = tr
	}
	existing := map[string]*mpv1alpha1.Translation{}
	for i := range list.Items {
		if isOurs(&list.Items[i]) {
			existing[list.Items[i].Name] = &list.Items[i]
		}
	}
	var errs []error
	var leaving []*mpv1alpha1.Translation
	for i := range list.Items {
		have := &list.Items[i]
		if !isOurs(have) || (wanted[have.Name] != nil && have.Labels[t.labelKey] == t.tenant) {
			continue
		}
		if t.leaving(have) {
			leaving = append(leaving, have)
			continue
		}
		if successor := t.pendingSuccessor(svc, have, wanted, existing); successor != "" {
			logger.V(4).Info("Keeping a Translation of another version until its successor is synced",
				"translation", have.Name, "successor", successor)
			continue
		}
		// Stale: its port is no longer exposed, its version is old (and its successor synced, or sharing its
		// NEGs), or it was made for another tenant (the Service moved; that tenant's pusher deletes its NEGs in its
		// own project).
		deleted, err := t.deleteTranslation(ctx, have)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if deleted {
			leaving = append(leaving, have)
			t.recorder.Eventf(svc, corev1.EventTypeNormal, ReasonTranslationDeleted,
				"Deleted Translation %s; its NEGs are deleted before it disappears", have.Name)
		}
	}
	// Translations left by a former Service of this name: it was deleted with --cascade=orphan, so the garbage
	// collector removed their owner reference and left them, with their NEGs.
	for _, old := range t.translationsNaming(svc.Namespace, svc.Name) {
		if ownerUID(old) == svc.UID {
			continue
		}
		if t.leaving(old) {
			leaving = append(leaving, old)
			continue
		}
		deleted, err := t.deletePredecessor(ctx, svc, old)
		if err != nil {
			errs = append(errs, err)
		} else if deleted {
			leaving = append(leaving, old)
		}
	}

	waiting := false
	var blocked []warning
	for _, want := range desired {
		have, ok := existing[want.Name]
		// A custom name the Service's Translation does not declare yet is reserved before the write: no other
		// Service's Translation may declare it, nor be about to.
		reserving, object := custom[want.Name], want.Namespace+"/"+want.Name
		if ok && declares(have, reserving) {
			reserving = ""
		}
		reserve := func() bool {
			if reserving == "" {
				return true
			}
			holder, free := t.reserveName(svc, reserving, object)
			if !free {
				logger.V(2).Info("Waiting for another Service's Translation to let a custom NEG name go",
					"translation", want.Name, "neg", reserving, "usedBy", holder)
				if holder != "" {
					blocked = append(blocked, warning{ReasonNameConflict, nameConflictMessage(reserving, portOf(want), holder)})
				}
			}
			return free
		}
		switch {
		case !ok:
			if blocker := blockedBy(want, leaving); blocker != nil {
				logger.V(4).Info("Waiting for a Translation to be deleted before creating its successor",
					"translation", want.Name, "deleting", blocker.Name)
				waiting = true
				continue
			}
			if !reserve() {
				continue
			}
			_, err := client.Create(ctx, want, metav1.CreateOptions{})
			if reserving != "" {
				t.nameCreated(reserving, object, err == nil)
			}
			switch {
			case apierrors.IsAlreadyExists(err):
				// Not made for this Service and not in the view: a former Service's, labeled for another tenant, or
				// one the view has not seen yet.
				if err := t.replaceForeign(ctx, svc, want.Name); err != nil {
					errs = append(errs, err)
				}
				waiting = true
			case err != nil:
				errs = append(errs, fmt.Errorf("creating Translation %s: %w", want.Name, err))
			default:
				t.recorder.Eventf(svc, corev1.EventTypeNormal, ReasonTranslationCreated,
					"Created Translation %s declaring NEG %s in %d zones", want.Name, negNameOf(want), len(want.Spec.Resources))
			}
		case have.DeletionTimestamp != nil || have.Labels[t.labelKey] != t.tenant:
			waiting = true
		case needsUpdate(have, want):
			if !reserve() {
				continue
			}
			updated := have.DeepCopy()
			updated.Spec = want.Spec
			if updated.Labels == nil {
				updated.Labels = map[string]string{}
			}
			for k, v := range want.Labels {
				updated.Labels[k] = v
			}
			updated.OwnerReferences = withController(updated.OwnerReferences, want.OwnerReferences[0])
			_, err := client.Update(ctx, updated, metav1.UpdateOptions{})
			if reserving != "" {
				t.nameCreated(reserving, object, err == nil)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("updating Translation %s: %w", want.Name, err))
			} else {
				logger.V(2).Info("Updated Translation", "translation", want.Name, "endpoints", endpointCount(want))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return blocked, err
	}
	if waiting {
		return blocked, errWaiting
	}
	return blocked, nil
}

// declares says whether a Translation lists a NEG of that name.
func declares(tr *mpv1alpha1.Translation, name string) bool {
	for _, r := range tr.Spec.Resources {
		if r.Name == name {
			return true
		}
	}
	return false
}

// portOf is the Service port a Translation of ours is for, from its name.
func portOf(tr *mpv1alpha1.Translation) int32 {
	_, _, port, _ := parseTranslationName(tr.Name)
	return port
}

// pendingSuccessor returns the name of the Translation of this version that replaces have, a Translation of the
// tenant of another version for a Service port still exposed, when have must stay until it is synced: the new
// NEGs are pushed before the old ones are deleted. It returns "" when have may go now: it has no successor, its
// successor is synced, or they share a NEG (a custom name), which must be deleted by the old one before the new one
// may declare it.
func (t *translator) pendingSuccessor(svc *corev1.Service, have *mpv1alpha1.Translation, wanted, existing map[string]*mpv1alpha1.Translation) string {
	version, _, port, ok := parseTranslationName(have.Name)
	if !ok || version == translationVersion || have.Labels[t.labelKey] != t.tenant {
		return ""
	}
	name := translationName(svc.Name, port)
	want := wanted[name]
	if want == nil || sharesNEGs(have, want) {
		return ""
	}
	if current := existing[name]; current != nil && current.DeletionTimestamp == nil &&
		current.Labels[t.labelKey] == t.tenant && isSynced(current) {
		return ""
	}
	return name
}

// blockedBy returns a leaving Translation that want must wait for: one of the same name, or one that lists one of
// want's NEGs.
func blockedBy(want *mpv1alpha1.Translation, leaving []*mpv1alpha1.Translation) *mpv1alpha1.Translation {
	for _, old := range leaving {
		if old.Name == want.Name || sharesNEGs(old, want) {
			return old
		}
	}
	return nil
}

// deletePredecessor deletes a Translation left by a former Service of svc's name and says so on svc.
func (t *translator) deletePredecessor(ctx context.Context, svc *corev1.Service, old *mpv1alpha1.Translation) (bool, error) {
	deleted, err := t.deleteTranslation(ctx, old)
	if deleted {
		klog.FromContext(ctx).Info("Deleted a Translation left by a former Service of the same name",
			"translation", old.Name, "formerUID", ownerUID(old), "uid", svc.UID)
		t.recorder.Eventf(svc, corev1.EventTypeNormal, ReasonStaleTranslationDeleted,
			"Deleted Translation %s left by a former Service of this name (UID %s); its NEGs are deleted before it "+
				"disappears, and this Service's own Translations are declared without it", old.Name, ownerUID(old))
	}
	return deleted, err
}

// replaceForeign handles a Translation that holds the name of one the Service needs and is not the Service's: if
// it was made for a former Service of this name, it is deleted. It is looked up with a list by name (the
// translator's role lists Translations; it has no get).
func (t *translator) replaceForeign(ctx context.Context, svc *corev1.Service, name string) error {
	list, err := t.mp.MultiprojectV1alpha1().Translations(svc.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		return fmt.Errorf("looking up Translation %s, which exists: %w", name, err)
	}
	for i := range list.Items {
		old := &list.Items[i]
		if old.Name != name || !isOurs(old) || ownerUID(old) == svc.UID || t.leaving(old) {
			// Gone meanwhile, made for this Service (the list by label lagged), or already going: retry later.
			continue
		}
		if _, err := t.deletePredecessor(ctx, svc, old); err != nil {
			return err
		}
	}
	return nil
}

// deleteTranslation deletes a Translation, with its UID as precondition so that a successor of the same name is
// never hit. It reports whether this call asked for the deletion: false if it was gone or already going.
func (t *translator) deleteTranslation(ctx context.Context, tr *mpv1alpha1.Translation) (bool, error) {
	if t.leaving(tr) {
		return false, nil
	}
	uid := tr.UID
	err := t.mp.MultiprojectV1alpha1().Translations(tr.Namespace).Delete(ctx, tr.Name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case apierrors.IsConflict(err):
		// The precondition failed: the name now belongs to another Translation, which is not this one's to delete.
		return false, nil
	case err != nil:
		return false, fmt.Errorf("deleting stale Translation %s: %w", tr.Name, err)
	}
	if uid != "" {
		t.deleting.Store(uid, struct{}{})
	}
	return true, nil
}

// needsUpdate compares what the translator owns: the spec, its labels and the controller reference. Status and
// finalizers belong to the pusher.
func needsUpdate(have, want *mpv1alpha1.Translation) bool {
	if !apiequality.Semantic.DeepEqual(have.Spec, want.Spec) {
		return true
	}
	for k, v := range want.Labels {
		if have.Labels[k] != v {
			return true
		}
	}
	ref := metav1.GetControllerOf(have)
	return ref == nil || !apiequality.Semantic.DeepEqual(*ref, want.OwnerReferences[0])
}

func withController(refs []metav1.OwnerReference, controller metav1.OwnerReference) []metav1.OwnerReference {
	out := []metav1.OwnerReference{controller}
	for _, r := range refs {
		if r.UID != controller.UID && (r.Controller == nil || !*r.Controller) {
			out = append(out, r)
		}
	}
	return out
}

func negNameOf(tr *mpv1alpha1.Translation) string {
	if len(tr.Spec.Resources) == 0 {
		return "(none: the tenant has no Nodes with a zone)"
	}
	return tr.Spec.Resources[0].Name
}

func endpointCount(tr *mpv1alpha1.Translation) int {
	n := 0
	for _, r := range tr.Spec.Resources {
		if r.NetworkEndpointGroup != nil {
			n += len(r.NetworkEndpointGroup.Endpoints)
		}
	}
	return n
}

// writeStatus patches the neg-status annotation when it differs from want (nil: absent).
func (t *translator) writeStatus(ctx context.Context, svc *corev1.Service, want *negStatus) error {
	current, present := svc.Annotations[NEGStatusAnnotationKey]
	if !statusNeedsWrite(current, present, want) {
		return nil
	}
	value := "null"
	if want != nil {
		value = fmt.Sprintf("%q", want.encode())
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, NEGStatusAnnotationKey, value)
	_, err := t.kube.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("writing annotation %s: %w", NEGStatusAnnotationKey, err)
	}
	return nil
}

// releaseDeparted handles a Service the tenant no longer sees. Still there (relabeled to another tenant, or to
// none): the Translations this tenant made for it are stale, and deleting them lets this tenant's pusher delete the
// NEGs in this tenant's project. Deleted: the garbage collector deletes its Translations, except after a delete with
// --cascade=orphan, which leaves them without owner; either way the Translations of the tenant that still name it
// (from the view) are deleted here, so that the pusher deletes their NEGs and removes their finalizer.
func (t *translator) releaseDeparted(ctx context.Context, namespace, name string) error {
	logger := klog.FromContext(ctx)
	var stale []*mpv1alpha1.Translation
	svc, err := t.kube.CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		svc = nil
	case err != nil:
		return fmt.Errorf("looking up a Service that left the tenant: %w", err)
	default:
		selector := labels.Set{mpv1alpha1.TranslationOwnerUIDLabelKey: string(svc.UID), t.labelKey: t.tenant}.AsSelector().String()
		list, err := t.mp.MultiprojectV1alpha1().Translations(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return fmt.Errorf("listing the Translations of a Service that left the tenant: %w", err)
		}
		for i := range list.Items {
			if isOurs(&list.Items[i]) {
				stale = append(stale, &list.Items[i])
			}
		}
	}
	listed := map[types.UID]bool{}
	for _, tr := range stale {
		listed[tr.UID] = true
	}
	for _, tr := range t.translationsNaming(namespace, name) {
		if !listed[tr.UID] {
			stale = append(stale, tr)
		}
	}
	var errs []error
	for _, tr := range stale {
		deleted, err := t.deleteTranslation(ctx, tr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		switch {
		case !deleted:
		case svc != nil:
			logger.V(2).Info("Deleted the Translation of a Service that left the tenant", "translation", tr.Name)
		case metav1.GetControllerOf(tr) == nil:
			logger.Info("Deleted a Translation whose Service no longer exists and that has no owner (the Service was deleted with --cascade=orphan)",
				"translation", tr.Name, "formerUID", ownerUID(tr))
		default:
			logger.V(2).Info("Deleted the Translation of a deleted Service", "translation", tr.Name)
		}
	}
	return errors.Join(errs...)
}
