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
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

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
	status := h.service("web").Annotations[negapi.StatusAnnotationKey]
	h.waitCached("services", "shop/web", func(obj any) bool {
		return obj.(*corev1.Service).Annotations[negapi.StatusAnnotationKey] == status
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
