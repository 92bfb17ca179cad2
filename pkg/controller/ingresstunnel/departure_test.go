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
	"errors"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	tunnelv1alpha1 "github.com/multiproject/api/pangolin/tunnel/v1alpha1"
	mpfake "github.com/multiproject/client-go/clientset/versioned/fake"
	mpinformers "github.com/multiproject/client-go/informers/externalversions"

	"github.com/multiproject/multiproject-controller-manager/pkg/claims"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant/tenanttest"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/tenancy"
	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
)

// routedCluster is one fake API whose tenants see what the tenancy router gives them, as in the manager: an
// Ingress belongs to the tenant of its namespace's label, a PangolinResource to the tenant its own label names.
type routedCluster struct {
	h      *harness
	router *tenancy.Router
	shared tenanttest.TenantInformers
	claims *claims.Service
}

func newRoutedCluster(t *testing.T, objects ...any) *routedCluster {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	kube, mp := kubefake.NewClientset(), mpfake.NewClientset()
	for _, o := range objects {
		var err error
		switch o := o.(type) {
		case *tunnelv1alpha1.PangolinTunnel:
			err = mp.Tracker().Add(o)
		case *tunnelv1alpha1.PangolinResource:
			err = mp.Tracker().Add(o)
		case *corev1.Namespace:
			err = kube.Tracker().Add(o)
		case *networkingv1.Ingress:
			err = kube.Tracker().Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	ingressStatusSubresource(kube)
	resourceOptimisticConcurrency(mp)
	kubeFactory := kubeinformers.NewSharedInformerFactory(kube, 0)
	mpFactory := mpinformers.NewSharedInformerFactory(mp, 0)
	namespaces := kubeFactory.Core().V1().Namespaces().Informer()
	informers := map[schema.GroupVersionResource]cache.SharedIndexInformer{
		informerset.Ingresses:         kubeFactory.Networking().V1().Ingresses().Informer(),
		informerset.Services:          kubeFactory.Core().V1().Services().Informer(),
		informerset.PangolinResources: mpFactory.Tunnel().V1alpha1().PangolinResources().Informer(),
		informerset.PangolinTunnels:   mpFactory.Tunnel().V1alpha1().PangolinTunnels().Informer(),
	}
	for _, inf := range append([]cache.SharedIndexInformer{namespaces}, informers[informerset.Ingresses], informers[informerset.Services], informers[informerset.PangolinResources]) {
		if err := inf.AddIndexers(tenancy.Indexers(testLabelKey)); err != nil {
			t.Fatal(err)
		}
	}
	router, err := tenancy.NewRouter(testLabelKey, namespaces)
	if err != nil {
		t.Fatal(err)
	}
	for gvr, scope := range map[schema.GroupVersionResource]tenancy.Scope{
		informerset.Ingresses: tenancy.Namespaced, informerset.Services: tenancy.Namespaced, informerset.PangolinResources: tenancy.ManagerWritten,
	} {
		if err := router.AddResource(gvr, informers[gvr], scope); err != nil {
			t.Fatal(err)
		}
	}
	kubeFactory.Start(ctx.Done())
	mpFactory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		kubeFactory.Shutdown()
		mpFactory.Shutdown()
		if err := router.Close(); err != nil {
			t.Error(err)
		}
	})
	kubeFactory.WaitForCacheSync(ctx.Done())
	mpFactory.WaitForCacheSync(ctx.Done())
	shared := tenanttest.TenantInformers{SharedInformers: informers}
	return &routedCluster{h: &harness{t: t, ctx: ctx, kube: kube, mp: mp}, router: router,
		shared: shared, claims: tenanttest.Claims(t, shared)}
}

// start runs the controller of tenant name, whose tunnels are in tunnelNamespace, on its views.
func (rc *routedCluster) start(name, tunnelNamespace string) *recorder {
	return rc.startObserved(name, tunnelNamespace, nil)
}

