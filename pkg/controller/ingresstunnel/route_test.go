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
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"
	gatewaylisters "sigs.k8s.io/gateway-api/pkg/client/listers/apis/v1"

	tunnelv1alpha1 "github.com/multiproject/api/pangolin/tunnel/v1alpha1"
	mpfake "github.com/multiproject/client-go/clientset/versioned/fake"
	tunnellisters "github.com/multiproject/client-go/listers/tunnel/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/claims"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant/tenanttest"
)

// Namespaces of the route tests: demo and backend are the tenant's, other is tenant-b's.
const (
	backendNamespace = "backend"
	otherNamespace   = "other"
	testClass        = "pangolin"
)

func tenantNamespace(name, tenant string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{testLabelKey: tenant}}}
}

func gatewayClass(name string, controller gatewayv1.GatewayController) *gatewayv1.GatewayClass {
	return &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: gatewayv1.GatewayClassSpec{ControllerName: controller}}
}

// gateway is a Gateway of class with one HTTP listener "web" for hostname ("" for none).
func gateway(namespace, name, class, hostname string) *gatewayv1.Gateway {
	l := gatewayv1.Listener{Name: "web", Port: 80, Protocol: gatewayv1.HTTPProtocolType}
	if hostname != "" {
		l.Hostname = ptr.To(gatewayv1.Hostname(hostname))
	}
	return &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("gw-" + namespace + "-" + name)},
		Spec:       gatewayv1.GatewaySpec{GatewayClassName: gatewayv1.ObjectName(class), Listeners: []gatewayv1.Listener{l}},
	}
}

// httpRoute is a route of namespace/name on the Gateway parent (namespace/name), for hostnames, with one rule to
// Service web port 80 of its namespace at path prefix "/".
func httpRoute(namespace, name, parent string, hostnames ...string) *gatewayv1.HTTPRoute {
	parentNS, parentName, _ := cache.SplitMetaNamespaceKey(parent)
	ref := gatewayv1.ParentReference{Name: gatewayv1.ObjectName(parentName)}
	if parentNS != namespace {
		ref.Namespace = ptr.To(gatewayv1.Namespace(parentNS))
	}
	r := &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("route-" + namespace + "-" + name)},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{ref}},
			Rules: []gatewayv1.HTTPRouteRule{{
				Matches:     []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To("/")}}},
				BackendRefs: []gatewayv1.HTTPBackendRef{backendRef("", "web", 80)},
			}},
		},
	}
	for _, h := range hostnames {
		r.Spec.Hostnames = append(r.Spec.Hostnames, gatewayv1.Hostname(h))
	}
	return r
}

func backendRef(namespace, name string, port int32) gatewayv1.HTTPBackendRef {
	ref := gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
		Name: gatewayv1.ObjectName(name), Port: ptr.To(gatewayv1.PortNumber(port))}}}
	if namespace != "" {
		ref.Namespace = ptr.To(gatewayv1.Namespace(namespace))
	}
	return ref
}

func service(namespace, name string, port int32) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: port}}}}
}

// grant lets the HTTPRoutes of from use the Services of namespace.
func grant(namespace, from string) *gatewayv1.ReferenceGrant {
	return &gatewayv1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "routes-from-" + from},
		Spec: gatewayv1.ReferenceGrantSpec{
			From: []gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: routeKind, Namespace: gatewayv1.Namespace(from)}},
			To:   []gatewayv1.ReferenceGrantTo{{Group: "", Kind: "Service"}},
		},
	}
}

