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
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

// shop/web exposes port 80 (named http, targetPort "web" resolved per Pod) and not 443. Nodes n1 and n2 are in
// zone b, n3 in zone c, n4 has no zone.
func webObjects() []runtimeObject {
	return []runtimeObject{
		node("n1", zoneB), node("n2", zoneB), node("n3", zoneC), node("n4", ""),
		service("web", `{"exposed_ports":{"80":{}}}`, servicePort("http", 80, "web"), servicePort("https", 443, "8443")),
		slice("web", "web-1", "http", 8080,
			ep{ip: "10.0.0.2", node: "n2"},
			ep{ip: "10.0.0.1", node: "n1"},
			ep{ip: "10.0.0.9", node: "n1", notReady: true},
			ep{ip: "10.0.1.1", node: "n3", zone: zoneC},
			ep{ip: "10.0.4.1", node: "n4"},        // no zone: skipped
			ep{ip: "10.0.5.1", node: "elsewhere"}, // a Node the tenant does not see: skipped
		),
		slice("web", "web-2", "http", 9090, ep{ip: "10.0.1.2", node: "n3"}, ep{ip: "10.0.0.1", node: "n1"}),
		// A slice of the https port only, and one of another Service: neither contributes.
		slice("web", "web-3", "https", 8443, ep{ip: "10.0.0.7", node: "n1"}),
		slice("other", "other-1", "http", 8080, ep{ip: "10.0.0.8", node: "n1"}),
	}
}

func TestSyncDeclaresOneTranslationPerExposedPort(t *testing.T) {
	h := newHarness(t, webObjects()...)
	h.sync("web")

	trs := h.translations()
	if len(trs) != 1 {
		t.Fatalf("got %d Translations, want 1: %v", len(trs), keys(trs))
	}
	tr := trs["neg-v1-web-80"]
	if tr == nil {
		t.Fatalf("no Translation neg-v1-web-80: %v", keys(trs))
	}
	if got := tr.Labels; got[testLabelKey] != testTenant || got[mpv1alpha1.TranslationOwnerUIDLabelKey] != "uid-web" {
		t.Errorf("labels = %v", got)
	}
	if !reflect.DeepEqual(tr.Finalizers, []string{mpv1alpha1.TranslationDeleterFinalizer}) {
		t.Errorf("finalizers = %v", tr.Finalizers)
	}
	ref := metav1.GetControllerOf(tr)
	if ref == nil || ref.Kind != "Service" || ref.Name != "web" || ref.UID != "uid-web" || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Errorf("controller reference = %+v", ref)
	}

	name := negName(translationVersion, testIdentity, testTenant, testNamespace, "web", 80)
	marker := negDescription(testIdentity, testTenant, testNamespace, "web", "uid-web", 80)
	want := []mpv1alpha1.BackendResource{
		{Kind: mpv1alpha1.BackendResourceKindNetworkEndpointGroup, Name: name, Zone: zoneB, Description: marker,
			NetworkEndpointGroup: &mpv1alpha1.NetworkEndpointGroupParameters{Network: "vpc-a", Subnetwork: "sub-a",
				Endpoints: []mpv1alpha1.NetworkEndpoint{
					{Instance: "n1", IPAddress: "10.0.0.1", Port: 8080},
					{Instance: "n1", IPAddress: "10.0.0.1", Port: 9090}, // the same Pod IP behind another targetPort number
					{Instance: "n2", IPAddress: "10.0.0.2", Port: 8080},
				}}},
		{Kind: mpv1alpha1.BackendResourceKindNetworkEndpointGroup, Name: name, Zone: zoneC, Description: marker,
			NetworkEndpointGroup: &mpv1alpha1.NetworkEndpointGroupParameters{Network: "vpc-a", Subnetwork: "sub-a",
				Endpoints: []mpv1alpha1.NetworkEndpoint{
					{Instance: "n3", IPAddress: "10.0.1.1", Port: 8080},
					{Instance: "n3", IPAddress: "10.0.1.2", Port: 9090},
				}}},
	}
	if !reflect.DeepEqual(tr.Spec.Resources, want) {
		t.Errorf("resources:\n got %+v\nwant %+v", tr.Spec.Resources, want)
	}

	svc := h.service("web")
	var status negStatus
	if err := json.Unmarshal([]byte(svc.Annotations[negapi.StatusAnnotationKey]), &status); err != nil {
		t.Fatalf("neg-status %q: %v", svc.Annotations[negapi.StatusAnnotationKey], err)
	}
	if wantStatus := (negStatus{NetworkEndpointGroups: map[string]string{"80": name}, Zones: []string{zoneB, zoneC}}); !status.equal(wantStatus) {
		t.Errorf("neg-status = %+v, want %+v", status, wantStatus)
	}
	if got := h.events.With("Warning " + ReasonEndpointsSkipped); len(got) != 1 {
		t.Errorf("want one %s Warning for the endpoints on n4 and elsewhere, got %v", ReasonEndpointsSkipped, got)
	}
	if got := h.events.With("Normal " + ReasonTranslationCreated); len(got) != 1 {
		t.Errorf("want one %s Event, got %v", ReasonTranslationCreated, got)
	}
}

