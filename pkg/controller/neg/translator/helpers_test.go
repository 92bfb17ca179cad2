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
	"errors"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpfake "github.com/multiproject/client-go/clientset/versioned/fake"
	mpinformers "github.com/multiproject/client-go/informers/externalversions"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant/tenanttest"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

// testIdentity is the cluster the tests' translators run in.
var testIdentity = clusterIdentity{name: testCluster, uid: testClusterUID}

const (
	testTenant  = "tenant-a"
	testProject = "tenant-a-project"
	testCluster = "prod-eu"
	// testClusterUID stands for the kube-system Namespace's UID that pkg/clusterid records.
	testClusterUID = "6a1f4c1e-2d3b-4c5d-8e9f-0a1b2c3d4e5f"
	testNamespace  = "shop"
	testLabelKey   = mpv1alpha1.DefaultProviderConfigLabelKey
	zoneB          = "europe-west1-b"
	zoneC          = "europe-west1-c"
)

// recorder remembers events without ever blocking.
type recorder = tenanttest.Events

// countingInformer counts the handlers added and removed, to show Run leaves none behind.
type countingInformer struct {
	cache.SharedIndexInformer
	mu             sync.Mutex
	added, removed int
}

func (c *countingInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	c.mu.Lock()
	c.added++
	c.mu.Unlock()
	return c.SharedIndexInformer.AddEventHandler(h)
}

func (c *countingInformer) RemoveEventHandler(r cache.ResourceEventHandlerRegistration) error {
	c.mu.Lock()
	c.removed++
	c.mu.Unlock()
	return c.SharedIndexInformer.RemoveEventHandler(r)
}

func (c *countingInformer) counts() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.added, c.removed
}

// harness is one tenant's translator on fake clientsets, with informers that see everything (the tenancy filter is
// tested in pkg/tenancy and in the integration tests).
type harness struct {
	t          testing.TB
	ctx        context.Context
	kube       *kubefake.Clientset
	mp         *mpfake.Clientset
	events     *recorder
	conditions *tenanttest.Conditions
	informers  map[string]*countingInformer
	tctx       *tenant.Context
	translator *Translator

	mu sync.Mutex
	// enqueued are the keys the translator enqueued since the last queued().
	enqueued map[string]bool
}

func newHarness(t testing.TB, objects ...runtime.Object) *harness {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	var kubeObjects, mpObjects []runtime.Object
	versions := &apiVersions{}
	for _, o := range objects {
		versions.stamp(o)
		if _, ok := o.(*mpv1alpha1.Translation); ok {
			mpObjects = append(mpObjects, o)
		} else {
			kubeObjects = append(kubeObjects, o)
		}
	}
	h := &harness{t: t, ctx: ctx, kube: kubefake.NewClientset(kubeObjects...), mp: mpfake.NewClientset(mpObjects...),
		events: &recorder{}, conditions: &tenanttest.Conditions{}, informers: map[string]*countingInformer{}, enqueued: map[string]bool{}}
	versions.serve(&h.kube.Fake, h.kube.Tracker())
	versions.serve(&h.mp.Fake, h.mp.Tracker())
	watching := &watchStarts{started: sets.New[string]()}
	watching.serve(&h.kube.Fake, h.kube.Tracker())
	watching.serve(&h.mp.Fake, h.mp.Tracker())
	kubeFactory := kubeinformers.NewSharedInformerFactory(h.kube, 0)
	mpFactory := mpinformers.NewSharedInformerFactory(h.mp, 0)
	h.informers["services"] = &countingInformer{SharedIndexInformer: kubeFactory.Core().V1().Services().Informer()}
	h.informers["slices"] = &countingInformer{SharedIndexInformer: kubeFactory.Discovery().V1().EndpointSlices().Informer()}
	h.informers["nodes"] = &countingInformer{SharedIndexInformer: kubeFactory.Core().V1().Nodes().Informer()}
	h.informers["translations"] = &countingInformer{SharedIndexInformer: mpFactory.Multiproject().V1alpha1().Translations().Informer()}
	h.informers["pods"] = &countingInformer{SharedIndexInformer: kubeFactory.Core().V1().Pods().Informer()}
	indexed(t, h.informers["slices"], informerset.EndpointSliceIndexers())
	indexed(t, h.informers["translations"], informerset.TranslationIndexers())
	kubeFactory.Start(ctx.Done())
	mpFactory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		kubeFactory.Shutdown()
		mpFactory.Shutdown()
	})
	kubeFactory.WaitForCacheSync(ctx.Done())
	mpFactory.WaitForCacheSync(ctx.Done())
	watching.wait(t, "services", "endpointslices", "nodes", "translations", "pods")

	informers := tenanttest.Informers{
		informerset.Services:       h.informers["services"],
		informerset.EndpointSlices: h.informers["slices"],
		informerset.Nodes:          h.informers["nodes"],
		informerset.Translations:   h.informers["translations"],
		informerset.Pods:           h.informers["pods"],
	}
	h.tctx = &tenant.Context{
		Controller: "neg",
		ProviderConfig: &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: testTenant},
			Spec: mpv1alpha1.ProviderConfigSpec{GCP: &mpv1alpha1.GCPConfig{ProjectID: testProject, Network: "vpc-a", Subnetwork: "sub-a"}}},
		ProviderConfigLabelKey: testLabelKey,
		KubeClient:             h.kube,
		MultiprojectClient:     h.mp,
		Informers:              informers,
		Claims:                 tenanttest.Claims(t, informers),
		EventRecorder:          h.events,
		Condition:              h.conditions,
		Options:                tenant.Options{ClusterName: testCluster, ClusterUID: testClusterUID},
		Workers:                2,
	}
	tr, err := New(h.tctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.translator = tr
	add := tr.add
	tr.add = func(key string) {
		h.mu.Lock()
		h.enqueued[key] = true
		h.mu.Unlock()
		add(key)
	}
	return h
}

