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

package pusher

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/neg/pushed"
)

// TestOnlyReportsTellsAReportFromADecision: a status is held only when it differs in the generation observed, the
// Synced message and the endpoint counts, with Synced True on both sides; a state, a lifecycle, an id, a
// membership, an error or Synced turning False is written at once.
func TestOnlyReportsTellsAReportFromADecision(t *testing.T) {
	status := func(generation int64, edit func(*mpv1alpha1.TranslationStatus)) mpv1alpha1.TranslationStatus {
		s := mpv1alpha1.TranslationStatus{ObservedGeneration: generation, EndpointCount: 3, ActiveResources: 1,
			Resources: []mpv1alpha1.BackendResourceStatus{{Name: "k8s1-web", Zone: "us-central1-a", ID: "7", State: mpv1alpha1.BackendResourceStateReady,
				Lifecycle: mpv1alpha1.BackendResourceLifecycleActive, EndpointCount: 3}},
			Conditions: []metav1.Condition{{Type: mpv1alpha1.TranslationConditionSynced, Status: metav1.ConditionTrue, Reason: ReasonSynced,
				Message: "1 NEGs match the spec", ObservedGeneration: generation}}}
		if edit != nil {
			edit(&s)
		}
		return s
	}
	recorded := status(4, nil)
	for _, tc := range []struct {
		name string
		next mpv1alpha1.TranslationStatus
		want bool
	}{
		{"a new generation and counts", status(5, func(s *mpv1alpha1.TranslationStatus) {
			s.EndpointCount, s.Resources[0].EndpointCount = 9, 9
		}), true},
		{"a state", status(5, func(s *mpv1alpha1.TranslationStatus) { s.Resources[0].State = mpv1alpha1.BackendResourceStatePending }), false},
		{"a lifecycle", status(5, func(s *mpv1alpha1.TranslationStatus) {
			s.Resources[0].Lifecycle, s.ActiveResources, s.InactiveResources = mpv1alpha1.BackendResourceLifecycleInactive, 0, 1
		}), false},
		{"a GCE id", status(5, func(s *mpv1alpha1.TranslationStatus) { s.Resources[0].ID = "8" }), false},
		{"a membership", status(5, func(s *mpv1alpha1.TranslationStatus) { s.Resources[0].BackendServices = []string{"bs"} }), false},
		{"an error", status(5, func(s *mpv1alpha1.TranslationStatus) { s.Resources[0].LastError = "boom" }), false},
		{"a NEG more", status(5, func(s *mpv1alpha1.TranslationStatus) {
			s.Resources = append(s.Resources, mpv1alpha1.BackendResourceStatus{Name: "k8s1-web", Zone: "us-central1-b"})
		}), false},
		{"Synced turning False", status(5, func(s *mpv1alpha1.TranslationStatus) { s.Conditions[0].Status = metav1.ConditionFalse }), false},
	} {
		if got := onlyReports(recorded, tc.next); got != tc.want {
			t.Errorf("%s: onlyReports = %v, want %v", tc.name, got, tc.want)
		}
	}
	notSynced := status(4, func(s *mpv1alpha1.TranslationStatus) { s.Conditions[0].Status = metav1.ConditionFalse })
	if onlyReports(notSynced, status(5, nil)) {
		t.Error("Synced turning True is a report held back; it must be written at once")
	}
}

// TestReportsHoldABusyTranslationsReportsUntilItIsQuiet: the first report after a quiet spell is written at once;
// the next ones wait until no generation came for the quiet time, and never past the bound from the first held.
func TestReportsHoldABusyTranslationsReportsUntilItIsQuiet(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	r := newReports(func() time.Time { return now })
	tr := func(generation int64) *mpv1alpha1.Translation {
		return &mpv1alpha1.Translation{ObjectMeta: metav1.ObjectMeta{UID: "u1", Generation: generation}}
	}
	const key = "shop/neg-v1-web-80"
	if wait := r.hold(key, tr(2)); wait != 0 {
		t.Fatalf("the first report held %s; want it written at once", wait)
	}
	r.wrote(key, "u1")
	now = now.Add(time.Second)
	if wait := r.hold(key, tr(3)); wait != reportQuiet {
		t.Fatalf("a report a second after the last write held %s, want %s", wait, reportQuiet)
	}
	// Generations every second push the report on, up to the bound from the first held.
	for g := int64(4); g <= 11; g++ {
		now = now.Add(time.Second)
		if wait := r.hold(key, tr(g)); wait != reportQuiet {
			t.Fatalf("generation %d held %s, want %s", g, wait, reportQuiet)
		}
	}
	now = now.Add(time.Second) // 9 s after the first held: 1 s of the bound left
	if wait := r.hold(key, tr(12)); wait != time.Second {
		t.Fatalf("near the bound the report held %s, want 1s", wait)
	}
	now = now.Add(time.Second)
	if wait := r.hold(key, tr(12)); wait != 0 {
		t.Fatalf("at the bound the report held %s; want it written", wait)
	}
	r.wrote(key, "u1")
	// A quiet spell past the last write: the next report is the first of a burst.
	now = now.Add(reportQuiet)
	r.idle(key)
	if r.len() != 0 {
		t.Fatalf("an idle Translation is still known: %d entries", r.len())
	}
	if wait := r.hold(key, tr(13)); wait != 0 {
		t.Fatalf("the first report after a quiet spell held %s", wait)
	}
	// A write drops the entries of Translations quiet since their last write, which may not be synced for long.
	r.wrote("shop/neg-v1-old-80", "u0")
	now = now.Add(reportQuiet)
	r.wrote(key, "u1")
	if r.len() != 1 {
		t.Fatalf("after a write, %d entries are known; the one quiet for %s must go", r.len(), reportQuiet)
	}
	// The same name made anew is another Translation.
	r.wrote(key, "u1")
	other := tr(1)
	other.UID = types.UID("u2")
	if wait := r.hold(key, other); wait != 0 {
		t.Fatalf("a new object of the same name held %s", wait)
	}
}