// judgeController is a Controller of testTenant that only reads, over indexers holding objs: the tenant's views hold
// what is in its namespaces (demo, backend), the shared GatewayClasses, Gateways and Namespaces everything.
func judgeController(t *testing.T, objs ...runtime.Object) *Controller {
	t.Helper()
	newIndexer := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	classes, gateways, allGateways, routes, grants, namespaces, services := newIndexer(), newIndexer(), newIndexer(), newIndexer(),
		newIndexer(), newIndexer(), newIndexer()
	objs = append(objs, tenantNamespace(testNamespace, testTenant), tenantNamespace(backendNamespace, testTenant),
		tenantNamespace(otherNamespace, "tenant-b"))
	for _, obj := range objs {
		m := obj.(metav1.Object)
		tenants := m.GetNamespace() == testNamespace || m.GetNamespace() == backendNamespace
		var add []cache.Indexer
		switch obj.(type) {
		case *gatewayv1.GatewayClass:
			add = []cache.Indexer{classes}
		case *gatewayv1.Gateway:
			add = []cache.Indexer{allGateways}
			if tenants {
				add = append(add, gateways)
			}
		case *gatewayv1.HTTPRoute:
			if tenants {
				add = []cache.Indexer{routes}
			}
		case *gatewayv1.ReferenceGrant:
			if tenants {
				add = []cache.Indexer{grants}
			}
		case *corev1.Service:
			if tenants {
				add = []cache.Indexer{services}
			}
		case *corev1.Namespace:
			add = []cache.Indexer{namespaces}
		default:
			t.Fatalf("unexpected %T", obj)
		}
		for _, idx := range add {
			if err := idx.Add(obj); err != nil {
				t.Fatal(err)
			}
		}
	}
	c := &Controller{tenant: testTenant, config: testConfig(), services: corelisters.NewServiceLister(services)}
	c.planner = &planner{tenant: testTenant, labelKey: testLabelKey, config: c.config}
	c.gateway = &gatewayAPI{
		classes:     gatewaylisters.NewGatewayClassLister(classes),
		gateways:    gatewaylisters.NewGatewayLister(gateways),
		allGateways: gatewaylisters.NewGatewayLister(allGateways),
		routes:      gatewaylisters.NewHTTPRouteLister(routes),
		grants:      gatewaylisters.NewReferenceGrantLister(grants),
		namespaces:  corelisters.NewNamespaceLister(namespaces),
		allRoutes:   gatewaylisters.NewHTTPRouteLister(routes),
	}
	return c
}

// parentSummary is what a test compares of one parentVerdict.
type parentSummary struct {
	Gateway string
	Status  bool
	Reason  gatewayv1.RouteConditionReason
	Hosts   []string
}

func summarize(v routeVerdict) []parentSummary {
	var out []parentSummary
	for _, p := range v.parents {
		out = append(out, parentSummary{Gateway: p.gateway, Status: p.status, Reason: p.reason, Hosts: p.hosts})
	}
	return out
}