// sync runs one sync of the Service, once the caches hold what the API holds, and fails the test on an error.
func (h *harness) sync(name string) {
	h.t.Helper()
	h.settle()
	if err := h.translator.sync(h.ctx, testNamespace+"/"+name); err != nil {
		h.t.Fatalf("sync %s: %v", name, err)
	}
}

// writes returns the mutating actions both clientsets saw since the last call.
func (h *harness) writes() []string {
	var out []string
	for _, actions := range [][]clienttesting.Action{h.kube.Actions(), h.mp.Actions()} {
		for _, a := range actions {
			switch a.GetVerb() {
			case "get", "list", "watch":
				continue
			}
			out = append(out, a.GetVerb()+" "+a.GetResource().Resource+a.GetSubresource())
		}
	}
	h.kube.ClearActions()
	h.mp.ClearActions()
	return out
}

func (h *harness) translations() map[string]*mpv1alpha1.Translation {
	h.t.Helper()
	list, err := h.mp.MultiprojectV1alpha1().Translations(testNamespace).List(h.ctx, metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string]*mpv1alpha1.Translation{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	h.mp.ClearActions()
	return out
}

func (h *harness) service(name string) *corev1.Service {
	h.t.Helper()
	svc, err := h.kube.CoreV1().Services(testNamespace).Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	h.kube.ClearActions()
	return svc
}

// settle waits until every informer's cache holds exactly the objects of the fake API, at their resourceVersions.
func (h *harness) settle() {
	h.t.Helper()
	for name, res := range map[string]struct {
		tracker clienttesting.ObjectTracker
		gvr     schema.GroupVersionResource
		gvk     schema.GroupVersionKind
	}{
		"services":     {h.kube.Tracker(), corev1.SchemeGroupVersion.WithResource("services"), corev1.SchemeGroupVersion.WithKind("Service")},
		"slices":       {h.kube.Tracker(), discoveryv1.SchemeGroupVersion.WithResource("endpointslices"), discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice")},
		"nodes":        {h.kube.Tracker(), corev1.SchemeGroupVersion.WithResource("nodes"), corev1.SchemeGroupVersion.WithKind("Node")},
		"translations": {h.mp.Tracker(), mpv1alpha1.SchemeGroupVersion.WithResource("translations"), mpv1alpha1.SchemeGroupVersion.WithKind("Translation")},
		"pods":         {h.kube.Tracker(), corev1.SchemeGroupVersion.WithResource("pods"), corev1.SchemeGroupVersion.WithKind("Pod")},
	} {
		err := wait.PollUntilContextTimeout(h.ctx, time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			list, err := res.tracker.List(res.gvr, res.gvk, "")
			if err != nil {
				return false, err
			}
			items, err := meta.ExtractList(list)
			if err != nil {
				return false, err
			}
			want := map[string]string{}
			for _, item := range items {
				m, _ := meta.Accessor(item)
				want[m.GetNamespace()+"/"+m.GetName()] = m.GetResourceVersion()
			}
			got := map[string]string{}
			for _, item := range h.informers[name].GetStore().List() {
				m, _ := meta.Accessor(item)
				got[m.GetNamespace()+"/"+m.GetName()] = m.GetResourceVersion()
			}
			return maps.Equal(got, want), nil
		})
		if err != nil {
			h.t.Fatalf("the %s informer never caught up with the fake API: %v", name, err)
		}
	}
}

// waitCached waits until the informer's cache holds an object at key that satisfies ok (nil: the key is absent).
// The fake clientsets set no resourceVersions, so the content decides.
func (h *harness) waitCached(informer, key string, ok func(obj any) bool) {
	h.t.Helper()
	inf := h.informers[informer]
	err := wait.PollUntilContextTimeout(h.ctx, 2*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		obj, exists, err := inf.GetIndexer().GetByKey(key)
		if err != nil || !exists {
			return ok == nil, err
		}
		return ok != nil && ok(obj), nil
	})
	if err != nil {
		h.t.Fatalf("informer %s never saw the expected %s: %v", informer, key, err)
	}
}

