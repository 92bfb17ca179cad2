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
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclientset "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	tunnelv1alpha1 "github.com/multiproject/api/pangolin/tunnel/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/ingresstunnel"
)

// TestHTTPRoutesPublishLikeIngresses walks Gateway API through the built manager, with the standard CRDs of
// test/fixtures/gateway-api installed and a GatewayClass of the ingress-tunnel controller. Tenant a has a Gateway of
// that class (listener *.<a's zone>); tenant b has none.
//   - An HTTPRoute on a's Gateway publishes its host (one PangolinResource, controlled by the route, through a's
//     tunnel) and reports Accepted and ResolvedRefs; the Gateway reports Accepted and Programmed.
//   - An Ingress and a later HTTPRoute asking for one host: one publisher, the Ingress, which claimed it first; the
//     route's Accepted message names it.
//   - A route to a Service of another namespace of the tenant: ResolvedRefs False, RefNotPermitted, and nothing
//     published, until a ReferenceGrant in that namespace allows it.
//   - A route with a header match: Accepted False, UnsupportedValue, nothing published.
//   - Tenant b's route naming a's Gateway: Accepted False, NotAllowedByListeners, nothing published.
//
// A watch of every PangolinResource fails the test if two ever published the shared host at once.
func TestHTTPRoutesPublishLikeIngresses(t *testing.T) {
	resetLease(t)
	ctx := t.Context()
	if _, err := controlPlane.ApplyManifestDir(ctx, "test/fixtures/gateway-api"); err != nil {
		t.Fatal(err)
	}
	gw, err := gatewayclientset.NewForConfig(controlPlane.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	gce := startFakeGCE(t)
	a, b := newWorkload(t, gce), newWorkload(t, gce)
	zone := a.tenant + ".example.com"
	host := func(name string) string { return name + "." + zone }

	class := "pangolin-" + a.tenant
	if _, err := gw.GatewayV1().GatewayClasses().Create(ctx, &gatewayv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: class},
		Spec:       gatewayv1.GatewayClassSpec{ControllerName: ingresstunnel.ControllerName},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = gw.GatewayV1().GatewayClasses().Delete(context.Background(), class, metav1.DeleteOptions{})
	})
	// The class's "pangolin-<suffix>" maps to no tunnel of a's: a's default tunnel serves it, as for an Ingress.
	if _, err := gw.GatewayV1().Gateways(a.appNS).Create(ctx, &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: a.appNS, Name: "public"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: gatewayv1.ObjectName(class), Listeners: []gatewayv1.Listener{{
			Name: "web", Port: 80, Protocol: gatewayv1.HTTPProtocolType, Hostname: ptr.To(gatewayv1.Hostname("*." + zone)),
		}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	counter := countPublishers(t, a.mp, host("shared"))

	le := leaderElection{leaseDuration: 15 * time.Second, renewDeadline: 10 * time.Second, retryPeriod: time.Second}
	m := startManager(t, "a", managerKubeconfig(t), gce.Endpoint(), le)
	// Right after the CRDs are installed, the API server's admission may not map HTTPRoute yet (its RESTMapper is
	// refreshed every 30 s or so) and refuses a PangolinResource whose owner reference blocks the route's deletion;
	// the manager retries until it does (docs/ingress-tunnel.md). That refusal is no RBAC rule's.
	m.allowForbiddenMessage("cannot set blockOwnerDeletion in this case because cannot find RESTMapping")
	waitLeader(t, m.identity(), 2*time.Minute)
	parent := gatewayv1.ParentReference{Namespace: ptr.To(gatewayv1.Namespace(a.appNS)), Name: "public"}

	// A route publishes its host and says so.
	createRoute(t, gw, a.appNS, "app", parent, host("app"), backendTo("", "backend"))
	waitRouteCondition(t, gw, a.appNS, "app", "Accepted", metav1.ConditionTrue, "Accepted", host("app"))
	waitRouteCondition(t, gw, a.appNS, "app", "ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs")
	res := waitPublisher(t, a, host("app"), "HTTPRoute", "app")
	if res.Spec.TunnelRef == nil || res.Spec.TunnelRef.Namespace != a.tunnelNS || res.Spec.TunnelRef.Name != tunnelName {
		t.Errorf("the route's PangolinResource uses tunnel %+v, want %s/%s", res.Spec.TunnelRef, a.tunnelNS, tunnelName)
	}
	waitGateway(t, gw, a.appNS, "public")

	// An Ingress and a later route asking for one host: the Ingress, first, holds it.
	a.setIngress("web", host("shared"))
	waitPublisher(t, a, host("shared"), "Ingress", "web")
	createRoute(t, gw, a.appNS, "shared", parent, host("shared"), backendTo("", "backend"))
	waitRouteCondition(t, gw, a.appNS, "shared", "Accepted", metav1.ConditionTrue, "Accepted",
		"Host "+host("shared")+" is already published by Ingress "+a.appNS+"/web")
	waitEvent(ctx, t, "HTTPRoute", a.appNS, "shared", ingresstunnel.ReasonHostConflict, host("shared"))
	waitPublisher(t, a, host("shared"), "Ingress", "web")

	// A Service of another namespace of the tenant: refused until a ReferenceGrant there allows it.
	backendNS := controlPlane.CreateNamespace(t)
	a.patchNamespaceLabels(backendNS, map[string]*string{labelKey: &a.tenant})
	if _, err := a.kube.CoreV1().Services(backendNS).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: backendNS, Name: "api"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createRoute(t, gw, a.appNS, "cross", parent, host("cross"), backendTo(backendNS, "api"))
	waitRouteCondition(t, gw, a.appNS, "cross", "ResolvedRefs", metav1.ConditionFalse, "RefNotPermitted", backendNS)
	if got := routePublishers(t, a, host("cross")); len(got) != 0 {
		t.Errorf("PangolinResources %v publish %s, whose backend no ReferenceGrant allows", got, host("cross"))
	}
	if _, err := gw.GatewayV1().ReferenceGrants(backendNS).Create(ctx, &gatewayv1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: backendNS, Name: "routes-of-" + a.appNS},
		Spec: gatewayv1.ReferenceGrantSpec{
			From: []gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: gatewayv1.Namespace(a.appNS)}},
			To:   []gatewayv1.ReferenceGrantTo{{Group: "", Kind: "Service"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRouteCondition(t, gw, a.appNS, "cross", "ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs")
	res = waitPublisher(t, a, host("cross"), "HTTPRoute", "cross")
	if want := "api." + backendNS + ".svc.cluster.local"; len(res.Spec.Targets) != 1 || res.Spec.Targets[0].IP != want {
		t.Errorf("the cross-namespace route's targets %+v, want %s", res.Spec.Targets, want)
	}

	// What Pangolin cannot express is refused with a condition.
	canary := routeSpec(a.appNS, "canary", parent, host("canary"), backendTo("", "backend"))
	canary.Spec.Rules[0].Matches = []gatewayv1.HTTPRouteMatch{{
		Path:    &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To("/")},
		Headers: []gatewayv1.HTTPHeaderMatch{{Name: "X-Canary", Value: "true"}},
	}}
	if _, err := gw.GatewayV1().HTTPRoutes(a.appNS).Create(ctx, canary, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRouteCondition(t, gw, a.appNS, "canary", "Accepted", metav1.ConditionFalse, "UnsupportedValue", "header matches")

	// Tenant b's route cannot attach to tenant a's Gateway.
	createRoute(t, gw, b.appNS, "intruder", parent, host("intruder"), backendTo("", "backend"))
	waitRouteCondition(t, gw, b.appNS, "intruder", "Accepted", metav1.ConditionFalse, "NotAllowedByListeners", "tenant "+b.tenant)

	for _, h := range []string{host("canary"), host("intruder")} {
		if got := routePublishers(t, a, h); len(got) != 0 {
			t.Errorf("PangolinResources %v publish %s, which no route may publish", got, h)
		}
	}
	if n := counter.stop(); n != 1 {
		t.Errorf("%d PangolinResources published %s at once, want 1", n, host("shared"))
	}
}

func backendTo(namespace, service string) gatewayv1.HTTPBackendRef {
	ref := gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
		Name: gatewayv1.ObjectName(service), Port: ptr.To(gatewayv1.PortNumber(80))}}}
	if namespace != "" {
		ref.Namespace = ptr.To(gatewayv1.Namespace(namespace))
	}
	return ref
}