func TestConvergedSyncWritesNothing(t *testing.T) {
	h := newHarness(t, webObjects()...)
	h.sync("web")
	status := h.service("web").Annotations[negapi.StatusAnnotationKey]
	h.waitCached("services", "shop/web", func(obj any) bool {
		return obj.(*corev1.Service).Annotations[negapi.StatusAnnotationKey] == status
	})
	h.writes()

	for range 3 {
		h.sync("web")
	}
	if w := h.writes(); len(w) != 0 {
		t.Errorf("a converged Service caused writes: %v", w)
	}
	if got := h.events.With("Warning"); len(got) != 1 {
		t.Errorf("a repeated problem must be reported once, got %v", got)
	}
}

func TestEndpointChangeUpdatesTheTranslation(t *testing.T) {
	h := newHarness(t, webObjects()...)
	h.sync("web")
	h.writes()

	s := slice("web", "web-2", "http", 9090, ep{ip: "10.0.1.2", node: "n3"}, ep{ip: "10.0.1.3", node: "n3"})
	s, err := h.kube.DiscoveryV1().EndpointSlices(testNamespace).Update(h.ctx, s, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.waitCached("slices", "shop/web-2", func(obj any) bool {
		return len(obj.(*discoveryv1.EndpointSlice).Endpoints) == 2 &&
			obj.(*discoveryv1.EndpointSlice).Endpoints[1].Addresses[0] == "10.0.1.3"
	})
	h.writes()
	h.sync("web")
	if w := h.writes(); !reflect.DeepEqual(w, []string{"patch translations"}) {
		t.Errorf("writes = %v, want one Translation spec patch", w)
	}
	tr := h.translations()["neg-v1-web-80"]
	var got []string
	for _, r := range tr.Spec.Resources {
		for _, e := range r.NetworkEndpointGroup.Endpoints {
			got = append(got, r.Zone+"/"+e.IPAddress)
		}
	}
	want := []string{zoneB + "/10.0.0.1", zoneB + "/10.0.0.2", zoneC + "/10.0.1.1", zoneC + "/10.0.1.2", zoneC + "/10.0.1.3"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("endpoints = %v, want %v", got, want)
	}
}

func TestPortRemovedAndAnnotationRemoved(t *testing.T) {
	objects := webObjects()
	objects[4] = service("web", `{"exposed_ports":{"80":{},"443":{"name":"custom-https"}}}`,
		servicePort("http", 80, "web"), servicePort("https", 443, "8443"))
	h := newHarness(t, objects...)
	h.sync("web")
	if trs := h.translations(); len(trs) != 2 || trs["neg-v1-web-443"] == nil ||
		trs["neg-v1-web-443"].Spec.Resources[0].Name != "custom-https" ||
		len(trs["neg-v1-web-443"].Spec.Resources[0].NetworkEndpointGroup.Endpoints) != 1 {
		t.Fatalf("Translations = %v", keys(trs))
	}

	// Port 443 no longer exposed: its Translation goes, the status forgets it.
	h.setAnnotation("web", `{"exposed_ports":{"80":{}}}`)
	h.sync("web")
	if trs := h.translations(); len(trs) != 1 || trs["neg-v1-web-80"] == nil {
		t.Fatalf("after removing port 443: Translations = %v", keys(trs))
	}
	if s := h.service("web").Annotations[negapi.StatusAnnotationKey]; strings.Contains(s, "443") || !strings.Contains(s, `"80"`) {
		t.Errorf("neg-status = %s", s)
	}

	// Annotation removed: every Translation goes, and so does the status.
	h.setAnnotation("web", "")
	h.sync("web")
	if trs := h.translations(); len(trs) != 0 {
		t.Fatalf("after removing the annotation: Translations = %v", keys(trs))
	}
	if s, ok := h.service("web").Annotations[negapi.StatusAnnotationKey]; ok {
		t.Errorf("neg-status still there: %s", s)
	}
	if got := h.events.With("Normal " + ReasonTranslationDeleted); len(got) != 2 {
		t.Errorf("want two %s Events, got %v", ReasonTranslationDeleted, got)
	}
}

// setAnnotation sets (or, with "", removes) the neg annotation and waits until the informer has it.
func (h *harness) setAnnotation(name, value string) {
	h.t.Helper()
	svc := h.service(name)
	if svc.Annotations == nil {
		svc.Annotations = map[string]string{}
	}
	if value == "" {
		delete(svc.Annotations, negapi.AnnotationKey)
	} else {
		svc.Annotations[negapi.AnnotationKey] = value
	}
	svc, err := h.kube.CoreV1().Services(testNamespace).Update(h.ctx, svc, metav1.UpdateOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	h.waitCached("services", testNamespace+"/"+name, func(obj any) bool {
		return obj.(*corev1.Service).Annotations[negapi.AnnotationKey] == value
	})
	h.writes()
}

func TestMalformedAnnotationIsAWarningAndChangesNothing(t *testing.T) {
	h := newHarness(t, webObjects()...)
	h.sync("web")
	before := h.translations()
	status := h.service("web").Annotations[negapi.StatusAnnotationKey]

	h.setAnnotation("web", `{"exposed_ports":{"80":{}}`) // missing brace
	for range 2 {
		h.sync("web")
	}
	if w := h.writes(); len(w) != 0 {
		t.Errorf("a malformed annotation caused writes: %v", w)
	}
	if after := h.translations(); !reflect.DeepEqual(keys(after), keys(before)) {
		t.Errorf("Translations changed: %v -> %v", keys(before), keys(after))
	}
	if got := h.service("web").Annotations[negapi.StatusAnnotationKey]; got != status {
		t.Errorf("neg-status changed: %s -> %s", status, got)
	}
	if got := h.events.With("Warning " + ReasonInvalidAnnotation); len(got) != 1 {
		t.Errorf("want one %s Warning, got %v", ReasonInvalidAnnotation, got)
	}
}

func TestPortNotExposedIsAWarning(t *testing.T) {
	objects := webObjects()
	objects[4] = service("web", `{"exposed_ports":{"80":{},"8081":{}}}`, servicePort("http", 80, "web"))
	h := newHarness(t, objects...)
	h.sync("web")
	if trs := h.translations(); len(trs) != 1 || trs["neg-v1-web-80"] == nil {
		t.Errorf("Translations = %v, want only port 80's", keys(trs))
	}
	if got := h.events.With("Warning " + ReasonPortNotExposed); len(got) != 1 || !strings.Contains(got[0], "8081") {
		t.Errorf("want one %s Warning naming 8081, got %v", ReasonPortNotExposed, got)
	}
}

func TestNoNodesMeansNoNEGsButAStatus(t *testing.T) {
	h := newHarness(t, service("web", `{"exposed_ports":{"80":{}}}`, servicePort("http", 80, "8080")))
	h.sync("web")
	tr := h.translations()["neg-v1-web-80"]
	if tr == nil || len(tr.Spec.Resources) != 0 {
		t.Fatalf("Translation = %+v, want one without resources", tr)
	}
	if s := h.service("web").Annotations[negapi.StatusAnnotationKey]; !strings.Contains(s, `"80"`) {
		t.Errorf("neg-status = %q", s)
	}
}

// TestRunTranslatesOnEventsAndLeavesNothingBehind runs the translator: a Service annotated after start gets its
// Translation from the events alone, a new zone's Node adds a NEG, its syncs count under the --controllers name
// (neg), and stopping removes every handler.
func TestRunTranslatesOnEventsAndLeavesNothingBehind(t *testing.T) {
	metrics.Register()
	before, _ := metrics.Syncs.Value(testTenant, "neg", "success")
	objects := webObjects()
	objects[4] = service("web", "", servicePort("http", 80, "web"))
	h := newHarness(t, objects...)
	synced := make(chan struct{})
	h.translator.onSynced = func() { close(synced) }
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.translator.Run(ctx)
	}()
	<-synced

	h.setAnnotation("web", `{"exposed_ports":{"80":{}}}`)
	h.waitFor("the Translation", func() bool { return h.translations()["neg-v1-web-80"] != nil })
	if _, err := h.kube.CoreV1().Nodes().Create(h.ctx, node("n5", "europe-west1-d"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitFor("a NEG in the new zone", func() bool {
		tr := h.translations()["neg-v1-web-80"]
		return tr != nil && len(tr.Spec.Resources) == 3
	})
	h.waitFor("the status to list the new zone", func() bool {
		return strings.Contains(h.service("web").Annotations[negapi.StatusAnnotationKey], "europe-west1-d")
	})
	if after, _ := metrics.Syncs.Value(testTenant, "neg", "success"); after <= before {
		t.Errorf("multiproject_controller_syncs_total{controller=%q,result=\"success\"} = %v, want more than %v", "neg", after, before)
	}

	cancel()
	<-done
	for name, inf := range h.informers {
		// The harness's Translation informer is also the unfiltered one, which carries the NEG name claims' handler:
		// the run's claims.Service keeps it until the command closes it.
		want := 1
		if name == "translations" {
			want = 2
			if added, removed := inf.counts(); added != want || removed != want-1 {
				t.Errorf("%s: %d handlers added, %d removed while the claims are open; want %d and %d", name, added, removed, want, want-1)
			}
			if err := h.tctx.Claims.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if added, removed := inf.counts(); added != want || removed != want {
			t.Errorf("%s: %d handlers added, %d removed; want %d and %d", name, added, removed, want, want)
		}
	}
	// A shut-down queue takes no more keys.
	h.translator.workers.Add("shop/late")
	if n := h.translator.workers.Len(); n != 0 {
		t.Errorf("the queue is not shut down: it holds %d keys", n)
	}
}

func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	err := wait.PollUntilContextTimeout(h.ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		h.t.Fatalf("waiting for %s: %v", what, err)
	}
}

func keys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

func TestEndpointsIgnoreOtherAddressTypesAndProtocols(t *testing.T) {
	topo := newTopology([]*corev1.Node{node("n1", zoneB)})
	fqdn := slice("web", "fqdn", "http", 80, ep{ip: "web.example.com", node: "n1"})
	fqdn.AddressType = discoveryv1.AddressTypeFQDN
	udp := slice("web", "udp", "http", 80, ep{ip: "10.0.0.3", node: "n1"})
	udp.Ports[0].Protocol = ptr.To(corev1.ProtocolUDP)
	unnamed := slice("web", "unnamed", "", 81, ep{ip: "10.0.0.4", node: "n1"})
	nilReady := slice("web", "nilready", "http", 80, ep{ip: "10.0.0.5", node: "n1"})
	nilReady.Endpoints[0].Conditions.Ready = nil // unknown readiness counts as ready, as the API says
	port := servicePort("http", 80, "80")
	got, left := endpointsByZone([]*discoveryv1.EndpointSlice{fqdn, udp, unnamed, nilReady}, &port, topo, (&Translator{}).endpointReady)
	want := map[string][]mpv1alpha1.NetworkEndpoint{zoneB: {{Instance: "n1", IPAddress: "10.0.0.5", Port: 80}}}
	if !reflect.DeepEqual(got, want) || left != (leftOut{}) {
		t.Errorf("got %v (left out %+v), want %v", got, left, want)
	}
}

// TestAnUpgradeKeepsTheLegacyNEGsOfItsOwnServices: a Translation made before the cluster's UID entered NEG names and
// markers keeps its NEG's name and marker (GCE cannot rename a NEG or change its description, and users attach NEGs
// to their own backend services), while a Service port without such a Translation gets the UID-bearing name; a
// legacy-looking Translation of another Service (another UID) adopts nothing.
func TestAnUpgradeKeepsTheLegacyNEGsOfItsOwnServices(t *testing.T) {
	legacyName := negName(translationVersion, testIdentity.legacy(), testTenant, testNamespace, "web", 80)
	legacy := translationOf(translationName("web", 80), "web", "uid-web", testTenant, true, legacyName)
	legacyMarker := negDescription(testIdentity.legacy(), testTenant, testNamespace, "web", "uid-web", 80)
	for i := range legacy.Spec.Resources {
		legacy.Spec.Resources[i].Description = legacyMarker
	}
	h := newHarness(t, append(webObjects(), legacy)...)
	h.sync("web")
	tr := h.translations()[translationName("web", 80)]
	if tr == nil || len(tr.Spec.Resources) == 0 {
		t.Fatalf("no Translation after the sync: %v", keys(h.translations()))
	}
	for _, r := range tr.Spec.Resources {
		if r.Name != legacyName || r.Description != legacyMarker {
			t.Errorf("after the upgrade the Translation declares %s with marker %s; want the legacy %s and %s", r.Name, r.Description, legacyName, legacyMarker)
		}
	}
	var status negStatus
	if err := json.Unmarshal([]byte(h.service("web").Annotations[negapi.StatusAnnotationKey]), &status); err != nil || status.NetworkEndpointGroups["80"] != legacyName {
		t.Errorf("neg-status names %v (%v); want the legacy NEG %s", status.NetworkEndpointGroups, err, legacyName)
	}

	// The same legacy name and marker in a Translation owned by another Service UID (a Service re-created under
	// the same name) are not this Service's: it gets the UID-bearing name.
	stranger := translationOf(translationName("web", 80), "web", "uid-old-web", testTenant, true, legacyName)
	for i := range stranger.Spec.Resources {
		stranger.Spec.Resources[i].Description = negDescription(testIdentity.legacy(), testTenant, testNamespace, "web", "uid-old-web", 80)
	}
	h2 := newHarness(t, webObjects()...)
	if id := h2.translator.negIdentity(h2.service("web"), negapi.ExposedPort{Port: 80}); id.name == legacyName || !strings.Contains(id.description, `"cluster-uid"`) {
		t.Errorf("without a legacy Translation the NEG is %s marked %s; want the UID-bearing name and marker", id.name, id.description)
	}
	if err := h2.translator.allTranslationIndex.Add(stranger); err != nil {
		t.Fatal(err)
	}
	if id := h2.translator.negIdentity(h2.service("web"), negapi.ExposedPort{Port: 80}); id.name == legacyName {
		t.Errorf("another Service's legacy Translation made this one adopt %s", id.name)
	}
}

// TestNoTranslationIsCreatedInANamespaceBeingDeleted: the API server refuses every create in a terminating
// namespace; the Services there go with it, so the sync ends without an error (no retry, no error logged) and
// without a Translation.
func TestNoTranslationIsCreatedInANamespaceBeingDeleted(t *testing.T) {
	h := newHarness(t, webObjects()...)
	h.mp.PrependReactor("create", "translations", func(clienttesting.Action) (bool, runtime.Object, error) {
		err := apierrors.NewForbidden(mpv1alpha1.Resource("translations"), "neg-v1-web-80",
			fmt.Errorf("unable to create new content in namespace %s because it is being terminated", testNamespace))
		err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause, Message: "namespace is being terminated"}}
		return true, nil, err
	})
	h.sync("web")
	if trs := h.translations(); len(trs) != 0 {
		t.Errorf("Translations %v, want none", keys(trs))
	}
}
