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
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
)

func allowance(entries ...mpv1alpha1.AllowedHostname) hostAllowance {
	return newHostAllowance(testTenant, entries)
}

// TestHostAllowance pins what an entry allows: an exact name only itself; "*.<name>" every name below <name>, at
// any depth, but not <name> itself (Gateway API's listener hostnames); no list every host; an entry the CRD refuses
// nothing.
func TestHostAllowance(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []mpv1alpha1.AllowedHostname
		allowed []string
		refused []string
	}{
		{name: "no list allows every host", allowed: []string{"web.a.example.com", "shop.example.net"}},
		{name: "an exact name", entries: []mpv1alpha1.AllowedHostname{"shop.example.com"},
			allowed: []string{"shop.example.com", "SHOP.example.com"},
			refused: []string{"www.shop.example.com", "example.com", "shop.example.com.evil.net", "xshop.example.com"}},
		{name: "a wildcard suffix", entries: []mpv1alpha1.AllowedHostname{"*.a.example.com"},
			allowed: []string{"web.a.example.com", "deep.web.a.example.com"},
			refused: []string{"a.example.com", "web.b.example.com", "xa.example.com", "web.a.example.com.evil.net", "example.com"}},
		{name: "both", entries: []mpv1alpha1.AllowedHostname{"*.a.example.com", "shop.example.net"},
			allowed: []string{"web.a.example.com", "shop.example.net"}, refused: []string{"a.example.com", "web.example.net"}},
		{name: "entries the CRD refuses allow nothing", entries: []mpv1alpha1.AllowedHostname{"*", "*.", "a.*.example.com", "**.example.com"},
			refused: []string{"web.a.example.com", "a.example.com", "x.example.com", "example.com"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := allowance(tc.entries...)
			for _, host := range tc.allowed {
				if !a.allows(host) {
					t.Errorf("%v refuses %s", tc.entries, host)
				}
			}
			for _, host := range tc.refused {
				if a.allows(host) {
					t.Errorf("%v allows %s", tc.entries, host)
				}
			}
		})
	}
}

// TestRefusalNamesTheHostAndTheTenant: the message names the host, the name it is published under when that is
// another, the tenant, and what the tenant may publish (the first five entries).
func TestRefusalNamesTheHostAndTheTenant(t *testing.T) {
	a := allowance("*.a.example.com")
	if got, want := a.refusal("web.b.example.com", "web.b.example.com"), "Host web.b.example.com is not among the hosts tenant "+
		testTenant+" may publish (spec.pangolin.allowedHostnames: *.a.example.com); this Ingress gets no PangolinResource for it"; got != want {
		t.Errorf("refusal:\n got %s\nwant %s", got, want)
	}
	if got := a.refusal("web.a.example.com", "shop.example.com"); !strings.Contains(got,
		"Host web.a.example.com is published as shop.example.com (annotation "+AnnotationSubdomain+"), which is not among") {
		t.Errorf("refusal of a renamed host: %s", got)
	}
	var many []mpv1alpha1.AllowedHostname
	for i := range 7 {
		many = append(many, mpv1alpha1.AllowedHostname(fmt.Sprintf("h%d.example.com", i)))
	}
	if got := allowance(many...).refusal("x.example.com", "x.example.com"); !strings.Contains(got, "h4.example.com and 2 more)") ||
		strings.Contains(got, "h5.example.com") {
		t.Errorf("refusal with seven entries: %s", got)
	}
}

