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
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	tunnelv1alpha1 "github.com/multiproject/api/pangolin/tunnel/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/ingresstunnel"
)

// setResourceStatus plays the Pangolin operator: it writes the status of the PangolinResource of an Ingress's host
// through the status subresource, with the admin client.
func (e *env) setResourceStatus(namespace, ingress, host string, change func(*tunnelv1alpha1.PangolinResourceStatus)) {
	e.t.Helper()
	client := e.admin.TunnelV1alpha1().PangolinResources(namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		res, err := client.Get(e.ctx, ingresstunnel.ResourceName(namespace, ingress, host), metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(&res.Status)
		_, err = client.UpdateStatus(e.ctx, res, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		e.t.Fatalf("writing the status of the PangolinResource of %s: %v", host, err)
	}
}

// operatorReady is what the pangolin-operator writes once it has published a resource on domain.
func operatorReady(domain string) func(*tunnelv1alpha1.PangolinResourceStatus) {
	return func(s *tunnelv1alpha1.PangolinResourceStatus) {
		s.ResourceID, s.BindingMode = "id-"+domain, "Created"
		s.FullDomain, s.URL, s.Status = domain, "https://"+domain, tunnelv1alpha1.ResourceStatusReady
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue,
			Reason: "ReconcileSuccess", Message: "Resource and target configured successfully"})
	}
}

// operatorStatus is what the pangolin-operator writes for any other state, with the Ready condition False.
func operatorStatus(status tunnelv1alpha1.ResourceStatusValue, message string) func(*tunnelv1alpha1.PangolinResourceStatus) {
	return func(s *tunnelv1alpha1.PangolinResourceStatus) {
		s.Status = status
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse,
			Reason: "ReconcileError", Message: message})
	}
}

func hostEntries(hosts ...string) []networkingv1.IngressLoadBalancerIngress {
	var out []networkingv1.IngressLoadBalancerIngress
	for _, h := range hosts {
		out = append(out, networkingv1.IngressLoadBalancerIngress{Hostname: h})
	}
	return out
}

// waitIngressStatus waits until the Ingress's status.loadBalancer.ingress is exactly want, in order.
func (e *env) waitIngressStatus(namespace, name string, want ...networkingv1.IngressLoadBalancerIngress) {
	e.t.Helper()
	var got []networkingv1.IngressLoadBalancerIngress
	err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		ing, err := e.adminKube.NetworkingV1().Ingresses(namespace).Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got = ing.Status.LoadBalancer.Ingress
		return slices.EqualFunc(got, want, func(a, b networkingv1.IngressLoadBalancerIngress) bool {
			return a.IP == b.IP && a.Hostname == b.Hostname && len(a.Ports) == len(b.Ports)
		}), nil
	})
	if err != nil {
		e.t.Fatalf("Ingress %s/%s: status.loadBalancer.ingress is %+v, want %+v", namespace, name, got, want)
	}
}