// routeSpec is an HTTPRoute on parent for host, with one rule to backend.
func routeSpec(namespace, name string, parent gatewayv1.ParentReference, host string, backend gatewayv1.HTTPBackendRef) *gatewayv1.HTTPRoute {
	return &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{parent}},
			Hostnames:       []gatewayv1.Hostname{gatewayv1.Hostname(host)},
			Rules:           []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{backend}}},
		},
	}
}

func createRoute(t *testing.T, gw gatewayclientset.Interface, namespace, name string, parent gatewayv1.ParentReference, host string,
	backend gatewayv1.HTTPBackendRef) {
	t.Helper()
	if _, err := gw.GatewayV1().HTTPRoutes(namespace).Create(t.Context(), routeSpec(namespace, name, parent, host, backend), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitRouteCondition waits until the route's status entry of the ingress-tunnel controller has the condition, with
// a message containing each of contains.
func waitRouteCondition(t *testing.T, gw gatewayclientset.Interface, namespace, name, conditionType string, status metav1.ConditionStatus,
	reason string, contains ...string) {
	t.Helper()
	seen := "no status entry of " + string(ingresstunnel.ControllerName)
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, convergeTimeout, true, func(ctx context.Context) (bool, error) {
		route, err := gw.GatewayV1().HTTPRoutes(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range route.Status.Parents {
			if p.ControllerName != ingresstunnel.ControllerName {
				continue
			}
			c := meta.FindStatusCondition(p.Conditions, conditionType)
			if c == nil {
				continue
			}
			seen = fmt.Sprintf("%s %s %s: %s (generation %d of %d)", c.Type, c.Status, c.Reason, c.Message, c.ObservedGeneration, route.Generation)
			ok := c.Status == status && c.Reason == reason && c.ObservedGeneration == route.Generation
			for _, s := range contains {
				ok = ok && strings.Contains(c.Message, s)
			}
			return ok, nil
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("HTTPRoute %s/%s: no %s=%s %s mentioning %q within %s; last seen: %s", namespace, name, conditionType, status, reason,
			contains, convergeTimeout, seen)
	}
}

// waitGateway waits until the Gateway is Accepted and Programmed and its listener too.
func waitGateway(t *testing.T, gw gatewayclientset.Interface, namespace, name string) {
	t.Helper()
	var seen string
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, convergeTimeout, true, func(ctx context.Context) (bool, error) {
		g, err := gw.GatewayV1().Gateways(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		seen = fmt.Sprintf("%+v", g.Status)
		return meta.IsStatusConditionTrue(g.Status.Conditions, "Accepted") && meta.IsStatusConditionTrue(g.Status.Conditions, "Programmed") &&
			len(g.Status.Listeners) == 1 && meta.IsStatusConditionTrue(g.Status.Listeners[0].Conditions, "Programmed") &&
			g.Status.Listeners[0].AttachedRoutes >= 1, nil
	})
	if err != nil {
		t.Fatalf("Gateway %s/%s is not Accepted and Programmed within %s: %s", namespace, name, convergeTimeout, seen)
	}
}

// routePublishers lists the PangolinResources of the tenant's app namespace that publish host.
func routePublishers(t *testing.T, w *workload, host string) []*tunnelv1alpha1.PangolinResource {
	t.Helper()
	list, err := w.mp.TunnelV1alpha1().PangolinResources(w.appNS).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []*tunnelv1alpha1.PangolinResource
	for i := range list.Items {
		r := &list.Items[i]
		if c := r.Spec.HTTPConfig; c != nil && c.Subdomain+"."+c.DomainName == host && r.DeletionTimestamp == nil {
			out = append(out, r)
		}
	}
	return out
}

// waitPublisher waits until exactly one PangolinResource publishes host, controlled by the object kind/name, and
// returns it.
func waitPublisher(t *testing.T, w *workload, host, kind, name string) *tunnelv1alpha1.PangolinResource {
	t.Helper()
	var got []*tunnelv1alpha1.PangolinResource
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, convergeTimeout, true, func(context.Context) (bool, error) {
		got = routePublishers(t, w, host)
		if len(got) != 1 {
			return false, nil
		}
		ref := metav1.GetControllerOf(got[0])
		return ref != nil && ref.Kind == kind && ref.Name == name, nil
	})
	if err != nil {
		var owners []string
		for _, r := range got {
			owners = append(owners, fmt.Sprintf("%s (%+v)", r.Name, metav1.GetControllerOf(r)))
		}
		t.Fatalf("%s is not published once by %s %s within %s: %v", host, kind, name, convergeTimeout, owners)
	}
	return got[0]
}
