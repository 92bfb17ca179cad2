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

package informerset_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	tunnelv1alpha1 "github.com/multiproject/api/pangolin/tunnel/v1alpha1"
	rancherv3 "github.com/multiproject/api/rancher/management/v3"
	mpfake "github.com/multiproject/client-go/clientset/versioned/fake"
	mpinformers "github.com/multiproject/client-go/informers/externalversions"

	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/tenancy"
)

// The cluster of BenchmarkInformerMemory: per namespace, Services with one EndpointSlice each; Nodes; one Rancher
// Project per namespace's app owner; a few tunnels.
const (
	benchNamespaces        = 1000
	benchServicesPerNS     = 10
	benchNodes             = 100
	benchTunnels           = 10
	benchManyTenants       = 1000
	benchProjectsNamespace = "local"
)

// serverMeta gives obj what the API server returns with an object made with kubectl apply and written by
// controllers: managedFields of each writer (their fieldsV1 as large as the fields they own) and, if applied, the
// last-applied annotation holding the object as applied.
func serverMeta(obj k8sruntime.Object, applied bool, managers ...string) {
	m := obj.(metav1.Object)
	raw, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	if applied {
		a := m.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[corev1.LastAppliedConfigAnnotation] = string(raw)
		m.SetAnnotations(a)
	}
	// fieldsV1 names every field a manager owns, as {"f:spec":{"f:ports":{...}}}: about the size of the JSON.
	fields := []byte(`{"f:metadata":{"f:labels":{}},"f:spec":{` + strings.Repeat(`"f:x":{},`, len(raw)/10) + `"f:y":{}}}`)
	var entries []metav1.ManagedFieldsEntry
	for _, manager := range managers {
		entries = append(entries, metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate,
			APIVersion: "v1", Time: &metav1.Time{Time: time.Unix(1700000000, 0)}, FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: fields}})
	}
	m.SetManagedFields(entries)
	m.SetUID("0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0")
	m.SetResourceVersion("123456789")
	m.SetCreationTimestamp(metav1.Time{Time: time.Unix(1700000000, 0)})
}

// benchCluster builds the objects, the namespace i labeled for tenant i mod tenants.
func benchCluster(tenants int) (kube, mp []k8sruntime.Object) {
	for i := range benchNamespaces {
		ns := fmt.Sprintf("app-%04d", i)
		tenant := fmt.Sprintf("tenant-%04d", i%tenants)
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
			mpv1alpha1.DefaultProviderConfigLabelKey: tenant, "appOwner": "team-" + ns, "kubernetes.io/metadata.name": ns}}}
		serverMeta(n, true, "kubectl-client-side-apply")
		kube = append(kube, n)
		p := &rancherv3.Project{ObjectMeta: metav1.ObjectMeta{Namespace: benchProjectsNamespace, Name: "p-" + ns},
			Spec: rancherv3.ProjectSpec{DisplayName: "team-" + ns, Description: "the project of team " + ns}}
		serverMeta(p, false, "rancher")
		mp = append(mp, p)
		for s := range benchServicesPerNS {
			name := fmt.Sprintf("svc-%02d", s)
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
				Labels:      map[string]string{"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": ns},
				Annotations: map[string]string{"cloud.google.com/neg": `{"exposed_ports":{"80":{}}}`}},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.0.12.34", ClusterIPs: []string{"10.0.12.34"},
					Selector: map[string]string{"app.kubernetes.io/name": name},
					Ports:    []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("http")}}}}
			serverMeta(svc, true, "kubectl-client-side-apply", "multiproject-controller-manager")
			kube = append(kube, svc)
			slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-abcde",
				Labels: map[string]string{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}},
				AddressType: discoveryv1.AddressTypeIPv4,
				Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}}}
			for e := range 3 {
				slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.1.%d.%d", s, e)},
					Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
					NodeName:   ptr.To(fmt.Sprintf("node-%03d", e)), Zone: ptr.To("zone-a"),
					TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: fmt.Sprintf("%s-7d9f8c-%d", name, e), UID: "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0"}})
			}
			serverMeta(slice, false, "endpointslice-controller.k8s.io")
			kube = append(kube, slice)
		}
	}
	for i := range benchNodes {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%03d", i), Labels: map[string]string{
			corev1.LabelTopologyZone: "zone-a", corev1.LabelHostname: fmt.Sprintf("node-%03d", i), corev1.LabelOSStable: "linux",
			corev1.LabelInstanceTypeStable: "n2-standard-8"}},
			Spec: corev1.NodeSpec{PodCIDR: "10.1.0.0/24", ProviderID: fmt.Sprintf("gce://project/zone-a/node-%03d", i)},
			Status: corev1.NodeStatus{
				Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.128.0.2"}, {Type: corev1.NodeHostName, Address: "node"}},
				NodeInfo:  corev1.NodeSystemInfo{KernelVersion: "6.1.0", OSImage: "Container-Optimized OS", ContainerRuntimeVersion: "containerd://1.7", KubeletVersion: "v1.37.1"}}}
		for c := range 5 {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeConditionType(fmt.Sprintf("Condition%d", c)),
				Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientResources", Message: "kubelet has sufficient resources available"})
		}
		for img := range 40 {
			n.Status.Images = append(n.Status.Images, corev1.ContainerImage{SizeBytes: 123456789, Names: []string{
				fmt.Sprintf("registry.example.com/team/image-%02d@sha256:%064d", img, img), fmt.Sprintf("registry.example.com/team/image-%02d:v1.2.%d", img, img)}})
		}
		serverMeta(n, false, "kubelet", "kube-controller-manager")
		kube = append(kube, n)
	}
	for i := range benchTunnels {
		tn := &tunnelv1alpha1.PangolinTunnel{ObjectMeta: metav1.ObjectMeta{Namespace: "pangolin-system", Name: fmt.Sprintf("tunnel-%d", i)}}
		serverMeta(tn, true, "kubectl-client-side-apply")
		mp = append(mp, tn)
	}
	return kube, mp
}

