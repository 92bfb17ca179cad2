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

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	tunnelv1alpha1 "github.com/multiproject/api/pangolin/tunnel/v1alpha1"
)

func testPlanner(services ...*corev1.Service) *planner {
	return &planner{tenant: testTenant, labelKey: testLabelKey, config: testConfig(),
		service: func(namespace, name string) (*corev1.Service, error) {
			for _, s := range services {
				if s.Namespace == namespace && s.Name == name {
					return s, nil
				}
			}
			return nil, apierrors.NewNotFound(corev1.Resource("services"), name)
		}}
}

func reasons(p plan) []string {
	var out []string
	for _, pr := range p.problems {
		out = append(out, pr.Reason)
	}
	return out
}

func TestPlanSeedExample(t *testing.T) {
	ing := seedIngress()
	p := testPlanner(seedService()).plan(ing, "main", namesOf(ing.Namespace, ing.Name, nil))
	if len(p.problems) > 0 {
		t.Fatalf("problems: %+v", p.problems)
	}
	target := func(port int32, path string, match tunnelv1alpha1.PathMatchType) tunnelv1alpha1.Target {
		return tunnelv1alpha1.Target{IP: "web.demo.svc.cluster.local", Port: port, Method: tunnelv1alpha1.TargetMethodHTTP,
			Path: path, PathMatchType: match, Priority: priority(path)}
	}
	want := map[string]struct {
		subdomain string
		targets   []tunnelv1alpha1.Target
	}{
		"admin.example.com": {"admin", []tunnelv1alpha1.Target{target(80, "/", "prefix")}},
		"api.example.com":   {"api", []tunnelv1alpha1.Target{target(8080, "/v1", "prefix"), target(8080, "/v2", "exact")}},
		"app.example.com":   {"app", []tunnelv1alpha1.Target{target(80, "/", "prefix"), target(8080, "/api", "prefix")}},
	}
	if len(p.resources) != 3 {
		t.Fatalf("got %d resources, want 3", len(p.resources))
	}
	var hosts []string
	for _, r := range p.resources {
		host := hostOf(r)
		hosts = append(hosts, host)
		w, ok := want[host]
		if !ok {
			t.Fatalf("unexpected host %q", host)
		}
		if r.Name != ResourceName("demo", "web", host) || r.Namespace != "demo" {
			t.Errorf("%s: name %s/%s", host, r.Namespace, r.Name)
		}
		wantSpec := tunnelv1alpha1.PangolinResourceSpec{
			TunnelRef:  &tunnelv1alpha1.TunnelReference{Name: "main", Namespace: testTunnelNS},
			Name:       "demo/web/" + host,
			Protocol:   "http",
			HTTPConfig: &tunnelv1alpha1.HTTPConfig{Subdomain: w.subdomain, DomainName: "example.com"},
			Targets:    w.targets,
			Enabled:    ptr.To(true),
		}
		if diff := cmp.Diff(wantSpec, r.Spec); diff != "" {
			t.Errorf("%s: spec (-want +got):\n%s", host, diff)
		}
		wantLabels := map[string]string{LabelIngressUID: "ingress-uid-1", LabelIngressName: "web", LabelIngressNamespace: "demo", testLabelKey: testTenant}
		if diff := cmp.Diff(wantLabels, r.Labels); diff != "" {
			t.Errorf("%s: labels (-want +got):\n%s", host, diff)
		}
		ref := metav1.GetControllerOf(r)
		if ref == nil || ref.UID != ing.UID || ref.Kind != "Ingress" || ref.APIVersion != "networking.k8s.io/v1" || !ptr.Deref(ref.BlockOwnerDeletion, false) {
			t.Errorf("%s: controller reference %+v", host, ref)
		}
	}
	if diff := cmp.Diff([]string{"admin.example.com", "api.example.com", "app.example.com"}, hosts); diff != "" {
		t.Errorf("resources are not in host order: %s", diff)
	}
	if p.keep.Len() != 3 {
		t.Errorf("keep = %v", sets.List(p.keep))
	}
}

