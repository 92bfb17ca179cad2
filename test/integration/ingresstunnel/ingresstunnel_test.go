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

package ingresstunnel

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	tunnelv1alpha1 "github.com/multiproject/api/pangolin/tunnel/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/ingresstunnel"
)

var seedHosts = []string{"app.example.com", "api.example.com", "admin.example.com"}

// gcTimeout covers the garbage collector's discovery of the fixture CRDs (it looks every 30 s).
const gcTimeout = 2 * time.Minute

// TestSeedIngressLifecycle: the seed's three-host Ingress gets three valid, owned PangolinResources; a touch of a
// converged Ingress writes nothing; a host removed deletes its resource; the Ingress deleted has the garbage
// collector delete the rest.
func TestSeedIngressLifecycle(t *testing.T) {
	e := newEnv(t, 50, 100)
	tunnelNS := controlPlane.CreateNamespace(t)
	tenantA := e.tenantName("a")
	appNS := e.tenantNamespace(tenantA)
	e.createTunnel(tunnelNS, "main")
	a := e.startTenant(tenantA, &mpv1alpha1.PangolinConfig{TunnelNamespace: tunnelNS, DefaultTunnel: "main"}, 2)

	ing := e.createSeed(appNS, "web", "pangolin")
	got := e.waitHosts(appNS, 30*time.Second, seedHosts...)
	for host, r := range got {
		if r.Name != ingresstunnel.ResourceName(appNS, "web", host) {
			t.Errorf("%s: name %s", host, r.Name)
		}
		if ref := metav1.GetControllerOf(r); ref == nil || ref.UID != ing.UID || ref.Kind != "Ingress" {
			t.Errorf("%s: controller reference %+v", host, ref)
		}
		wantLabels := map[string]string{ingresstunnel.LabelIngressUID: string(ing.UID), ingresstunnel.LabelIngressName: "web",
			ingresstunnel.LabelIngressNamespace: appNS, labelKey: tenantA}
		for k, v := range wantLabels {
			if r.Labels[k] != v {
				t.Errorf("%s: label %s=%q, want %q", host, k, r.Labels[k], v)
			}
		}
		if ref := r.Spec.TunnelRef; ref == nil || ref.Name != "main" || ref.Namespace != tunnelNS {
			t.Errorf("%s: tunnelRef %+v", host, ref)
		}
		if hc := r.Spec.HTTPConfig; hc.DomainName != "example.com" || hc.Subdomain != strings.TrimSuffix(host, ".example.com") {
			t.Errorf("%s: httpConfig %+v", host, hc)
		}
	}
	if targets := got["app.example.com"].Spec.Targets; len(targets) != 2 || targets[0].Port != 80 || targets[1].Port != 8080 {
		t.Errorf("app.example.com targets (named ports): %+v", targets)
	}
	e.waitEvent(appNS, "web", corev1.EventTypeNormal, ingresstunnel.ReasonCreated, 3)

	// A converged Ingress: a change that does not matter makes a sync and no write.
	versions := map[string]string{}
	for host, r := range got {
		versions[host] = r.ResourceVersion
	}
	before := a.syncs()
	e.updateIngress(appNS, "web", func(ing *networkingv1.Ingress) { ing.Labels = map[string]string{"touched": "yes"} })
	e.waitFor("a sync of the touched Ingress", 30*time.Second, func() (bool, error) { return a.syncs() > before, nil })
	for host, r := range e.resourcesByHost(appNS) {
		if r.ResourceVersion != versions[host] {
			t.Errorf("%s was written although nothing changed", host)
		}
	}

	// A host removed.
	e.updateIngress(appNS, "web", func(ing *networkingv1.Ingress) { ing.Spec.Rules = ing.Spec.Rules[:2] })
	e.waitHosts(appNS, 30*time.Second, "app.example.com", "api.example.com")
	e.waitEvent(appNS, "web", corev1.EventTypeNormal, ingresstunnel.ReasonDeleted, 1)

	// The Ingress deleted: the garbage collector deletes what it owned.
	if err := e.adminKube.NetworkingV1().Ingresses(appNS).Delete(e.ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitHosts(appNS, gcTimeout)
}

// TestClassChangedToAnotherController: an Ingress handed to another ingress controller loses its resources.
func TestClassChangedToAnotherController(t *testing.T) {
	e := newEnv(t, 50, 100)
	tunnelNS := controlPlane.CreateNamespace(t)
	tenantA := e.tenantName("a")
	appNS := e.tenantNamespace(tenantA)
	e.createTunnel(tunnelNS, "internal-tunnel")
	e.startTenant(tenantA, &mpv1alpha1.PangolinConfig{TunnelNamespace: tunnelNS,
		TunnelsByClassSuffix: map[string]mpv1alpha1.TunnelName{"internal": "internal-tunnel"}}, 2)

	e.createSeed(appNS, "web", "pangolin-internal")
	got := e.waitHosts(appNS, 30*time.Second, seedHosts...)
	if ref := got["api.example.com"].Spec.TunnelRef; ref.Name != "internal-tunnel" {
		t.Errorf("class suffix mapping not used: tunnelRef %+v", ref)
	}
	e.updateIngress(appNS, "web", func(ing *networkingv1.Ingress) { ing.Spec.IngressClassName = ptr.To("nginx") })
	e.waitHosts(appNS, 30*time.Second)
	e.waitEvent(appNS, "web", corev1.EventTypeNormal, ingresstunnel.ReasonDeleted, 3)
}

// TestTunnelCreatedLate: an Ingress whose tunnel does not exist gets a TunnelNotFound warning and is exposed as soon
// as the tunnel is created. A tunnel of that name in another namespace does not count.
func TestTunnelCreatedLate(t *testing.T) {
	e := newEnv(t, 50, 100)
	tunnelNS := controlPlane.CreateNamespace(t)
	otherNS := controlPlane.CreateNamespace(t)
	tenantA := e.tenantName("a")
	appNS := e.tenantNamespace(tenantA)
	e.createTunnel(otherNS, "main")
	e.startTenant(tenantA, &mpv1alpha1.PangolinConfig{TunnelNamespace: tunnelNS, DefaultTunnel: "main"}, 2)

	e.createSeed(appNS, "web", "pangolin")
	e.waitEvent(appNS, "web", corev1.EventTypeWarning, ingresstunnel.ReasonTunnelNotFound, 1)
	if n := len(e.resourcesByHost(appNS)); n != 0 {
		t.Fatalf("%d PangolinResources without a tunnel", n)
	}
	e.createTunnel(tunnelNS, "main")
	e.waitHosts(appNS, 30*time.Second, seedHosts...)
}

// TestEveryWrittenResourceIsValid runs an Ingress with the edge cases the controller must express (long names,
// the priority cap, exact paths, https backends, SSO, deep subdomains under a multi-label public suffix) and checks that the API server, with the operator's schema,
// accepted every write: one resource per valid host and no WriteFailed Event. Hosts Pangolin cannot serve are
// InvalidHost warnings, not rejected writes.
func TestEveryWrittenResourceIsValid(t *testing.T) {
	e := newEnv(t, 50, 100)
	tunnelNS := controlPlane.CreateNamespace(t)
	tenantA := e.tenantName("a")
	appNS := e.tenantNamespace(tenantA)
	e.createTunnel(tunnelNS, "main")
	e.startTenant(tenantA, &mpv1alpha1.PangolinConfig{TunnelNamespace: tunnelNS, DefaultTunnel: "main",
		SSODefault: true, BlockAccessDefault: true}, 2)

	svc, _ := seedObjects(appNS, "unused", "pangolin")
	if _, err := e.adminKube.CoreV1().Services(appNS).Create(e.ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	name := strings.Repeat("very-long-ingress-name-", 10) + "end" // 233 characters
	longPath := "/" + strings.Repeat("segment/", 40)
	backend := func(port networkingv1.ServiceBackendPort) networkingv1.IngressBackend {
		return networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "demo-app", Port: port}}
	}
	paths := []networkingv1.HTTPIngressPath{
		{Path: longPath, PathType: ptr.To(networkingv1.PathTypePrefix), Backend: backend(networkingv1.ServiceBackendPort{Name: "http"})},
		{Path: "/exact", PathType: ptr.To(networkingv1.PathTypeExact), Backend: backend(networkingv1.ServiceBackendPort{Number: 65535})},
		{Path: "/", PathType: ptr.To(networkingv1.PathTypeImplementationSpecific), Backend: backend(networkingv1.ServiceBackendPort{Name: "api"})},
	}
	var rules []networkingv1.IngressRule
	hosts := []string{"a.b.c.d.example.co.uk", strings.Repeat("x", 63) + ".example.com", "example.com", "*.example.com", "app.example.com"}
	for _, h := range hosts {
		rules = append(rules, networkingv1.IngressRule{Host: h, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}}})
	}
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: appNS, Name: name, Annotations: map[string]string{ingresstunnel.AnnotationBackendScheme: "https"}},
		Spec:       networkingv1.IngressSpec{IngressClassName: ptr.To("pangolin"), Rules: rules},
	}
	if _, err := e.adminKube.NetworkingV1().Ingresses(appNS).Create(e.ctx, ing, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	valid := []string{hosts[0], hosts[1], hosts[4]}
	got := e.waitHosts(appNS, 30*time.Second, valid...)
	e.waitEvent(appNS, name, corev1.EventTypeWarning, ingresstunnel.ReasonInvalidHost, 2)
	if n := e.eventCount(appNS, name, corev1.EventTypeWarning, ingresstunnel.ReasonWriteFailed); n > 0 {
		t.Errorf("%d writes were refused", n)
	}
	for host, r := range got {
		if len(r.Name) > 63 {
			t.Errorf("%s: name %q is longer than 63 characters", host, r.Name)
		}
		if r.Spec.Targets[0].Priority != 1000 || r.Spec.Targets[0].Method != tunnelv1alpha1.TargetMethodHTTPS {
			t.Errorf("%s: first target %+v", host, r.Spec.Targets[0])
		}
		if !r.Spec.HTTPConfig.SSO || !r.Spec.HTTPConfig.BlockAccess {
			t.Errorf("%s: tenant defaults not applied: %+v", host, r.Spec.HTTPConfig)
		}
	}
	if hc := got[hosts[0]].Spec.HTTPConfig; hc.Subdomain != "a.b.c.d" || hc.DomainName != "example.co.uk" {
		t.Errorf("%s: httpConfig %+v", hosts[0], hc)
	}
}

