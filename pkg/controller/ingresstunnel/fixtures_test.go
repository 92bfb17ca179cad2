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
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	tunnelv1alpha1 "github.com/multiproject/api/pangolin/tunnel/v1alpha1"
)

const (
	testTenant    = "tenant-a"
	testLabelKey  = mpv1alpha1.DefaultProviderConfigLabelKey
	testNamespace = "demo"
	testTunnelNS  = "pangolin-system"
)

func testConfig() *mpv1alpha1.PangolinConfig {
	return &mpv1alpha1.PangolinConfig{
		TunnelNamespace:      testTunnelNS,
		DefaultTunnel:        "main",
		TunnelsByClassSuffix: map[string]mpv1alpha1.TunnelName{"internal": "internal-tunnel"},
	}
}

func path(p string, pathType networkingv1.PathType, service string, port networkingv1.ServiceBackendPort) networkingv1.HTTPIngressPath {
	return networkingv1.HTTPIngressPath{Path: p, PathType: &pathType, Backend: networkingv1.IngressBackend{
		Service: &networkingv1.IngressServiceBackend{Name: service, Port: port}}}
}

func rule(host string, paths ...networkingv1.HTTPIngressPath) networkingv1.IngressRule {
	return networkingv1.IngressRule{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}}}
}

func named(name string) networkingv1.ServiceBackendPort {
	return networkingv1.ServiceBackendPort{Name: name}
}
func number(n int32) networkingv1.ServiceBackendPort {
	return networkingv1.ServiceBackendPort{Number: n}
}

// seedIngress is the seed's three-host example: app.example.com (/, /api), api.example.com (/v1, /v2) and
// admin.example.com (/), backed by one Service with named ports.
func seedIngress() *networkingv1.Ingress {
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "web", UID: types.UID("ingress-uid-1")},
		Spec: networkingv1.IngressSpec{
			IngressClassName: ptr.To("pangolin"),
			Rules: []networkingv1.IngressRule{
				rule("app.example.com",
					path("/", networkingv1.PathTypePrefix, "web", named("http")),
					path("/api", networkingv1.PathTypePrefix, "web", named("api"))),
				rule("api.example.com",
					path("/v1", networkingv1.PathTypePrefix, "web", number(8080)),
					path("/v2", networkingv1.PathTypeExact, "web", number(8080))),
				rule("admin.example.com",
					path("/", networkingv1.PathTypeImplementationSpecific, "web", named("http"))),
			},
		},
	}
}

func seedService() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "web"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Name: "http", Port: 80},
			{Name: "api", Port: 8080},
		}},
	}
}

func tunnel(namespace, name string) *tunnelv1alpha1.PangolinTunnel {
	return &tunnelv1alpha1.PangolinTunnel{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       tunnelv1alpha1.PangolinTunnelSpec{OrganizationRef: tunnelv1alpha1.OrganizationReference{Name: "org"}},
	}
}