func TestPlanHosts(t *testing.T) {
	svc := seedService()
	for _, tc := range []struct {
		name        string
		rules       []networkingv1.IngressRule
		annotations map[string]string
		services    []*corev1.Service
		// hosts with a desired resource, "host=subdomain@domain".
		want     []string
		keepOnly []string
		reasons  []string
	}{
		{
			name:    "no rules",
			reasons: []string{ReasonNoRules},
		},
		{
			name: "duplicate hosts are merged and empty hosts skipped",
			rules: []networkingv1.IngressRule{
				rule("app.example.com", path("/a", networkingv1.PathTypePrefix, "web", number(80))),
				rule("", path("/", networkingv1.PathTypePrefix, "web", number(80))),
				rule("app.example.com", path("/b", networkingv1.PathTypePrefix, "web", number(80))),
			},
			want:    []string{"app.example.com=app@example.com"},
			reasons: []string{ReasonEmptyHost},
		},
		{
			name: "invalid hosts are skipped, the others go on",
			rules: []networkingv1.IngressRule{
				rule("example.com", path("/", networkingv1.PathTypePrefix, "web", number(80))),
				rule("*.example.com", path("/", networkingv1.PathTypePrefix, "web", number(80))),
				rule("10.1.2.3", path("/", networkingv1.PathTypePrefix, "web", number(80))),
				rule("ok.example.com", path("/", networkingv1.PathTypePrefix, "web", number(80))),
			},
			want:    []string{"ok.example.com=ok@example.com"},
			reasons: []string{ReasonInvalidHost, ReasonInvalidHost, ReasonInvalidHost},
		},
		{
			name:    "a host without Service backends is invalid",
			rules:   []networkingv1.IngressRule{{Host: "app.example.com"}},
			reasons: []string{ReasonInvalidHost},
		},
		{
			name: "a missing Service of a named port keeps the host as it is",
			rules: []networkingv1.IngressRule{
				rule("app.example.com", path("/", networkingv1.PathTypePrefix, "missing", named("http"))),
				rule("b.example.com", path("/", networkingv1.PathTypePrefix, "web", named("http"))),
			},
			services: []*corev1.Service{svc},
			want:     []string{"b.example.com=b@example.com"},
			keepOnly: []string{"app.example.com"},
			reasons:  []string{ReasonServiceNotFound},
		},
		{
			name: "an unknown port name skips the path",
			rules: []networkingv1.IngressRule{rule("app.example.com",
				path("/", networkingv1.PathTypePrefix, "web", named("nope")),
				path("/x", networkingv1.PathTypePrefix, "web", named("http")))},
			services: []*corev1.Service{svc},
			want:     []string{"app.example.com=app@example.com"},
			reasons:  []string{ReasonInvalidBackend},
		},
		{
			name: "domain-name applies to every host",
			rules: []networkingv1.IngressRule{
				rule("a.staging.example.com", path("/", networkingv1.PathTypePrefix, "web", number(80))),
				rule("b.c.staging.example.com", path("/", networkingv1.PathTypePrefix, "web", number(80))),
				rule("other.example.com", path("/", networkingv1.PathTypePrefix, "web", number(80))),
			},
			annotations: map[string]string{AnnotationDomainName: "staging.example.com"},
			want:        []string{"a.staging.example.com=a@staging.example.com", "b.c.staging.example.com=b.c@staging.example.com"},
			reasons:     []string{ReasonInvalidHost},
		},
		{
			name:        "subdomain on a single host, even an apex one",
			rules:       []networkingv1.IngressRule{rule("example.com", path("/", networkingv1.PathTypePrefix, "web", number(80)))},
			annotations: map[string]string{AnnotationSubdomain: "www"},
			want:        []string{"example.com=www@example.com"},
		},
		{
			name: "subdomain on several hosts changes nothing",
			rules: []networkingv1.IngressRule{
				rule("a.example.com", path("/", networkingv1.PathTypePrefix, "web", number(80))),
				rule("b.example.com", path("/", networkingv1.PathTypePrefix, "web", number(80))),
			},
			annotations: map[string]string{AnnotationSubdomain: "www"},
			keepOnly:    []string{"a.example.com", "b.example.com"},
			reasons:     []string{ReasonInvalidAnnotation},
		},
		{
			name:        "an invalid sso value changes nothing",
			rules:       []networkingv1.IngressRule{rule("a.example.com", path("/", networkingv1.PathTypePrefix, "web", number(80)))},
			annotations: map[string]string{AnnotationSSO: "yes"},
			keepOnly:    []string{"a.example.com"},
			reasons:     []string{ReasonInvalidAnnotation},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web", UID: "u", Annotations: tc.annotations},
				Spec: networkingv1.IngressSpec{IngressClassName: ptr.To("pangolin"), Rules: tc.rules}}
			p := testPlanner(tc.services...).plan(ing, "main", namesOf(ing.Namespace, ing.Name, nil))
			var got []string
			wantKeep := sets.New[string]()
			for _, r := range p.resources {
				got = append(got, hostOf(r)+"="+r.Spec.HTTPConfig.Subdomain+"@"+r.Spec.HTTPConfig.DomainName)
				wantKeep.Insert(r.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("resources (-want +got):\n%s", diff)
			}
			for _, h := range tc.keepOnly {
				wantKeep.Insert(ResourceName("demo", "web", h))
			}
			if !p.keep.Equal(wantKeep) {
				t.Errorf("keep = %v, want %v", sets.List(p.keep), sets.List(wantKeep))
			}
			if diff := cmp.Diff(tc.reasons, reasons(p)); diff != "" {
				t.Errorf("warnings (-want +got):\n%s\n%+v", diff, p.problems)
			}
		})
	}
}