// startObserved is start with a hook that sees every sync's outcome.
func (rc *routedCluster) startObserved(name, tunnelNamespace string, afterSync func(key string, err error)) *recorder {
	rc.h.t.Helper()
	views, err := rc.router.Tenant(name)
	if err != nil {
		rc.h.t.Fatal(err)
	}
	informers := rc.shared
	informers.Views = views
	events, conditions := &recorder{}, &tenanttest.Conditions{}
	config := testConfig()
	config.TunnelNamespace = tunnelNamespace
	ctrl, err := newController(&tenant.Context{
		Controller:             "ingress-tunnel",
		ProviderConfig:         &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: mpv1alpha1.ProviderConfigSpec{Pangolin: config}},
		ProviderConfigLabelKey: testLabelKey,
		KubeClient:             rc.h.kube,
		MultiprojectClient:     rc.h.mp,
		Informers:              informers,
		Claims:                 rc.claims,
		EventRecorder:          events,
		Condition:              conditions,
		Workers:                2,
	}, afterSync)
	if err != nil {
		rc.h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(rc.h.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctrl.Run(ctx)
	}()
	rc.h.t.Cleanup(func() {
		cancel()
		<-done
		views.Close()
	})
	rc.h.waitFor("tenant "+name+" to run", func() bool {
		c, ok := conditions.Last()
		return ok && c.Status == metav1.ConditionTrue
	})
	return events
}

func (rc *routedCluster) labelNamespace(name, tenantName string) {
	rc.h.t.Helper()
	ns, err := rc.h.kube.CoreV1().Namespaces().Get(rc.h.ctx, name, metav1.GetOptions{})
	if err != nil {
		rc.h.t.Fatal(err)
	}
	ns.Labels = map[string]string{}
	if tenantName != "" {
		ns.Labels[testLabelKey] = tenantName
	}
	ns.ResourceVersion = bump(ns.ResourceVersion)
	if _, err := rc.h.kube.CoreV1().Namespaces().Update(rc.h.ctx, ns, metav1.UpdateOptions{}); err != nil {
		rc.h.t.Fatal(err)
	}
}

func namespace(name, tenantName string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1", Labels: map[string]string{testLabelKey: tenantName}}}
}

// TestAnIngressThatLeavesItsTenantIsWithdrawn: the namespace of a published Ingress is relabeled from tenant a to
// tenant b. Tenant a deletes the resource it made (it publishes through a's tunnel), with a Deleted Event on the
// Ingress and its host taken out of the Ingress's status; tenant b publishes the Ingress afresh, through its own
// tunnel, and does not adopt a's resource. When the namespace then leaves every tenant, tenant b withdraws too.
func TestAnIngressThatLeavesItsTenantIsWithdrawn(t *testing.T) {
	const host = "shop.example.com"
	rc := newRoutedCluster(t, tunnel("tunnels-a", "main"), tunnel("tunnels-b", "main"), namespace(testNamespace, "tenant-a"),
		hostIngress(testNamespace, "web", "uid-web", 0, host))
	h := rc.h
	eventsA, eventsB := rc.start("tenant-a", "tunnels-a"), rc.start("tenant-b", "tunnels-b")
	published := h.waitHosts(host)[host]
	if published.Labels[testLabelKey] != "tenant-a" || published.Spec.TunnelRef.Namespace != "tunnels-a" {
		t.Fatalf("tenant a's resource: labels %v, tunnel %+v", published.Labels, published.Spec.TunnelRef)
	}
	h.setResourceStatus(host, ready(host))
	h.waitIngressStatus("web", entry(host))

	rc.labelNamespace(testNamespace, "tenant-b")
	withdrawn := "namespace " + testNamespace + " no longer belongs to tenant tenant-a"
	h.waitFor("tenant a's Deleted Event", func() bool {
		got := eventsA.With(corev1.EventTypeNormal + " " + ReasonDeleted + " ")
		return len(got) == 1 && strings.Contains(got[0], withdrawn)
	})
	h.waitFor("tenant b's resource", func() bool {
		res := h.resources()[host]
		return res != nil && res.Labels[testLabelKey] == "tenant-b"
	})
	res := h.resources()[host]
	if res.Spec.TunnelRef.Namespace != "tunnels-b" {
		t.Errorf("tenant b's resource: labels %v, tunnel %+v", res.Labels, res.Spec.TunnelRef)
	}
	h.waitFor("tenant b's Created Event", func() bool { return eventsB.Count(corev1.EventTypeNormal, ReasonCreated) == 1 })
	if n := eventsB.Count(corev1.EventTypeNormal, ReasonUpdated); n != 0 {
		t.Errorf("tenant b updated (adopted) tenant a's resource %d times", n)
	}
	h.waitIngressStatus("web")

	// Out of every tenant: nobody publishes it.
	h.setResourceStatus(host, ready(host))
	h.waitIngressStatus("web", entry(host))
	rc.labelNamespace(testNamespace, "")
	h.waitFor("tenant b's resource to go", func() bool { return len(h.resources()) == 0 })
	h.waitFor("tenant b's Deleted Event", func() bool {
		got := eventsB.With(corev1.EventTypeNormal + " " + ReasonDeleted + " ")
		return len(got) == 1 && strings.Contains(got[0], "namespace "+testNamespace+" no longer belongs to tenant tenant-b")
	})
	h.waitIngressStatus("web")
}

