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
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
	"github.com/multiproject/multiproject-controller-manager/pkg/tenancy"
)

// TestNamespaceEditorCannotActAsAnotherTenant: one manager, tenants A and B. Acting as an editor of A's namespace
// only (the built-in edit ClusterRole bound there), a user labels a neg Service with ready endpoints and a Pangolin
// Ingress for B. Neither grants B anything: no Translation of B, no NEG in B's GCP project, no PangolinResource of
// B or through B's tunnels. Both are A's, exactly like any other object of A's namespace (A converges with them),
// and each carries a TenantLabelIgnored Warning saying why. B, meanwhile, converges with its own objects only.
func TestNamespaceEditorCannotActAsAnotherTenant(t *testing.T) {
	resetLease(t)
	gce := startFakeGCE(t)
	a := newWorkload(t, gce)
	b := newWorkload(t, gce)
	le := leaderElection{leaseDuration: 15 * time.Second, renewDeadline: 10 * time.Second, retryPeriod: time.Second}
	m := startManager(t, "a", managerKubeconfig(t), gce.Endpoint(), le)
	waitLeader(t, m.identity(), 2*time.Minute)

	editor := editorOf(t, a.appNS)
	ctx := a.ctx
	claimsB := map[string]string{labelKey: b.tenant}

	// The Service, as the editor. Its EndpointSlice is the EndpointSlice controller's to write (editors may not),
	// which copies the Service's labels onto it: the admin writes it here, on A's Nodes.
	const name = "claims-b"
	_, err := editor.CoreV1().Services(a.appNS).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: a.appNS, Name: name, Labels: claimsB,
			Annotations: map[string]string{negapi.AnnotationKey: `{"exposed_ports":{"80":{}}}`}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("the namespace editor creating a Service: %v", err)
	}
	eps := a.endpoints(1, 0, 2)
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: a.appNS, Name: name + "-http",
			Labels: map[string]string{discoveryv1.LabelServiceName: name, labelKey: b.tenant}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for _, ep := range eps {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{ep.ip}, NodeName: ptr.To(ep.node),
			Zone: ptr.To(zones[ep.zone]), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	if _, err := a.kube.DiscoveryV1().EndpointSlices(a.appNS).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The Ingress, as the editor.
	ing := pangolinIngress(a.appNS, name, "claims-b.example.com")
	ing.Labels = claimsB
	if _, err := editor.NetworkingV1().Ingresses(a.appNS).Create(ctx, ing, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the namespace editor creating an Ingress: %v", err)
	}

	// What each tenant must end up with: A has both (its namespace's), B only objects of its own namespace.
	a.mu.Lock()
	a.services[name] = eps
	a.ingresses[name] = sets.New("claims-b.example.com")
	a.mu.Unlock()
	b.setService("own", b.endpoints(2, 0, 1))
	b.setIngress("own", "own.b.example.com")

	oa := a.waitConverged("tenant A, with the objects labeled for B in its namespace")
	b.waitConverged("tenant B, with only its own objects")

	// Exact for each tenant's own namespace and project (waitConverged); now what B could have got elsewhere.
	for _, tr := range oa.translations {
		if tr.Labels[labelKey] != a.tenant {
			t.Errorf("Translation %s/%s is labeled for %q, want A (%s)", tr.Namespace, tr.Name, tr.Labels[labelKey], a.tenant)
		}
	}
	for _, r := range oa.resources {
		if r.Labels[labelKey] != a.tenant || r.Spec.TunnelRef == nil || r.Spec.TunnelRef.Namespace != a.tunnelNS {
			t.Errorf("PangolinResource %s/%s: tenant label %q, tunnelRef %+v; want A's (%s, tunnels in %s)",
				r.Namespace, r.Name, r.Labels[labelKey], r.Spec.TunnelRef, a.tenant, a.tunnelNS)
		}
	}
	bSelector := metav1.ListOptions{LabelSelector: labelKey + "=" + b.tenant}
	trs, err := a.mp.MultiprojectV1alpha1().Translations(metav1.NamespaceAll).List(ctx, bSelector)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range trs.Items {
		if tr.Namespace != b.appNS {
			t.Errorf("Translation %s/%s is B's, outside B's namespace", tr.Namespace, tr.Name)
		}
	}
	resources, err := a.mp.TunnelV1alpha1().PangolinResources(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resources.Items {
		if (r.Labels[labelKey] == b.tenant || (r.Spec.TunnelRef != nil && r.Spec.TunnelRef.Namespace == b.tunnelNS)) && r.Namespace != b.appNS {
			t.Errorf("PangolinResource %s/%s publishes through B (label %q, tunnelRef %+v) from outside B's namespace",
				r.Namespace, r.Name, r.Labels[labelKey], r.Spec.TunnelRef)
		}
	}

	// And the user is told why.
	why := "is ignored: namespace " + a.appNS + " belongs to tenant " + a.tenant
	waitEvent(ctx, t, "Service", a.appNS, name, tenancy.ReasonTenantLabelIgnored, labelKey+"="+b.tenant, why)
	waitEvent(ctx, t, "Ingress", a.appNS, name, tenancy.ReasonTenantLabelIgnored, labelKey+"="+b.tenant, why)
}

// editorOf returns a client for a new ServiceAccount of namespace that holds the built-in edit ClusterRole in that
// namespace and nothing else (unlike admission_test.go's namespaceEditor, which may also write Namespaces and
// Nodes), once RBAC lets it create Services there.
func editorOf(t *testing.T, namespace string) kubernetes.Interface {
	t.Helper()
	ctx := t.Context()
	admin := controlPlane.AdminClient()
	aggregateEdit(t)
	const name = "editor"
	if _, err := admin.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg, err := controlPlane.ServiceAccountConfig(ctx, namespace, name)
	if err != nil {
		t.Fatal(err)
	}
	editor, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The RBAC authorizer learns of the binding from its informers.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		review, err := editor.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: namespace, Verb: "create", Resource: "services"}}}, metav1.CreateOptions{})
		if err != nil {
			return false, nil
		}
		return review.Status.Allowed, nil
	})
	if err != nil {
		t.Fatalf("ServiceAccount %s/%s may not create Services in its namespace: %v", namespace, name, err)
	}
	// Only there: it is a namespace editor, not more.
	if _, err := editor.CoreV1().Services(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the namespace editor listing Services in %s: %v, want Forbidden", metav1.NamespaceDefault, err)
	}
	return editor
}