func TestJudgeRoute(t *testing.T) {
	ours := gatewayClass(testClass, ControllerName)
	theirs := gatewayClass("istio", "istio.io/gateway-controller")
	gw := gateway(testNamespace, "public", testClass, "*.example.com")
	svc := service(testNamespace, "web", 80)
	accepted := func(hosts ...string) []parentSummary {
		return []parentSummary{{Gateway: "demo/public", Status: true, Reason: gatewayv1.RouteReasonAccepted, Hosts: hosts}}
	}
	refused := func(gateway string, reason gatewayv1.RouteConditionReason) []parentSummary {
		return []parentSummary{{Gateway: gateway, Reason: reason}}
	}
	for _, tc := range []struct {
		name    string
		route   *gatewayv1.HTTPRoute
		objects []runtime.Object
		parents []parentSummary
		// resolved is the ResolvedRefs reason.
		resolved gatewayv1.RouteConditionReason
	}{
		{
			name:     "hostnames intersected with the listener's",
			route:    httpRoute(testNamespace, "app", "demo/public", "app.example.com", "app.example.org"),
			objects:  []runtime.Object{ours, gw, svc},
			parents:  accepted("app.example.com"),
			resolved: gatewayv1.RouteReasonResolvedRefs,
		},
		{
			name:     "no hostname of the route matches the listener's",
			route:    httpRoute(testNamespace, "app", "demo/public", "app.example.org"),
			objects:  []runtime.Object{ours, gw, svc},
			parents:  refused("demo/public", gatewayv1.RouteReasonNoMatchingListenerHostname),
			resolved: gatewayv1.RouteReasonResolvedRefs,
		},
		{
			name:     "a wildcard hostname",
			route:    httpRoute(testNamespace, "app", "demo/public", "*.apps.example.com"),
			objects:  []runtime.Object{ours, gw, svc},
			parents:  refused("demo/public", gatewayv1.RouteReasonUnsupportedValue),
			resolved: gatewayv1.RouteReasonResolvedRefs,
		},
		{
			name: "a header match",
			route: func() *gatewayv1.HTTPRoute {
				r := httpRoute(testNamespace, "app", "demo/public", "app.example.com")
				r.Spec.Rules[0].Matches[0].Headers = []gatewayv1.HTTPHeaderMatch{{Name: "X-Canary", Value: "1"}}
				return r
			}(),
			objects:  []runtime.Object{ours, gw, svc},
			parents:  refused("demo/public", gatewayv1.RouteReasonUnsupportedValue),
			resolved: gatewayv1.RouteReasonResolvedRefs,
		},
		{
			name: "two weighted backends",
			route: func() *gatewayv1.HTTPRoute {
				r := httpRoute(testNamespace, "app", "demo/public", "app.example.com")
				r.Spec.Rules[0].BackendRefs = append(r.Spec.Rules[0].BackendRefs, backendRef("", "web-v2", 80))
				return r
			}(),
			objects:  []runtime.Object{ours, gw, svc},
			parents:  refused("demo/public", gatewayv1.RouteReasonUnsupportedValue),
			resolved: gatewayv1.RouteReasonResolvedRefs,
		},
		{
			name:     "a route of another namespace of the tenant, listener from Same",
			route:    httpRoute(backendNamespace, "app", "demo/public", "app.example.com"),
			objects:  []runtime.Object{ours, gw, service(backendNamespace, "web", 80)},
			parents:  refused("demo/public", gatewayv1.RouteReasonNotAllowedByListeners),
			resolved: gatewayv1.RouteReasonResolvedRefs,
		},
		{
			name:  "a route of another namespace of the tenant, listener from All",
			route: httpRoute(backendNamespace, "app", "demo/public", "app.example.com"),
			objects: []runtime.Object{ours, service(backendNamespace, "web", 80), func() *gatewayv1.Gateway {
				g := gw.DeepCopy()
				g.Spec.Listeners[0].AllowedRoutes = &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: ptr.To(gatewayv1.NamespacesFromAll)}}
				return g
			}()},
			parents:  accepted("app.example.com"),
			resolved: gatewayv1.RouteReasonResolvedRefs,
		},
		{
			name: "a sectionName no listener has",
			route: func() *gatewayv1.HTTPRoute {
				r := httpRoute(testNamespace, "app", "demo/public", "app.example.com")
				r.Spec.ParentRefs[0].SectionName = ptr.To(gatewayv1.SectionName("websecure"))
				return r
			}(),
			objects:  []runtime.Object{ours, gw, svc},
			parents:  refused("demo/public", gatewayv1.RouteReasonNoMatchingParent),
			resolved: gatewayv1.RouteReasonResolvedRefs,
		},
		{
			name:     "a Gateway of another implementation gets no entry",
			route:    httpRoute(testNamespace, "app", "demo/mesh", "app.example.com"),
			objects:  []runtime.Object{ours, theirs, gateway(testNamespace, "mesh", "istio", ""), svc},
			resolved: gatewayv1.RouteReasonResolvedRefs,
		},
		{
			name:     "a Gateway of another tenant",
			route:    httpRoute(testNamespace, "app", "other/public", "app.example.com"),
			objects:  []runtime.Object{ours, gateway(otherNamespace, "public", testClass, ""), svc},
			parents:  refused("other/public", gatewayv1.RouteReasonNotAllowedByListeners),
			resolved: gatewayv1.RouteReasonResolvedRefs,
		},
		{
			name:     "a Service that does not exist",
			route:    httpRoute(testNamespace, "app", "demo/public", "app.example.com"),
			objects:  []runtime.Object{ours, gw},
			parents:  accepted("app.example.com"),
			resolved: gatewayv1.RouteReasonBackendNotFound,
		},
		{
			name:     "a port the Service does not have",
			route:    httpRoute(testNamespace, "app", "demo/public", "app.example.com"),
			objects:  []runtime.Object{ours, gw, service(testNamespace, "web", 8080)},
			parents:  accepted("app.example.com"),
			resolved: gatewayv1.RouteReasonBackendNotFound,
		},
		{
			name: "a Service of another namespace of the tenant, no ReferenceGrant",
			route: func() *gatewayv1.HTTPRoute {
				r := httpRoute(testNamespace, "app", "demo/public", "app.example.com")
				r.Spec.Rules[0].BackendRefs[0] = backendRef(backendNamespace, "web", 80)
				return r
			}(),
			objects:  []runtime.Object{ours, gw, service(backendNamespace, "web", 80)},
			parents:  accepted("app.example.com"),
			resolved: gatewayv1.RouteReasonRefNotPermitted,
		},
		{
			name: "a Service of another namespace of the tenant, with a ReferenceGrant",
			route: func() *gatewayv1.HTTPRoute {
				r := httpRoute(testNamespace, "app", "demo/public", "app.example.com")
				r.Spec.Rules[0].BackendRefs[0] = backendRef(backendNamespace, "web", 80)
				return r
			}(),
			objects:  []runtime.Object{ours, gw, service(backendNamespace, "web", 80), grant(backendNamespace, testNamespace)},
			parents:  accepted("app.example.com"),
			resolved: gatewayv1.RouteReasonResolvedRefs,
		},
		{
			name: "a Service of another tenant, whatever its ReferenceGrant",
			route: func() *gatewayv1.HTTPRoute {
				r := httpRoute(testNamespace, "app", "demo/public", "app.example.com")
				r.Spec.Rules[0].BackendRefs[0] = backendRef(otherNamespace, "web", 80)
				return r
			}(),
			objects:  []runtime.Object{ours, gw, service(otherNamespace, "web", 80), grant(otherNamespace, testNamespace)},
			parents:  accepted("app.example.com"),
			resolved: gatewayv1.RouteReasonRefNotPermitted,
		},
		{
			name: "a backend that is not a Service",
			route: func() *gatewayv1.HTTPRoute {
				r := httpRoute(testNamespace, "app", "demo/public", "app.example.com")
				r.Spec.Rules[0].BackendRefs[0].Kind = ptr.To(gatewayv1.Kind("Bucket"))
				r.Spec.Rules[0].BackendRefs[0].Group = ptr.To(gatewayv1.Group("storage.example.com"))
				return r
			}(),
			objects:  []runtime.Object{ours, gw, svc},
			parents:  accepted("app.example.com"),
			resolved: gatewayv1.RouteReasonInvalidKind,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := judgeController(t, append(tc.objects, tc.route)...).judgeRoute(tc.route)
			if diff := cmp.Diff(tc.parents, summarize(v)); diff != "" {
				t.Errorf("parents (-want +got):\n%s", diff)
			}
			if v.reason != tc.resolved || v.resolved != (tc.resolved == gatewayv1.RouteReasonResolvedRefs) {
				t.Errorf("ResolvedRefs %v %s (%s), want reason %s", v.resolved, v.reason, v.message, tc.resolved)
			}
		})
	}
}

