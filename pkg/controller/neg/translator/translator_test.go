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
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
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
	if err := json.Unmarshal([]byte(svc.Annotations[NEGStatusAnnotationKey]), &status); err != nil {
		t.Fatalf("neg-status %q: %v", svc.Annotations[NEGStatusAnnotationKey], err)
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
	status := h.service("web").Annotations[NEGStatusAnnotationKey]
	h.waitCached("services", "shop/web", func(obj any) bool {
		return obj.(*corev1.Service).Annotations[NEGStatusAnnotationKey] == status
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
	if s := h.service("web").Annotations[NEGStatusAnnotationKey]; strings.Contains(s, "443") || !strings.Contains(s, `"80"`) {
		t.Errorf("neg-status = %s", s)
	}

	// Annotation removed: every Translation goes, and so does the status.
	h.setAnnotation("web", "")
	h.sync("web")
	if trs := h.translations(); len(trs) != 0 {
		t.Fatalf("after removing the annotation: Translations = %v", keys(trs))
	}
	if s, ok := h.service("web").Annotations[NEGStatusAnnotationKey]; ok {
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
		delete(svc.Annotations, NEGAnnotationKey)
	} else {
		svc.Annotations[NEGAnnotationKey] = value
	}
	svc, err := h.kube.CoreV1().Services(testNamespace).Update(h.ctx, svc, metav1.UpdateOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	h.waitCached("services", testNamespace+"/"+name, func(obj any) bool {
		return obj.(*corev1.Service).Annotations[NEGAnnotationKey] == value
	})
	h.writes()
}

func TestMalformedAnnotationIsAWarningAndChangesNothing(t *testing.T) {
	h := newHarness(t, webObjects()...)
	h.sync("web")
	before := h.translations()
	status := h.service("web").Annotations[NEGStatusAnnotationKey]

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
	if got := h.service("web").Annotations[NEGStatusAnnotationKey]; got != status {
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

func TestStaleAndForeignTranslationsAreDeleted(t *testing.T) {
	owned := func(name, tenantName string) *mpv1alpha1.Translation {
		return &mpv1alpha1.Translation{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: name,
			Labels: map[string]string{testLabelKey: tenantName, mpv1alpha1.TranslationOwnerUIDLabelKey: "uid-web"}}}
	}
	objects := append(webObjects(),
		owned("neg-v0-web-80", testTenant), // an older version: goes once its successor is synced
		owned("neg-v0-web-81", testTenant), // an older version of a port no longer exposed: goes at once
		owned("neg-v1-web-80", "tenant-b"), // the Service's former tenant
		owned("other-web", testTenant),     // not ours (another controller's prefix): untouched
	)
	h := newHarness(t, objects...)
	err := h.translator.sync(h.ctx, "shop/web")
	if !errors.Is(err, errWaiting) {
		t.Fatalf("sync = %v, want errWaiting while tenant-b's Translation of the same name is deleted", err)
	}
	trs := h.translations()
	if _, ok := trs["neg-v0-web-81"]; ok {
		t.Error("the old version's Translation of a port no longer exposed was not deleted")
	}
	if _, ok := trs["neg-v0-web-80"]; !ok {
		t.Error("the old version's Translation was deleted before its successor existed")
	}
	if _, ok := trs["neg-v1-web-80"]; ok {
		t.Error("the former tenant's Translation was not deleted")
	}
	if _, ok := trs["other-web"]; !ok {
		t.Error("another controller's Translation was deleted")
	}
	// Once it is gone, the tenant's own is created; the old version goes once that one is synced.
	h.sync("web")
	if tr := h.translations()["neg-v1-web-80"]; tr == nil || tr.Labels[testLabelKey] != testTenant {
		t.Errorf("Translation after the wait = %+v", tr)
	}
	h.markSynced("neg-v1-web-80")
	h.sync("web")
	if _, ok := h.translations()["neg-v0-web-80"]; ok {
		t.Error("the old version's Translation was not deleted once its successor was synced")
	}
}

// TestVersionBumpDeclaresNewNEGsBeforeTheOldOnesGo: a Translation of another version names other NEGs than the
// current one, and it is deleted (so the pusher deletes its NEGs) only once the current one is synced (its NEGs
// exist).
func TestVersionBumpDeclaresNewNEGsBeforeTheOldOnesGo(t *testing.T) {
	oldName := negName("v0", testIdentity, testTenant, testNamespace, "web", 80)
	old := translationOf("neg-v0-web-80", "web", "uid-web", testTenant, true, oldName)
	h := newHarness(t, append(webObjects(), old)...)
	h.sync("web")
	trs := h.translations()
	current := trs[translationName("web", 80)]
	if current == nil || trs["neg-v0-web-80"] == nil {
		t.Fatalf("Translations = %v, want the current one and the old one", keys(trs))
	}
	if got := negNameOf(current); got == oldName {
		t.Errorf("the current version declares the old version's NEG %s", got)
	}
	if got := h.events.With("Normal " + ReasonTranslationDeleted); len(got) != 0 {
		t.Errorf("the old Translation was deleted before its successor was synced: %v", got)
	}
	status := h.service("web").Annotations[NEGStatusAnnotationKey]
	h.waitCached("services", "shop/web", func(obj any) bool {
		return obj.(*corev1.Service).Annotations[NEGStatusAnnotationKey] == status
	})
	h.writes()

	// The pusher has pushed the current one: the old one goes, and with it (by the pusher) its NEGs only.
	h.markSynced(current.Name)
	h.sync("web")
	if w := h.writes(); !reflect.DeepEqual(w, []string{"delete translations"}) {
		t.Errorf("writes = %v, want the old Translation's deletion only", w)
	}
	if trs := h.translations(); trs["neg-v0-web-80"] != nil || trs[current.Name] == nil {
		t.Errorf("Translations = %v, want the current one only", keys(trs))
	}
	if got := h.events.With("Normal " + ReasonTranslationDeleted); len(got) != 1 || !strings.Contains(got[0], "neg-v0-web-80") {
		t.Errorf("want one %s Event for neg-v0-web-80, got %v", ReasonTranslationDeleted, got)
	}
}

// TestVersionBumpWithACustomNameHandsTheNEGOver: a custom NEG name is the same in every version, so the old
// Translation (which deletes the NEG) goes first and the new one declares the NEG only once the old one is gone; a
// NEG never belongs to two Translations.
func TestVersionBumpWithACustomNameHandsTheNEGOver(t *testing.T) {
	objects := webObjects()
	objects[4] = service("web", `{"exposed_ports":{"80":{"name":"custom-web"}}}`, servicePort("http", 80, "web"))
	old := translationOf("neg-v0-web-80", "web", "uid-web", testTenant, true, "custom-web")
	h := newHarness(t, append(objects, old)...)
	h.syncWaiting("web")
	if trs := h.translations(); len(trs) != 0 {
		t.Fatalf("Translations = %v; want the old one deleted and the new one not created while the old one exists", keys(trs))
	}
	h.sync("web")
	if tr := h.translations()[translationName("web", 80)]; tr == nil || negNameOf(tr) != "custom-web" {
		t.Fatalf("Translation once the old one is gone = %+v", tr)
	}
}

// TestRecreatedServiceReplacesItsPredecessorsTranslations: a Service deleted with --cascade=orphan and created again
// with the same name (a new UID) finds the Translations of its predecessor, without owner reference; they are
// deleted (their NEGs carry the old UID's marker) and its own takes the name once the old one is gone.
func TestRecreatedServiceReplacesItsPredecessorsTranslations(t *testing.T) {
	name := negName(translationVersion, testIdentity, testTenant, testNamespace, "web", 80)
	objects := append(webObjects(),
		translationOf("neg-v1-web-80", "web", "uid-old", testTenant, false, name),
		translationOf("neg-v1-web-443", "web", "uid-old", testTenant, false, "custom-https"), // a port the new one does not expose
		translationOf("neg-v1-api-80", "api", "uid-api", testTenant, false, "api-80"),        // another Service's: untouched
	)
	h := newHarness(t, objects...)
	h.syncWaiting("web")
	trs := h.translations()
	if trs["neg-v1-web-80"] != nil || trs["neg-v1-web-443"] != nil || trs["neg-v1-api-80"] == nil {
		t.Fatalf("Translations = %v, want only neg-v1-api-80 left", keys(trs))
	}
	if got := h.events.With("Normal " + ReasonStaleTranslationDeleted); len(got) != 2 || !strings.Contains(got[0], "uid-old") {
		t.Errorf("want two %s Events naming the old UID, got %v", ReasonStaleTranslationDeleted, got)
	}
	if got := h.events.With("Normal " + ReasonTranslationCreated); len(got) != 0 {
		t.Errorf("the new Translation was created while the old one of the same name existed: %v", got)
	}

	// The view has seen the old ones go: the Service's own Translation is created.
	h.waitCached("translations", "shop/neg-v1-web-80", nil)
	h.waitCached("translations", "shop/neg-v1-web-443", nil)
	h.sync("web")
	tr := h.translations()["neg-v1-web-80"]
	if tr == nil || tr.Labels[mpv1alpha1.TranslationOwnerUIDLabelKey] != "uid-web" || metav1.GetControllerOf(tr).UID != "uid-web" {
		t.Fatalf("the new Service's Translation = %+v", tr)
	}
	if got := tr.Spec.Resources[0].Description; got != negDescription(testIdentity, testTenant, testNamespace, "web", "uid-web", 80) {
		t.Errorf("marker = %s, want the new UID's", got)
	}
	if got := h.events.With("Normal " + ReasonStaleTranslationDeleted); len(got) != 2 {
		t.Errorf("a predecessor's Translation was reported twice: %v", got)
	}
}

// TestRecreatedServiceReplacesAPredecessorsTranslationOutsideTheView: the predecessor's Translation of the same name
// is labeled for another tenant (the Service moved before it was deleted): the tenant's view does not show it, the
// unfiltered cache does.
func TestRecreatedServiceReplacesAPredecessorsTranslationOutsideTheView(t *testing.T) {
	name := negName(translationVersion, testIdentity, "tenant-b", testNamespace, "web", 80)
	h := newHarness(t, append(webObjects(), translationOf("neg-v1-web-80", "web", "uid-old", "tenant-b", false, name))...)
	h.syncWaiting("web")
	if tr := h.translations()["neg-v1-web-80"]; tr != nil {
		t.Fatalf("the predecessor's Translation was not deleted: %+v", tr.ObjectMeta)
	}
	if got := h.events.With("Normal " + ReasonStaleTranslationDeleted); len(got) != 1 {
		t.Errorf("want one %s Event, got %v", ReasonStaleTranslationDeleted, got)
	}
	h.sync("web")
	if tr := h.translations()["neg-v1-web-80"]; tr == nil || tr.Labels[testLabelKey] != testTenant ||
		tr.Labels[mpv1alpha1.TranslationOwnerUIDLabelKey] != "uid-web" {
		t.Fatalf("the new Service's Translation = %+v", tr)
	}
}

// TestOrphanedTranslationOfAGoneServiceIsDeleted: a Service deleted with --cascade=orphan and not created again
// leaves Translations without owner reference; the Translation's event leads to the Service's key (from its name),
// and the sync of a Service that does not exist deletes the tenant's Translations that name it.
func TestOrphanedTranslationOfAGoneServiceIsDeleted(t *testing.T) {
	orphan := translationOf("neg-v1-gone-80", "gone", "uid-gone", testTenant, false, "gone-80")
	objects := append(webObjects(), orphan,
		translationOf("neg-v1-gone-80-443", "gone-80", "uid-gone-80", testTenant, false, "x"), // Service gone-80's
		translationOf("neg-v1-gone-81", "gone", "uid-gone", "tenant-b", false, "y"),           // another tenant's
	)
	h := newHarness(t, objects...)

	withOwner := orphan.DeepCopy()
	withOwner.OwnerReferences = translationOf("neg-v1-gone-80", "gone", "uid-gone", testTenant, true, "gone-80").OwnerReferences
	h.translator.onTranslationUpdate(withOwner, orphan) // the garbage collector removed the owner reference
	h.translator.onTranslation(objects[len(objects)-2]) // a Translation of Service gone-80
	if got := h.queued(); !reflect.DeepEqual(got, []string{"shop/gone", "shop/gone-80"}) {
		t.Errorf("queued %v, want the Services named by the Translations", got)
	}
	statusOnly := orphan.DeepCopy()
	statusOnly.Status.ObservedGeneration = 7
	h.translator.onTranslationUpdate(orphan, statusOnly)
	if got := h.queued(); len(got) != 0 {
		t.Errorf("a status write queued %v", got)
	}

	h.sync("gone")
	trs := h.translations()
	if trs["neg-v1-gone-80"] != nil {
		t.Error("the orphaned Translation of a Service that no longer exists was not deleted")
	}
	if trs["neg-v1-gone-80-443"] == nil || trs["neg-v1-gone-81"] == nil {
		t.Errorf("Translations = %v; another Service's or another tenant's was deleted", keys(trs))
	}
	h.writes()
	h.sync("gone")
	if w := h.writes(); len(w) != 0 {
		t.Errorf("a second sync wrote %v", w)
	}
}

func TestServiceThatLeftTheTenantLosesItsTranslations(t *testing.T) {
	h := newHarness(t, webObjects()...)
	h.sync("web")
	if len(h.translations()) != 1 {
		t.Fatal("no Translation")
	}
	// The view no longer has the Service (it moved to a namespace of another tenant's): an empty lister.
	h.translator.serviceLister = emptyServiceLister{h.translator.serviceLister}
	h.settle()
	h.requests()
	h.sync("web")
	if got := h.requests(); !reflect.DeepEqual(got, []string{"get services", "delete translations"}) {
		t.Errorf("requests = %v, want one read confirming the Service is not the tenant's, and the delete", got)
	}
	if trs := h.translations(); len(trs) != 0 {
		t.Errorf("Translations of a Service that left = %v", keys(trs))
	}
	// Deleted rather than moved: its Translations are already gone, so nothing is read or written.
	if err := h.kube.CoreV1().Services(testNamespace).Delete(h.ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.requests()
	h.sync("web")
	if got := h.requests(); len(got) != 0 {
		t.Errorf("requests for a deleted Service without Translations: %v", got)
	}
}

func TestServiceBeingDeletedIsLeftToTheGarbageCollector(t *testing.T) {
	objects := webObjects()
	svc := objects[4].(*corev1.Service)
	svc.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	svc.Finalizers = []string{metav1.FinalizerDeleteDependents}
	h := newHarness(t, objects...)
	h.sync("web")
	if w := h.writes(); len(w) != 0 {
		t.Errorf("writes for a Service being deleted: %v", w)
	}
}

func TestNoNodesMeansNoNEGsButAStatus(t *testing.T) {
	h := newHarness(t, service("web", `{"exposed_ports":{"80":{}}}`, servicePort("http", 80, "8080")))
	h.sync("web")
	tr := h.translations()["neg-v1-web-80"]
	if tr == nil || len(tr.Spec.Resources) != 0 {
		t.Fatalf("Translation = %+v, want one without resources", tr)
	}
	if s := h.service("web").Annotations[NEGStatusAnnotationKey]; !strings.Contains(s, `"80"`) {
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
		return strings.Contains(h.service("web").Annotations[NEGStatusAnnotationKey], "europe-west1-d")
	})
	if after, _ := metrics.Syncs.Value(testTenant, "neg", "success"); after <= before {
		t.Errorf("multiproject_controller_syncs_total{controller=%q,result=\"success\"} = %v, want more than %v", "neg", after, before)
	}

	cancel()
	<-done
	for name, inf := range h.informers {
		// The harness's Translation informer is also the unfiltered one, which carries the NEG name claims' handler.
		want := 1
		if name == "translations" {
			want = 2
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
	v6 := slice("web", "v6", "http", 80, ep{ip: "fd00::1", node: "n1"})
	v6.AddressType = discoveryv1.AddressTypeIPv6
	udp := slice("web", "udp", "http", 80, ep{ip: "10.0.0.3", node: "n1"})
	udp.Ports[0].Protocol = ptr.To(corev1.ProtocolUDP)
	unnamed := slice("web", "unnamed", "", 81, ep{ip: "10.0.0.4", node: "n1"})
	nilReady := slice("web", "nilready", "http", 80, ep{ip: "10.0.0.5", node: "n1"})
	nilReady.Endpoints[0].Conditions.Ready = nil // unknown readiness counts as ready, as the API says
	port := servicePort("http", 80, "80")
	got, skipped := endpointsByZone([]*discoveryv1.EndpointSlice{v6, udp, unnamed, nilReady}, &port, topo)
	want := map[string][]mpv1alpha1.NetworkEndpoint{zoneB: {{Instance: "n1", IPAddress: "10.0.0.5", Port: 80}}}
	if !reflect.DeepEqual(got, want) || skipped != 0 {
		t.Errorf("got %v (skipped %d), want %v", got, skipped, want)
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
	if err := json.Unmarshal([]byte(h.service("web").Annotations[NEGStatusAnnotationKey]), &status); err != nil || status.NetworkEndpointGroups["80"] != legacyName {
		t.Errorf("neg-status names %v (%v); want the legacy NEG %s", status.NetworkEndpointGroups, err, legacyName)
	}

	// The same legacy name and marker in a Translation owned by another Service UID (a Service re-created under
	// the same name) are not this Service's: it gets the UID-bearing name.
	stranger := translationOf(translationName("web", 80), "web", "uid-old-web", testTenant, true, legacyName)
	for i := range stranger.Spec.Resources {
		stranger.Spec.Resources[i].Description = negDescription(testIdentity.legacy(), testTenant, testNamespace, "web", "uid-old-web", 80)
	}
	h2 := newHarness(t, webObjects()...)
	if name, marker := h2.translator.negIdentity(h2.service("web"), exposedPort{Port: 80}); name == legacyName || !strings.Contains(marker, `"cluster-uid"`) {
		t.Errorf("without a legacy Translation the NEG is %s marked %s; want the UID-bearing name and marker", name, marker)
	}
	if err := h2.translator.allTranslationIndex.Add(stranger); err != nil {
		t.Fatal(err)
	}
	if name, _ := h2.translator.negIdentity(h2.service("web"), exposedPort{Port: 80}); name == legacyName {
		t.Errorf("another Service's legacy Translation made this one adopt %s", name)
	}
}

// TestAPredecessorAlreadyGoneDoesNotHoldTheCreateBack: the cache still shows a predecessor's Translation that the API
// no longer has. Its deletion is not asked (404), so nothing is leaving, and the Service's own Translation of that
// name is created in the same sync.
func TestAPredecessorAlreadyGoneDoesNotHoldTheCreateBack(t *testing.T) {
	name := negName(translationVersion, testIdentity, testTenant, testNamespace, "web", 80)
	h := newHarness(t, append(webObjects(), translationOf("neg-v1-web-80", "web", "uid-old", testTenant, false, name))...)
	h.freezeTranslations()
	if err := h.mp.MultiprojectV1alpha1().Translations(testNamespace).Delete(h.ctx, "neg-v1-web-80", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.writes()
	if err := h.translator.sync(h.ctx, testNamespace+"/web"); err != nil {
		t.Fatalf("sync = %v", err)
	}
	if tr := h.translations()["neg-v1-web-80"]; tr == nil || tr.Labels[mpv1alpha1.TranslationOwnerUIDLabelKey] != "uid-web" {
		t.Fatalf("the Service's own Translation = %+v, want it created", tr)
	}
	if got := h.events.With("Normal " + ReasonStaleTranslationDeleted); len(got) != 0 {
		t.Errorf("a deletion that was not made was reported: %v", got)
	}
	if got := h.events.With("Normal " + ReasonTranslationCreated); len(got) != 1 {
		t.Errorf("want one %s Event, got %v", ReasonTranslationCreated, got)
	}
}
