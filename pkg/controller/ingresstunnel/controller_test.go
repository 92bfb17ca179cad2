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
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	gatewayclientset "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gatewayfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"
	gatewayinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	tunnelv1alpha1 "github.com/multiproject/api/pangolin/tunnel/v1alpha1"
	mpfake "github.com/multiproject/client-go/clientset/versioned/fake"
	mpinformers "github.com/multiproject/client-go/informers/externalversions"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant/tenanttest"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
)

// recorder remembers events without ever blocking.
type recorder = tenanttest.Events

// harness runs one controller on informers of fake clientsets.
type harness struct {
	t    *testing.T
	ctx  context.Context
	kube *kubefake.Clientset
	mp   *mpfake.Clientset
	// gw, if set, serves Gateway API (newGatewayHarness).
	gw         *gatewayfake.Clientset
	events     *recorder
	conditions *tenanttest.Conditions
	ctrl       *Controller
	syncs      syncCounter
	stop       context.CancelFunc
	done       chan struct{}
	workers    int
}

func newHarness(t *testing.T, config *mpv1alpha1.PangolinConfig, kubeObjects []runtime.Object, mpObjects ...runtime.Object) *harness {
	t.Helper()
	return newHarnessWorkers(t, 2, config, kubeObjects, mpObjects...)
}

// newHarnessWorkers is newHarness with the controller's worker count: with one, keys are synced in the order they
// were enqueued.
func newHarnessWorkers(t *testing.T, workers int, config *mpv1alpha1.PangolinConfig, kubeObjects []runtime.Object, mpObjects ...runtime.Object) *harness {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	h := &harness{t: t, ctx: ctx, kube: kubefake.NewClientset(kubeObjects...), mp: mpfake.NewClientset(mpObjects...),
		events: &recorder{}, conditions: &tenanttest.Conditions{}, workers: workers}
	ingressStatusSubresource(h.kube)
	resourceOptimisticConcurrency(h.mp)
	h.start(config)
	return h
}

// start runs a new controller with fresh informers, as after a restart of the manager.
func (h *harness) start(config *mpv1alpha1.PangolinConfig) {
	h.t.Helper()
	if config == nil {
		config = testConfig()
	}
	kubeFactory := kubeinformers.NewSharedInformerFactory(h.kube, 0)
	mpFactory := mpinformers.NewSharedInformerFactory(h.mp, 0)
	informers := tenanttest.Informers{
		informerset.Ingresses:         kubeFactory.Networking().V1().Ingresses().Informer(),
		informerset.Services:          kubeFactory.Core().V1().Services().Informer(),
		informerset.PangolinResources: mpFactory.Tunnel().V1alpha1().PangolinResources().Informer(),
		informerset.PangolinTunnels:   mpFactory.Tunnel().V1alpha1().PangolinTunnels().Informer(),
	}
	var gatewayFactory gatewayinformers.SharedInformerFactory
	var gatewayClient gatewayclientset.Interface
	if h.gw != nil {
		gatewayClient = h.gw
		gatewayFactory = gatewayinformers.NewSharedInformerFactory(h.gw, 0)
		informers[informerset.GatewayClasses] = gatewayFactory.Gateway().V1().GatewayClasses().Informer()
		informers[informerset.Gateways] = gatewayFactory.Gateway().V1().Gateways().Informer()
		informers[informerset.HTTPRoutes] = gatewayFactory.Gateway().V1().HTTPRoutes().Informer()
		informers[informerset.ReferenceGrants] = gatewayFactory.Gateway().V1().ReferenceGrants().Informer()
		informers[informerset.Namespaces] = kubeFactory.Core().V1().Namespaces().Informer()
	}
	ctrl, err := newController(&tenant.Context{
		Controller:             "ingress-tunnel",
		ProviderConfig:         &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: testTenant}, Spec: mpv1alpha1.ProviderConfigSpec{Pangolin: config}},
		ProviderConfigLabelKey: testLabelKey,
		KubeClient:             h.kube,
		MultiprojectClient:     h.mp,
		GatewayClient:          gatewayClient,
		Informers:              informers,
		Claims:                 tenanttest.Claims(h.t, informers),
		EventRecorder:          h.events,
		Condition:              h.conditions,
		Workers:                h.workers,
	}, h.syncs.observe)
	if err != nil {
		h.t.Fatal(err)
	}
	h.ctrl = ctrl
	ctx, cancel := context.WithCancel(h.ctx)
	kubeFactory.Start(ctx.Done())
	mpFactory.Start(ctx.Done())
	if gatewayFactory != nil {
		gatewayFactory.Start(ctx.Done())
	}
	h.stop, h.done = cancel, make(chan struct{})
	go func() {
		defer close(h.done)
		ctrl.Run(ctx)
	}()
	h.t.Cleanup(func() {
		h.shutdown()
		kubeFactory.Shutdown()
		mpFactory.Shutdown()
		if gatewayFactory != nil {
			gatewayFactory.Shutdown()
		}
	})
	h.waitFor("the controller to report Running", func() bool {
		c, ok := h.conditions.Last()
		return ok && c.Status == metav1.ConditionTrue && c.Reason == "Running"
	})
}

