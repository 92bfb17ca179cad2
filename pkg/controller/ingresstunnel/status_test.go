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
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	tunnelv1alpha1 "github.com/multiproject/api/pangolin/tunnel/v1alpha1"
	mpfake "github.com/multiproject/client-go/clientset/versioned/fake"
	tunnellisters "github.com/multiproject/client-go/listers/tunnel/v1alpha1"
)

func TestPublishedDomain(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status tunnelv1alpha1.PangolinResourceStatus
		want   string
	}{
		{"not ready", tunnelv1alpha1.PangolinResourceStatus{Status: tunnelv1alpha1.ResourceStatusCreating}, ""},
		{"full domain", tunnelv1alpha1.PangolinResourceStatus{FullDomain: "app.example.com", URL: "https://other.example.com"}, "app.example.com"},
		{"url only", tunnelv1alpha1.PangolinResourceStatus{URL: "https://app.example.com:8443/x"}, "app.example.com"},
		{"case and trailing dot", tunnelv1alpha1.PangolinResourceStatus{FullDomain: "App.Example.COM."}, "app.example.com"},
		{"wildcard cannot be an Ingress status host", tunnelv1alpha1.PangolinResourceStatus{FullDomain: "*.example.com"}, ""},
		{"IP address", tunnelv1alpha1.PangolinResourceStatus{FullDomain: "192.0.2.1"}, ""},
		{"unparsable url", tunnelv1alpha1.PangolinResourceStatus{URL: "://"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := publishedDomain(&tunnelv1alpha1.PangolinResource{Status: tc.status}); got != tc.want {
				t.Errorf("publishedDomain = %q, want %q", got, tc.want)
			}
		})
	}
}

func readyCondition(status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Type: conditionReady, Status: status, Reason: reason, Message: message}
}

