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

package ingresstunnel

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	tunnelv1alpha1 "github.com/multiproject/api/pangolin/tunnel/v1alpha1"
	mpfake "github.com/multiproject/client-go/clientset/versioned/fake"
	mpinformers "github.com/multiproject/client-go/informers/externalversions"

	"github.com/multiproject/multiproject-controller-manager/pkg/claims"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant/tenanttest"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
)

// cluster is one fake API with several tenants' controllers, as the manager runs them in one process: each tenant
// sees its own namespace through its views, and all of them share the unfiltered PangolinResource and
// PangolinTunnel informers.
type cluster struct {
	t      *testing.T
	ctx    context.Context
	kube   *kubefake.Clientset
	mp     *mpfake.Clientset
	shared map[schema.GroupVersionResource]cache.SharedIndexInformer
	// claims is the process's claims.Service, which every tenant's controller joins.
	claims *claims.Service
	// published counts, from a watch started before anything ran, the PangolinResources that exist at once for each
	// published name; max is the most there ever were.
	mu        sync.Mutex
	published map[string]map[string]bool
	max       map[string]int
	watchDone chan struct{}
	watcher   watch.Interface
}

func newCluster(t *testing.T, objects ...runtime.Object) *cluster {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	var kubeObjects, mpObjects []runtime.Object
	for _, o := range objects {
		switch o.(type) {
		case *tunnelv1alpha1.PangolinResource, *tunnelv1alpha1.PangolinTunnel:
			mpObjects = append(mpObjects, o)
		default:
			kubeObjects = append(kubeObjects, o)
		}
	}
	cl := &cluster{t: t, ctx: ctx, kube: kubefake.NewClientset(kubeObjects...), mp: mpfake.NewClientset(mpObjects...),
		published: map[string]map[string]bool{}, max: map[string]int{}, watchDone: make(chan struct{})}
	w, err := cl.mp.TunnelV1alpha1().PangolinResources("").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cl.watcher = w
	for _, o := range mpObjects {
		if res, ok := o.(*tunnelv1alpha1.PangolinResource); ok {
			cl.count(watch.Added, res)
		}
	}
	go func() {
		defer close(cl.watchDone)
		for ev := range w.ResultChan() {
			if res, ok := ev.Object.(*tunnelv1alpha1.PangolinResource); ok {
				cl.count(ev.Type, res)
			}
		}
	}()
	factory := mpinformers.NewSharedInformerFactory(cl.mp, 0)
	cl.shared = map[schema.GroupVersionResource]cache.SharedIndexInformer{
		informerset.PangolinResources: factory.Tunnel().V1alpha1().PangolinResources().Informer(),
		informerset.PangolinTunnels:   factory.Tunnel().V1alpha1().PangolinTunnels().Informer(),
	}
	cl.claims = tenanttest.Claims(t, tenanttest.Informers(cl.shared))
	factory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	return cl
}

func (cl *cluster) count(t watch.EventType, res *tunnelv1alpha1.PangolinResource) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	name, key := publishedName(res), res.Namespace+"/"+res.Name
	if cl.published[name] == nil {
		cl.published[name] = map[string]bool{}
	}
	if t == watch.Deleted {
		delete(cl.published[name], key)
		return
	}
	cl.published[name][key] = true
	cl.max[name] = max(cl.max[name], len(cl.published[name]))
}

// neverTwo stops the watch and fails the test if two PangolinResources ever published one name at once.
func (cl *cluster) neverTwo() {
	cl.t.Helper()
	cl.watcher.Stop()
	<-cl.watchDone
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for name, n := range cl.max {
		if n > 1 {
			cl.t.Errorf("%d PangolinResources published %s at once", n, name)
		}
	}
}

// runningTenant is one tenant's controller in the cluster.
type runningTenant struct {
	cl        *cluster
	name      string
	namespace string
	events    *recorder
	syncs     syncCounter
	ctrl      *Controller
	stop      context.CancelFunc
	done      chan struct{}
}

