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
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
)

// The translator reads only caches: these tests look at every request it makes, reads included.

func TestAnEndpointChangeReadsNothingAndWritesTheTranslationOnce(t *testing.T) {
	h := newHarness(t, webObjects()...)
	h.sync("web")
	h.settle()
	h.requests()

	h.updateSlice(slice("web", "web-2", "http", 9090, ep{ip: "10.0.1.2", node: "n3"}, ep{ip: "10.0.1.3", node: "n3"}))
	h.sync("web")
	if got := h.requests(); !reflect.DeepEqual(got, []string{"patch translations"}) {
		t.Errorf("requests = %v, want one Translation spec patch and no read", got)
	}
	// The update's own event brings the Service back: nothing to do, nothing read.
	h.sync("web")
	if got := h.requests(); len(got) != 0 {
		t.Errorf("the sync after the update made requests: %v", got)
	}
	if n := h.translator.writes.len(); n != 0 {
		t.Errorf("%d writes still remembered once the cache shows them", n)
	}
}

// TestALaggingCacheMakesNoSecondCreate: until the cache shows the Translation the translator created, a sync waits
// for it instead of creating it again (which the API would refuse with AlreadyExists).
func TestALaggingCacheMakesNoSecondCreate(t *testing.T) {
	h := newHarness(t, webObjects()...)
	h.freezeTranslations()
	h.requests()
	if err := h.translator.sync(h.ctx, "shop/web"); err != nil {
		t.Fatal(err)
	}
	if got := h.requests(); !reflect.DeepEqual(got, []string{"patch services", "create translations"}) {
		t.Fatalf("first sync: requests = %v", got)
	}
	for range 3 {
		h.settle() // the Service cache shows the status patch; the Translation cache does not show the create
		if err := h.translator.sync(h.ctx, "shop/web"); !errors.Is(err, errCacheLagging) {
			t.Fatalf("sync with a cache that lacks the translator's create = %v, want errCacheLagging", err)
		}
		if got := h.requests(); len(got) != 0 {
			t.Fatalf("a sync on a lagging cache made requests: %v", got)
		}
	}
	// To the workers that is no failure, and no backoff: the key comes back on the create's event, or soon after.
	if res, err := h.translator.syncKey(h.ctx, "shop/web"); err != nil || res.RequeueAfter != lagRecheck {
		t.Errorf("syncKey on a lagging cache = %+v, %v; want no error and a requeue after %s", res, err, lagRecheck)
	}
	h.thawTranslations()
	h.sync("web")
	if got := h.requests(); len(got) != 0 {
		t.Errorf("requests once the cache caught up = %v, want none", got)
	}
	if got := h.events.With("Normal " + ReasonTranslationCreated); len(got) != 1 {
		t.Errorf("%s Events = %v, want one", ReasonTranslationCreated, got)
	}
}

// TestALaggingCacheMakesNoSecondUpdate: a cache that still shows the Translation at the version the translator
// updated is waited for; once it shows the update, the next change is one update again.
func TestALaggingCacheMakesNoSecondUpdate(t *testing.T) {
	h := newHarness(t, webObjects()...)
	h.sync("web")
	h.freezeTranslations()
	h.requests()

	h.updateSlice(slice("web", "web-2", "http", 9090, ep{ip: "10.0.1.2", node: "n3"}, ep{ip: "10.0.1.3", node: "n3"}))
	if err := h.translator.sync(h.ctx, "shop/web"); err != nil {
		t.Fatal(err)
	}
	if got := h.requests(); !reflect.DeepEqual(got, []string{"patch translations"}) {
		t.Fatalf("requests = %v, want one spec patch", got)
	}
	h.updateSlice(slice("web", "web-2", "http", 9090, ep{ip: "10.0.1.2", node: "n3"}, ep{ip: "10.0.1.4", node: "n3"}))
	if err := h.translator.sync(h.ctx, "shop/web"); !errors.Is(err, errCacheLagging) {
		t.Fatalf("sync with a cache older than the translator's update = %v, want errCacheLagging", err)
	}
	if got := h.requests(); len(got) != 0 {
		t.Fatalf("a sync on a lagging cache made requests: %v", got)
	}
	h.thawTranslations()
	h.sync("web")
	if got := h.requests(); !reflect.DeepEqual(got, []string{"patch translations"}) {
		t.Errorf("requests once the cache caught up = %v, want one spec patch", got)
	}
	if eps := h.translations()["neg-v1-web-80"].Spec.Resources[1].NetworkEndpointGroup.Endpoints; len(eps) != 3 || eps[2].IPAddress != "10.0.1.4" {
		t.Errorf("zone c endpoints = %+v, want the last change", eps)
	}
}

