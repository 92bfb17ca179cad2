//go:build integration

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

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	tunnelv1alpha1 "github.com/multiproject/api/pangolin/tunnel/v1alpha1"
	rancherv3 "github.com/multiproject/api/rancher/management/v3"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/ingresstunnel"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/namespaceproject"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/neg/pusher"
	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

const (
	labelKey    = mpv1alpha1.DefaultProviderConfigLabelKey
	appOwnerKey = "appOwner" // the manager's default --app-owner-label-key
	tunnelName  = "main"
	// convergeTimeout is generous: two shared cores, with other engineers' builds running.
	convergeTimeout = 4 * time.Minute
)

var zones = []string{"europe-west1-b", "europe-west1-c", "europe-west1-d"}

// owners are the Rancher Projects of the tenant's cluster, by display name (the app owner) to Project name.
var owners = map[string]string{"alpha": "p-alpha", "beta": "p-beta", "gamma": "p-gamma"}

// workload is one tenant with all three controllers configured, and what the test wants of it: the tenant's
// Services with the neg annotation (their endpoints), its app namespaces (their app owner) and its Pangolin-class
// Ingresses (their hosts). Every change goes through its methods, which keep the wanted state, so convergence and
// "nothing duplicated, lost or left behind" are exact comparisons of the API and the fake GCE against it.
type workload struct {
	t         testing.TB
	ctx       context.Context
	kube      kubernetes.Interface
	mp        mpclientset.Interface
	gce       *fakegce.Server
	tenant    string
	project   string // GCP project
	clusterID string // the Rancher cluster: the namespace holding its Projects
	tunnelNS  string
	appNS     string // Services and Ingresses
	// negAnnotation and negStatus are the keys the manager runs on (--neg-annotation-key,
	// --neg-status-annotation-key): ingress-gce's unless a test sets its own.
	negAnnotation, negStatus string
	// awaiting are NEGs ("zone/name") of deleted Services that a backend service still uses: emptied and left to
	// the garbage sweep, they are in GCE without being wanted until it deletes them.
	awaiting sets.Set[string]
	// fixed are the zones without Nodes whose NEGs a Service has ahead (its annotation's or the tenant's "zones"),
	// each empty, beside those of zones; deleteRefused says that a build is expected to fail deleting such a NEG a
	// backend service uses (a previous release that drops the zone: NEGInUse on the Translation and the tenant).
	fixed         map[string][]string
	deleteRefused bool

	mu         sync.Mutex
	services   map[string][]endpoint       // Service name → ready endpoints of port http
	namespaces map[string]string           // app namespace → app owner
	ingresses  map[string]sets.Set[string] // Ingress name → hosts
}

// endpoint is one ready Pod of a Service: its IP on a Node of the tenant in zones[zone].
type endpoint struct {
	ip   string
	node string
	zone int
}

// newWorkload creates the tenant: zone-labeled Nodes, the Rancher cluster namespace with three Projects, the tunnel
// namespace with its PangolinTunnel, the tenant's app namespace, and the ProviderConfig with gcp, rancher and
// pangolin sections. gce is the fake the managers talk to.
func newWorkload(t testing.TB, gce *fakegce.Server) *workload {
	t.Helper()
	w := newWorkloadWithoutProviderConfig(t, gce)
	w.createProviderConfig()
	return w
}