// waitCached waits until the tenant's controller has seen in its cache the PangolinResource of each host its Ingress
// web publishes.
func (rt *runningTenant) waitCached(hosts ...string) {
	rt.cl.t.Helper()
	rt.cl.waitFor(rt.name+"'s cache to hold its resources", func() bool {
		for _, host := range hosts {
			if _, err := rt.ctrl.resources.PangolinResources(rt.namespace).Get(ResourceName(rt.namespace, "web", host)); err != nil {
				return false
			}
		}
		return true
	})
}

// viewsAndShared gives a controller the tenant's namespace-scoped informers as its views and the cluster's
// unfiltered ones as shared.
type viewsAndShared struct {
	views, shared map[schema.GroupVersionResource]cache.SharedIndexInformer
}

func (i viewsAndShared) Informer(gvr schema.GroupVersionResource) (cache.SharedIndexInformer, error) {
	return tenanttest.Informers(i.views).Informer(gvr)
}

func (i viewsAndShared) Shared(gvr schema.GroupVersionResource) (cache.SharedIndexInformer, error) {
	if gvr == informerset.Ingresses {
		// The manager's views are filters of its shared informers, so an Ingress's delete reaches a view after the
		// shared store dropped it. A tenant here never leaves its namespace, so the view's informer, which holds
		// every Ingress of the namespace, is the shared one as far as the tenant can tell.
		return tenanttest.Informers(i.views).Informer(gvr)
	}
	return tenanttest.Informers(i.shared).Informer(gvr)
}

// start runs the controller of tenant name, which sees namespace and may publish the allowed hosts (every host when
// none is given).
func (cl *cluster) start(name, namespace string, allowed ...mpv1alpha1.AllowedHostname) *runningTenant {
	cl.t.Helper()
	config := testConfig()
	config.AllowedHostnames = allowed
	kubeFactory := kubeinformers.NewSharedInformerFactoryWithOptions(cl.kube, 0, kubeinformers.WithNamespace(namespace))
	mpFactory := mpinformers.NewSharedInformerFactoryWithOptions(cl.mp, 0, mpinformers.WithNamespace(namespace))
	rt := &runningTenant{cl: cl, name: name, namespace: namespace, events: &recorder{}}
	conditions := &tenanttest.Conditions{}
	ctrl, err := newController(&tenant.Context{
		Controller:             "ingress-tunnel",
		ProviderConfig:         &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: mpv1alpha1.ProviderConfigSpec{Pangolin: config}},
		ProviderConfigLabelKey: testLabelKey,
		KubeClient:             cl.kube,
		MultiprojectClient:     cl.mp,
		Claims:                 cl.claims,
		Informers: viewsAndShared{shared: cl.shared, views: map[schema.GroupVersionResource]cache.SharedIndexInformer{
			informerset.Ingresses:         kubeFactory.Networking().V1().Ingresses().Informer(),
			informerset.Services:          kubeFactory.Core().V1().Services().Informer(),
			informerset.PangolinResources: mpFactory.Tunnel().V1alpha1().PangolinResources().Informer(),
		}},
		EventRecorder: rt.events,
		Condition:     conditions,
		Workers:       3,
	}, rt.syncs.observe)
	if err != nil {
		cl.t.Fatal(err)
	}
	rt.ctrl = ctrl
	ctx, cancel := context.WithCancel(cl.ctx)
	kubeFactory.Start(ctx.Done())
	mpFactory.Start(ctx.Done())
	rt.stop, rt.done = cancel, make(chan struct{})
	go func() {
		defer close(rt.done)
		ctrl.Run(ctx)
	}()
	cl.t.Cleanup(func() {
		rt.shutdown()
		kubeFactory.Shutdown()
		mpFactory.Shutdown()
	})
	cl.waitFor("tenant "+name+" to run", func() bool {
		c, ok := conditions.Last()
		return ok && c.Status == metav1.ConditionTrue
	})
	return rt
}