func node(name, zone string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if zone != "" {
		n.Labels = map[string]string{corev1.LabelTopologyZone: zone}
	}
	return n
}

func service(name, annotation string, ports ...corev1.ServicePort) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: name, UID: types.UID("uid-" + name)},
		Spec: corev1.ServiceSpec{Ports: ports}}
	if annotation != "" {
		svc.Annotations = map[string]string{negapi.AnnotationKey: annotation}
	}
	return svc
}

func servicePort(name string, port int32, target string) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: port, Protocol: corev1.ProtocolTCP, TargetPort: intstr.Parse(target)}
}

// ep is a ready endpoint on a node; zone "" leaves the endpoint's zone field unset; pod names the Pod of the
// namespace it is for (targetRef).
type ep struct {
	ip, node, zone, pod   string
	notReady, terminating bool
}

func slice(service, name string, portName string, port int32, endpoints ...ep) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(portName), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for _, e := range endpoints {
		de := discoveryv1.Endpoint{Addresses: []string{e.ip}, NodeName: ptr.To(e.node),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(!e.notReady)}}
		if e.zone != "" {
			de.Zone = ptr.To(e.zone)
		}
		if e.pod != "" {
			de.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: testNamespace, Name: e.pod, UID: types.UID("uid-" + e.pod)}
		}
		if e.terminating {
			de.Conditions.Terminating = ptr.To(true)
		}
		s.Endpoints = append(s.Endpoints, de)
	}
	return s
}

type runtimeObject = runtime.Object

// emptyServiceLister stands for a tenant view that no longer has a Service.
type emptyServiceLister struct{ corelisters.ServiceLister }

func (emptyServiceLister) Services(string) corelisters.ServiceNamespaceLister { return emptyServices{} }

type emptyServices struct{}

func (emptyServices) List(labels.Selector) ([]*corev1.Service, error) { return nil, nil }
func (emptyServices) Get(name string) (*corev1.Service, error) {
	return nil, apierrors.NewNotFound(corev1.Resource("services"), name)
}

func itoa(i int32) string { return strconv.Itoa(int(i)) }

// translationOf is a Translation as the translator makes it for port 80 of a Service of the test namespace: named
// name, made for the Service UID uid, labeled for tenantName, with the deleter finalizer and a NEG named negName in
// zones b and c carrying uid's marker. withOwner adds the controller reference, which the garbage collector removes
// when the Service is deleted with --cascade=orphan.
func translationOf(name, service, uid, tenantName string, withOwner bool, negName string) *mpv1alpha1.Translation {
	tr := &mpv1alpha1.Translation{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: name, UID: types.UID("tr-" + name + "-" + uid),
		Labels:     map[string]string{testLabelKey: tenantName, mpv1alpha1.TranslationOwnerUIDLabelKey: uid},
		Finalizers: []string{mpv1alpha1.TranslationDeleterFinalizer}}}
	if withOwner {
		tr.OwnerReferences = []metav1.OwnerReference{ownerReference(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: service, UID: types.UID(uid)}})}
	}
	marker := negDescription(testIdentity, tenantName, testNamespace, service, uid, 80)
	for _, zone := range []string{zoneB, zoneC} {
		tr.Spec.Resources = append(tr.Spec.Resources, mpv1alpha1.BackendResource{Kind: mpv1alpha1.BackendResourceKindNetworkEndpointGroup,
			Name: negName, Zone: zone, Description: marker,
			NetworkEndpointGroup: &mpv1alpha1.NetworkEndpointGroupParameters{Network: "vpc-a", Subnetwork: "sub-a"}})
	}
	return tr
}