// warnings returns the messages of the Warning Events of reason on an Ingress, with their repeat counts.
func (e *env) warnings(namespace, ingress, reason string) map[string]int {
	e.t.Helper()
	list, err := e.adminKube.CoreV1().Events(namespace).List(e.ctx, metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.kind": "Ingress", "involvedObject.name": ingress, "reason": reason, "type": corev1.EventTypeWarning}.String()})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]int{}
	for _, ev := range list.Items {
		out[ev.Message] += int(max(ev.Count, 1))
	}
	return out
}

// TestIngressStatusListsPublishedHosts: the test plays the Pangolin operator and writes the PangolinResources'
// status. The Ingress's status.loadBalancer lists the hosts the operator reports published (not the one still being
// created), beside another controller's entry; the operator's rewrites of the same values cost no write, neither
// does a restart of the controller; an operator error is one TunnelResourceError Warning; handed to another
// ingress controller, the Ingress keeps only the other controller's entry. The controller runs as the manager's
// ServiceAccount, so this also checks manifests/rbac's ingresses/status rule.
func TestIngressStatusListsPublishedHosts(t *testing.T) {
	e := newEnv(t, 50, 100)
	tunnelNS := controlPlane.CreateNamespace(t)
	tenantA := e.tenantName("a")
	appNS := e.tenantNamespace(tenantA)
	e.createTunnel(tunnelNS, "main")
	// One worker syncs Ingresses in the order they were enqueued: the barrier below relies on it.
	a := e.startTenant(tenantA, &mpv1alpha1.PangolinConfig{TunnelNamespace: tunnelNS, DefaultTunnel: "main"}, 1)

	ing := e.createSeed(appNS, "web", "pangolin")
	foreign := networkingv1.IngressLoadBalancerIngress{IP: "192.0.2.10"}
	ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{foreign}
	if _, err := e.adminKube.NetworkingV1().Ingresses(appNS).UpdateStatus(e.ctx, ing, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The barrier's Ingress, with a host of its own.
	const otherHost = "other-status.example.com"
	_, other := seedObjects(appNS, "other", "pangolin")
	other.Spec.Rules = other.Spec.Rules[1:2]
	other.Spec.Rules[0].Host = otherHost
	if _, err := e.adminKube.NetworkingV1().Ingresses(appNS).Create(e.ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitHosts(appNS, 30*time.Second, append(slices.Clone(seedHosts), otherHost)...)

	e.setResourceStatus(appNS, "web", "admin.example.com", operatorStatus(tunnelv1alpha1.ResourceStatusWaiting, "Waiting for tunnel to be ready"))
	e.setResourceStatus(appNS, "web", "app.example.com", operatorReady("app.example.com"))
	e.setResourceStatus(appNS, "web", "api.example.com", operatorReady("api.example.com"))
	e.waitIngressStatus(appNS, "web", append([]networkingv1.IngressLoadBalancerIngress{foreign}, hostEntries("api.example.com", "app.example.com")...)...)
	e.setResourceStatus(appNS, "web", "admin.example.com", operatorReady("admin.example.com"))
	all := append([]networkingv1.IngressLoadBalancerIngress{foreign}, hostEntries("admin.example.com", "api.example.com", "app.example.com")...)
	e.waitIngressStatus(appNS, "web", all...)
	if n := len(e.warnings(appNS, "web", ingresstunnel.ReasonTunnelResourceError)); n != 0 {
		t.Errorf("%d TunnelResourceError warnings while the operator only waited", n)
	}

	// A barrier: whatever either informer delivered before is synced before the other Ingress shows the effect of
	// a status change of its resource (the PangolinResource informer), then of a change of itself (the Ingress
	// informer).
	rounds := 0
	barrier := func() {
		t.Helper()
		rounds++
		domain := fmt.Sprintf("round%d.%s", rounds, otherHost)
		e.setResourceStatus(appNS, "other", otherHost, operatorReady(domain))
		e.waitIngressStatus(appNS, "other", hostEntries(domain)...)
		e.updateIngress(appNS, "other", func(ing *networkingv1.Ingress) {
			ing.Annotations = map[string]string{ingresstunnel.AnnotationSSO: fmt.Sprintf("round%d", rounds)}
		})
		e.waitEvent(appNS, "other", corev1.EventTypeWarning, ingresstunnel.ReasonInvalidAnnotation, rounds)
	}
	statusPath := "/apis/networking.k8s.io/v1/namespaces/" + appNS + "/ingresses/web/status"
	writes := func() int { return e.requests.count("PUT", statusPath) + e.requests.count("PATCH", statusPath) }
	barrier()

	// The operator rewrites the same values, and values the Ingress does not read: no write.
	before := writes()
	for _, host := range seedHosts {
		e.setResourceStatus(appNS, "web", host, operatorReady(host))
		e.setResourceStatus(appNS, "web", host, func(s *tunnelv1alpha1.PangolinResourceStatus) {
			s.TargetIDs, s.TargetCount, s.ObservedGeneration = []string{"1", "2"}, 2, s.ObservedGeneration+1
		})
	}
	barrier()
	if n := writes() - before; n != 0 {
		t.Errorf("the operator's rewrites of a converged Ingress's resources caused %d status writes", n)
	}

	// A restart of the controller writes nothing either.
	a.stop()
	syncs := a.syncs()
	a.tenant.Start()
	e.waitFor("the restarted controller to sync both Ingresses", 30*time.Second, func() (bool, error) { return a.syncs() >= syncs+2, nil })
	barrier()
	if n := writes() - before; n != 0 {
		t.Errorf("a restart over a converged Ingress caused %d status writes", n)
	}
	e.waitIngressStatus(appNS, "web", all...)

	// An operator error is one Warning, however often the Ingress is synced.
	const failure = "failed to create Pangolin resource: 409 Conflict"
	e.setResourceStatus(appNS, "web", "api.example.com", operatorStatus(tunnelv1alpha1.ResourceStatusError, failure))
	e.waitEvent(appNS, "web", corev1.EventTypeWarning, ingresstunnel.ReasonTunnelResourceError, 1)
	e.updateIngress(appNS, "web", func(ing *networkingv1.Ingress) { ing.Labels = map[string]string{"touched": "yes"} })
	barrier()
	got := e.warnings(appNS, "web", ingresstunnel.ReasonTunnelResourceError)
	if len(got) != 1 {
		t.Fatalf("TunnelResourceError warnings %v, want one", got)
	}
	for msg, n := range got {
		if n != 1 || !strings.Contains(msg, "api.example.com") || !strings.HasSuffix(msg, "status Error: "+failure) {
			t.Errorf("TunnelResourceError %q recorded %d times, want once, naming the host and the operator's message", msg, n)
		}
	}

	// Handed to another ingress controller: only the other controller's entry stays.
	e.updateIngress(appNS, "web", func(ing *networkingv1.Ingress) { ing.Spec.IngressClassName = ptr.To("nginx") })
	e.waitIngressStatus(appNS, "web", foreign)
}