// shutdown stops the controller, as the manager does when the tenant leaves.
func (rt *runningTenant) shutdown() {
	if rt.stop == nil {
		return
	}
	rt.stop()
	<-rt.done
	rt.stop = nil
}

func (cl *cluster) waitFor(what string, cond func() bool) {
	cl.t.Helper()
	h := &harness{t: cl.t, ctx: cl.ctx}
	h.waitFor(what, cond)
}

// resourcesFor lists the PangolinResources of the whole cluster that publish host, by namespace/name.
func (cl *cluster) resourcesFor(host string) []string {
	cl.t.Helper()
	list, err := cl.mp.TunnelV1alpha1().PangolinResources("").List(cl.ctx, metav1.ListOptions{})
	if err != nil {
		cl.t.Fatal(err)
	}
	var out []string
	for _, r := range list.Items {
		if publishedName(&r) == host {
			out = append(out, r.Namespace+"/"+r.Name)
		}
	}
	return out
}

// waitPublishedBy waits until exactly the resource of that Ingress publishes host.
func (cl *cluster) waitPublishedBy(host, namespace, ingress string) {
	cl.t.Helper()
	want := namespace + "/" + ResourceName(namespace, ingress, host)
	cl.waitFor(host+" published by "+namespace+"/"+ingress, func() bool {
		got := cl.resourcesFor(host)
		return len(got) == 1 && got[0] == want
	})
}

func (cl *cluster) updateIngress(namespace, name string, change func(*networkingv1.Ingress)) {
	cl.t.Helper()
	ing, err := cl.kube.NetworkingV1().Ingresses(namespace).Get(cl.ctx, name, metav1.GetOptions{})
	if err != nil {
		cl.t.Fatal(err)
	}
	change(ing)
	ing.ResourceVersion = bump(ing.ResourceVersion)
	if _, err := cl.kube.NetworkingV1().Ingresses(namespace).Update(cl.ctx, ing, metav1.UpdateOptions{}); err != nil {
		cl.t.Fatal(err)
	}
}

var created0 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

// hostIngress is a Pangolin-class Ingress with one rule per host to Service web port 80, created at created0 plus
// the given seconds.
func hostIngress(namespace, name, uid string, seconds int, hosts ...string) *networkingv1.Ingress {
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(uid), ResourceVersion: "1",
			CreationTimestamp: metav1.NewTime(created0.Add(time.Duration(seconds) * time.Second))},
		Spec: networkingv1.IngressSpec{IngressClassName: ptr.To("pangolin")},
	}
	for _, h := range hosts {
		ing.Spec.Rules = append(ing.Spec.Rules, rule(h, path("/", networkingv1.PathTypePrefix, "web", number(80))))
	}
	return ing
}

func conflictsNaming(events *recorder, holder string) int {
	n := 0
	for _, e := range events.With(corev1.EventTypeWarning + " " + ReasonHostConflict + " ") {
		if strings.Contains(e, "published by "+holder+";") {
			n++
		}
	}
	return n
}