// TestClaimedHostsAreTheAllowedOnes: an Ingress claims only the names its tenant may publish, judged by the name
// the subdomain annotation gives the host, so the annotation cannot take a host out of the tenant's list.
func TestClaimedHostsAreTheAllowedOnes(t *testing.T) {
	two := hostIngress("demo", "web", "uid", 0, "web.a.example.com", "web.b.example.com")
	renamed := hostIngress("demo", "web", "uid", 0, "web.a.example.com")
	renamed.Annotations = map[string]string{AnnotationSubdomain: "shop"} // published as shop.example.com
	for _, tc := range []struct {
		name    string
		ing     *networkingv1.Ingress
		allowed hostAllowance
		want    []string
	}{
		{"no list", two, allowance(), []string{"web.a.example.com", "web.b.example.com"}},
		{"a wildcard suffix", two, allowance("*.a.example.com"), []string{"web.a.example.com"}},
		{"nothing allowed", two, allowance("shop.example.net"), nil},
		{"renamed out of the list", renamed, allowance("*.a.example.com"), nil},
		{"renamed into the list", renamed, allowance("shop.example.com"), []string{"shop.example.com"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := claimedNames(tc.ing, tc.allowed); !slices.Equal(got, tc.want) {
				t.Errorf("claimedNames = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestPlanRefusesHostsOutsideTheList: the plan makes no resource for a host the tenant may not publish, keeps none,
// says why each would go, and warns once per host.
func TestPlanRefusesHostsOutsideTheList(t *testing.T) {
	ing := seedIngress() // app, api and admin.example.com
	pl := testPlanner(seedService())
	pl.allowed = allowance("app.example.com", "*.api.example.com") // the wildcard does not allow api.example.com itself
	p := pl.plan(ing, "main", namesOf(ing.Namespace, ing.Name, nil))
	if len(p.resources) != 1 || hostOf(p.resources[0]) != "app.example.com" {
		t.Fatalf("planned %d resources, want app.example.com's only", len(p.resources))
	}
	for _, host := range []string{"api.example.com", "admin.example.com"} {
		name := ResourceName(ing.Namespace, ing.Name, host)
		if p.keep.Has(name) {
			t.Errorf("%s is kept", host)
		}
		if _, ok := p.refused[name]; !ok {
			t.Errorf("%s is not refused", host)
		}
	}
	var refusals []string
	for _, pr := range p.problems {
		if pr.Reason == ReasonHostNotAllowed {
			refusals = append(refusals, pr.Message)
		} else {
			t.Errorf("unexpected problem %s: %s", pr.Reason, pr.Message)
		}
	}
	if len(refusals) != 2 || !strings.Contains(refusals[0], "Host admin.example.com ") || !strings.Contains(refusals[1], "Host api.example.com ") {
		t.Errorf("HostNotAllowed warnings: %q", refusals)
	}
}

// TestARefusedHostClaimsNothing: tenant a, allowed *.a.example.com, has the earlier Ingress, which asks for
// web.a.example.com and web.b.example.com; tenant b, allowed *.b.example.com, asks for web.b.example.com later.
// Tenant a publishes its own host and gets one HostNotAllowed for the other, which it does not claim: tenant b
// publishes it, with no HostConflict. Then tenant a's list drops *.a.example.com (the manager restarts its
// controller with the new spec): its resource is withdrawn, with a Deleted Event saying why, and a HostNotAllowed.
func TestARefusedHostClaimsNothing(t *testing.T) {
	cl := newCluster(t, tunnel(testTunnelNS, "main"),
		hostIngress("ns-a", "web", "uid-a", 0, "web.a.example.com", "web.b.example.com"),
		hostIngress("ns-b", "web", "uid-b", 1, "web.b.example.com"))
	a := cl.start("tenant-a", "ns-a", "*.a.example.com")
	b := cl.start("tenant-b", "ns-b", "*.b.example.com")
	cl.waitPublishedBy("web.a.example.com", "ns-a", "web")
	cl.waitPublishedBy("web.b.example.com", "ns-b", "web")
	refusal := "Warning " + ReasonHostNotAllowed + " Host web.b.example.com is not among the hosts tenant tenant-a may publish"
	cl.waitFor("a HostNotAllowed on tenant a's Ingress", func() bool { return len(a.events.With(refusal)) == 1 })
	if n := a.events.Count(corev1.EventTypeWarning, ReasonHostNotAllowed); n != 1 {
		t.Errorf("tenant a: %d HostNotAllowed Warnings, want 1: %q", n, a.events.With("Warning"))
	}
	if n := b.events.Count(corev1.EventTypeWarning, ReasonHostConflict); n != 0 {
		t.Errorf("tenant b: %d HostConflict Warnings: the refused Ingress claimed the host: %q", n, b.events.With("Warning"))
	}

	a.shutdown()
	a = cl.start("tenant-a", "ns-a", "shop.a.example.com")
	cl.waitFor("tenant a's resource to be withdrawn", func() bool { return len(cl.resourcesFor("web.a.example.com")) == 0 })
	withdrawn := "Normal " + ReasonDeleted + " Deleted PangolinResource " + ResourceName("ns-a", "web", "web.a.example.com") +
		" for host web.a.example.com: its host is not among the hosts tenant tenant-a may publish"
	cl.waitFor("a Deleted Event saying why", func() bool { return len(a.events.With(withdrawn)) == 1 })
	cl.waitFor("a HostNotAllowed for the withdrawn host", func() bool {
		return len(a.events.With("Warning "+ReasonHostNotAllowed+" Host web.a.example.com is not among")) == 1
	})
	cl.waitPublishedBy("web.b.example.com", "ns-b", "web")
	cl.neverTwo()
}

// TestARefusedHostIsWithdrawnWhereResourcesAreKept: a sync that leaves the Ingress's resources as they are (its
// tunnel is missing, an annotation is invalid) still withdraws those that publish a host the tenant may no longer
// publish.
func TestARefusedHostIsWithdrawnWhereResourcesAreKept(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(h *harness)
		reason string
	}{
		{"the tunnel is missing", func(h *harness) {
			if err := h.mp.TunnelV1alpha1().PangolinTunnels(testTunnelNS).Delete(h.ctx, "main", metav1.DeleteOptions{}); err != nil {
				h.t.Fatal(err)
			}
		}, ReasonTunnelNotFound},
		{"an annotation is invalid", func(h *harness) {
			h.updateIngress(func(ing *networkingv1.Ingress) { ing.Annotations = map[string]string{AnnotationSSO: "maybe"} })
		}, ReasonInvalidAnnotation},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil, []runtime.Object{seedIngress(), seedService()}, tunnel(testTunnelNS, "main"))
			h.waitHosts("app.example.com", "api.example.com", "admin.example.com")
			h.shutdown()
			tc.change(h)
			config := testConfig()
			config.AllowedHostnames = []mpv1alpha1.AllowedHostname{"app.example.com"}
			h.start(config)
			h.waitHosts("app.example.com")
			h.waitFor("two HostNotAllowed Warnings", func() bool { return h.events.Count(corev1.EventTypeWarning, ReasonHostNotAllowed) == 2 })
			h.waitFor("the Warning "+tc.reason, func() bool { return h.events.Count(corev1.EventTypeWarning, tc.reason) == 1 })
		})
	}
}
