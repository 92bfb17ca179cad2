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
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	tunnelv1alpha1 "github.com/multiproject/api/pangolin/tunnel/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/ingresstunnel"
)

// hostWatch follows, from one watch of every PangolinResource of the cluster, how many exist at once for one
// published name (subdomain.domain); one being deleted still counts, since the Pangolin operator publishes it until
// its finalizer is removed.
type hostWatch struct {
	t    *testing.T
	host string
	w    watch.Interface
	done chan struct{}

	mu       sync.Mutex
	live     map[string]bool
	max      int
	maxAt    []string
	closedBy string
	stopping bool
}

func (e *env) watchHost(t *testing.T, host string) *hostWatch {
	t.Helper()
	list, err := e.admin.TunnelV1alpha1().PangolinResources("").List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hw := &hostWatch{t: t, host: host, done: make(chan struct{}), live: map[string]bool{}}
	for i := range list.Items {
		hw.observe(watch.Added, &list.Items[i])
	}
	hw.w, err = e.admin.TunnelV1alpha1().PangolinResources("").Watch(e.ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(hw.done)
		for ev := range hw.w.ResultChan() {
			res, ok := ev.Object.(*tunnelv1alpha1.PangolinResource)
			if !ok {
				// Stopping the watch makes the client report the closed stream as an error.
				hw.mu.Lock()
				if !hw.stopping {
					hw.closedBy = fmt.Sprintf("a %s event: %+v", ev.Type, ev.Object)
				}
				hw.mu.Unlock()
				continue
			}
			hw.observe(ev.Type, res)
		}
	}()
	return hw
}

func (hw *hostWatch) observe(t watch.EventType, res *tunnelv1alpha1.PangolinResource) {
	if res.Spec.HTTPConfig == nil || res.Spec.HTTPConfig.Subdomain+"."+res.Spec.HTTPConfig.DomainName != hw.host {
		return
	}
	hw.mu.Lock()
	defer hw.mu.Unlock()
	key := res.Namespace + "/" + res.Name
	if t == watch.Deleted {
		delete(hw.live, key)
		return
	}
	hw.live[key] = true
	if len(hw.live) > hw.max {
		hw.max = len(hw.live)
		hw.maxAt = nil
		for k := range hw.live {
			hw.maxAt = append(hw.maxAt, k)
		}
	}
}

// check stops the watch and fails the test if two PangolinResources ever published the host at once, or the watch
// broke (then it could have missed that).
func (hw *hostWatch) check() {
	hw.t.Helper()
	select {
	case <-hw.done:
		hw.t.Error("the watch of PangolinResources ended before the test did")
	default:
	}
	hw.mu.Lock()
	hw.stopping = true
	hw.mu.Unlock()
	hw.w.Stop()
	<-hw.done
	hw.mu.Lock()
	defer hw.mu.Unlock()
	if hw.closedBy != "" {
		hw.t.Errorf("the watch of PangolinResources broke: %s", hw.closedBy)
	}
	if hw.max > 1 {
		hw.t.Errorf("%d PangolinResources published %s at once: %v", hw.max, hw.host, hw.maxAt)
	}
	if hw.max == 0 {
		hw.t.Errorf("no PangolinResource ever published %s", hw.host)
	}
}

// hostIngress is a Pangolin-class Ingress with one rule for host to Service web port 80 (a number: no Service needed).
func hostIngress(namespace, name, host string) *networkingv1.Ingress {
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: networkingv1.IngressSpec{
			IngressClassName: ptr.To("pangolin"),
			Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix),
					Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web",
						Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}}},
		},
	}
}

// claimsFirst orders two Ingresses as the controller does: the earlier creation, then the smaller UID.
func claimsFirst(a, b *networkingv1.Ingress) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.UID < b.UID
}

// hostConflicts returns the messages of the HostConflict Events on an Ingress, each repeated by its count.
func (e *env) hostConflicts(namespace, ingress string) []string {
	e.t.Helper()
	list, err := e.adminKube.CoreV1().Events(namespace).List(e.ctx, metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.kind": "Ingress", "involvedObject.name": ingress, "reason": ingresstunnel.ReasonHostConflict}.String()})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, ev := range list.Items {
		for range max(ev.Count, 1) {
			out = append(out, ev.Message)
		}
	}
	return out
}