func TestPlanSettings(t *testing.T) {
	ing := seedIngress()
	pl := testPlanner(seedService())
	pl.config.SSODefault = true
	p := pl.plan(ing, "main", namesOf(ing.Namespace, ing.Name, nil))
	if hc := p.resources[0].Spec.HTTPConfig; !hc.SSO || hc.BlockAccess {
		t.Errorf("tenant defaults not applied: %+v", hc)
	}
	ing.Annotations = map[string]string{AnnotationSSO: "false", AnnotationBlockAccess: "True", AnnotationBackendScheme: "https"}
	p = pl.plan(ing, "main", namesOf(ing.Namespace, ing.Name, nil))
	if hc := p.resources[0].Spec.HTTPConfig; hc.SSO || !hc.BlockAccess {
		t.Errorf("annotations not applied: %+v", hc)
	}
	if m := p.resources[0].Spec.Targets[0].Method; m != tunnelv1alpha1.TargetMethodHTTPS {
		t.Errorf("method = %q, want https", m)
	}
}

func TestPriority(t *testing.T) {
	if priority("/") != 110 || priority("/api") != 140 || priority(strings.Repeat("a", 200)) != 1000 {
		t.Errorf("priority: / %d, /api %d, long %d", priority("/"), priority("/api"), priority(strings.Repeat("a", 200)))
	}
}

func TestIsManaged(t *testing.T) {
	for _, tc := range []struct {
		class       *string
		annotations map[string]string
		want        bool
	}{
		{class: ptr.To("pangolin"), want: true},
		{class: ptr.To("pangolin-internal"), want: true},
		{class: ptr.To("pangolin-"), want: false},
		{class: ptr.To("pangolinx"), want: false},
		{class: ptr.To("nginx"), want: false},
		{class: nil, want: false},
		{class: nil, annotations: map[string]string{legacyIngressClassAnnotation: "pangolin"}, want: true},
		{class: ptr.To("pangolin"), annotations: map[string]string{AnnotationEnabled: "false"}, want: false},
		{class: ptr.To("nginx"), annotations: map[string]string{AnnotationEnabled: "true"}, want: true},
		{class: ptr.To("pangolin"), annotations: map[string]string{AnnotationEnabled: "maybe"}, want: true},
	} {
		ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations}, Spec: networkingv1.IngressSpec{IngressClassName: tc.class}}
		if got := isManaged(ing); got != tc.want {
			t.Errorf("isManaged(class %v, %v) = %v, want %v", ptr.Deref(tc.class, "<nil>"), tc.annotations, got, tc.want)
		}
	}
}

func TestResolveTunnel(t *testing.T) {
	config := testConfig()
	noDefault := testConfig()
	noDefault.DefaultTunnel = ""
	for _, tc := range []struct {
		class       string
		annotations map[string]string
		config      *mpv1alpha1.PangolinConfig
		want        string
		wantErr     bool
	}{
		{class: "pangolin", config: config, want: "main"},
		{class: "pangolin-internal", config: config, want: "internal-tunnel"},
		{class: "pangolin-edge", config: config, want: "main"}, // an unmapped suffix uses the default tunnel
		{class: "pangolin-edge", config: noDefault, wantErr: true},
		{class: "pangolin-internal", annotations: map[string]string{AnnotationTunnelName: "other"}, config: config, want: "other"},
		{class: "nginx", annotations: map[string]string{AnnotationEnabled: "true"}, config: config, want: "main"},
		{class: "pangolin", config: noDefault, wantErr: true},
		{class: "pangolin", annotations: map[string]string{AnnotationTunnelName: "Bad_Name"}, config: config, wantErr: true},
	} {
		ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations}, Spec: networkingv1.IngressSpec{IngressClassName: ptr.To(tc.class)}}
		got, err := resolveTunnel(ing, tc.config)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("resolveTunnel(%s, %v) = %q, %v; want %q (error %v)", tc.class, tc.annotations, got, err, tc.want, tc.wantErr)
		}
	}
}