// TestTheStatusOfABusyTranslationFollowsOnceItIsQuiet: with a pushed.Generations, a sync that only reports a new
// generation right after a status write leaves the status as it was and tells the process (Synced for the new
// generation, the listeners called); GCE holds the new endpoints meanwhile. Once the Translation is quiet, its next
// sync writes the exact status and the process holds nothing. A report held when the pusher stops is written by the
// next pusher at its start.
func TestTheStatusOfABusyTranslationFollowsOnceItIsQuiet(t *testing.T) {
	h := newHarness(t, nil)
	h.shutdown()
	pushes := pushed.New()
	var mu sync.Mutex
	var heard []int64
	pushes.OnPushed(func(tr *mpv1alpha1.Translation) {
		mu.Lock()
		defer mu.Unlock()
		heard = append(heard, tr.Generation)
	})
	var clock atomic.Int64
	clock.Store(time.Unix(2_000_000, 0).UnixNano())
	h.configure = func(p *Pusher) {
		p.ReportPushesTo(pushes)
		p.reports.now = func() time.Time { return time.Unix(0, clock.Load()) }
	}
	h.start(false)

	ctx := context.Background()
	tr := translation("web", map[string]int{"us-central1-a": 2}, true)
	if _, err := h.client.MultiprojectV1alpha1().Translations(testNamespace).Create(ctx, tr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitFor("generation 1 reported", func() bool { return h.get("web").Status.ObservedGeneration == 1 })
	writes := h.statusUpdates()

	next := h.get("web")
	next.Generation = 2
	next.Spec.Resources[0] = negResource("web", "us-central1-a", 5)
	if _, err := h.client.MultiprojectV1alpha1().Translations(testNamespace).Update(ctx, next, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitFor("generation 2 pushed", func() bool { return pushes.Synced(h.get("web")) })
	if n := h.endpointCount("us-central1-a", "k8s1-web"); n != 5 {
		t.Fatalf("the fake GCE holds %d endpoints once generation 2 is pushed, want 5", n)
	}
	if got := h.get("web"); got.Status.ObservedGeneration != 1 || h.statusUpdates() != writes {
		t.Fatalf("the status of generation 2 was written (observed %d, %d status writes, %d before) a moment after generation 1's",
			got.Status.ObservedGeneration, h.statusUpdates(), writes)
	}
	mu.Lock()
	if len(heard) != 1 || heard[0] != 2 {
		t.Fatalf("the listeners heard %v, want [2]", heard)
	}
	mu.Unlock()

	clock.Add(int64(reportQuiet))
	h.pusher.workers.Add(testNamespace + "/web")
	h.waitFor("generation 2 reported", func() bool { return h.get("web").Status.ObservedGeneration == 2 })
	got := h.get("web")
	if !pushes.Synced(got) || got.Status.EndpointCount != 5 || pushes.Len() != 0 {
		t.Fatalf("after the quiet spell: endpoint count %d (want 5), %d held in the process (want 0)", got.Status.EndpointCount, pushes.Len())
	}

	// A pusher that stops with a report held leaves it to the next, which writes it at its start.
	got.Generation = 3
	got.Spec.Resources[0] = negResource("web", "us-central1-a", 1)
	if _, err := h.client.MultiprojectV1alpha1().Translations(testNamespace).Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitFor("generation 3 pushed", func() bool { return pushes.Synced(h.get("web")) })
	if observed := h.get("web").Status.ObservedGeneration; observed != 2 {
		t.Fatalf("generation 3's report was not held: the status observes %d", observed)
	}
	h.shutdown()
	h.configure = func(p *Pusher) { p.ReportPushesTo(pushed.New()) }
	h.start(false)
	h.waitFor("generation 3 reported by the next pusher", func() bool { return h.get("web").Status.ObservedGeneration == 3 })
	if n := h.get("web").Status.EndpointCount; n != 1 {
		t.Errorf("the next pusher reported %d endpoints, want 1", n)
	}
}