// TestRouteTargets shows the translation of a route's rules to a PangolinResource's targets: one per path match,
// exact or prefix, to the rule's Service port; a rule without matches serves "/".
func TestRouteTargets(t *testing.T) {
	r := httpRoute(testNamespace, "app", "demo/public", "app.example.com")
	r.Spec.Rules = append(r.Spec.Rules,
		gatewayv1.HTTPRouteRule{
			Matches: []gatewayv1.HTTPRouteMatch{
				{Path: &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchExact), Value: ptr.To("/healthz")}},
				{Path: &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To("/api")}},
			},
			BackendRefs: []gatewayv1.HTTPBackendRef{backendRef("", "api", 8080)},
		})
	// The Ingress annotations that are not about one host work on a route too.
	r.Annotations = map[string]string{AnnotationBackendScheme: "https", AnnotationSSO: "true"}
	c := judgeController(t, gatewayClass(testClass, ControllerName), gateway(testNamespace, "public", testClass, ""),
		service(testNamespace, "web", 80), service(testNamespace, "api", 8080), r)
	v := c.judgeRoute(r)
	want := []tunnelv1alpha1.Target{
		{IP: "web.demo.svc.cluster.local", Port: 80, Method: "https", Path: "/", PathMatchType: "prefix", Priority: priority("/")},
		{IP: "api.demo.svc.cluster.local", Port: 8080, Method: "https", Path: "/healthz", PathMatchType: "exact", Priority: priority("/healthz")},
		{IP: "api.demo.svc.cluster.local", Port: 8080, Method: "https", Path: "/api", PathMatchType: "prefix", Priority: priority("/api")},
	}
	if !v.settings.sso {
		t.Error("annotation sso=true not read from the route")
	}
	if diff := cmp.Diff(want, v.targets); diff != "" {
		t.Errorf("targets (-want +got):\n%s", diff)
	}
	res := c.routeResource(r, routeResourceName(r.Namespace, r.Name, "app.example.com"), "app.example.com", "main", "app", "example.com",
		v.settings, v.targets)
	if ref := metav1.GetControllerOf(res); ref == nil || ref.Kind != "HTTPRoute" || ref.APIVersion != "gateway.networking.k8s.io/v1" || ref.UID != r.UID {
		t.Errorf("controller reference %+v", ref)
	}
	if res.Name == ResourceName(r.Namespace, r.Name, "app.example.com") {
		t.Errorf("the route's resource is named %s, as an Ingress of the same name's would be", res.Name)
	}
	if got := hostOf(res); got != "app.example.com" {
		t.Errorf("hostOf = %q", got)
	}
	if h, ok := resourceHolding(res); !ok || h.Owner != r.UID || h.Holder != "HTTPRoute demo/app" {
		t.Errorf("holding %+v, %v", h, ok)
	}
}