// newWorkloadWithoutProviderConfig is newWorkload up to the ProviderConfig, for tests that create the tenant's
// objects before the tenant itself (createProviderConfig).
func newWorkloadWithoutProviderConfig(t testing.TB, gce *fakegce.Server) *workload {
	t.Helper()
	adminConfig := controlPlane.AdminConfig()
	w := &workload{
		t:             t,
		ctx:           t.Context(),
		kube:          controlPlane.AdminClient(),
		gce:           gce,
		tenant:        "e2e-" + utilrand.String(6),
		namespaces:    map[string]string{},
		services:      map[string][]endpoint{},
		ingresses:     map[string]sets.Set[string]{},
		negAnnotation: negapi.AnnotationKey,
		negStatus:     negapi.StatusAnnotationKey,
	}
	var err error
	if w.mp, err = mpclientset.NewForConfig(adminConfig); err != nil {
		t.Fatal(err)
	}
	w.project = w.tenant + "-project"

	for zi, zone := range zones {
		for i := range 2 {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: w.nodeName(zi, i),
				Labels: map[string]string{corev1.LabelTopologyZone: zone, labelKey: w.tenant}}}
			if _, err := w.kube.CoreV1().Nodes().Create(w.ctx, node, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = w.kube.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{}) })
		}
	}

	w.clusterID = controlPlane.CreateNamespace(t)
	for displayName, name := range owners {
		p := &rancherv3.Project{ObjectMeta: metav1.ObjectMeta{Namespace: w.clusterID, Name: name},
			Spec: rancherv3.ProjectSpec{DisplayName: displayName, ClusterName: w.clusterID}}
		if _, err := w.mp.ManagementV3().Projects(w.clusterID).Create(w.ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	w.tunnelNS = controlPlane.CreateNamespace(t)
	_, err = w.mp.TunnelV1alpha1().PangolinTunnels(w.tunnelNS).Create(w.ctx, &tunnelv1alpha1.PangolinTunnel{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.tunnelNS, Name: tunnelName},
		Spec:       tunnelv1alpha1.PangolinTunnelSpec{OrganizationRef: tunnelv1alpha1.OrganizationReference{Name: "org"}, SiteName: tunnelName},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	w.appNS = controlPlane.CreateNamespace(t)
	w.patchNamespaceLabels(w.appNS, map[string]*string{labelKey: &w.tenant})
	waitGCKnowsTranslations(t, w.appNS)
	// The Ingresses' backend.
	_, err = w.kube.CoreV1().Services(w.appNS).Create(w.ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.appNS, Name: "backend"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	return w
}

// createProviderConfig creates the workload's ProviderConfig.
func (w *workload) createProviderConfig() {
	t := w.t
	t.Helper()
	pc := &mpv1alpha1.ProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Name: w.tenant},
		Spec: mpv1alpha1.ProviderConfigSpec{
			GCP:      &mpv1alpha1.GCPConfig{ProjectID: w.project, Network: "default"},
			Rancher:  &mpv1alpha1.RancherConfig{ClusterID: w.clusterID},
			Pangolin: &mpv1alpha1.PangolinConfig{TunnelNamespace: w.tunnelNS, DefaultTunnel: tunnelName},
		},
	}
	if _, err := w.mp.MultiprojectV1alpha1().ProviderConfigs().Create(w.ctx, pc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A test that fails before its teardown still must not leave a tenant that the next test's managers would
	// run: delete it, and strip the finalizer that no manager will remove once this test's processes are killed.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		pcs := w.mp.MultiprojectV1alpha1().ProviderConfigs()
		if err := pcs.Delete(ctx, w.tenant, metav1.DeleteOptions{}); apierrors.IsNotFound(err) {
			return
		}
		_, _ = pcs.Patch(ctx, w.tenant, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		// Nor Translations that keep their deleter finalizer for a tenant no manager runs any more.
		trs, err := w.mp.MultiprojectV1alpha1().Translations(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: labelKey + "=" + w.tenant})
		if err != nil {
			return
		}
		for _, tr := range trs.Items {
			_, _ = w.mp.MultiprojectV1alpha1().Translations(tr.Namespace).Patch(ctx, tr.Name, types.MergePatchType,
				[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		}
	})
}

func (w *workload) nodeName(zone, i int) string {
	return fmt.Sprintf("%s-%c-%d", w.tenant, 'b'+zone, i)
}

func (w *workload) patchNamespaceLabels(name string, labels map[string]*string) {
	w.t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		w.t.Fatal(err)
	}
	if _, err := w.kube.CoreV1().Namespaces().Patch(w.ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		w.t.Fatalf("labeling namespace %s: %v", name, err)
	}
}

// --- changes -----------------------------------------------------------------------------------------------------

// endpoints makes n ready endpoints per zone for Service number serial at generation gen (so a change gives other IPs).
func (w *workload) endpoints(serial, gen, n int) []endpoint {
	var out []endpoint
	for zi := range zones {
		for i := range n {
			// The third octet wraps after 25 generations (a benchmark's rounds go on): an address comes back only
			// 25 generations after it was last asked for.
			out = append(out, endpoint{ip: fmt.Sprintf("10.%d.%d.%d", serial, (gen*10+zi)%256, i+1), node: w.nodeName(zi, i%2), zone: zi})
		}
	}
	return out
}

// setService creates or updates the Service's EndpointSlice with eps and, the first time, the Service itself with
// the neg annotation exposing port 80 (target port 8080).
func (w *workload) setService(name string, eps []endpoint) {
	w.t.Helper()
	slice := endpointSlice(w.appNS, name, eps)
	slices := w.kube.DiscoveryV1().EndpointSlices(w.appNS)
	existing, err := slices.Get(w.ctx, slice.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = slices.Create(w.ctx, slice, metav1.CreateOptions{})
	case err == nil:
		slice.ResourceVersion = existing.ResourceVersion
		_, err = slices.Update(w.ctx, slice, metav1.UpdateOptions{})
	}
	if err != nil {
		w.t.Fatalf("EndpointSlice of %s: %v", name, err)
	}
	w.mu.Lock()
	_, exists := w.services[name]
	w.services[name] = eps
	w.mu.Unlock()
	if exists {
		return
	}
	// A selector-less Service, so no EndpointSlice controller competes with the test's slices.
	_, err = w.kube.CoreV1().Services(w.appNS).Create(w.ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.appNS, Name: name,
			Annotations: map[string]string{w.negAnnotation: `{"exposed_ports":{"80":{}}}`}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatalf("creating Service %s: %v", name, err)
	}
}

// endpointSlice is the Service's EndpointSlice in ns holding eps, port http → 8080.
func endpointSlice(ns, service string, eps []endpoint) *discoveryv1.EndpointSlice {
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: service + "-http",
			Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for _, ep := range eps {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{ep.ip}, NodeName: ptr.To(ep.node),
			Zone: ptr.To(zones[ep.zone]), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return slice
}

func (w *workload) deleteService(name string) {
	w.t.Helper()
	if err := w.kube.CoreV1().Services(w.appNS).Delete(w.ctx, name, metav1.DeleteOptions{}); err != nil {
		w.t.Fatalf("deleting Service %s: %v", name, err)
	}
	w.mu.Lock()
	delete(w.services, name)
	w.mu.Unlock()
}

// addNamespace creates an app namespace of the tenant with the app owner label.
func (w *workload) addNamespace(owner string) string {
	w.t.Helper()
	name := controlPlane.CreateNamespace(w.t)
	w.patchNamespaceLabels(name, map[string]*string{labelKey: &w.tenant, appOwnerKey: &owner})
	w.mu.Lock()
	w.namespaces[name] = owner
	w.mu.Unlock()
	return name
}

// setOwner relabels an app namespace: the controller moves it, since it made the assignment.
func (w *workload) setOwner(name, owner string) {
	w.t.Helper()
	w.patchNamespaceLabels(name, map[string]*string{appOwnerKey: &owner})
	w.mu.Lock()
	w.namespaces[name] = owner
	w.mu.Unlock()
}

// setIngress creates or updates a Pangolin-class Ingress with one rule per host, all to the backend Service.
func (w *workload) setIngress(name string, hosts ...string) {
	w.t.Helper()
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.appNS, Name: name},
		Spec:       networkingv1.IngressSpec{IngressClassName: ptr.To("pangolin")},
	}
	for _, h := range hosts {
		ing.Spec.Rules = append(ing.Spec.Rules, networkingv1.IngressRule{Host: h, IngressRuleValue: networkingv1.IngressRuleValue{
			HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix),
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
					Name: "backend", Port: networkingv1.ServiceBackendPort{Name: "http"}}},
			}}},
		}})
	}
	w.writeIngress(ing)
	w.mu.Lock()
	w.ingresses[name] = sets.New(hosts...)
	w.mu.Unlock()
}