// fakeClientset is what both fake clientsets offer.
type fakeClientset interface {
	PrependReactor(verb, resource string, reaction clienttesting.ReactionFunc)
	Tracker() clienttesting.ObjectTracker
}

// decodedLists makes a fake clientset answer a list as the API server does, with objects decoded afresh: its own
// answers are deep copies, whose strings share their bytes with the objects it holds, so an informer's cache would
// seem to hold no annotation or label of its own.
func decodedLists(c fakeClientset) {
	c.PrependReactor("list", "*", func(action clienttesting.Action) (bool, k8sruntime.Object, error) {
		list := action.(clienttesting.ListActionImpl)
		obj, err := c.Tracker().List(list.GetResource(), list.GetKind(), list.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		raw, err := json.Marshal(obj)
		if err != nil {
			return true, nil, err
		}
		out := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(k8sruntime.Object)
		return true, out, json.Unmarshal(raw, out)
	})
}

// servesAll is discovery for every optional API.
type servesAll struct{}

func (servesAll) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	list := &metav1.APIResourceList{GroupVersion: gv}
	for _, r := range informerset.Resources {
		if r.GVR.GroupVersion().String() == gv {
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: r.GVR.Resource})
		}
	}
	if len(list.APIResources) == 0 {
		return nil, apierrors.NewNotFound(schema.GroupResource{}, gv)
	}
	return list, nil
}

// liveHeap returns the heap in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func waitSynced(b *testing.B, ctx context.Context, synced func() bool) {
	b.Helper()
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Minute, true, func(context.Context) (bool, error) {
		return synced(), nil
	}); err != nil {
		b.Fatal("the informers did not sync")
	}
}

// bareHeap is the heap that plain client-go informers (as a shared informer factory builds them, no transform)
// hold over the cluster's objects.
func bareHeap(b *testing.B, kubeObjects, mpObjects []k8sruntime.Object) uint64 {
	kube, mp := kubefake.NewClientset(kubeObjects...), mpfake.NewClientset(mpObjects...)
	decodedLists(kube)
	decodedLists(mp)
	ctx, cancel := context.WithCancel(context.Background())
	before := liveHeap()
	kubeFactory := kubeinformers.NewSharedInformerFactory(kube, 0)
	mpFactory := mpinformers.NewSharedInformerFactory(mp, 0)
	informers := []cache.SharedIndexInformer{kubeFactory.Core().V1().Services().Informer(), kubeFactory.Discovery().V1().EndpointSlices().Informer(),
		kubeFactory.Core().V1().Nodes().Informer(), kubeFactory.Core().V1().Namespaces().Informer(),
		mpFactory.Management().V3().Projects().Informer(), mpFactory.Tunnel().V1alpha1().PangolinTunnels().Informer()}
	kubeFactory.Start(ctx.Done())
	mpFactory.Start(ctx.Done())
	waitSynced(b, ctx, func() bool {
		for _, inf := range informers {
			if !inf.HasSynced() {
				return false
			}
		}
		return true
	})
	after := liveHeap()
	cancel()
	kubeFactory.Shutdown()
	mpFactory.Shutdown()
	runtime.KeepAlive(informers)
	return after - before
}

