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
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	tunnelv1alpha1 "github.com/multiproject/api/pangolin/tunnel/v1alpha1"
)

// TestAResourceNamedByAnotherBuildKeepsItsName: a host whose PangolinResource, controlled by the Ingress, has a name
// this build would not give it (another build's layout of the name) keeps that resource: nothing is created or
// deleted, and a change of the Ingress updates it in place (docs/upgrade.md).
func TestAResourceNamedByAnotherBuildKeepsItsName(t *testing.T) {
	first := newHarness(t, nil, []runtime.Object{seedIngress(), seedService()}, tunnel(testTunnelNS, "main"))
	converged := first.waitHosts("app.example.com", "api.example.com", "admin.example.com")
	first.shutdown()

	const otherName = "pic-demo-web-named-by-another-build"
	renamed := converged["admin.example.com"].DeepCopy()
	renamed.Name = otherName
	h := newHarness(t, nil, []runtime.Object{seedIngress(), seedService()}, tunnel(testTunnelNS, "main"),
		converged["app.example.com"], converged["api.example.com"], renamed)
	h.waitFor("the Ingress to be synced", func() bool { return h.syncs.successes("demo/web") > 0 })
	if n := h.writes(); n != 0 {
		t.Errorf("a converged Ingress with a resource of another build's name sent %d writes, want none", n)
	}
	h.updateIngress(func(ing *networkingv1.Ingress) { ing.Annotations = map[string]string{AnnotationSSO: "true"} })
	h.waitFor("three Updated events", func() bool { return h.events.Count(corev1.EventTypeNormal, ReasonUpdated) == 3 })
	got := h.resources()
	if len(got) != 3 || got["admin.example.com"] == nil || got["admin.example.com"].Name != otherName || !got["admin.example.com"].Spec.HTTPConfig.SSO {
		t.Errorf("admin.example.com's resource = %+v; want %s kept and updated", got["admin.example.com"], otherName)
	}
	if n := h.events.Count(corev1.EventTypeNormal, ReasonCreated) + h.events.Count(corev1.EventTypeNormal, ReasonDeleted); n != 0 {
		t.Errorf("%d resources created or deleted, want none", n)
	}
}

// TestNamesOfPreferThisBuildsName: where a host has resources of both names, this build's is the host's (the other
// goes as an extra), and a resource being deleted names nothing.
func TestNamesOfPreferThisBuildsName(t *testing.T) {
	ing := seedIngress()
	own := ResourceName(ing.Namespace, ing.Name, "app.example.com")
	res := func(name, host string) *tunnelv1alpha1.PangolinResource {
		return &tunnelv1alpha1.PangolinResource{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: tunnelv1alpha1.PangolinResourceSpec{Name: displayName(ing.Namespace, ing.Name, host)}}
	}
	leaving := res("pic-leaving", "admin.example.com")
	now := metav1.Now()
	leaving.DeletionTimestamp = &now
	names := namesOf(ing.Namespace, ing.Name, []*tunnelv1alpha1.PangolinResource{
		res("pic-other-app", "app.example.com"), res(own, "app.example.com"),
		res("pic-other-b", "api.example.com"), res("pic-other-a", "api.example.com"),
		leaving,
	})
	for host, want := range map[string]string{
		"app.example.com":   own,
		"api.example.com":   "pic-other-a",
		"admin.example.com": ResourceName(ing.Namespace, ing.Name, "admin.example.com"),
	} {
		if got := names.of(host); got != want {
			t.Errorf("names.of(%s) = %s, want %s", host, got, want)
		}
	}
}