// unmanageIngress moves the Ingress to another class: the controller must delete its PangolinResources itself.
func (w *workload) unmanageIngress(name string) {
	w.t.Helper()
	ing, err := w.kube.NetworkingV1().Ingresses(w.appNS).Get(w.ctx, name, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	ing.Spec.IngressClassName = ptr.To("nginx")
	w.writeIngress(ing)
	w.mu.Lock()
	delete(w.ingresses, name)
	w.mu.Unlock()
}

func (w *workload) writeIngress(ing *networkingv1.Ingress) {
	w.t.Helper()
	client := w.kube.NetworkingV1().Ingresses(w.appNS)
	existing, err := client.Get(w.ctx, ing.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = client.Create(w.ctx, ing, metav1.CreateOptions{})
	case err == nil:
		ing.ResourceVersion = existing.ResourceVersion
		_, err = client.Update(w.ctx, ing, metav1.UpdateOptions{})
	}
	if err != nil {
		w.t.Fatalf("writing Ingress %s: %v", ing.Name, err)
	}
}

// --- observing ---------------------------------------------------------------------------------------------------

// observed is the tenant's state as the API server and the fake GCE hold it.
type observed struct {
	translations map[string]*mpv1alpha1.Translation          // by name
	negs         map[string]string                           // "zone/name" → NEG id
	negEndpoints map[string]sets.Set[string]                 // "zone/name" → "node/ip:port"
	resources    map[string]*tunnelv1alpha1.PangolinResource // by name
	assigned     map[string]string                           // app namespace → Rancher's projectId annotation
	services     map[string]*corev1.Service                  // by name (neg-annotated ones only)
	pc           *mpv1alpha1.ProviderConfig                  // nil when gone
}

func (w *workload) observe() (*observed, error) {
	o := &observed{translations: map[string]*mpv1alpha1.Translation{}, negs: map[string]string{},
		negEndpoints: map[string]sets.Set[string]{}, resources: map[string]*tunnelv1alpha1.PangolinResource{},
		assigned: map[string]string{}, services: map[string]*corev1.Service{}}
	trs, err := w.mp.MultiprojectV1alpha1().Translations(w.appNS).List(w.ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range trs.Items {
		o.translations[trs.Items[i].Name] = &trs.Items[i]
	}
	for _, n := range w.gce.NEGs(w.project) {
		key := path.Base(n.Zone) + "/" + n.Name
		o.negs[key] = fmt.Sprint(n.Id)
		eps, _ := w.gce.Endpoints(w.project, path.Base(n.Zone), n.Name)
		got := sets.New[string]()
		for _, ep := range eps {
			got.Insert(fmt.Sprintf("%s/%s:%d", ep.Instance, ep.IpAddress, ep.Port))
		}
		o.negEndpoints[key] = got
	}
	res, err := w.mp.TunnelV1alpha1().PangolinResources(w.appNS).List(w.ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range res.Items {
		o.resources[res.Items[i].Name] = &res.Items[i]
	}
	nss, err := w.kube.CoreV1().Namespaces().List(w.ctx, metav1.ListOptions{LabelSelector: labelKey + "=" + w.tenant})
	if err != nil {
		return nil, err
	}
	for _, ns := range nss.Items {
		if v, ok := ns.Annotations[rancherv3.ProjectIDAnnotationKey]; ok {
			o.assigned[ns.Name] = v
		}
	}
	svcs, err := w.kube.CoreV1().Services(w.appNS).List(w.ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range svcs.Items {
		if _, ok := svcs.Items[i].Annotations[w.negAnnotation]; ok {
			o.services[svcs.Items[i].Name] = &svcs.Items[i]
		}
	}
	pc, err := w.mp.MultiprojectV1alpha1().ProviderConfigs().Get(w.ctx, w.tenant, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, err
	default:
		o.pc = pc
	}
	return o, nil
}

func translationName(service string) string { return "neg-v1-" + service + "-80" }

// diff compares the observed state with the wanted one exactly and says what differs, "" when nothing does. Every
// set is compared both ways: a missing item is lost work, an extra one is a duplicate or something left behind.
func (w *workload) diff(o *observed) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	// neg: one synced Translation per Service port; in GCE exactly its NEGs (one per zone) with exactly the
	// Service's endpoints; the neg-status annotation names them.
	wantTranslations := sets.New[string]()
	wantNEGs := map[string]sets.Set[string]{}
	for svc, eps := range w.services {
		name := translationName(svc)
		wantTranslations.Insert(name)
		tr := o.translations[name]
		if tr == nil {
			add("no Translation %s", name)
			continue
		}
		if !synced(tr) && !w.refusedInUse(tr) {
			add("Translation %s (generation %d) not Synced", name, tr.Generation)
		}
		svcZones := append(slices.Clone(zones), w.fixed[svc]...)
		if len(tr.Spec.Resources) != len(svcZones) {
			add("Translation %s declares %d NEGs, want %d", name, len(tr.Spec.Resources), len(svcZones))
			continue
		}
		negName := tr.Spec.Resources[0].Name
		for zi, z := range svcZones {
			want := sets.New[string]()
			for _, ep := range eps {
				if ep.zone == zi {
					want.Insert(fmt.Sprintf("%s/%s:8080", ep.node, ep.ip))
				}
			}
			wantNEGs[z+"/"+negName] = want
		}
		if s := o.services[svc]; s == nil || !strings.Contains(s.Annotations[w.negStatus], negName) {
			add("Service %s: neg-status does not name %s", svc, negName)
		}
	}
	if got := sets.KeySet(o.translations); !got.Equal(wantTranslations) {
		add("Translations %v, want %v", sorted(got), sorted(wantTranslations))
	}
	if got, want := sets.KeySet(o.negs).Difference(w.awaiting), sets.KeySet(wantNEGs); !got.Equal(want) {
		add("GCE NEGs %v, want %v", sorted(got), sorted(want))
	}
	for key, want := range wantNEGs {
		if got, ok := o.negEndpoints[key]; ok && !got.Equal(want) {
			add("NEG %s: %d endpoints (missing %v, extra %v)", key, got.Len(), sorted(want.Difference(got)), sorted(got.Difference(want)))
		}
	}

	// ingress-tunnel: exactly one PangolinResource per host of each managed Ingress, owned by it.
	wantResources := map[string]string{} // name → "ingress host"
	for ing, hosts := range w.ingresses {
		for h := range hosts {
			wantResources[ingresstunnel.ResourceName(w.appNS, ing, h)] = ing + " " + h
		}
	}
	if got, want := sets.KeySet(o.resources), sets.KeySet(wantResources); !got.Equal(want) {
		add("PangolinResources %v, want %v", sorted(got), sorted(want))
	}
	for name, r := range o.resources {
		if want, ok := wantResources[name]; ok {
			ing := strings.Fields(want)[0]
			if ref := metav1.GetControllerOf(r); ref == nil || ref.Kind != "Ingress" || ref.Name != ing {
				add("PangolinResource %s: controller %v, want Ingress %s", name, ref, ing)
			}
		}
	}

	// namespace-project: each app namespace in the Project of its app owner, and only those namespaces assigned.
	wantAssigned := map[string]string{}
	for ns, owner := range w.namespaces {
		wantAssigned[ns] = w.clusterID + ":" + owners[owner]
	}
	if !maps.Equal(o.assigned, wantAssigned) {
		add("namespace assignments %v, want %v", o.assigned, wantAssigned)
	}

	// The tenant: Ready, for its current generation.
	if o.pc == nil {
		add("ProviderConfig %s is gone", w.tenant)
	} else if c := meta.FindStatusCondition(o.pc.Status.Conditions, mpv1alpha1.ProviderConfigConditionReady); c == nil ||
		(c.Status != metav1.ConditionTrue && !w.refusedInUseOnly(o.pc)) || o.pc.Status.ObservedGeneration != o.pc.Generation {
		add("ProviderConfig %s not Ready: %+v", w.tenant, o.pc.Status)
	}
	sort.Strings(problems)
	return strings.Join(problems, "; ")
}

// refusedInUse says whether deleteRefused allows the Translation's state: not Synced only because GCE refuses to
// delete a NEG that a backend service uses.
func (w *workload) refusedInUse(tr *mpv1alpha1.Translation) bool {
	c := meta.FindStatusCondition(tr.Status.Conditions, mpv1alpha1.TranslationConditionSynced)
	return w.deleteRefused && c != nil && c.Reason == pusher.ReasonInUse && c.ObservedGeneration == tr.Generation
}

// refusedInUseOnly says whether deleteRefused allows the tenant's state: its NEGReady is False for NEGInUse alone.
func (w *workload) refusedInUseOnly(pc *mpv1alpha1.ProviderConfig) bool {
	c := meta.FindStatusCondition(pc.Status.Conditions, mpv1alpha1.ProviderConfigConditionNEGReady)
	return w.deleteRefused && c != nil && c.Reason == pusher.ReasonInUse
}

func synced(tr *mpv1alpha1.Translation) bool {
	c := meta.FindStatusCondition(tr.Status.Conditions, mpv1alpha1.TranslationConditionSynced)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == tr.Generation
}

func sorted(s sets.Set[string]) []string { return sets.List(s) }

// waitConverged waits until the API and the fake GCE hold exactly the wanted state, and returns that state.
func (w *workload) waitConverged(what string) *observed {
	w.t.Helper()
	start := time.Now()
	var o *observed
	why := "not looked yet"
	err := wait.PollUntilContextTimeout(w.ctx, 250*time.Millisecond, convergeTimeout, true, func(context.Context) (bool, error) {
		var err error
		if o, err = w.observe(); err != nil {
			why = err.Error()
			return false, nil
		}
		why = w.diff(o)
		return why == "", nil
	})
	if err != nil {
		w.t.Fatalf("%s: did not converge within %s: %s", what, convergeTimeout, why)
	}
	w.t.Logf("%s: converged in %s", what, time.Since(start).Round(100*time.Millisecond))
	return o
}

// assignedEvents counts the Assigned Events (with their repeat counts) recorded on a namespace.
func (w *workload) assignedEvents(ns string) int {
	w.t.Helper()
	list, err := w.kube.CoreV1().Events(metav1.NamespaceDefault).List(w.ctx, metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.kind": "Namespace", "involvedObject.name": ns, "reason": namespaceproject.ReasonAssigned}.String()})
	if err != nil {
		w.t.Fatal(err)
	}
	n := 0
	for _, ev := range list.Items {
		n += int(max(ev.Count, 1))
	}
	return n
}

// teardown removes the workload through the controllers and checks that nothing is left behind: every neg Service
// deleted (the pusher deletes its NEGs from GCE, the Translations go), every Ingress moved to another class (the
// ingress-tunnel controller deletes its PangolinResources itself), then the ProviderConfig deleted (its finalizer
// goes once nothing is pending). Namespace assignments stay by design: removing them would change who may use a
// namespace.
func (w *workload) teardown() {
	w.t.Helper()
	w.mu.Lock()
	svcs := slices.Collect(maps.Keys(w.services))
	ings := slices.Collect(maps.Keys(w.ingresses))
	w.mu.Unlock()
	for _, s := range svcs {
		w.deleteService(s)
	}
	for _, i := range ings {
		w.unmanageIngress(i)
	}
	w.waitConverged("teardown of Services and Ingresses")

	if err := w.mp.MultiprojectV1alpha1().ProviderConfigs().Delete(w.ctx, w.tenant, metav1.DeleteOptions{}); err != nil {
		w.t.Fatal(err)
	}
	var why string
	err := wait.PollUntilContextTimeout(w.ctx, 250*time.Millisecond, convergeTimeout, true, func(context.Context) (bool, error) {
		o, err := w.observe()
		if err != nil {
			why = err.Error()
			return false, nil
		}
		switch {
		case o.pc != nil:
			why = fmt.Sprintf("ProviderConfig still there, status %+v", o.pc.Status)
		case len(o.negs) > 0 || len(o.translations) > 0 || len(o.resources) > 0:
			why = fmt.Sprintf("left behind: NEGs %v, Translations %v, PangolinResources %v",
				sorted(sets.KeySet(o.negs)), sorted(sets.KeySet(o.translations)), sorted(sets.KeySet(o.resources)))
		default:
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		w.t.Fatalf("deleting ProviderConfig %s: %v: %s", w.tenant, err, why)
	}
	if n := len(w.gce.NEGs(w.project)); n != 0 {
		w.t.Errorf("%d NEGs left in GCE project %s", n, w.project)
	}
}

var gcKnowsTranslations sync.Once

// waitGCKnowsTranslations waits until kube-controller-manager's garbage collector tracks Translations (it finds
// CRDs by periodic discovery, and they are installed after it starts; until then it would delete a Service
// without its Translations). The probe: a ConfigMap owning a Translation, deleted; the collector must delete the
// Translation.
func waitGCKnowsTranslations(t testing.TB, ns string) {
	t.Helper()
	kube := controlPlane.AdminClient()
	mp, err := mpclientset.NewForConfig(controlPlane.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	gcKnowsTranslations.Do(func() {
		err := wait.PollUntilContextTimeout(t.Context(), time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
			owner, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "gc-probe-"}}, metav1.CreateOptions{})
			if err != nil {
				return false, err
			}
			probe := &mpv1alpha1.Translation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: owner.Name,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}}}
			if _, err := mp.MultiprojectV1alpha1().Translations(ns).Create(ctx, probe, metav1.CreateOptions{}); err != nil {
				return false, err
			}
			if err := kube.CoreV1().ConfigMaps(ns).Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
				return false, err
			}
			err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
				_, err := mp.MultiprojectV1alpha1().Translations(ns).Get(ctx, owner.Name, metav1.GetOptions{})
				return apierrors.IsNotFound(err), nil
			})
			if err != nil {
				_ = mp.MultiprojectV1alpha1().Translations(ns).Delete(ctx, owner.Name, metav1.DeleteOptions{})
				return false, nil
			}
			return true, nil
		})
		if err != nil {
			t.Fatalf("the garbage collector does not track Translations: %v", err)
		}
	})
}
