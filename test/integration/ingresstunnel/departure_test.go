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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/ingresstunnel"
)

// TestNamespaceLeavesItsTenant: the namespace of a published Ingress is relabeled from tenant a to tenant b, then
// unlabeled. Each time the tenant it leaves withdraws what it published (its PangolinResource is deleted, with a
// Deleted Event on the Ingress); the tenant it joins publishes it afresh through its own tunnel, and nobody publishes
// an Ingress of no tenant. Against the real API server, the tenancy router and the Manager, with the manager's
// ServiceAccount.
func TestNamespaceLeavesItsTenant(t *testing.T) {
	e := newEnv(t, 50, 100)
	tunnelsA, tunnelsB := controlPlane.CreateNamespace(t), controlPlane.CreateNamespace(t)
	e.createTunnel(tunnelsA, "main")
	e.createTunnel(tunnelsB, "main")
	tenantA, tenantB := e.tenantName("a"), e.tenantName("b")
	ns := e.tenantNamespace(tenantA)
	host := "moving-" + ns[strings.LastIndex(ns, "-")+1:] + ".example.com"
	hw := e.watchHost(t, host)
	e.startTenant(tenantA, &mpv1alpha1.PangolinConfig{TunnelNamespace: tunnelsA, DefaultTunnel: "main"}, 2)
	e.startTenant(tenantB, &mpv1alpha1.PangolinConfig{TunnelNamespace: tunnelsB, DefaultTunnel: "main"}, 2)
	if _, err := e.adminKube.NetworkingV1().Ingresses(ns).Create(e.ctx, hostIngress(ns, "web", host), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	first := e.waitHosts(ns, 30*time.Second, host)[host]
	if first.Labels[labelKey] != tenantA || first.Spec.TunnelRef.Namespace != tunnelsA {
		t.Fatalf("tenant a's resource: tenant label %q, tunnelRef %+v", first.Labels[labelKey], first.Spec.TunnelRef)
	}

	e.labelNamespace(ns, tenantB)
	e.waitFor("tenant b's own resource", 30*time.Second, func() (bool, error) {
		r := e.resourcesByHost(ns)[host]
		return r != nil && r.UID != first.UID && r.Labels[labelKey] == tenantB && r.Spec.TunnelRef.Namespace == tunnelsB, nil
	})
	e.waitDeletedEvent(ns, "web", "namespace "+ns+" no longer belongs to tenant "+tenantA)

	e.labelNamespace(ns, "")
	e.waitFor("the Ingress to be published by nobody", 30*time.Second, func() (bool, error) {
		return len(e.resourcesByHost(ns)) == 0, nil
	})
	e.waitDeletedEvent(ns, "web", "namespace "+ns+" no longer belongs to tenant "+tenantB)
	hw.check()
}

// labelNamespace makes tenantName the tenant of namespace; "" removes the tenant label.
func (e *env) labelNamespace(namespace, tenantName string) {
	e.t.Helper()
	got, err := e.adminKube.CoreV1().Namespaces().Get(e.ctx, namespace, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	delete(got.Labels, labelKey)
	if tenantName != "" {
		got.Labels[labelKey] = tenantName
	}
	if _, err := e.adminKube.CoreV1().Namespaces().Update(e.ctx, got, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// waitDeletedEvent waits for a Deleted Event on the Ingress whose message contains why.
func (e *env) waitDeletedEvent(namespace, ingress, why string) {
	e.t.Helper()
	e.waitFor("a Deleted Event saying "+why, 30*time.Second, func() (bool, error) {
		list, err := e.adminKube.CoreV1().Events(namespace).List(e.ctx, metav1.ListOptions{FieldSelector: fields.Set{
			"involvedObject.kind": "Ingress", "involvedObject.name": ingress, "reason": ingresstunnel.ReasonDeleted,
			"type": corev1.EventTypeNormal}.String()})
		if err != nil {
			return false, err
		}
		for _, ev := range list.Items {
			if strings.Contains(ev.Message, why) {
				return true, nil
			}
		}
		return false, nil
	})
}