// TestTheTranslatorsOwnPatchComingBackSyncsNothing: the event of the translator's own spec patch brings the Service
// back only if a sync was turned away while the cache lacked the patch; otherwise that sync would find nothing to do.
// A spec someone else wrote brings it back to be put right.
func TestTheTranslatorsOwnPatchComingBackSyncsNothing(t *testing.T) {
	h := newHarness(t, webObjects()...)
	h.sync("web")
	cachedWeb := func() *mpv1alpha1.Translation {
		h.t.Helper()
		h.settle()
		obj, ok, err := h.informers["translations"].GetStore().GetByKey(testNamespace + "/neg-v1-web-80")
		if err != nil || !ok {
			t.Fatalf("the Translation is not cached: %v", err)
		}
		return obj.(*mpv1alpha1.Translation)
	}

	// No sync waits: the patch's event enqueues nothing, and the write is forgotten.
	before := cachedWeb()
	h.updateSlice(slice("web", "web-2", "http", 9090, ep{ip: "10.0.1.2", node: "n3"}, ep{ip: "10.0.1.3", node: "n3"}))
	h.sync("web")
	if got := h.requests(); !reflect.DeepEqual(got, []string{"patch translations"}) {
		t.Fatalf("requests = %v, want one spec patch", got)
	}
	after := cachedWeb()
	h.queued()
	h.translator.onTranslationUpdate(before, after)
	if got := h.queued(); len(got) != 0 {
		t.Errorf("the translator's own patch coming back enqueued %v", got)
	}
	if n := h.translator.writes.len(); n != 0 {
		t.Errorf("%d writes still remembered once their event came", n)
	}

	// A sync turned away while the cache lacked the patch: the patch's event brings the Service back, and the
	// change that waited is written.
	before = after
	h.updateSlice(slice("web", "web-2", "http", 9090, ep{ip: "10.0.1.2", node: "n3"}, ep{ip: "10.0.1.4", node: "n3"}))
	h.freezeTranslations()
	h.sync("web")
	h.updateSlice(slice("web", "web-2", "http", 9090, ep{ip: "10.0.1.2", node: "n3"}, ep{ip: "10.0.1.5", node: "n3"}))
	if err := h.translator.sync(h.ctx, "shop/web"); !errors.Is(err, errCacheLagging) {
		t.Fatalf("sync with a cache older than the translator's patch = %v, want errCacheLagging", err)
	}
	h.thawTranslations()
	after = cachedWeb()
	h.queued()
	h.translator.onTranslationUpdate(before, after)
	if got := h.queued(); !reflect.DeepEqual(got, []string{"shop/web"}) {
		t.Fatalf("the patch a sync waited for enqueued %v, want the Service", got)
	}
	h.requests()
	h.sync("web")
	if got := h.requests(); !reflect.DeepEqual(got, []string{"patch translations"}) {
		t.Errorf("requests once the cache caught up = %v, want one spec patch", got)
	}
	if eps := h.translations()["neg-v1-web-80"].Spec.Resources[1].NetworkEndpointGroup.Endpoints; len(eps) != 3 || eps[2].IPAddress != "10.0.1.5" {
		t.Errorf("zone c endpoints = %+v, want the change that waited", eps)
	}

	// Someone else's spec: no write of the translator's gave that generation.
	before = cachedWeb()
	edited := before.DeepCopy()
	edited.Spec.Resources[1].NetworkEndpointGroup.Endpoints = nil
	if _, err := h.mp.MultiprojectV1alpha1().Translations(testNamespace).Update(h.ctx, edited, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	after = cachedWeb()
	if after.Generation == before.Generation {
		t.Fatal("the fake API did not move the generation of an edited spec")
	}
	h.queued()
	h.translator.onTranslationUpdate(before, after)
	if got := h.queued(); !reflect.DeepEqual(got, []string{"shop/web"}) {
		t.Errorf("a spec edited by someone else enqueued %v, want the Service", got)
	}
}

// TestALaggingServiceCacheGetsNoSecondStatusPatch: the neg-status annotation is compared with a cached Service only
// once it shows the translator's last patch.
func TestALaggingServiceCacheGetsNoSecondStatusPatch(t *testing.T) {
	h := newHarness(t, webObjects()...)
	h.freezeServices()
	h.sync("web")
	h.requests()
	if err := h.translator.sync(h.ctx, "shop/web"); !errors.Is(err, errCacheLagging) {
		t.Fatalf("sync with a Service cache older than the status patch = %v, want errCacheLagging", err)
	}
	if got := h.requests(); len(got) != 0 {
		t.Errorf("a sync on a lagging Service cache made requests: %v", got)
	}
}

// TestAWriteTheCacheNeverShowsIsWaitedForOnlySoLong: past ownWriteTimeout the cache is trusted again; the API's
// own checks (here AlreadyExists, which is not followed by a read) keep a stale cache from doing harm.
func TestAWriteTheCacheNeverShowsIsWaitedForOnlySoLong(t *testing.T) {
	h := newHarness(t, webObjects()...)
	clock := clocktesting.NewFakePassiveClock(time.Now())
	h.translator.writes = newOwnWrites(clock)
	h.freezeTranslations()
	if err := h.translator.sync(h.ctx, "shop/web"); err != nil {
		t.Fatal(err)
	}
	h.settle()
	h.requests()
	clock.SetTime(clock.Now().Add(ownWriteTimeout - time.Second))
	if err := h.translator.sync(h.ctx, "shop/web"); !errors.Is(err, errCacheLagging) {
		t.Fatalf("sync within the timeout = %v, want errCacheLagging", err)
	}
	clock.SetTime(clock.Now().Add(2 * time.Second))
	if err := h.translator.sync(h.ctx, "shop/web"); !errors.Is(err, errWaiting) {
		t.Fatalf("sync past the timeout = %v, want errWaiting after the create answered AlreadyExists", err)
	}
	if got := h.requests(); !reflect.DeepEqual(got, []string{"create translations"}) {
		t.Errorf("requests past the timeout = %v, want the one create, answered AlreadyExists, and no read", got)
	}
}

// TestAServiceResyncEnqueuesNothing: an update with the same resourceVersion is a resync.
func TestAServiceResyncEnqueuesNothing(t *testing.T) {
	h := newHarness(t, webObjects()...)
	svc := h.service("web")
	h.translator.onServiceUpdate(svc, svc.DeepCopy())
	if got := h.queued(); len(got) != 0 {
		t.Errorf("a resync queued %v", got)
	}
	changed := svc.DeepCopy()
	changed.ResourceVersion += "0"
	h.translator.onServiceUpdate(svc, changed)
	if got := h.queued(); !reflect.DeepEqual(got, []string{"shop/web"}) {
		t.Errorf("an update queued %v, want the Service", got)
	}
}

// TestNodeEventsEnqueueOnlyTheServicesTheyConcern: a Node event enqueues every Service when the tenant's set of
// zones changes, and otherwise only the Services with an endpoint on the Node.
func TestNodeEventsEnqueueOnlyTheServicesTheyConcern(t *testing.T) {
	objects := append(webObjects(),
		service("api", `{"exposed_ports":{"80":{}}}`, servicePort("http", 80, "8080")),
		slice("api", "api-1", "http", 8080, ep{ip: "10.0.2.1", node: "n3"}),
		service("plain", "", servicePort("http", 80, "8080")), // asks for no NEG
		slice("plain", "plain-1", "http", 8080, ep{ip: "10.0.3.1", node: "n3"}),
	)
	h := newHarness(t, objects...)
	h.settle()
	for _, n := range []*corev1.Node{node("n1", zoneB), node("n2", zoneB), node("n3", zoneC), node("n4", "")} {
		h.translator.onNodeAdd(n, true)
	}
	all := []string{"shop/api", "shop/web"}
	zoneD := "europe-west1-d"
	n3InB := node("n3", zoneB)
	n3Status := n3InB.DeepCopy()
	n3Status.Status.Phase = corev1.NodeRunning
	for _, step := range []struct {
		what  string
		event func()
		want  []string
	}{
		{"the initial list", func() {}, nil},
		{"a Node in a known zone, without endpoints", func() { h.translator.onNodeAdd(node("n5", zoneB), false) }, nil},
		{"a Node in a known zone that endpoints use", func() { h.translator.onNodeAdd(node("elsewhere", zoneC), false) }, []string{"shop/web"}},
		{"a Node in a new zone", func() { h.translator.onNodeAdd(node("n6", zoneD), false) }, all},
		{"a Node without a zone", func() { h.translator.onNodeAdd(node("n7", ""), false) }, nil},
		{"a Node moving between zones that stay", func() { h.translator.onNodeUpdate(node("n3", zoneC), n3InB) }, all},
		{"a Node's status", func() { h.translator.onNodeUpdate(n3InB, n3Status) }, nil},
		{"the last Node of a zone deleted", func() { h.translator.onNodeDelete(node("n6", zoneD)) }, all},
		{"a Node deleted from a zone that stays", func() { h.translator.onNodeDelete(node("n1", zoneB)) }, []string{"shop/web"}},
		{"a Node without a zone deleted", func() { h.translator.onNodeDelete(node("n4", "")) }, nil},
	} {
		step.event()
		if got := h.queued(); !reflect.DeepEqual(got, step.want) && (len(got) != 0 || len(step.want) != 0) {
			t.Errorf("%s: queued %v, want %v", step.what, got, step.want)
		}
	}
}

// TestAStatusWriteTheCacheHasNotSeenCostsNoConflict: the pusher writes a Translation's status all the time, so the
// cache often holds an older resourceVersion than the API when the next endpoint change comes. The spec patch
// carries none: one request, no 409, the new spec stored beside the pusher's status.
func TestAStatusWriteTheCacheHasNotSeenCostsNoConflict(t *testing.T) {
	h := newHarness(t, webObjects()...)
	h.sync("web")
	h.settle()
	h.freezeTranslations()
	tr := h.translations()["neg-v1-web-80"].DeepCopy()
	tr.Status.Conditions = []metav1.Condition{{Type: mpv1alpha1.TranslationConditionSynced, Status: metav1.ConditionTrue,
		Reason: "Pushed", ObservedGeneration: tr.Generation, LastTransitionTime: metav1.Now()}}
	if _, err := h.mp.MultiprojectV1alpha1().Translations(testNamespace).UpdateStatus(h.ctx, tr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.requests()

	h.updateSlice(slice("web", "web-2", "http", 9090, ep{ip: "10.0.1.2", node: "n3"}, ep{ip: "10.0.1.3", node: "n3"}))
	if err := h.translator.sync(h.ctx, "shop/web"); err != nil {
		t.Fatalf("sync on a cache without the pusher's status write: %v", err)
	}
	if got := h.requests(); !reflect.DeepEqual(got, []string{"patch translations"}) {
		t.Errorf("requests = %v, want one spec patch", got)
	}
	stored, err := h.mp.MultiprojectV1alpha1().Translations(testNamespace).Get(h.ctx, "neg-v1-web-80", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if eps := stored.Spec.Resources[1].NetworkEndpointGroup.Endpoints; len(eps) != 3 || eps[2].IPAddress != "10.0.1.3" {
		t.Errorf("zone c endpoints = %+v, want the change", eps)
	}
	if len(stored.Status.Conditions) != 1 || stored.Generation != tr.Generation+1 {
		t.Errorf("stored status %+v at generation %d, want the pusher's status kept and generation %d", stored.Status, stored.Generation, tr.Generation+1)
	}
}

// TestASpecPatchIsShownByItsGenerationOnly: after a spec patch, a cache that shows another writer's later change
// (a new resourceVersion, the pusher's status) at the old generation still lags; the patch's generation, or a
// replaced or deleted object, shows it.
func TestASpecPatchIsShownByItsGenerationOnly(t *testing.T) {
	w := ownWrite{uid: "u1", generation: 5}
	for _, tc := range []struct {
		name  string
		cache cached
		want  bool
	}{
		{"the version patched, old generation", cached{exists: true, uid: "u1", resourceVersion: "10", generation: 4}, false},
		{"a status write, old generation", cached{exists: true, uid: "u1", resourceVersion: "11", generation: 4}, false},
		{"the patch's generation", cached{exists: true, uid: "u1", resourceVersion: "12", generation: 5}, true},
		{"a later generation", cached{exists: true, uid: "u1", resourceVersion: "13", generation: 6}, true},
		{"replaced", cached{exists: true, uid: "u2", resourceVersion: "14", generation: 1}, true},
		{"deleted", cached{}, true},
	} {
		if got := w.shows(tc.cache); got != tc.want {
			t.Errorf("%s: shows = %t, want %t", tc.name, got, tc.want)
		}
	}
}
