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

package translator

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

// hybridGCP is a hybrid tenant's spec.gcp: rack-1 is in zone b, rack-2 in zone c, and every other Node (one of
// rack-3, unmapped, or one without a zone) in zone d.
func hybridGCP() *mpv1alpha1.GCPConfig {
	return &mpv1alpha1.GCPConfig{ProjectID: testProject, Network: "vpc-a",
		NetworkEndpointType: mpv1alpha1.NetworkEndpointTypeNonGCPPrivateIPPort,
		ZoneMapping:         map[string]mpv1alpha1.GCEZone{"rack-1": zoneB, "rack-2": zoneC},
		DefaultNEGZone:      zoneD}
}

// useGCP makes the harness's translator one of a tenant with this spec.gcp, as the tenant's restart after a spec
// change does.
func (h *harness) useGCP(gcp *mpv1alpha1.GCPConfig) {
	h.t.Helper()
	h.tctx.ProviderConfig.Spec.GCP = gcp
	tr, err := New(h.tctx, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	h.translator = tr
	add := tr.add
	tr.add = func(key string) {
		h.mu.Lock()
		h.enqueued[key] = true
		h.mu.Unlock()
		add(key)
	}
}

// hybridObjects: shop/web exposes port 80 (targetPort 8080) from Pods on n1 (rack-1), n2 (rack-2), n3 (rack-3,
// unmapped) and n4 (no zone); a is dual-stack, v6 has only an IPv6 address, slow is not ready, and gated waits only
// for the NEG readiness gate. The slices' zone fields carry the cluster's zone names, which are no GCE zones.
func hybridObjects() []runtimeObject {
	return []runtimeObject{
		node("n1", "rack-1"), node("n2", "rack-2"), node("n3", "rack-3"), node("n4", ""),
		service("web", `{"exposed_ports":{"80":{}}}`, servicePort("http", 80, "web")),
		slice("web", "web-v4", "http", 8080,
			ep{ip: "10.0.0.1", node: "n1", zone: "rack-1", pod: "a"},
			ep{ip: "10.0.0.2", node: "n2", zone: "rack-2", pod: "b"},
			ep{ip: "10.0.0.3", node: "n3", pod: "c"},
			ep{ip: "10.0.0.4", node: "n4", pod: "d"},
			ep{ip: "10.0.0.5", node: "n1", pod: "slow", notReady: true},
			ep{ip: "10.0.0.6", node: "n1", pod: "gated", notReady: true},
		),
		ipv6Slice("web", "web-v6", "http", 8080,
			ep{ip: "fd00::1", node: "n1", zone: "rack-1", pod: "a"},
			ep{ip: "fd00::7", node: "n2", pod: "v6"},
		),
		gatedPod("gated"),
	}
}

// TestAHybridTenantDeclaresIPv4EndpointsInTheMappedZones: a NON_GCP_PRIVATE_IP_PORT tenant's Translation (its own
// version, h1) declares NEGs of that type in the GCE zones its Nodes' zones map to (the default zone for an unmapped
// zone or none), without a subnetwork, holding each ready endpoint (and the one waiting only for the readiness
// gate) as its IPv4 address and port with its Pod: no instance, and a dual-stack Pod without its IPv6 address. An
// IPv6-only Pod is left out with a Warning; the zones fixed ahead are GCE zones, as for GCE_VM_IP_PORT.
func TestAHybridTenantDeclaresIPv4EndpointsInTheMappedZones(t *testing.T) {
	h := newHarness(t, hybridObjects()...)
	gcp := hybridGCP()
	gcp.Zones = []mpv1alpha1.GCEZone{zoneE}
	h.useGCP(gcp)
	h.sync("web")

	trs := h.translations()
	tr := trs["neg-h1-web-80"]
	if len(trs) != 1 || tr == nil {
		t.Fatalf("Translations = %v, want neg-h1-web-80 only", keys(trs))
	}
	name := negName(hybridTranslationVersion, testIdentity, testTenant, testNamespace, "web", 80)
	if !strings.HasPrefix(name, "mph1-") || name == negName(translationVersion, testIdentity, testTenant, testNamespace, "web", 80) {
		t.Fatalf("hybrid NEG name %s is not of its own layout", name)
	}
	marker := negDescription(testIdentity, testTenant, testNamespace, "web", "uid-web", 80)
	neg := func(zone string, endpoints ...mpv1alpha1.NetworkEndpoint) mpv1alpha1.BackendResource {
		return mpv1alpha1.BackendResource{Kind: mpv1alpha1.BackendResourceKindNetworkEndpointGroup, Name: name, Zone: zone,
			Description: marker, NetworkEndpointGroup: &mpv1alpha1.NetworkEndpointGroupParameters{
				NetworkEndpointType: mpv1alpha1.NetworkEndpointTypeNonGCPPrivateIPPort, Network: "vpc-a", Endpoints: endpoints}}
	}
	want := []mpv1alpha1.BackendResource{
		neg(zoneB, mpv1alpha1.NetworkEndpoint{IPAddress: "10.0.0.1", Port: 8080, Pod: "a"},
			mpv1alpha1.NetworkEndpoint{IPAddress: "10.0.0.6", Port: 8080, Pod: "gated"}),
		neg(zoneC, mpv1alpha1.NetworkEndpoint{IPAddress: "10.0.0.2", Port: 8080, Pod: "b"}),
		neg(zoneD, mpv1alpha1.NetworkEndpoint{IPAddress: "10.0.0.3", Port: 8080, Pod: "c"},
			mpv1alpha1.NetworkEndpoint{IPAddress: "10.0.0.4", Port: 8080, Pod: "d"}),
		neg(zoneE),
	}
	if !reflect.DeepEqual(tr.Spec.Resources, want) {
		t.Errorf("resources:\n got %+v\nwant %+v", tr.Spec.Resources, want)
	}
	if got := tr.Annotations[mpv1alpha1.TranslationGeneratedNEGNameAnnotationKey]; got != name {
		t.Errorf("generated NEG name annotation = %q, want %q", got, name)
	}
	var status negStatus
	if err := json.Unmarshal([]byte(h.service("web").Annotations[negapi.StatusAnnotationKey]), &status); err != nil {
		t.Fatal(err)
	}
	if wantStatus := (negStatus{NetworkEndpointGroups: map[string]string{"80": name}, Zones: []string{zoneB, zoneC, zoneD, zoneE}}); !status.equal(wantStatus) {
		t.Errorf("neg-status = %+v, want %+v", status, wantStatus)
	}
	if got := h.events.With("Warning " + ReasonIPv6EndpointsNotServed); len(got) != 1 {
		t.Errorf("want one %s Warning for the IPv6-only Pod, got %v", ReasonIPv6EndpointsNotServed, got)
	}
	if got := h.events.With("Warning " + ReasonEndpointsSkipped); len(got) != 0 {
		t.Errorf("every Node has a GCE zone (mapped or the default), yet %v", got)
	}

	// Converged: a second sync writes nothing.
	h.writes()
	h.sync("web")
	if w := h.writes(); len(w) != 0 {
		t.Errorf("a converged hybrid sync wrote %v", w)
	}
}

// TestAHybridTenantWithoutADefaultZoneLeavesUnmappedNodesOut: without defaultNEGZone, the endpoints of a Node whose
// zone the mapping does not name (or that has none) are left out with a Warning, as those of a Node without a zone
// are for GCE_VM_IP_PORT.
func TestAHybridTenantWithoutADefaultZoneLeavesUnmappedNodesOut(t *testing.T) {
	h := newHarness(t, hybridObjects()...)
	gcp := hybridGCP()
	gcp.DefaultNEGZone = ""
	h.useGCP(gcp)
	h.sync("web")
	if got, want := h.endpointIPs("neg-h1-web-80"), []string{"10.0.0.1", "10.0.0.2", "10.0.0.6"}; !reflect.DeepEqual(got, want) {
		t.Errorf("NEG endpoints = %v, want %v", got, want)
	}
	if got := h.events.With("Warning " + ReasonEndpointsSkipped); len(got) != 1 {
		t.Errorf("want one %s Warning for the endpoints on n3 and n4, got %v", ReasonEndpointsSkipped, got)
	}
}

// TestANodesZoneChangeMovesItsHybridEndpoints: a Node relabelled into another cluster zone moves its endpoints to the
// NEG of the GCE zone that zone maps to, whatever zone its EndpointSlice still gives, and the NEG it left is kept,
// empty (inactive), as a GCE_VM_IP_PORT NEG of a zone that lost its Nodes is.
func TestANodesZoneChangeMovesItsHybridEndpoints(t *testing.T) {
	h := newHarness(t, hybridObjects()...)
	h.useGCP(hybridGCP())
	h.sync("web")
	n2, err := h.kube.CoreV1().Nodes().Get(h.ctx, "n2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n2.Labels[corev1.LabelTopologyZone] = "rack-1"
	if _, err := h.kube.CoreV1().Nodes().Update(h.ctx, n2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The Node handler's view of the change: the topology is built again.
	h.translator.nodeGeneration.Add(1)
	h.sync("web")
	byZone := map[string][]string{}
	for _, r := range h.translations()["neg-h1-web-80"].Spec.Resources {
		byZone[r.Zone] = []string{}
		for _, e := range r.NetworkEndpointGroup.Endpoints {
			byZone[r.Zone] = append(byZone[r.Zone], e.IPAddress)
		}
	}
	want := map[string][]string{zoneB: {"10.0.0.1", "10.0.0.2", "10.0.0.6"}, zoneC: {}, zoneD: {"10.0.0.3", "10.0.0.4"}}
	if !reflect.DeepEqual(byZone, want) {
		t.Errorf("endpoints by zone = %v, want %v", byZone, want)
	}
}

// TestATypeSwitchDeclaresNewNEGsBeforeTheOldOnesGo: a tenant switching from GCE_VM_IP_PORT to hybrid NEGs, and
// back, gets the other type's Translation (and NEGs) beside the old one, which is deleted only once the new one is
// synced; neither type takes the other's Translation for a newer build's.
func TestATypeSwitchDeclaresNewNEGsBeforeTheOldOnesGo(t *testing.T) {
	h := newHarness(t, hybridObjects()...)
	h.sync("web")
	if trs := h.translations(); len(trs) != 1 || trs["neg-v1-web-80"] == nil {
		t.Fatalf("GCE_VM_IP_PORT Translations = %v", keys(trs))
	}
	for _, step := range []struct {
		gcp      *mpv1alpha1.GCPConfig
		old, new string
	}{
		{hybridGCP(), "neg-v1-web-80", "neg-h1-web-80"},
		{&mpv1alpha1.GCPConfig{ProjectID: testProject, Network: "vpc-a", Subnetwork: "sub-a"}, "neg-h1-web-80", "neg-v1-web-80"},
	} {
		h.useGCP(step.gcp)
		h.sync("web")
		trs := h.translations()
		if len(trs) != 2 || trs[step.old] == nil || trs[step.new] == nil {
			t.Fatalf("after the switch to %s: Translations = %v, want %s beside %s", step.new, keys(trs), step.new, step.old)
		}
		if negNameOf(trs[step.old]) == negNameOf(trs[step.new]) {
			t.Fatalf("%s and %s declare the same NEG %s", step.old, step.new, negNameOf(trs[step.new]))
		}
		status := h.service("web").Annotations[negapi.StatusAnnotationKey]
		if !strings.Contains(status, negNameOf(trs[step.new])) {
			t.Errorf("neg-status %s does not name the new NEG %s", status, negNameOf(trs[step.new]))
		}
		h.waitCached("services", "shop/web", func(obj any) bool {
			return obj.(*corev1.Service).Annotations[negapi.StatusAnnotationKey] == status
		})
		h.sync("web")
		if trs := h.translations(); len(trs) != 2 {
			t.Fatalf("the old Translation went before the new one was synced: %v", keys(trs))
		}
		h.writes()
		h.markSynced(step.new)
		h.sync("web")
		if w := h.writes(); !reflect.DeepEqual(w, []string{"delete translations"}) {
			t.Errorf("writes = %v, want the old Translation's deletion only", w)
		}
		// The fake API deletes at once (no finalizer wait): the pusher's part is its own tests'.
		if trs := h.translations(); trs[step.old] != nil {
			if trs[step.old].DeletionTimestamp == nil {
				t.Errorf("%s was not deleted once %s was synced", step.old, step.new)
			}
		}
	}
	if got := h.events.With("Warning " + ReasonNewerTranslation); len(got) != 0 {
		t.Errorf("a type switch took the other type's Translation for a newer build's: %v", got)
	}
}

// TestAHybridTenantLeavesANewerLayoutAlone: a hybrid tenant, as a GCE_VM_IP_PORT one, leaves a Translation of a
// layout it does not write (h2, a newer build's) alone and makes no successor.
func TestAHybridTenantLeavesANewerLayoutAlone(t *testing.T) {
	newer := translationOf("neg-h2-web-80", "web", "uid-web", testTenant, true, "mph2-e2e-shop-web-80-0a1b2c3d4e")
	h := newHarness(t, append(hybridObjects(), newer)...)
	h.useGCP(hybridGCP())
	h.sync("web")
	if trs := h.translations(); len(trs) != 1 || trs["neg-h2-web-80"] == nil {
		t.Fatalf("Translations = %v; want the newer build's only", keys(trs))
	}
	if got := h.events.With("Warning " + ReasonNewerTranslation); len(got) != 1 || !strings.Contains(got[0], "this build writes h1") {
		t.Errorf("want one %s Warning naming this build's layout h1, got %v", ReasonNewerTranslation, got)
	}
}

// TestAHybridTenantsNodeEventsCountGCEZones: a hybrid tenant's Node handlers count Nodes by the GCE zone their zone
// maps to, so every Service is enqueued only when the set of GCE zones changes: a Node of another rack mapped to a
// zone the tenant has changes nothing (beside its own endpoints), and a Node without a zone, which the default zone
// takes, is one of that zone's Nodes.
func TestAHybridTenantsNodeEventsCountGCEZones(t *testing.T) {
	h := newHarness(t, hybridObjects()...)
	gcp := hybridGCP()
	gcp.ZoneMapping["rack-4"] = zoneB
	h.useGCP(gcp)
	h.settle()
	for _, n := range []*corev1.Node{node("n1", "rack-1"), node("n2", "rack-2")} {
		h.translator.onNodeAdd(n, true)
	}
	all := []string{"shop/web"}
	for _, step := range []struct {
		what  string
		event func()
		want  []string
	}{
		{"the initial list", func() {}, nil},
		{"a Node of another rack mapped to zone b", func() { h.translator.onNodeAdd(node("n5", "rack-4"), false) }, nil},
		{"a Node without a zone: the default zone d, new", func() { h.translator.onNodeAdd(node("n6", ""), false) }, all},
		{"a Node of an unmapped rack: zone d, known", func() { h.translator.onNodeAdd(node("n7", "rack-9"), false) }, nil},
		{"a Node moving between racks of one zone", func() { h.translator.onNodeUpdate(node("n5", "rack-4"), node("n5", "rack-1")) }, nil},
		{"the last Node of zone c moving to rack-1", func() { h.translator.onNodeUpdate(node("n2", "rack-2"), node("n2", "rack-1")) }, all},
	} {
		step.event()
		if got := h.queued(); !reflect.DeepEqual(got, step.want) && (len(got) != 0 || len(step.want) != 0) {
			t.Errorf("%s: queued %v, want %v", step.what, got, step.want)
		}
	}
}