// TestFixtureRejectsWhatTheOperatorWould: the fixture CRD enforces the real pangolin-operator's validation, so a
// controller bug that the real operator's API server would reject fails here too.
func TestFixtureRejectsWhatTheOperatorWould(t *testing.T) {
	e := newEnv(t, 50, 100)
	ns := controlPlane.CreateNamespace(t)
	valid := func() *tunnelv1alpha1.PangolinResource {
		return &tunnelv1alpha1.PangolinResource{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"},
			Spec: tunnelv1alpha1.PangolinResourceSpec{
				TunnelRef:  &tunnelv1alpha1.TunnelReference{Name: "main", Namespace: "pangolin-system"},
				Name:       "probe",
				Protocol:   tunnelv1alpha1.ProtocolHTTP,
				HTTPConfig: &tunnelv1alpha1.HTTPConfig{Subdomain: "app", DomainName: "example.com"},
				Targets:    []tunnelv1alpha1.Target{{IP: "web.demo.svc.cluster.local", Port: 80, Method: "http", Path: "/", PathMatchType: "prefix", Priority: 110}},
				Enabled:    ptr.To(true),
			},
		}
	}
	create := func(r *tunnelv1alpha1.PangolinResource) error {
		_, err := e.admin.TunnelV1alpha1().PangolinResources(ns).Create(e.ctx, r, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	if err := create(valid()); err != nil {
		t.Fatalf("a valid PangolinResource was rejected: %v", err)
	}
	for what, change := range map[string]func(*tunnelv1alpha1.PangolinResource){
		"empty subdomain (apex host)":  func(r *tunnelv1alpha1.PangolinResource) { r.Spec.HTTPConfig.Subdomain = "" },
		"port 0 (unresolved name)":     func(r *tunnelv1alpha1.PangolinResource) { r.Spec.Targets[0].Port = 0 },
		"port 65536":                   func(r *tunnelv1alpha1.PangolinResource) { r.Spec.Targets[0].Port = 65536 },
		"priority 1001":                func(r *tunnelv1alpha1.PangolinResource) { r.Spec.Targets[0].Priority = 1001 },
		"method ftp":                   func(r *tunnelv1alpha1.PangolinResource) { r.Spec.Targets[0].Method = "ftp" },
		"path match glob":              func(r *tunnelv1alpha1.PangolinResource) { r.Spec.Targets[0].PathMatchType = "glob" },
		"proxyConfig without the port": func(r *tunnelv1alpha1.PangolinResource) { r.Spec.ProxyConfig = &tunnelv1alpha1.ProxyConfig{} },
	} {
		r := valid()
		change(r)
		if err := create(r); !apierrors.IsInvalid(err) {
			t.Errorf("%s: want Invalid, got %v", what, err)
		}
	}
}

// TestTwoTenants: each tenant's Ingresses use the tunnels of its own tunnel namespace, carry its label, and a
// tunnel of the other tenant is not found.
func TestTwoTenants(t *testing.T) {
	e := newEnv(t, 50, 100)
	tunnelsA, tunnelsB := controlPlane.CreateNamespace(t), controlPlane.CreateNamespace(t)
	tenantA, tenantB := e.tenantName("a"), e.tenantName("b")
	appA, appB := e.tenantNamespace(tenantA), e.tenantNamespace(tenantB)
	e.createTunnel(tunnelsA, "main")
	e.createTunnel(tunnelsB, "main")
	e.createTunnel(tunnelsA, "only-a")
	e.startTenant(tenantA, &mpv1alpha1.PangolinConfig{TunnelNamespace: tunnelsA, DefaultTunnel: "main"}, 2)
	e.startTenant(tenantB, &mpv1alpha1.PangolinConfig{TunnelNamespace: tunnelsB, DefaultTunnel: "main", SSODefault: true}, 2)

	e.createSeed(appA, "web", "pangolin")
	// A host is published once in the cluster (TestHostClaimedByTwoTenants): tenant b's Ingress has hosts of its own.
	svcB, ingB := seedObjects(appB, "web", "pangolin")
	var hostsB []string
	for i := range ingB.Spec.Rules {
		ingB.Spec.Rules[i].Host = "b-" + ingB.Spec.Rules[i].Host
		hostsB = append(hostsB, ingB.Spec.Rules[i].Host)
	}
	if _, err := e.adminKube.CoreV1().Services(appB).Create(e.ctx, svcB, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.adminKube.NetworkingV1().Ingresses(appB).Create(e.ctx, ingB, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ns, tenant, tunnels string
		hosts               []string
	}{{appA, tenantA, tunnelsA, seedHosts}, {appB, tenantB, tunnelsB, hostsB}} {
		for host, r := range e.waitHosts(tc.ns, 30*time.Second, tc.hosts...) {
			if r.Labels[labelKey] != tc.tenant || r.Spec.TunnelRef.Namespace != tc.tunnels {
				t.Errorf("%s %s: tenant label %q, tunnelRef %+v; want %s in %s", tc.ns, host, r.Labels[labelKey], r.Spec.TunnelRef, tc.tenant, tc.tunnels)
			}
			if r.Spec.HTTPConfig.SSO != (tc.tenant == tenantB) {
				t.Errorf("%s %s: sso %v does not follow its tenant's default", tc.ns, host, r.Spec.HTTPConfig.SSO)
			}
		}
	}

	// Tenant B cannot use tenant A's tunnel.
	e.updateIngress(appB, "web", func(ing *networkingv1.Ingress) {
		ing.Annotations = map[string]string{ingresstunnel.AnnotationTunnelName: "only-a"}
	})
	e.waitEvent(appB, "web", corev1.EventTypeWarning, ingresstunnel.ReasonTunnelNotFound, 1)
	for host, r := range e.resourcesByHost(appB) {
		if r.Spec.TunnelRef.Name != "main" {
			t.Errorf("%s: moved to another tenant's tunnel: %+v", host, r.Spec.TunnelRef)
		}
	}
}