func TestIntersectHostnames(t *testing.T) {
	for _, tc := range []struct {
		listener string
		route    []string
		want     []string
	}{
		{"", []string{"a.example.com"}, []string{"a.example.com"}},
		{"", nil, []string{"*"}},
		{"a.example.com", nil, []string{"a.example.com"}},
		{"a.example.com", []string{"a.example.com", "b.example.com"}, []string{"a.example.com"}},
		{"*.example.com", []string{"a.example.com", "x.y.example.com", "example.com"}, []string{"a.example.com", "x.y.example.com"}},
		{"a.example.com", []string{"*.example.com"}, []string{"a.example.com"}},
		{"*.example.com", []string{"*.apps.example.com"}, []string{"*.apps.example.com"}},
		{"*.apps.example.com", []string{"*.example.com"}, []string{"*.apps.example.com"}},
		{"A.Example.com", []string{"a.example.COM"}, []string{"a.example.com"}},
	} {
		var listener *gatewayv1.Hostname
		if tc.listener != "" {
			listener = ptr.To(gatewayv1.Hostname(tc.listener))
		}
		var route []gatewayv1.Hostname
		for _, h := range tc.route {
			route = append(route, gatewayv1.Hostname(h))
		}
		if diff := cmp.Diff(tc.want, intersectHostnames(listener, route)); diff != "" {
			t.Errorf("intersect(%q, %q) (-want +got):\n%s", tc.listener, tc.route, diff)
		}
	}
}

// TestRouteClaimKeys: a route claims under a key that carries its kind, an Ingress under its bare namespace/name,
// so the claim records of Ingresses are named and annotated as before.
func TestRouteClaimKeys(t *testing.T) {
	route := httpRoute(testNamespace, "web", "demo/public", "app.example.com")
	self := routeClaimant(route)
	if self.Key != "HTTPRoute/demo/web" {
		t.Errorf("route claimant key %q", self.Key)
	}
	if kind, key := claims.SplitKindKey(self.Key); kind != routeKind || key != "demo/web" {
		t.Errorf("SplitKindKey(%q) = %q, %q", self.Key, kind, key)
	}
	ing := claimantOf(seedIngress())
	if kind, key := claims.SplitKindKey(ing.Key); kind != "" || key != "demo/web" {
		t.Errorf("SplitKindKey(%q) = %q, %q", ing.Key, kind, key)
	}
}