// aggregateEdit gives the built-in edit ClusterRole the rules it has in a real cluster. The API server creates it
// with an aggregationRule and no rules; kube-controller-manager's clusterrole-aggregation controller, which the test
// control plane does not run, fills them in from the ClusterRoles it selects (view among them, itself aggregated).
// This does the same, once.
func aggregateEdit(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	roles := controlPlane.AdminClient().RbacV1().ClusterRoles()
	var rulesOf func(role *rbacv1.ClusterRole, seen sets.Set[string]) []rbacv1.PolicyRule
	rulesOf = func(role *rbacv1.ClusterRole, seen sets.Set[string]) []rbacv1.PolicyRule {
		if role.AggregationRule == nil || seen.Has(role.Name) {
			return role.Rules
		}
		seen.Insert(role.Name)
		var rules []rbacv1.PolicyRule
		for _, s := range role.AggregationRule.ClusterRoleSelectors {
			selector, err := metav1.LabelSelectorAsSelector(&s)
			if err != nil {
				t.Fatal(err)
			}
			selected, err := roles.List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
			if err != nil {
				t.Fatal(err)
			}
			for i := range selected.Items {
				if selected.Items[i].Name != role.Name {
					rules = append(rules, rulesOf(&selected.Items[i], seen)...)
				}
			}
		}
		return rules
	}
	edit, err := roles.Get(ctx, "edit", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(edit.Rules) > 0 {
		return
	}
	edit.Rules = rulesOf(edit, sets.New[string]())
	if len(edit.Rules) == 0 {
		t.Fatal("the edit ClusterRole aggregates no rules")
	}
	if _, err := roles.Update(ctx, edit, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