func TestResourceError(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status tunnelv1alpha1.PangolinResourceStatus
		want   string
	}{
		{"no status yet", tunnelv1alpha1.PangolinResourceStatus{}, ""},
		{"ready", tunnelv1alpha1.PangolinResourceStatus{Status: tunnelv1alpha1.ResourceStatusReady,
			Conditions: []metav1.Condition{readyCondition(metav1.ConditionTrue, "ReconcileSuccess", "configured")}}, ""},
		// The operator writes Ready=False while it waits: not an error.
		{"waiting", tunnelv1alpha1.PangolinResourceStatus{Status: tunnelv1alpha1.ResourceStatusWaiting,
			Conditions: []metav1.Condition{readyCondition(metav1.ConditionFalse, "ReconcileError", "Waiting for tunnel to be ready")}}, ""},
		{"creating", tunnelv1alpha1.PangolinResourceStatus{Status: tunnelv1alpha1.ResourceStatusCreating,
			Conditions: []metav1.Condition{readyCondition(metav1.ConditionFalse, "ReconcileError", "creating")}}, ""},
		{"error with message", tunnelv1alpha1.PangolinResourceStatus{Status: tunnelv1alpha1.ResourceStatusError,
			Conditions: []metav1.Condition{
				{Type: "Synced", Status: metav1.ConditionFalse, Message: "not this one"},
				readyCondition(metav1.ConditionFalse, "ReconcileError", "failed to get tunnel main: not found")}},
			"status Error: failed to get tunnel main: not found"},
		{"error without condition", tunnelv1alpha1.PangolinResourceStatus{Status: tunnelv1alpha1.ResourceStatusError}, "status Error"},
		{"false condition without status value", tunnelv1alpha1.PangolinResourceStatus{
			Conditions: []metav1.Condition{readyCondition(metav1.ConditionFalse, "DomainNotFound", "no domain example.org")}},
			"condition Ready is False (DomainNotFound): no domain example.org"},
		{"another false condition beside Ready", tunnelv1alpha1.PangolinResourceStatus{Status: tunnelv1alpha1.ResourceStatusReady,
			Conditions: []metav1.Condition{readyCondition(metav1.ConditionTrue, "ReconcileSuccess", ""),
				{Type: "SSOConfigured", Status: metav1.ConditionFalse}}},
			"condition SSOConfigured is False"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := resourceError(&tunnelv1alpha1.PangolinResource{Status: tc.status}); got != tc.want {
				t.Errorf("resourceError = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestLoadBalancerIngressReplacesOnlyOurs(t *testing.T) {
	others := []networkingv1.IngressLoadBalancerIngress{
		{IP: "192.0.2.10"},
		{Hostname: "lb.other.example"},
		// The same host as one of ours, but with ports: another controller's entry.
		{Hostname: "app.example.com", Ports: []networkingv1.IngressPortStatus{{Port: 443, Protocol: corev1.ProtocolTCP}}},
	}
	current := append(slices.Clone(others), entry("old.example.com"), entry("app.example.com"))
	ours := func(h string) bool { return h == "old.example.com" || h == "app.example.com" || h == "api.example.com" }

	got := loadBalancerIngress(current, []string{"app.example.com", "api.example.com", "app.example.com"}, ours)
	want := append(slices.Clone(others), entry("api.example.com"), entry("app.example.com"))
	if !sameEntries(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if !sameEntries(loadBalancerIngress(current, nil, ours), others) {
		t.Errorf("removing ours: got %+v, want %+v", loadBalancerIngress(current, nil, ours), others)
	}
	if got := loadBalancerIngress(nil, nil, ours); got != nil {
		t.Errorf("nothing to list gives %+v, want nil", got)
	}
	// A host that is not ours is kept even when it is not wanted.
	if got := loadBalancerIngress([]networkingv1.IngressLoadBalancerIngress{entry("x.example.com")}, nil, ours); len(got) != 1 {
		t.Errorf("another controller's bare host was removed: %+v", got)
	}
}

func TestResourceChangedSkipsWhatTheIngressDoesNotRead(t *testing.T) {
	base := &tunnelv1alpha1.PangolinResource{
		ObjectMeta: metav1.ObjectMeta{ResourceVersion: "5", Generation: 2, Labels: map[string]string{"a": "b"}},
		Status: tunnelv1alpha1.PangolinResourceStatus{FullDomain: "app.example.com", Status: tunnelv1alpha1.ResourceStatusReady,
			ResourceID: "r1", Conditions: []metav1.Condition{readyCondition(metav1.ConditionTrue, "ReconcileSuccess", "ok")}},
	}
	for _, tc := range []struct {
		name   string
		change func(*tunnelv1alpha1.PangolinResource)
		want   bool
	}{
		{"resync", func(*tunnelv1alpha1.PangolinResource) {}, false},
		{"status rewritten with the same values", func(r *tunnelv1alpha1.PangolinResource) { r.ResourceVersion = "6" }, false},
		{"fields the Ingress does not read", func(r *tunnelv1alpha1.PangolinResource) {
			r.ResourceVersion = "6"
			r.Status.TargetIDs, r.Status.TargetCount, r.Status.ObservedGeneration = []string{"t1"}, 1, 2
			r.Status.Conditions[0].LastTransitionTime = metav1.NewTime(time.Unix(1000, 0))
		}, false},
		// Waiting is no error and the domain stays: nothing for the Ingress.
		{"waiting again", func(r *tunnelv1alpha1.PangolinResource) {
			r.ResourceVersion = "6"
			r.Status.Status = tunnelv1alpha1.ResourceStatusWaiting
			r.Status.Conditions[0] = readyCondition(metav1.ConditionFalse, "ReconcileError", "Waiting for tunnel to be ready")
		}, false},
		{"domain reported", func(r *tunnelv1alpha1.PangolinResource) {
			r.ResourceVersion = "6"
			r.Status.FullDomain = "app2.example.com"
		}, true},
		{"error reported", func(r *tunnelv1alpha1.PangolinResource) {
			r.ResourceVersion = "6"
			r.Status.Status = tunnelv1alpha1.ResourceStatusError
			r.Status.Conditions[0] = readyCondition(metav1.ConditionFalse, "ReconcileError", "boom")
		}, true},
		{"operator deleting", func(r *tunnelv1alpha1.PangolinResource) {
			r.ResourceVersion = "6"
			r.Status.Status = tunnelv1alpha1.ResourceStatusDeleting
		}, true},
		{"spec changed", func(r *tunnelv1alpha1.PangolinResource) { r.ResourceVersion, r.Generation = "6", 3 }, true},
		{"labels changed", func(r *tunnelv1alpha1.PangolinResource) { r.ResourceVersion, r.Labels = "6", nil }, true},
		{"being deleted", func(r *tunnelv1alpha1.PangolinResource) {
			r.ResourceVersion, r.DeletionTimestamp = "6", ptr.To(metav1.Now())
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			updated := base.DeepCopy()
			tc.change(updated)
			if got := resourceChanged(base, updated); got != tc.want {
				t.Errorf("resourceChanged = %v, want %v", got, tc.want)
			}
		})
	}
}

// --- the controller, playing the Pangolin operator -------------------------------------------------------------

// ingressStatusSubresource makes the fake clientset's Ingress updates behave as the API server's: an update of the
// Ingress keeps its status, an update of its status keeps the rest, is refused on a stale resourceVersion and bumps
// it. The fake would replace the whole object, so a status write from a stale cache could undo a test's change.
func ingressStatusSubresource(kube *kubefake.Clientset) {
	gvr := networkingv1.SchemeGroupVersion.WithResource("ingresses")
	kube.PrependReactor("update", "ingresses", func(a clienttesting.Action) (bool, runtime.Object, error) {
		sent, ok := a.(clienttesting.UpdateAction).GetObject().(*networkingv1.Ingress)
		if !ok {
			return false, nil, nil
		}
		obj, err := kube.Tracker().Get(gvr, sent.Namespace, sent.Name)
		if err != nil {
			return false, nil, nil
		}
		stored := obj.(*networkingv1.Ingress)
		out := sent.DeepCopy()
		if a.GetSubresource() == "status" {
			if sent.ResourceVersion != stored.ResourceVersion {
				return true, nil, apierrors.NewConflict(gvr.GroupResource(), sent.Name, fmt.Errorf("the object has been modified"))
			}
			out = stored.DeepCopy()
			out.Status = sent.Status
			out.ResourceVersion = bump(stored.ResourceVersion)
		} else {
			out.Status = stored.Status
		}
		if err := kube.Tracker().Update(gvr, out, out.Namespace); err != nil {
			return true, nil, err
		}
		return true, out, nil
	})
}

// resourceOptimisticConcurrency makes the fake clientset's PangolinResource updates behave as the API server's: an
// update on a stale resourceVersion is refused with a conflict, and a stored one gets a new resourceVersion; an
// update keeps the stored status, and a status update keeps the rest. The fake would accept a write from a stale
// cache, which the API server never does, and a test would see it twice.
func resourceOptimisticConcurrency(mp *mpfake.Clientset) {
	gvr := tunnelv1alpha1.SchemeGroupVersion.WithResource("pangolinresources")
	mp.PrependReactor("update", "pangolinresources", func(a clienttesting.Action) (bool, runtime.Object, error) {
		sent, ok := a.(clienttesting.UpdateAction).GetObject().(*tunnelv1alpha1.PangolinResource)
		if !ok {
			return false, nil, nil
		}
		obj, err := mp.Tracker().Get(gvr, sent.Namespace, sent.Name)
		if err != nil {
			return false, nil, nil
		}
		stored := obj.(*tunnelv1alpha1.PangolinResource)
		if sent.ResourceVersion != stored.ResourceVersion {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), sent.Name, fmt.Errorf("the object has been modified"))
		}
		out := sent.DeepCopy()
		if a.GetSubresource() == "status" {
			out = stored.DeepCopy()
			out.Status = sent.Status
		} else {
			out.Status = stored.Status
		}
		out.ResourceVersion = bump(stored.ResourceVersion)
		if err := mp.Tracker().Update(gvr, out, out.Namespace); err != nil {
			return true, nil, err
		}
		return true, out, nil
	})
}

// setResourceStatus writes a PangolinResource's status as the Pangolin operator would, bumping its resourceVersion
// as the API server does.
func (h *harness) setResourceStatus(host string, change func(*tunnelv1alpha1.PangolinResourceStatus)) {
	h.t.Helper()
	res := h.resources()[host]
	if res == nil {
		h.t.Fatalf("no PangolinResource for %s", host)
	}
	change(&res.Status)
	if _, err := h.mp.TunnelV1alpha1().PangolinResources(res.Namespace).UpdateStatus(h.ctx, res, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// ready is the operator's status of a resource it has published on domain.
func ready(domain string) func(*tunnelv1alpha1.PangolinResourceStatus) {
	return func(s *tunnelv1alpha1.PangolinResourceStatus) {
		s.ResourceID, s.FullDomain, s.URL, s.Status = "id-"+domain, domain, "https://"+domain, tunnelv1alpha1.ResourceStatusReady
		meta.SetStatusCondition(&s.Conditions, readyCondition(metav1.ConditionTrue, "ReconcileSuccess", "Resource and target configured successfully"))
	}
}

// failing is the operator's status of a resource it could not reconcile.
func failing(message string) func(*tunnelv1alpha1.PangolinResourceStatus) {
	return func(s *tunnelv1alpha1.PangolinResourceStatus) {
		s.Status = tunnelv1alpha1.ResourceStatusError
		meta.SetStatusCondition(&s.Conditions, readyCondition(metav1.ConditionFalse, "ReconcileError", message))
	}
}

func (h *harness) ingressStatus(name string) []networkingv1.IngressLoadBalancerIngress {
	h.t.Helper()
	ing, err := h.kube.NetworkingV1().Ingresses(testNamespace).Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return ing.Status.LoadBalancer.Ingress
}

func (h *harness) waitIngressStatus(name string, want ...networkingv1.IngressLoadBalancerIngress) {
	h.t.Helper()
	var got []networkingv1.IngressLoadBalancerIngress
	err := wait.PollUntilContextTimeout(h.ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		got = h.ingressStatus(name)
		return sameEntries(got, want), nil
	})
	if err != nil {
		h.t.Fatalf("Ingress %s's status.loadBalancer.ingress is %+v, want %+v", name, got, want)
	}
}

func entries(hosts ...string) []networkingv1.IngressLoadBalancerIngress {
	var out []networkingv1.IngressLoadBalancerIngress
	for _, h := range hosts {
		out = append(out, entry(h))
	}
	return out
}

// statusWrites counts the Ingress status writes sent for the Ingress name.
func (h *harness) statusWrites(name string) int {
	n := 0
	for _, a := range h.kube.Actions() {
		u, ok := a.(clienttesting.UpdateAction)
		if ok && a.GetResource().Resource == "ingresses" && a.GetSubresource() == "status" {
			if m, err := meta.Accessor(u.GetObject()); err == nil && m.GetName() == name {
				n++
			}
		}
		if a.GetResource().Resource == "ingresses" && a.GetVerb() == "patch" {
			n++
		}
	}
	return n
}

func TestIngressStatusListsPublishedHosts(t *testing.T) {
	h := newHarness(t, nil, []runtime.Object{seedIngress(), seedService()}, tunnel(testTunnelNS, "main"))
	h.waitHosts("app.example.com", "api.example.com", "admin.example.com")
	h.waitFor("three Created events", func() bool { return h.events.Count(corev1.EventTypeNormal, ReasonCreated) == 3 })

	// The operator publishes two hosts; the third is still being created (no domain): it is not listed.
	h.setResourceStatus("admin.example.com", func(s *tunnelv1alpha1.PangolinResourceStatus) {
		s.Status = tunnelv1alpha1.ResourceStatusCreating
		meta.SetStatusCondition(&s.Conditions, readyCondition(metav1.ConditionFalse, "ReconcileError", "Creating"))
	})
	h.setResourceStatus("app.example.com", ready("app.example.com"))
	h.setResourceStatus("api.example.com", ready("api.example.com"))
	h.waitIngressStatus("web", entries("api.example.com", "app.example.com")...)
	h.setResourceStatus("admin.example.com", ready("admin.example.com"))
	h.waitIngressStatus("web", entries("admin.example.com", "api.example.com", "app.example.com")...)
	if n := h.events.Count(corev1.EventTypeWarning, ReasonTunnelResourceError); n != 0 {
		t.Errorf("%d TunnelResourceError warnings for resources being created or ready", n)
	}

	// Converged: a sync writes nothing, nor does a restart with empty caches.
	writes := h.statusWrites("web")
	synced := h.syncs.successes("demo/web")
	h.updateIngress(func(ing *networkingv1.Ingress) { ing.Labels = map[string]string{"touched": "yes"} })
	h.waitFor("a sync of the touched Ingress", func() bool { return h.syncs.successes("demo/web") > synced })
	h.shutdown()
	resourceWrites := h.writes()
	synced = h.syncs.successes("demo/web")
	h.start(nil)
	h.waitFor("the Ingress to be synced again", func() bool { return h.syncs.successes("demo/web") > synced })
	if n := h.statusWrites("web") - writes; n != 0 {
		t.Errorf("a converged Ingress had %d status writes", n)
	}
	if n := h.writes() - resourceWrites; n != 0 {
		t.Errorf("a converged restart sent %d PangolinResource writes", n)
	}

	// The operator reports another domain for a host that an earlier process listed: the old entry goes.
	h.setResourceStatus("app.example.com", ready("www.example.com"))
	h.waitIngressStatus("web", entries("admin.example.com", "api.example.com", "www.example.com")...)
	h.setResourceStatus("app.example.com", ready("app.example.com"))
	h.waitIngressStatus("web", entries("admin.example.com", "api.example.com", "app.example.com")...)

	// A host renamed: its new resource is listed once the operator reports it, the old one's entry goes at once.
	h.updateIngress(func(ing *networkingv1.Ingress) { ing.Spec.Rules[2].Host = "console.example.com" })
	h.waitHosts("app.example.com", "api.example.com", "console.example.com")
	h.waitIngressStatus("web", entries("api.example.com", "app.example.com")...)
	h.setResourceStatus("console.example.com", ready("console.example.com"))
	h.waitIngressStatus("web", entries("api.example.com", "app.example.com", "console.example.com")...)
}

// TestUnmanagedIngressKeepsOnlyOthersStatus: the entries another controller wrote stay through publishing and after
// the Ingress is handed to that controller; only the controller's own go.
func TestUnmanagedIngressKeepsOnlyOthersStatus(t *testing.T) {
	others := []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.10"}, {Hostname: "lb.other.example"}}
	ing := seedIngress()
	ing.Status.LoadBalancer.Ingress = slices.Clone(others)
	h := newHarness(t, nil, []runtime.Object{ing, seedService()}, tunnel(testTunnelNS, "main"))
	h.waitHosts("app.example.com", "api.example.com", "admin.example.com")
	for _, host := range seedHosts() {
		h.setResourceStatus(host, ready(host))
	}
	h.waitIngressStatus("web", append(slices.Clone(others), entries("admin.example.com", "api.example.com", "app.example.com")...)...)

	h.updateIngress(func(ing *networkingv1.Ingress) { ing.Spec.IngressClassName = ptr.To("nginx") })
	h.waitHosts()
	h.waitIngressStatus("web", others...)
}

func seedHosts() []string { return []string{"app.example.com", "api.example.com", "admin.example.com"} }

// TestRemovedHostLeavesTheStatusAfterAFailedWrite: the write that should remove a host's entry fails until the
// host's resource is gone from the cache; the entry is still recognised as the controller's and removed.
func TestRemovedHostLeavesTheStatusAfterAFailedWrite(t *testing.T) {
	h := newHarness(t, nil, []runtime.Object{seedIngress(), seedService()}, tunnel(testTunnelNS, "main"))
	h.waitHosts(seedHosts()...)
	for _, host := range seedHosts() {
		h.setResourceStatus(host, ready(host))
	}
	h.waitIngressStatus("web", entries("admin.example.com", "api.example.com", "app.example.com")...)

	adminName := ResourceName(testNamespace, "web", "admin.example.com")
	var mu sync.Mutex
	failed := 0
	h.kube.PrependReactor("update", "ingresses", func(a clienttesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if a.GetSubresource() != "status" {
			return false, nil, nil
		}
		if _, err := h.ctrl.resources.PangolinResources(testNamespace).Get(adminName); failed == 0 || err == nil {
			failed++
			return true, nil, apierrors.NewInternalError(fmt.Errorf("etcd is having a bad day"))
		}
		return false, nil, nil
	})
	h.updateIngress(func(ing *networkingv1.Ingress) { ing.Spec.Rules = ing.Spec.Rules[:2] })
	h.waitHosts("app.example.com", "api.example.com")
	h.waitIngressStatus("web", entries("api.example.com", "app.example.com")...)
}

func TestOperatorErrorIsOneWarning(t *testing.T) {
	h := newHarness(t, nil, []runtime.Object{seedIngress(), seedService()}, tunnel(testTunnelNS, "main"))
	h.waitHosts(seedHosts()...)
	warnings := func() []string { return h.events.With(corev1.EventTypeWarning + " " + ReasonTunnelResourceError + " ") }

	h.setResourceStatus("api.example.com", failing("failed to create Pangolin resource: 409 conflict"))
	h.waitFor("a TunnelResourceError warning", func() bool { return len(warnings()) == 1 })
	want := fmt.Sprintf("PangolinResource %s for host api.example.com: the Pangolin operator reports status Error: "+
		"failed to create Pangolin resource: 409 conflict", ResourceName(testNamespace, "web", "api.example.com"))
	if got := warnings()[0]; got != "Warning "+ReasonTunnelResourceError+" "+want {
		t.Errorf("warning %q, want message %q", got, want)
	}

	// The operator retries and writes the same error again, and the Ingress is synced: still one warning.
	synced := h.syncs.successes("demo/web")
	h.setResourceStatus("api.example.com", func(s *tunnelv1alpha1.PangolinResourceStatus) { s.ObservedGeneration++ })
	h.updateIngress(func(ing *networkingv1.Ingress) { ing.Labels = map[string]string{"touched": "yes"} })
	h.waitFor("a sync of the touched Ingress", func() bool { return h.syncs.successes("demo/web") > synced })
	if n := len(warnings()); n != 1 {
		t.Errorf("%d TunnelResourceError warnings for one persisting error, want 1", n)
	}

	// Another error is another warning; a fix and the same error back is one more.
	h.setResourceStatus("api.example.com", failing("failed to get API key secret: not found"))
	h.waitFor("a second warning", func() bool { return len(warnings()) == 2 })
	h.setResourceStatus("api.example.com", ready("api.example.com"))
	h.waitIngressStatus("web", entries("api.example.com")...)
	h.setResourceStatus("api.example.com", failing("failed to get API key secret: not found"))
	h.waitFor("a third warning", func() bool { return len(warnings()) == 3 })
}

// TestStatusRewriteWithTheSameValuesIsIgnored: the operator rewrites the status of a converged Ingress's resources
// with what the Ingress reads unchanged; the Ingress is not even synced, and its status not written.
func TestStatusRewriteWithTheSameValuesIsIgnored(t *testing.T) {
	other := seedIngress()
	other.Name, other.UID = "other", "ingress-uid-2"
	other.Spec.Rules = []networkingv1.IngressRule{rule("other.example.com", path("/", networkingv1.PathTypePrefix, "web", number(80)))}
	// One worker syncs keys in the order they were enqueued, so the other Ingress's sync below is a barrier.
	h := newHarnessWorkers(t, 1, nil, []runtime.Object{seedIngress(), other, seedService()}, tunnel(testTunnelNS, "main"))
	h.waitHosts(append(seedHosts(), "other.example.com")...)
	for _, host := range append(seedHosts(), "other.example.com") {
		h.setResourceStatus(host, ready(host))
	}
	h.waitIngressStatus("web", entries("admin.example.com", "api.example.com", "app.example.com")...)
	// A barrier: whatever either informer delivered for "web" before is synced before the other Ingress shows the
	// effect of a change of its resource (the resource informer), then of a change of itself (the Ingress informer).
	barrier := func(round string) {
		t.Helper()
		domain := round + ".other.example.com"
		h.setResourceStatus("other.example.com", ready(domain))
		h.waitIngressStatus("other", entries(domain)...)
		ing, err := h.kube.NetworkingV1().Ingresses(testNamespace).Get(h.ctx, "other", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ing.Annotations = map[string]string{AnnotationSSO: round}
		ing.ResourceVersion = bump(ing.ResourceVersion)
		if _, err := h.kube.NetworkingV1().Ingresses(testNamespace).Update(h.ctx, ing, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		h.waitFor("the other Ingress's invalid annotation "+round, func() bool {
			return len(h.events.With(fmt.Sprintf("Warning %s Annotation %s=%q", ReasonInvalidAnnotation, AnnotationSSO, round))) == 1
		})
	}
	barrier("first")

	synced, writes := h.syncs.successes("demo/web"), h.statusWrites("web")
	for _, host := range seedHosts() {
		h.setResourceStatus(host, func(s *tunnelv1alpha1.PangolinResourceStatus) {
			s.TargetIDs, s.TargetCount, s.ObservedGeneration = []string{"t1", "t2"}, 2, s.ObservedGeneration+1
			s.Conditions[0].LastTransitionTime = metav1.NewTime(time.Now().Add(time.Hour))
		})
		h.setResourceStatus(host, ready(host))
	}
	barrier("second")
	if n := h.syncs.successes("demo/web") - synced; n != 0 {
		t.Errorf("the operator's rewrites caused %d syncs of the converged Ingress", n)
	}
	if n := h.statusWrites("web") - writes; n != 0 {
		t.Errorf("the operator's rewrites caused %d status writes", n)
	}
}

// TestCleanupRemovesTheHostFromTheIngressStatus: a departing tenant's cleanup takes the host of each resource out
// of its Ingress's status before deleting it, and leaves other controllers' entries.
func TestCleanupRemovesTheHostFromTheIngressStatus(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ing := seedIngress()
	ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.10"}, entry("app.example.com"), entry("api.example.com")}
	res := &tunnelv1alpha1.PangolinResource{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: ResourceName(testNamespace, "web", "app.example.com"),
			Labels:          map[string]string{LabelIngressUID: string(ing.UID)},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ing, ingressGVK)}},
		Spec:   tunnelv1alpha1.PangolinResourceSpec{Name: testNamespace + "/web/app.example.com"},
		Status: tunnelv1alpha1.PangolinResourceStatus{FullDomain: "app.example.com"},
	}
	kube, mp := kubefake.NewClientset(ing), mpfake.NewClientset(res)
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := indexer.Add(res); err != nil {
		t.Fatal(err)
	}
	cl := &cleanup{client: mp, kube: kube, lister: tunnellisters.NewPangolinResourceLister(indexer), recorder: &recorder{},
		pc: &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: testTenant}}}
	if err := cl.delete(ctx, testNamespace+"/"+res.Name); err != nil {
		t.Fatal(err)
	}
	got, err := kube.NetworkingV1().Ingresses(testNamespace).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.10"}, entry("api.example.com")}
	if !sameEntries(got.Status.LoadBalancer.Ingress, want) {
		t.Errorf("Ingress status %+v, want %+v", got.Status.LoadBalancer.Ingress, want)
	}
	if _, err := mp.TunnelV1alpha1().PangolinResources(testNamespace).Get(ctx, res.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the resource was not deleted: %v", err)
	}
}