// newGatewayHarness runs one controller with Gateway API served, over fake clientsets holding objs: each goes to
// the clientset of its API.
func newGatewayHarness(t *testing.T, objs ...runtime.Object) *harness {
	t.Helper()
	var kube, mp, gw []runtime.Object
	for _, obj := range objs {
		switch obj.(type) {
		case *tunnelv1alpha1.PangolinTunnel, *tunnelv1alpha1.PangolinResource:
			mp = append(mp, obj)
		case *gatewayv1.GatewayClass, *gatewayv1.Gateway, *gatewayv1.HTTPRoute, *gatewayv1.ReferenceGrant:
			gw = append(gw, obj)
		default:
			kube = append(kube, obj)
		}
	}
	_, ctx := ktesting.NewTestContext(t)
	h := &harness{t: t, ctx: ctx, kube: kubefake.NewClientset(kube...), mp: mpfake.NewClientset(mp...), gw: gatewayfake.NewSimpleClientset(), //nolint:staticcheck // see below
		events: &recorder{}, conditions: &tenanttest.Conditions{}, workers: 2}
	// Created through the typed client, on the plain object tracker: given to a fake clientset, a Gateway is filed
	// under the resource "gatewaies" (meta.UnsafeGuessKindToResource), where no Get finds it, and NewClientset's
	// field-managed tracker knows no resource "gateways" at all.
	for _, obj := range gw {
		var err error
		switch o := obj.(type) {
		case *gatewayv1.GatewayClass:
			_, err = h.gw.GatewayV1().GatewayClasses().Create(ctx, o, metav1.CreateOptions{})
		case *gatewayv1.Gateway:
			_, err = h.gw.GatewayV1().Gateways(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *gatewayv1.HTTPRoute:
			_, err = h.gw.GatewayV1().HTTPRoutes(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *gatewayv1.ReferenceGrant:
			_, err = h.gw.GatewayV1().ReferenceGrants(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	ingressStatusSubresource(h.kube)
	resourceOptimisticConcurrency(h.mp)
	h.start(nil)
	return h
}

func condition(conditions []metav1.Condition, conditionType string) metav1.Condition {
	if c := meta.FindStatusCondition(conditions, conditionType); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// TestHTTPRoutePublishesBesideIngresses: a route attached to one of the controller's Gateways publishes its hosts
// through the Gateway's tunnel, owned by the route; a host an older Ingress claims stays the Ingress's (one
// publisher per host), and the route's Accepted condition says so; the Gateway, its listener and its class report
// what Gateway API tools read.
func TestHTTPRoutePublishesBesideIngresses(t *testing.T) {
	older := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "legacy", UID: "ingress-legacy", CreationTimestamp: older},
		Spec: networkingv1.IngressSpec{IngressClassName: ptr.To("pangolin"),
			Rules: []networkingv1.IngressRule{rule("shared.example.com", path("/", networkingv1.PathTypePrefix, "web", number(80)))}},
	}
	route := httpRoute(testNamespace, "app", "demo/public", "app.example.com", "shared.example.com")
	route.CreationTimestamp = metav1.NewTime(older.Add(time.Minute))
	route.Generation = 1
	// Another implementation's entry, which the controller leaves alone.
	mesh := gatewayv1.RouteParentStatus{ParentRef: gatewayv1.ParentReference{Name: "mesh"}, ControllerName: "istio.io/gateway-controller",
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", LastTransitionTime: older}}}
	route.Status.Parents = []gatewayv1.RouteParentStatus{mesh}
	gw := gateway(testNamespace, "public", testClass, "")
	gw.Generation = 1
	h := newGatewayHarness(t, tenantNamespace(testNamespace, testTenant), service(testNamespace, "web", 80), ing,
		tunnel(testTunnelNS, "main"), gatewayClass(testClass, ControllerName), gw, route)

	got := h.waitHosts("app.example.com", "shared.example.com")
	list, err := h.mp.TunnelV1alpha1().PangolinResources(testNamespace).List(h.ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 2 {
		t.Fatalf("%d PangolinResources (%v), want one per host: %+v", len(list.Items), err, list.Items)
	}
	if ref := metav1.GetControllerOf(got["app.example.com"]); ref == nil || ref.Kind != routeKind || ref.UID != route.UID {
		t.Errorf("app.example.com: controller %+v, want the HTTPRoute", ref)
	}
	if ref := metav1.GetControllerOf(got["shared.example.com"]); ref == nil || ref.Kind != "Ingress" || ref.UID != ing.UID {
		t.Errorf("shared.example.com: controller %+v, want the older Ingress", ref)
	}
	if spec := got["app.example.com"].Spec; spec.TunnelRef.Name != "main" || len(spec.Targets) != 1 || spec.Targets[0].IP != "web.demo.svc.cluster.local" {
		t.Errorf("app.example.com: spec %+v", spec)
	}

	var parents []gatewayv1.RouteParentStatus
	h.waitFor("the route's status", func() bool {
		r, err := h.gw.GatewayV1().HTTPRoutes(testNamespace).Get(h.ctx, "app", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		parents = r.Status.Parents
		return len(parents) == 2 && strings.Contains(condition(parents[1].Conditions, "Accepted").Message, "Ingress demo/legacy")
	})
	if diff := cmp.Diff(mesh, parents[0]); diff != "" {
		t.Errorf("another implementation's entry changed (-want +got):\n%s", diff)
	}
	p := parents[1]
	if p.ControllerName != ControllerName || p.ParentRef.Name != "public" {
		t.Errorf("parent %+v", p)
	}
	if c := condition(p.Conditions, "Accepted"); c.Status != metav1.ConditionTrue || c.Reason != "Accepted" || c.ObservedGeneration != 1 {
		t.Errorf("Accepted %+v", c)
	}
	if c := condition(p.Conditions, "ResolvedRefs"); c.Status != metav1.ConditionTrue || c.Reason != "ResolvedRefs" {
		t.Errorf("ResolvedRefs %+v", c)
	}

	h.waitFor("the Gateway's status", func() bool {
		g, err := h.gw.GatewayV1().Gateways(testNamespace).Get(h.ctx, "public", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return condition(g.Status.Conditions, "Accepted").Status == metav1.ConditionTrue &&
			condition(g.Status.Conditions, "Programmed").Status == metav1.ConditionTrue &&
			len(g.Status.Listeners) == 1 && g.Status.Listeners[0].AttachedRoutes == 1 &&
			condition(g.Status.Listeners[0].Conditions, "Programmed").Status == metav1.ConditionTrue
	})
	class, err := h.gw.GatewayV1().GatewayClasses().Get(h.ctx, testClass, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := condition(class.Status.Conditions, "Accepted"); c.Status != metav1.ConditionTrue {
		t.Errorf("GatewayClass Accepted %+v", c)
	}
	if n := h.events.Count(corev1.EventTypeWarning, ReasonHostConflict); n == 0 {
		t.Errorf("no %s Warning; events: %v", ReasonHostConflict, h.events.With(""))
	}
}

// TestRouteThatLeftTheTenantIsWithdrawn: a route gone from the tenant's view that still exists (its namespace moved
// to another tenant) loses the PangolinResources the tenant made for it; one that is gone keeps them for the
// garbage collector.
func TestRouteThatLeftTheTenantIsWithdrawn(t *testing.T) {
	route := httpRoute(testNamespace, "app", "demo/public", "app.example.com")
	c := judgeController(t, route)
	res := c.routeResource(route, routeResourceName(route.Namespace, route.Name, "app.example.com"), "app.example.com", "main", "app",
		"example.com", hostSettings{}, nil)
	res.UID = "res-1"
	mp := mpfake.NewClientset(res)
	resources := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := resources.Add(res); err != nil {
		t.Fatal(err)
	}
	events := &recorder{}
	c.client, c.resources, c.recorder = mp, tunnellisters.NewPangolinResourceLister(resources), events
	_, ctx := ktesting.NewTestContext(t)

	if err := c.withdrawRoute(ctx, testNamespace, "gone"); err != nil {
		t.Fatal(err)
	}
	if err := c.withdrawRoute(ctx, testNamespace, "app"); err != nil {
		t.Fatal(err)
	}
	if _, err := mp.TunnelV1alpha1().PangolinResources(testNamespace).Get(ctx, res.Name, metav1.GetOptions{}); err == nil {
		t.Errorf("PangolinResource %s of a route that left the tenant is still there", res.Name)
	}
	if n := events.Count(corev1.EventTypeNormal, ReasonDeleted); n != 1 {
		t.Errorf("%d Deleted Events, want 1: %v", n, events.With(""))
	}
}

// TestDeletedReferenceGrantWithdrawsTheHost: a route to a Service of another namespace of the tenant publishes while
// a ReferenceGrant there allows it, and its host is withdrawn once the grant is deleted.
func TestDeletedReferenceGrantWithdrawsTheHost(t *testing.T) {
	route := httpRoute(testNamespace, "app", "demo/public", "app.example.com")
	route.Spec.Rules[0].BackendRefs[0] = backendRef(backendNamespace, "web", 80)
	h := newGatewayHarness(t, tenantNamespace(testNamespace, testTenant), tenantNamespace(backendNamespace, testTenant),
		service(backendNamespace, "web", 80), tunnel(testTunnelNS, "main"), gatewayClass(testClass, ControllerName),
		gateway(testNamespace, "public", testClass, ""), grant(backendNamespace, testNamespace), route)
	h.waitHosts("app.example.com")
	g := grant(backendNamespace, testNamespace)
	if err := h.gw.GatewayV1().ReferenceGrants(backendNamespace).Delete(h.ctx, g.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitHosts()
	h.waitFor("ResolvedRefs RefNotPermitted", func() bool {
		r, err := h.gw.GatewayV1().HTTPRoutes(testNamespace).Get(h.ctx, "app", metav1.GetOptions{})
		return err == nil && len(r.Status.Parents) == 1 && condition(r.Status.Parents[0].Conditions, "ResolvedRefs").Reason == "RefNotPermitted"
	})
}