// TestAHostIsPublishedOnceAcrossTenants: two tenants' Ingresses claim shared.example.com; the earlier one keeps it,
// the later gets one HostConflict naming it (not one per sync) and no resource for it, and takes the host over, after
// the holder's resource is gone, once the holder drops the host.
func TestAHostIsPublishedOnceAcrossTenants(t *testing.T) {
	cl := newCluster(t, tunnel(testTunnelNS, "main"),
		hostIngress("ns-a", "web", "uid-a", 0, "shared.example.com", "a.example.com"),
		hostIngress("ns-b", "web", "uid-b", 1, "shared.example.com", "b.example.com"))
	a, b := cl.start("tenant-a", "ns-a"), cl.start("tenant-b", "ns-b")
	cl.waitPublishedBy("shared.example.com", "ns-a", "web")
	cl.waitPublishedBy("a.example.com", "ns-a", "web")
	cl.waitPublishedBy("b.example.com", "ns-b", "web")
	cl.waitFor("a HostConflict on tenant b's Ingress", func() bool { return conflictsNaming(b.events, "Ingress ns-a/web") == 1 })
	if n := b.events.Count(corev1.EventTypeWarning, ReasonHostConflict); n != 1 {
		t.Errorf("%d HostConflict Warnings, want 1", n)
	}
	if n := a.events.Count(corev1.EventTypeWarning, ReasonHostConflict); n != 0 {
		t.Errorf("the holder got %d HostConflict Warnings", n)
	}

	// More syncs of the later Ingress: the conflict is not reported again, and nothing is written. Converged means
	// also that tenant b's cache holds the resource it created: before, a sync would try to create it again, as it
	// would against an API server.
	b.waitCached("b.example.com")
	writes := countWrites(cl.mp)
	synced := b.syncs.successes("ns-b/web")
	cl.updateIngress("ns-b", "web", func(ing *networkingv1.Ingress) { ing.Labels = map[string]string{"touched": "yes"} })
	cl.waitFor("another sync of tenant b's Ingress", func() bool { return b.syncs.successes("ns-b/web") > synced })
	if n := b.events.Count(corev1.EventTypeWarning, ReasonHostConflict); n != 1 {
		t.Errorf("%d HostConflict Warnings after another sync, want still 1", n)
	}
	if n := countWrites(cl.mp) - writes; n != 0 {
		t.Errorf("a converged sync with a conflict wrote %d times", n)
	}

	// The holder drops the host: its resource goes, then the later Ingress's comes.
	cl.updateIngress("ns-a", "web", func(ing *networkingv1.Ingress) { ing.Spec.Rules = ing.Spec.Rules[1:] })
	cl.waitPublishedBy("shared.example.com", "ns-b", "web")
	cl.waitPublishedBy("a.example.com", "ns-a", "web")
	cl.neverTwo()
}