// waitPublishedBy waits until the only PangolinResource for host in the cluster is the one of that Ingress.
func (e *env) waitPublishedBy(host string, ing *networkingv1.Ingress, timeout time.Duration) {
	e.t.Helper()
	want := ingresstunnel.ResourceName(ing.Namespace, ing.Name, host)
	e.waitFor(fmt.Sprintf("%s published by Ingress %s/%s alone", host, ing.Namespace, ing.Name), timeout, func() (bool, error) {
		list, err := e.admin.TunnelV1alpha1().PangolinResources("").List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var got []string
		for _, r := range list.Items {
			if r.Spec.HTTPConfig != nil && r.Spec.HTTPConfig.Subdomain+"."+r.Spec.HTTPConfig.DomainName == host {
				got = append(got, r.Namespace+"/"+r.Name)
			}
		}
		return len(got) == 1 && got[0] == ing.Namespace+"/"+want, nil
	})
}

// TestHostClaimedByTwoTenants: Ingresses of two tenants publish one host. The one that publishes it keeps it;
// the other gets one HostConflict Warning naming it and no PangolinResource, however often it is synced. Deleting
// the holder hands the host to the other once the garbage collector has deleted the holder's resource. Exactly one
// PangolinResource publishes the host at every moment, which a watch of every PangolinResource checks throughout.
func TestHostClaimedByTwoTenants(t *testing.T) {
	e := newEnv(t, 50, 100)
	tunnels := controlPlane.CreateNamespace(t)
	e.createTunnel(tunnels, "main")
	tenantA, tenantB := e.tenantName("a"), e.tenantName("b")
	nsA, nsB := e.tenantNamespace(tenantA), e.tenantNamespace(tenantB)
	// The namespace's random suffix makes the host the test's own: other tests' resources never publish it.
	host := "shared-" + nsA[strings.LastIndex(nsA, "-")+1:] + ".example.com"
	hw := e.watchHost(t, host)
	config := &mpv1alpha1.PangolinConfig{TunnelNamespace: tunnels, DefaultTunnel: "main"}
	e.startTenant(tenantA, config, 2)
	b := e.startTenant(tenantB, config, 2)

	first, err := e.adminKube.NetworkingV1().Ingresses(nsA).Create(e.ctx, hostIngress(nsA, "web", host), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.waitPublishedBy(host, first, 30*time.Second)
	second, err := e.adminKube.NetworkingV1().Ingresses(nsB).Create(e.ctx, hostIngress(nsB, "web", host), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The first Ingress publishes the host: it keeps it, even when the second comes first by UID (created in the
	// same second).
	holder, other := first, second
	e.waitPublishedBy(host, holder, 30*time.Second)
	holderName := fmt.Sprintf("Ingress %s/%s", holder.Namespace, holder.Name)
	e.waitFor("a HostConflict Warning on the other Ingress", 30*time.Second, func() (bool, error) {
		return len(e.hostConflicts(other.Namespace, other.Name)) > 0, nil
	})
	if got := e.hostConflicts(other.Namespace, other.Name); len(got) != 1 || !strings.Contains(got[0], host) || !strings.Contains(got[0], holderName) {
		t.Errorf("HostConflict Warnings on the other Ingress: %q; want one naming %s and %s", got, host, holderName)
	}
	if got := e.hostConflicts(holder.Namespace, holder.Name); len(got) != 0 {
		t.Errorf("HostConflict Warnings on the holder: %q", got)
	}

	// Another sync of the other Ingress (if it is tenant b's): the conflict is not reported again.
	if other.Namespace == nsB {
		before := b.syncs()
		e.updateIngress(nsB, other.Name, func(ing *networkingv1.Ingress) { ing.Labels = map[string]string{"touched": "yes"} })
		e.waitFor("another sync of the other Ingress", 30*time.Second, func() (bool, error) { return b.syncs() > before, nil })
	}

	// The holder is deleted: the garbage collector deletes its resource, then the other Ingress's is created.
	if err := e.adminKube.NetworkingV1().Ingresses(holder.Namespace).Delete(e.ctx, holder.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitPublishedBy(host, other, gcTimeout)
	if got := e.hostConflicts(other.Namespace, other.Name); len(got) != 1 {
		t.Errorf("HostConflict Warnings on the other Ingress after the takeover: %q; want the first one only", got)
	}
	e.waitEvent(other.Namespace, other.Name, corev1.EventTypeNormal, ingresstunnel.ReasonCreated, 1)
	hw.check()
}

// TestSubdomainRenameToAnotherTenantsHost: tenant b's Ingress, older than tenant a's, is annotated to publish its
// host as a's host (pangolin.ingress.k8s.io/subdomain). a's Ingress publishes that name, so b's older Ingress does
// not take it: b's resource is not changed to publish it, after convergence exactly one PangolinResource publishes
// the host, a's (the same object), b's Ingress has a HostConflict naming a's, and at no moment did two publish it
// (the watch runs through the whole test).
func TestSubdomainRenameToAnotherTenantsHost(t *testing.T) {
	e := newEnv(t, 50, 100)
	tunnels := controlPlane.CreateNamespace(t)
	e.createTunnel(tunnels, "main")
	tenantA, tenantB := e.tenantName("a"), e.tenantName("b")
	nsA, nsB := e.tenantNamespace(tenantA), e.tenantNamespace(tenantB)
	suffix := nsA[strings.LastIndex(nsA, "-")+1:]
	hostA, hostB := "a-"+suffix+".example.com", "b-"+suffix+".example.com"
	hw := e.watchHost(t, hostA)
	config := &mpv1alpha1.PangolinConfig{TunnelNamespace: tunnels, DefaultTunnel: "main"}
	e.startTenant(tenantA, config, 2)
	e.startTenant(tenantB, config, 2)

	older, err := e.adminKube.NetworkingV1().Ingresses(nsB).Create(e.ctx, hostIngress(nsB, "web", hostB), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.waitPublishedBy(hostB, older, 30*time.Second)
	// a's Ingress must come after b's in claim order; one created in the same second may have the smaller UID, so it
	// is created again until it comes after.
	var newer *networkingv1.Ingress
	e.waitFor("tenant a's Ingress to come after tenant b's", 30*time.Second, func() (bool, error) {
		if newer != nil {
			if err := e.adminKube.NetworkingV1().Ingresses(nsA).Delete(e.ctx, "web", metav1.DeleteOptions{}); err != nil {
				return false, err
			}
			e.waitFor("the deleted Ingress to go", 30*time.Second, func() (bool, error) {
				_, err := e.adminKube.NetworkingV1().Ingresses(nsA).Get(e.ctx, "web", metav1.GetOptions{})
				return apierrors.IsNotFound(err), nil
			})
		}
		newer, err = e.adminKube.NetworkingV1().Ingresses(nsA).Create(e.ctx, hostIngress(nsA, "web", hostA), metav1.CreateOptions{})
		return err == nil && claimsFirst(older, newer), err
	})
	e.waitPublishedBy(hostA, newer, gcTimeout)
	publisher, err := e.admin.TunnelV1alpha1().PangolinResources(nsA).Get(e.ctx, ingresstunnel.ResourceName(nsA, "web", hostA), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	e.updateIngress(nsB, "web", func(ing *networkingv1.Ingress) {
		ing.Annotations = map[string]string{ingresstunnel.AnnotationSubdomain: "a-" + suffix}
	})
	holderName := fmt.Sprintf("Ingress %s/%s", nsA, newer.Name)
	e.waitFor("a HostConflict Warning on tenant b's Ingress", 30*time.Second, func() (bool, error) {
		return len(e.hostConflicts(nsB, "web")) > 0, nil
	})
	if got := e.hostConflicts(nsB, "web"); len(got) != 1 || !strings.Contains(got[0], hostA) || !strings.Contains(got[0], holderName) {
		t.Errorf("HostConflict Warnings on tenant b's Ingress: %q; want one naming %s and %s", got, hostA, holderName)
	}
	e.waitFor("tenant b's resource to go", 30*time.Second, func() (bool, error) { return len(e.resourcesByHost(nsB)) == 0, nil })
	e.waitPublishedBy(hostA, newer, 30*time.Second)
	if kept, err := e.admin.TunnelV1alpha1().PangolinResources(nsA).Get(e.ctx, publisher.Name, metav1.GetOptions{}); err != nil || kept.UID != publisher.UID {
		t.Errorf("tenant a's PangolinResource was replaced or deleted (%v)", err)
	}
	hw.check()
}