// managerHeap is the heap the manager's tenancy (informerset.NewRouting: the shared informers, trimmed and indexed,
// the Router and the Fanouts) holds over the cluster's objects, with tenants tenants each running what the
// controllers register: a handler on its views of Services, EndpointSlices, Nodes and Namespaces, and an Interest in
// its namespace's Project and in one tunnel.
func managerHeap(b *testing.B, kubeObjects, mpObjects []k8sruntime.Object, tenants int) uint64 {
	kube, mp := kubefake.NewClientset(kubeObjects...), mpfake.NewClientset(mpObjects...)
	decodedLists(kube)
	decodedLists(mp)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	before := liveHeap()
	tn, err := informerset.NewRouting(informerset.RoutingConfig{Config: informerset.Config{Client: kube, MultiprojectClient: mp, Discovery: servesAll{}}})
	if err != nil {
		b.Fatal(err)
	}
	if err := tn.Set.Start(ctx); err != nil {
		b.Fatal(err)
	}
	routing := make(chan struct{})
	go func() {
		defer close(routing)
		tn.RouteOptionals(ctx, nil)
	}()
	waitSynced(b, ctx, func() bool {
		return tn.Set.HasSynced() && tn.Served(informerset.Projects) && tn.Served(informerset.PangolinTunnels)
	})
	var regs []cache.ResourceEventHandlerRegistration
	var closers []func()
	for i := range tenants {
		t, err := tn.Router.Tenant(fmt.Sprintf("tenant-%04d", i))
		if err != nil {
			b.Fatal(err)
		}
		closers = append(closers, t.Close)
		for _, gvr := range []schema.GroupVersionResource{informerset.Services, informerset.EndpointSlices, informerset.Nodes, informerset.Namespaces} {
			view, err := t.Informer(gvr)
			if err != nil {
				b.Fatal(err)
			}
			reg, err := view.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(any) {}})
			if err != nil {
				b.Fatal(err)
			}
			regs = append(regs, reg)
		}
		for gvr, key := range map[schema.GroupVersionResource]string{
			informerset.Projects:        informerset.ProjectKey(benchProjectsNamespace, fmt.Sprintf("team-app-%04d", i)),
			informerset.PangolinTunnels: informerset.TunnelKey("pangolin-system", fmt.Sprintf("tunnel-%d", i%benchTunnels)),
		} {
			shared, _ := tn.Shared(gvr)
			in, err := shared.(*tenancy.Fanout).Interest()
			if err != nil {
				b.Fatal(err)
			}
			in.Add(key)
			reg, err := in.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(any) {}})
			if err != nil {
				b.Fatal(err)
			}
			regs = append(regs, reg)
			closers = append(closers, in.Close)
		}
	}
	waitSynced(b, ctx, func() bool {
		for _, reg := range regs {
			if !reg.HasSynced() {
				return false
			}
		}
		return true
	})
	after := liveHeap()
	for _, c := range closers {
		c()
	}
	cancel()
	<-routing
	_ = tn.Close()
	runtime.KeepAlive(regs)
	return after - before
}

// BenchmarkInformerMemory measures, over the same objects shaped as the API server returns them (managedFields,
// kubectl's last-applied annotation, Node status):
//
//   - manager-B/object, bare-B/object, manager/bare: the heap per cached object of the manager's tenancy (1 tenant)
//     and of plain client-go informers of the same resources; the goal is a ratio of 0.8 or less;
//   - tenants=1000/tenants=1: the heap of the manager's tenancy with 1,000 tenants against 1 (the tenants' views,
//     handlers and Interests); the goal is 1.3 or less.
func BenchmarkInformerMemory(b *testing.B) {
	kubeOne, mpOne := benchCluster(1)
	kubeMany, mpMany := benchCluster(benchManyTenants)
	objects := float64(len(kubeOne) + len(mpOne))
	var bare, one, many uint64
	for range b.N {
		bare = bareHeap(b, kubeOne, mpOne)
		one = managerHeap(b, kubeOne, mpOne, 1)
		many = managerHeap(b, kubeMany, mpMany, benchManyTenants)
		b.ReportMetric(float64(one)/objects, "manager-B/object")
		b.ReportMetric(float64(bare)/objects, "bare-B/object")
		b.ReportMetric(float64(one)/float64(bare), "manager/bare")
		b.ReportMetric(float64(one), "tenants=1-heap-B")
		b.ReportMetric(float64(many), "tenants=1000-heap-B")
		b.ReportMetric(float64(many)/float64(one), "tenants=1000/tenants=1")
	}
	recordInformerRows(b, objects, float64(bare), float64(one), float64(many))
}