// A sync whose cache still shows the version of the Ingress that the controller last wrote the status of sends
// nothing: the API server has the newer version, so the write would only conflict, and the write's own update
// event brings the Ingress back to be synced.
func TestNoStatusWriteFromTheVersionAlreadyWritten(t *testing.T) {
	ing := seedIngress()
	ing.ResourceVersion = "1" // the API server's are never empty
	h := newHarness(t, nil, []runtime.Object{ing, seedService()}, tunnel(testTunnelNS, "main"))
	h.waitHosts("app.example.com", "api.example.com", "admin.example.com")
	h.shutdown()
	cached, err := h.kube.NetworkingV1().Ingresses(testNamespace).Get(h.ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := h.statusWrites("web")
	want := []string{"app.example.com"}
	if err := h.ctrl.writeStatus(h.ctx, testNamespace+"/web", cached, nil, want, &problems{}); err != nil {
		t.Fatal(err)
	}
	if n := h.statusWrites("web") - before; n != 1 {
		t.Fatalf("the first write sent %d status writes, want 1", n)
	}
	// The cache has not caught up: the same version comes back, with the status as it was before the write.
	if err := h.ctrl.writeStatus(h.ctx, testNamespace+"/web", cached, nil, want, &problems{}); err != nil {
		t.Fatal(err)
	}
	if n := h.statusWrites("web") - before; n != 1 {
		t.Errorf("a sync from the version already written sent %d more status writes", n-1)
	}
	// The newer version, as the informer delivers it: a change is written again.
	current, err := h.kube.NetworkingV1().Ingresses(testNamespace).Get(h.ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.ctrl.writeStatus(h.ctx, testNamespace+"/web", current, nil, []string{"api.example.com"}, &problems{}); err != nil {
		t.Fatal(err)
	}
	if n := h.statusWrites("web") - before; n != 2 {
		t.Errorf("a change on the newer version sent %d status writes in all, want 2", n)
	}
}