func (h *harness) shutdown() {
	if h.stop == nil {
		return
	}
	h.stop()
	<-h.done
	h.stop = nil
}

func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	err := wait.PollUntilContextTimeout(h.ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		h.t.Fatalf("waiting for %s: %v", what, err)
	}
}

func (h *harness) resources() map[string]*tunnelv1alpha1.PangolinResource {
	h.t.Helper()
	list, err := h.mp.TunnelV1alpha1().PangolinResources(testNamespace).List(h.ctx, metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string]*tunnelv1alpha1.PangolinResource{}
	for i := range list.Items {
		out[hostOf(&list.Items[i])] = &list.Items[i]
	}
	return out
}

func (h *harness) waitHosts(hosts ...string) map[string]*tunnelv1alpha1.PangolinResource {
	h.t.Helper()
	var got map[string]*tunnelv1alpha1.PangolinResource
	h.waitFor(fmt.Sprintf("PangolinResources for %v", hosts), func() bool {
		got = h.resources()
		if len(got) != len(hosts) {
			return false
		}
		for _, host := range hosts {
			if got[host] == nil {
				return false
			}
		}
		return true
	})
	return got
}

// writes counts the mutating PangolinResource requests sent so far.
func (h *harness) writes() int {
	n := 0
	for _, a := range h.mp.Actions() {
		if a.GetResource().Resource == "pangolinresources" && (a.GetVerb() == "create" || a.GetVerb() == "update" || a.GetVerb() == "delete" || a.GetVerb() == "patch") {
			n++
		}
	}
	return n
}

// updateIngress changes the Ingress as a user would; the fake clientset keeps resourceVersions unchanged, so the
// helper bumps it as the API server does.
func (h *harness) updateIngress(change func(*networkingv1.Ingress)) {
	h.t.Helper()
	ing, err := h.kube.NetworkingV1().Ingresses(testNamespace).Get(h.ctx, "web", metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	change(ing)
	ing.ResourceVersion = bump(ing.ResourceVersion)
	if _, err := h.kube.NetworkingV1().Ingresses(testNamespace).Update(h.ctx, ing, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// syncCounter counts successful syncs per key.
type syncCounter struct {
	mu sync.Mutex
	ok map[string]int
}

func (s *syncCounter) observe(key string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ok == nil {
		s.ok = map[string]int{}
	}
	if err == nil {
		s.ok[key]++
	}
}

func (s *syncCounter) successes(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ok[key]
}

func bump(rv string) string {
	var n int
	_, _ = fmt.Sscan(rv, &n)
	return fmt.Sprint(n + 1)
}

func TestSeedIngressGetsOneResourcePerHost(t *testing.T) {
	h := newHarness(t, nil, []runtime.Object{seedIngress(), seedService()}, tunnel(testTunnelNS, "main"))
	got := h.waitHosts("app.example.com", "api.example.com", "admin.example.com")
	h.waitFor("three Created events", func() bool { return h.events.Count(corev1.EventTypeNormal, ReasonCreated) == 3 })
	if app := got["app.example.com"]; app.Spec.Targets[0].Port != 80 || app.Spec.Targets[1].Port != 8080 {
		t.Errorf("named ports not resolved: %+v", app.Spec.Targets)
	}

	// A restart (fresh caches) over a converged cluster writes nothing.
	h.shutdown()
	before := h.writes()
	synced := h.syncs.successes("demo/web")
	h.start(nil)
	h.waitFor("the Ingress to be synced again", func() bool { return h.syncs.successes("demo/web") > synced })
	if h.writes() != before {
		t.Errorf("a converged restart sent %d writes", h.writes()-before)
	}
}

func TestHostRemovedDeletesItsResource(t *testing.T) {
	h := newHarness(t, nil, []runtime.Object{seedIngress(), seedService()}, tunnel(testTunnelNS, "main"))
	h.waitHosts("app.example.com", "api.example.com", "admin.example.com")
	h.updateIngress(func(ing *networkingv1.Ingress) { ing.Spec.Rules = ing.Spec.Rules[:2] })
	h.waitHosts("app.example.com", "api.example.com")
	h.waitFor("a Deleted event", func() bool { return h.events.Count(corev1.EventTypeNormal, ReasonDeleted) == 1 })
}

func TestSpecChangeUpdatesAndDriftIsRepaired(t *testing.T) {
	h := newHarness(t, nil, []runtime.Object{seedIngress(), seedService()}, tunnel(testTunnelNS, "main"))
	h.waitHosts("app.example.com", "api.example.com", "admin.example.com")
	h.updateIngress(func(ing *networkingv1.Ingress) { ing.Annotations = map[string]string{AnnotationSSO: "true"} })
	h.waitFor("three Updated events", func() bool { return h.events.Count(corev1.EventTypeNormal, ReasonUpdated) == 3 })
	for host, r := range h.resources() {
		if !r.Spec.HTTPConfig.SSO {
			t.Errorf("%s: sso not set", host)
		}
	}

	// Someone edits a resource: the controller puts it back.
	r := h.resources()["admin.example.com"]
	r.Spec.Targets[0].Port = 9999
	r.Generation++
	if _, err := h.mp.TunnelV1alpha1().PangolinResources(testNamespace).Update(h.ctx, r, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the edit to be reverted", func() bool {
		return h.resources()["admin.example.com"].Spec.Targets[0].Port == 80
	})
}

func TestUnmanagedIngressLosesItsResources(t *testing.T) {
	for name, change := range map[string]func(*networkingv1.Ingress){
		"class changed": func(ing *networkingv1.Ingress) { ing.Spec.IngressClassName = ptr.To("nginx") },
		"opted out":     func(ing *networkingv1.Ingress) { ing.Annotations = map[string]string{AnnotationEnabled: "false"} },
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, nil, []runtime.Object{seedIngress(), seedService()}, tunnel(testTunnelNS, "main"))
			h.waitHosts("app.example.com", "api.example.com", "admin.example.com")
			h.updateIngress(change)
			h.waitHosts()
			h.waitFor("three Deleted events", func() bool { return h.events.Count(corev1.EventTypeNormal, ReasonDeleted) == 3 })
		})
	}
}