// TestTakeOverWaitsForTheHoldersResource: a deleted holder's resources stay until the garbage collector deletes
// them; the next claimer creates its own only after that.
func TestTakeOverWaitsForTheHoldersResource(t *testing.T) {
	cl := newCluster(t, tunnel(testTunnelNS, "main"),
		hostIngress("ns-a", "web", "uid-a", 0, "shared.example.com"),
		hostIngress("ns-b", "web", "uid-b", 1, "shared.example.com"))
	cl.start("tenant-a", "ns-a")
	b := cl.start("tenant-b", "ns-b")
	cl.waitPublishedBy("shared.example.com", "ns-a", "web")
	cl.waitFor("a HostConflict", func() bool { return conflictsNaming(b.events, "Ingress ns-a/web") == 1 })

	synced := b.syncs.successes("ns-b/web")
	if err := cl.kube.NetworkingV1().Ingresses("ns-a").Delete(cl.ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The later Ingress is synced as the new holder, and waits: the fake clientset has no garbage collector.
	cl.waitFor("a sync of the new holder", func() bool { return b.syncs.successes("ns-b/web") > synced })
	if got := cl.resourcesFor("shared.example.com"); len(got) != 1 || !strings.HasPrefix(got[0], "ns-a/") {
		t.Fatalf("resources for the host while the old one exists: %v", got)
	}
	if n := conflictsNaming(b.events, "Ingress ns-a/web"); n != 1 {
		t.Errorf("%d HostConflict Warnings naming the old holder while its resource is deleted, want the first one only", n)
	}
	// The garbage collector's part.
	if err := cl.mp.TunnelV1alpha1().PangolinResources("ns-a").Delete(cl.ctx, ResourceName("ns-a", "web", "shared.example.com"), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cl.waitPublishedBy("shared.example.com", "ns-b", "web")
	cl.neverTwo()
}

// TestAnOlderIngressBecomingPangolinClassLeavesAPublishedHost: the Ingress that publishes a host keeps it: an older
// Ingress that becomes Pangolin-class later gets a HostConflict naming the publisher, whose resource stays (the
// same object). Once the publisher stops being Pangolin-class, the older Ingress takes the host.
func TestAnOlderIngressBecomingPangolinClassLeavesAPublishedHost(t *testing.T) {
	older := hostIngress("ns-a", "web", "uid-a", 0, "shared.example.com")
	older.Spec.IngressClassName = ptr.To("nginx")
	cl := newCluster(t, tunnel(testTunnelNS, "main"), older, hostIngress("ns-b", "web", "uid-b", 1, "shared.example.com"))
	a, b := cl.start("tenant-a", "ns-a"), cl.start("tenant-b", "ns-b")
	cl.waitPublishedBy("shared.example.com", "ns-b", "web")
	published, err := cl.mp.TunnelV1alpha1().PangolinResources("ns-b").Get(cl.ctx, ResourceName("ns-b", "web", "shared.example.com"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	cl.updateIngress("ns-a", "web", func(ing *networkingv1.Ingress) { ing.Spec.IngressClassName = ptr.To("pangolin") })
	cl.waitFor("a HostConflict naming the publisher", func() bool { return conflictsNaming(a.events, "Ingress ns-b/web") == 1 })
	if got := cl.resourcesFor("shared.example.com"); len(got) != 1 || got[0] != "ns-b/"+published.Name {
		t.Fatalf("resources for the host after the older Ingress claimed it: %v", got)
	}
	if kept, err := cl.mp.TunnelV1alpha1().PangolinResources("ns-b").Get(cl.ctx, published.Name, metav1.GetOptions{}); err != nil || kept.UID != published.UID {
		t.Fatalf("the publisher's resource was replaced or deleted (%v)", err)
	}
	if n := b.events.Count(corev1.EventTypeWarning, ReasonHostConflict); n != 0 {
		t.Errorf("the publisher got %d HostConflict Warnings", n)
	}
	if n := len(b.events.With(corev1.EventTypeNormal + " " + ReasonDeleted + " ")); n != 0 {
		t.Errorf("the publisher's resource was deleted %d times", n)
	}

	// The publisher lets the host go: the older Ingress takes it once the resource is gone.
	cl.updateIngress("ns-b", "web", func(ing *networkingv1.Ingress) { ing.Spec.IngressClassName = ptr.To("nginx") })
	cl.waitPublishedBy("shared.example.com", "ns-a", "web")
	cl.neverTwo()
}

// TestATenantThatLeavesHandsItsHostsOver: a tenant whose controller stops claims nothing; its resources (deleted by
// its cleanup, here by hand) stand in the way until they are gone.
func TestATenantThatLeavesHandsItsHostsOver(t *testing.T) {
	cl := newCluster(t, tunnel(testTunnelNS, "main"),
		hostIngress("ns-a", "web", "uid-a", 0, "shared.example.com"),
		hostIngress("ns-b", "web", "uid-b", 1, "shared.example.com"))
	a := cl.start("tenant-a", "ns-a")
	b := cl.start("tenant-b", "ns-b")
	cl.waitPublishedBy("shared.example.com", "ns-a", "web")
	cl.waitFor("a HostConflict", func() bool { return conflictsNaming(b.events, "Ingress ns-a/web") == 1 })

	synced := b.syncs.successes("ns-b/web")
	a.shutdown()
	cl.waitFor("a sync of the new holder", func() bool { return b.syncs.successes("ns-b/web") > synced })
	if got := cl.resourcesFor("shared.example.com"); len(got) != 1 || !strings.HasPrefix(got[0], "ns-a/") {
		t.Fatalf("resources for the host while the departed tenant's exists: %v", got)
	}
	if err := cl.mp.TunnelV1alpha1().PangolinResources("ns-a").Delete(cl.ctx, ResourceName("ns-a", "web", "shared.example.com"), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cl.waitPublishedBy("shared.example.com", "ns-b", "web")
	cl.neverTwo()
}

// TestManyTakeOversNeverPublishTwice: the tenant of the later claimants runs first and publishes every host; the
// tenant of the earlier claimants then starts and takes nothing (a HostConflict each). Then every publisher stops
// being Pangolin-class at once, and the earlier claimants take every host over, their workers and the other
// tenant's racing, and no host is ever published twice on the way.
func TestManyTakeOversNeverPublishTwice(t *testing.T) {
	var hosts []string
	for i := range 20 {
		hosts = append(hosts, fmt.Sprintf("h%02d.example.com", i))
	}
	objects := []runtime.Object{tunnel(testTunnelNS, "main")}
	// One creation second: the UID decides ("uid-1-…" < "uid-2-…"). One Ingress per host, so the workers of each
	// tenant run in parallel.
	for i, h := range hosts {
		objects = append(objects,
			hostIngress("ns-a", fmt.Sprintf("web-%02d", i), fmt.Sprintf("uid-2-%02d", i), 0, h),
			hostIngress("ns-b", fmt.Sprintf("web-%02d", i), fmt.Sprintf("uid-1-%02d", i), 0, h))
	}
	cl := newCluster(t, objects...)
	a := cl.start("tenant-a", "ns-a")
	for i, h := range hosts {
		cl.waitPublishedBy(h, "ns-a", fmt.Sprintf("web-%02d", i))
	}
	b := cl.start("tenant-b", "ns-b")
	cl.waitFor("a HostConflict on each earlier claimant", func() bool {
		return b.events.Count(corev1.EventTypeWarning, ReasonHostConflict) == len(hosts)
	})
	for i, h := range hosts {
		if got := cl.resourcesFor(h); len(got) != 1 || !strings.HasPrefix(got[0], "ns-a/") {
			t.Fatalf("resources for %s after the earlier claimants started: %v", h, got)
		}
		cl.updateIngress("ns-a", fmt.Sprintf("web-%02d", i), func(ing *networkingv1.Ingress) { ing.Spec.IngressClassName = ptr.To("nginx") })
	}
	for i, h := range hosts {
		cl.waitPublishedBy(h, "ns-b", fmt.Sprintf("web-%02d", i))
	}
	if n := a.events.Count(corev1.EventTypeWarning, ReasonHostConflict); n != 0 {
		t.Errorf("the publishers got %d HostConflict Warnings", n)
	}
	cl.neverTwo()
}

// TestASubdomainRenameToAnotherIngressesHostLoses: tenant b's published Ingress is annotated to publish its host
// as tenant a's (earlier) host. The rename claims that name, a holds it, so b's resource is not changed to publish
// it: it is deleted, with one HostConflict naming a's Ingress, and a's resource stays the only one.
func TestASubdomainRenameToAnotherIngressesHostLoses(t *testing.T) {
	cl := newCluster(t, tunnel(testTunnelNS, "main"),
		hostIngress("ns-a", "web", "uid-a", 0, "a.example.com"),
		hostIngress("ns-b", "web", "uid-b", 1, "b.example.com"))
	a, b := cl.start("tenant-a", "ns-a"), cl.start("tenant-b", "ns-b")
	cl.waitPublishedBy("a.example.com", "ns-a", "web")
	cl.waitPublishedBy("b.example.com", "ns-b", "web")
	b.waitCached("b.example.com")

	cl.updateIngress("ns-b", "web", func(ing *networkingv1.Ingress) {
		ing.Annotations = map[string]string{AnnotationSubdomain: "a"}
	})
	cl.waitFor("a HostConflict naming tenant a's Ingress", func() bool { return conflictsNaming(b.events, "Ingress ns-a/web") == 1 })
	if got := b.events.With(corev1.EventTypeWarning + " " + ReasonHostConflict + " "); !strings.Contains(got[0], "Host b.example.com is published as a.example.com") {
		t.Errorf("HostConflict %q does not say which name the host is published as", got[0])
	}
	cl.waitFor("b's resource to go", func() bool { return len(cl.resourcesFor("b.example.com")) == 0 })
	cl.waitPublishedBy("a.example.com", "ns-a", "web")
	cl.waitFor("the renamed Ingress's Deleted Event", func() bool {
		return len(b.events.With(corev1.EventTypeNormal+" "+ReasonDeleted+" ")) > 0
	})
	if got := b.events.With(corev1.EventTypeNormal + " " + ReasonDeleted + " "); len(got) != 1 || !strings.Contains(got[0], "another Ingress claimed its host first") {
		t.Errorf("Deleted Events of the renamed Ingress: %q", got)
	}
	if n := a.events.Count(corev1.EventTypeWarning, ReasonHostConflict); n != 0 {
		t.Errorf("the holder got %d HostConflict Warnings", n)
	}

	// Renamed back, it publishes its own host again.
	cl.updateIngress("ns-b", "web", func(ing *networkingv1.Ingress) { ing.Annotations = nil })
	cl.waitPublishedBy("b.example.com", "ns-b", "web")
	cl.waitPublishedBy("a.example.com", "ns-a", "web")
	cl.neverTwo()
}

// TestARenameWaitsForTheNamesPublisher: an update that changes the name a resource publishes passes the check a
// create passes. A PangolinResource made by hand publishes x.example.com; the Ingress that holds the claim to that
// name renames its resource to it only once the hand-made one is gone: meanwhile its resource is deleted (it would
// publish a name the Ingress no longer asks for) and a HostConflict names the hand-made one.
func TestARenameWaitsForTheNamesPublisher(t *testing.T) {
	byHand := &tunnelv1alpha1.PangolinResource{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns-x", Name: "by-hand"},
		Spec: tunnelv1alpha1.PangolinResourceSpec{Name: "by-hand", Protocol: tunnelv1alpha1.ProtocolHTTP,
			HTTPConfig: &tunnelv1alpha1.HTTPConfig{Subdomain: "x", DomainName: "example.com"}},
	}
	cl := newCluster(t, tunnel(testTunnelNS, "main"), byHand, hostIngress("ns-b", "web", "uid-b", 1, "b.example.com"))
	b := cl.start("tenant-b", "ns-b")
	cl.waitPublishedBy("b.example.com", "ns-b", "web")
	b.waitCached("b.example.com")

	cl.updateIngress("ns-b", "web", func(ing *networkingv1.Ingress) {
		ing.Annotations = map[string]string{AnnotationSubdomain: "x"}
	})
	cl.waitFor("a HostConflict naming the hand-made resource", func() bool {
		return conflictsNaming(b.events, "PangolinResource ns-x/by-hand") == 1
	})
	cl.waitFor("b's resource to go", func() bool { return len(cl.resourcesFor("b.example.com")) == 0 })
	if got := cl.resourcesFor("x.example.com"); len(got) != 1 || got[0] != "ns-x/by-hand" {
		t.Fatalf("resources for x.example.com while the hand-made one exists: %v", got)
	}
	cl.waitFor("the renamed Ingress's Deleted Event", func() bool {
		return len(b.events.With(corev1.EventTypeNormal+" "+ReasonDeleted+" ")) > 0
	})
	if got := b.events.With(corev1.EventTypeNormal + " " + ReasonDeleted + " "); len(got) != 1 ||
		!strings.Contains(got[0], "its new name x.example.com is published by another PangolinResource") {
		t.Errorf("Deleted Events of the renamed Ingress: %q", got)
	}

	if err := cl.mp.TunnelV1alpha1().PangolinResources("ns-x").Delete(cl.ctx, "by-hand", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want := "ns-b/" + ResourceName("ns-b", "web", "b.example.com")
	cl.waitFor("x.example.com published by tenant b's Ingress", func() bool {
		got := cl.resourcesFor("x.example.com")
		return len(got) == 1 && got[0] == want
	})
	cl.neverTwo()
}

func countWrites(mp *mpfake.Clientset) int {
	n := 0
	for _, a := range mp.Actions() {
		switch a.GetVerb() {
		case "create", "update", "delete", "patch":
			if a.GetResource().Resource == "pangolinresources" {
				n++
			}
		}
	}
	return n
}