// TestAnotherTenantsResourceIsNotAdopted: an Ingress whose namespace moved to tenant b still controls a resource
// tenant a made (a's controller has not withdrawn it yet). Tenant b does not adopt it, which would move a's
// publication to b's tunnel inside a's Pangolin organization: it waits, and publishes the host afresh once the
// resource is gone.
func TestAnotherTenantsResourceIsNotAdopted(t *testing.T) {
	const host = "shop.example.com"
	ing := hostIngress(testNamespace, "web", "uid-web", 0, host)
	old := (&planner{tenant: "tenant-a", labelKey: testLabelKey, config: &mpv1alpha1.PangolinConfig{TunnelNamespace: "tunnels-a"}}).
		resource(ing, ResourceName(testNamespace, "web", host), host, "main", "shop", "example.com", hostSettings{},
			[]tunnelv1alpha1.Target{{IP: "web.demo.svc.cluster.local", Port: 80, Method: tunnelv1alpha1.TargetMethodHTTP, Path: "/",
				PathMatchType: tunnelv1alpha1.PathMatchTypePrefix, Priority: 110}})
	old.ResourceVersion = "1"
	rc := newRoutedCluster(t, tunnel("tunnels-b", "main"), namespace(testNamespace, "tenant-b"), ing, old)
	h := rc.h
	var mu sync.Mutex
	waited := 0
	events := rc.startObserved("tenant-b", "tunnels-b", func(_ string, err error) {
		if errors.Is(err, worker.ErrWaiting) && strings.Contains(err.Error(), "still belongs to tenant tenant-a") {
			mu.Lock()
			waited++
			mu.Unlock()
		}
	})
	h.waitFor("two syncs of tenant b that wait for tenant a", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return waited >= 2
	})
	if res := h.resources()[host]; res.Labels[testLabelKey] != "tenant-a" || res.Spec.TunnelRef.Namespace != "tunnels-a" {
		t.Errorf("tenant a's resource was changed: labels %v, tunnel %+v", res.Labels, res.Spec.TunnelRef)
	}
	if n := events.Count(corev1.EventTypeNormal, ReasonUpdated); n != 0 {
		t.Errorf("tenant b adopted tenant a's resource (%d Updated Events)", n)
	}

	// Tenant a's part.
	if err := h.mp.TunnelV1alpha1().PangolinResources(testNamespace).Delete(h.ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitFor("tenant b's resource", func() bool {
		res := h.resources()[host]
		return res != nil && res.Labels[testLabelKey] == "tenant-b" && res.Spec.TunnelRef.Namespace == "tunnels-b"
	})
	h.waitFor("tenant b's Created Event", func() bool { return events.Count(corev1.EventTypeNormal, ReasonCreated) == 1 })
}