func TestTunnelCreatedLate(t *testing.T) {
	ing := seedIngress()
	ing.Spec.IngressClassName = ptr.To("pangolin-internal")
	// A tunnel of the same name in another namespace does not count.
	h := newHarness(t, nil, []runtime.Object{ing, seedService()}, tunnel("elsewhere", "internal-tunnel"))
	h.waitFor("a TunnelNotFound warning", func() bool { return h.events.Count(corev1.EventTypeWarning, ReasonTunnelNotFound) == 1 })
	if n := len(h.resources()); n != 0 {
		t.Fatalf("%d resources without a tunnel", n)
	}
	if _, err := h.mp.TunnelV1alpha1().PangolinTunnels(testTunnelNS).Create(h.ctx, tunnel(testTunnelNS, "internal-tunnel"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := h.waitHosts("app.example.com", "api.example.com", "admin.example.com")
	if ref := got["app.example.com"].Spec.TunnelRef; ref.Name != "internal-tunnel" || ref.Namespace != testTunnelNS {
		t.Errorf("tunnelRef = %+v", ref)
	}
}

func TestServiceCreatedLate(t *testing.T) {
	h := newHarness(t, nil, []runtime.Object{seedIngress()}, tunnel(testTunnelNS, "main"))
	// api.example.com uses port numbers only; the other hosts wait for the Service's named ports.
	h.waitHosts("api.example.com")
	h.waitFor("ServiceNotFound warnings", func() bool { return h.events.Count(corev1.EventTypeWarning, ReasonServiceNotFound) >= 2 })
	if _, err := h.kube.CoreV1().Services(testNamespace).Create(h.ctx, seedService(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitHosts("app.example.com", "api.example.com", "admin.example.com")
}

func TestResourceNotControlledIsLeftAlone(t *testing.T) {
	foreign := &tunnelv1alpha1.PangolinResource{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace,
		Name: ResourceName(testNamespace, "web", "admin.example.com")}, Spec: tunnelv1alpha1.PangolinResourceSpec{Name: "hand-made"}}
	h := newHarness(t, nil, []runtime.Object{seedIngress(), seedService()}, tunnel(testTunnelNS, "main"), foreign)
	h.waitFor("a ResourceConflict warning", func() bool { return h.events.Count(corev1.EventTypeWarning, ReasonResourceConflict) >= 1 })
	h.waitFor("the two other hosts", func() bool { return h.events.Count(corev1.EventTypeNormal, ReasonCreated) == 2 })
	got, err := h.mp.TunnelV1alpha1().PangolinResources(testNamespace).Get(h.ctx, foreign.Name, metav1.GetOptions{})
	if err != nil || got.Spec.Name != "hand-made" {
		t.Errorf("the foreign resource was changed: %+v, %v", got, err)
	}
}

func TestNoRulesAndNoTunnelConfigured(t *testing.T) {
	ing := seedIngress()
	ing.Spec.Rules = nil
	noDefault := testConfig()
	noDefault.DefaultTunnel = ""
	other := seedIngress()
	other.Name, other.UID = "other", "uid-2"
	h := newHarness(t, noDefault, []runtime.Object{ing, other, seedService()}, tunnel(testTunnelNS, "main"))
	h.waitFor("TunnelResolutionFailed warnings", func() bool {
		return h.events.Count(corev1.EventTypeWarning, ReasonTunnelResolutionFailed) == 2
	})
	h.updateIngress(func(ing *networkingv1.Ingress) { ing.Annotations = map[string]string{AnnotationTunnelName: "main"} })
	h.waitFor("a NoRules warning", func() bool { return h.events.Count(corev1.EventTypeWarning, ReasonNoRules) == 1 })
}

// TestPersistingWarningIsRecordedOnce: a problem that persists across syncs is one Warning; once fixed and back, it
// is one more.
func TestPersistingWarningIsRecordedOnce(t *testing.T) {
	ing := seedIngress()
	ing.Annotations = map[string]string{AnnotationSSO: "maybe"}
	h := newHarness(t, nil, []runtime.Object{ing, seedService()}, tunnel(testTunnelNS, "main"))
	warnings := func() int { return h.events.Count(corev1.EventTypeWarning, ReasonInvalidAnnotation) }
	// Nothing else enqueues the invalid Ingress: no resource is written, the Service and tunnel do not change.
	h.waitFor("the first sync", func() bool { return h.syncs.successes("demo/web") == 1 })
	resync := func(change func(*networkingv1.Ingress)) {
		t.Helper()
		before := h.syncs.successes("demo/web")
		h.updateIngress(change)
		h.waitFor("another sync", func() bool { return h.syncs.successes("demo/web") > before })
	}

	resync(func(ing *networkingv1.Ingress) { ing.Labels = map[string]string{"touched": "yes"} })
	if n := warnings(); n != 1 {
		t.Fatalf("%d InvalidAnnotation warnings after two syncs, want 1", n)
	}

	h.updateIngress(func(ing *networkingv1.Ingress) { delete(ing.Annotations, AnnotationSSO) })
	h.waitHosts("app.example.com", "api.example.com", "admin.example.com")
	h.updateIngress(func(ing *networkingv1.Ingress) { ing.Annotations[AnnotationSSO] = "maybe" })
	h.waitFor("the warning again", func() bool { return warnings() == 2 })
	resync(func(ing *networkingv1.Ingress) { ing.Labels = map[string]string{"touched": "again"} })
	if n := warnings(); n != 2 {
		t.Errorf("%d InvalidAnnotation warnings, want 2", n)
	}
}

func TestCreateFailureIsRetriedAndReported(t *testing.T) {
	h := newHarness(t, nil, nil, tunnel(testTunnelNS, "main"))
	failures := 2
	var mu sync.Mutex
	h.mp.PrependReactor("create", "pangolinresources", func(clienttesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if failures == 0 {
			return false, nil, nil
		}
		failures--
		return true, nil, apierrors.NewInternalError(fmt.Errorf("etcd is having a bad day"))
	})
	ing := seedIngress()
	ing.Spec.Rules = ing.Spec.Rules[1:2]
	if _, err := h.kube.NetworkingV1().Ingresses(testNamespace).Create(h.ctx, ing, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitHosts("api.example.com")
}

func TestRunStopsCleanly(t *testing.T) {
	h := newHarness(t, nil, []runtime.Object{seedIngress(), seedService()}, tunnel(testTunnelNS, "main"))
	h.waitHosts("app.example.com", "api.example.com", "admin.example.com")
	h.shutdown()
	// A shut-down queue drops what is added to it.
	h.ctrl.workers.Add("demo/late")
	if n := h.ctrl.workers.Len(); n != 0 {
		t.Errorf("the queue is not shut down after Run returned: it holds %d keys", n)
	}
}