// markSynced writes the status the pusher writes once every NEG of the Translation exists as declared.
func (h *harness) markSynced(name string) {
	h.t.Helper()
	tr := h.translations()[name]
	if tr == nil {
		h.t.Fatalf("no Translation %s to mark synced", name)
	}
	tr.Status.ObservedGeneration = tr.Generation
	tr.Status.Conditions = []metav1.Condition{{Type: mpv1alpha1.TranslationConditionSynced, Status: metav1.ConditionTrue,
		Reason: "Synced", ObservedGeneration: tr.Generation, LastTransitionTime: metav1.Now()}}
	if _, err := h.mp.MultiprojectV1alpha1().Translations(testNamespace).UpdateStatus(h.ctx, tr, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	h.writes()
}

// syncWaiting runs one sync of the Service, once the caches hold what the API holds, that must end in errWaiting.
func (h *harness) syncWaiting(name string) {
	h.t.Helper()
	h.settle()
	if err := h.translator.sync(h.ctx, testNamespace+"/"+name); !errors.Is(err, errWaiting) {
		h.t.Fatalf("sync %s = %v, want errWaiting", name, err)
	}
}

// queued returns the keys the translator enqueued since the last call, sorted.
func (h *harness) queued() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := slices.Sorted(maps.Keys(h.enqueued))
	clear(h.enqueued)
	return out
}

// requests returns every request both clientsets saw since the last call, reads included, as "<verb> <resource>".
func (h *harness) requests() []string {
	var out []string
	for _, actions := range [][]clienttesting.Action{h.kube.Actions(), h.mp.Actions()} {
		for _, a := range actions {
			if a.GetVerb() == "watch" {
				continue
			}
			out = append(out, a.GetVerb()+" "+a.GetResource().Resource+a.GetSubresource())
		}
	}
	h.kube.ClearActions()
	h.mp.ClearActions()
	return out
}

// freezeTranslations makes the translator read Translations from a copy of the Translation cache as it is now,
// which stays so until thawTranslations: a cache that lags behind every write.
func (h *harness) freezeTranslations() {
	h.t.Helper()
	h.settle()
	frozen := cache.NewIndexer(cache.MetaNamespaceKeyFunc, informerset.TranslationIndexers())
	for _, obj := range h.informers["translations"].GetStore().List() {
		if err := frozen.Add(obj); err != nil {
			h.t.Fatal(err)
		}
	}
	h.useTranslationStore(frozen)
}

// thawTranslations makes the translator read the live Translation cache again, once it holds what the API holds.
func (h *harness) thawTranslations() {
	h.t.Helper()
	h.settle()
	h.useTranslationStore(h.informers["translations"].GetIndexer())
}

func (h *harness) useTranslationStore(indexer cache.Indexer) {
	h.translator.translationIndex, h.translator.allTranslationIndex = indexer, indexer
}

// freezeServices makes the translator read Services from a copy of the Service cache as it is now.
func (h *harness) freezeServices() {
	h.t.Helper()
	h.settle()
	frozen := cache.NewIndexer(cache.MetaNamespaceKeyFunc, informerset.TranslationIndexers())
	for _, obj := range h.informers["services"].GetStore().List() {
		if err := frozen.Add(obj); err != nil {
			h.t.Fatal(err)
		}
	}
	h.translator.serviceLister = corelisters.NewServiceLister(frozen)
}

// updateSlice writes the EndpointSlice and waits until the informer has it.
func (h *harness) updateSlice(s *discoveryv1.EndpointSlice) {
	h.t.Helper()
	stored, err := h.kube.DiscoveryV1().EndpointSlices(s.Namespace).Get(h.ctx, s.Name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	s.ResourceVersion = stored.ResourceVersion
	if _, err := h.kube.DiscoveryV1().EndpointSlices(s.Namespace).Update(h.ctx, s, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	h.settle()
	h.requests()
}
