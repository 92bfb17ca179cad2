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
	"fmt"
	"strings"
	"testing"
	"time"

	compute "google.golang.org/api/compute/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
)

// sweepableMarker is an ownership marker of this cluster and tenant, which the garbage sweep recognises.
var sweepableMarker = fmt.Sprintf(`{"cluster-name":"default","cluster-uid":%q,"provider-config":"tenant-a","namespace":"shop","service-name":"web","managed-by":"multiproject-controller-manager"}`, testClusterUID)

// sweptTranslation is a Translation of the Service web with one NEG per zone, marked as the translator marks them.
func sweptTranslation(endpoints map[string]int) *mpv1alpha1.Translation {
	tr := translation("web", endpoints, true)
	for i := range tr.Spec.Resources {
		tr.Spec.Resources[i].Description = sweepableMarker
	}
	tr.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "web", UID: "svc-uid"}}
	return tr
}

// markDeleted sets the Translation's deletionTimestamp, as a delete of an object with a finalizer does.
func (h *harness) markDeleted(name string) {
	h.t.Helper()
	tr := h.get(name)
	now := metav1.Now()
	tr.DeletionTimestamp = &now
	if _, err := h.client.MultiprojectV1alpha1().Translations(testNamespace).Update(context.Background(), tr, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// waitReleased waits for the Translation's finalizer to go, and deletes it then, as the API server does (the fake
// clientset keeps an object whose finalizers are gone).
func (h *harness) waitReleased(name string) {
	h.t.Helper()
	h.waitFor("the finalizer of "+name+" to go", func() bool { return len(h.get(name).Finalizers) == 0 })
	if err := h.client.MultiprojectV1alpha1().Translations(testNamespace).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// withSweeps restarts the pusher with a fast garbage sweep.
func (h *harness) withSweeps(cleanupOnly bool) {
	h.t.Helper()
	h.shutdown()
	h.tctx.Options.NEGGCPeriod = 100 * time.Millisecond
	h.gcGrace = 50 * time.Millisecond
	h.start(cleanupOnly)
}

// A Translation being deleted whose NEG a backend service uses does not wait for the load balancer: the NEG is
// emptied, the finalizer goes, a Warning says so, and the NEG counts as awaiting deletion. The sweep reports it on
// the tenant's condition (and an Event on the ProviderConfig) while GCE refuses it, and deletes it once GCE lets
// it, without counting it as a leak.
func TestNEGInUseIsEmptiedAndLeftToTheSweep(t *testing.T) {
	h := newHarness(t, nil, sweptTranslation(map[string]int{"us-central1-a": 3, "us-central1-b": 2}))
	h.withSweeps(false)
	h.waitSynced("web", metav1.ConditionTrue)
	if err := h.gce.SetInUseBy(testProject, "us-central1-a", "k8s1-web", "web-backend"); err != nil {
		t.Fatal(err)
	}
	leaksBefore, _ := metrics.NEGsCollected.Value("tenant-a")

	h.markDeleted("web")
	h.waitReleased("web")
	if n := h.endpointCount("us-central1-a", "k8s1-web"); n != 0 {
		t.Errorf("the NEG in use has %d endpoints after its Translation was released, want 0", n)
	}
	if _, ok := h.gce.NEG(testProject, "us-central1-b", "k8s1-web"); ok {
		t.Error("the NEG nothing uses was not deleted")
	}
	// Recorded right after the finalizer went.
	h.waitFor("a Warning Event on the Service", func() bool {
		return h.events.Count(corev1.EventTypeWarning, ReasonNEGAwaitingDeletion) > 0
	})
	if got := h.events.With("Warning " + ReasonNEGAwaitingDeletion); len(got) != 1 ||
		!strings.Contains(got[0], "us-central1-a") || !strings.Contains(got[0], "web-backend") {
		t.Errorf("Events %q, want one %s naming the NEG's zone and the backend service", got, ReasonNEGAwaitingDeletion)
	}

	h.waitFor("the sweep to report the NEG on the tenant's condition", func() bool {
		c, ok := h.conditions.Last()
		return ok && c.Status == metav1.ConditionFalse && c.Reason == ReasonInUse &&
			strings.Contains(c.Message, "us-central1-a/k8s1-web") && strings.Contains(c.Message, "web-backend")
	})
	if v, _ := metrics.NEGsAwaitingDeletion.Value("tenant-a"); v != 1 {
		t.Errorf("%s = %v, want 1", "multiproject_neg_awaiting_deletion", v)
	}
	h.waitFor("a Warning Event on the ProviderConfig", func() bool { return h.events.Count(corev1.EventTypeWarning, ReasonNEGsAwaitingDeletion) == 1 })

	if err := h.gce.SetInUseBy(testProject, "us-central1-a", "k8s1-web"); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the sweep to delete the NEG", func() bool {
		_, ok := h.gce.NEG(testProject, "us-central1-a", "k8s1-web")
		return !ok
	})
	h.waitFor("the tenant's condition to recover", func() bool {
		c, ok := h.conditions.Last()
		return ok && c.Status == metav1.ConditionTrue
	})
	if v, _ := metrics.NEGsAwaitingDeletion.Value("tenant-a"); v != 0 {
		t.Errorf("multiproject_neg_awaiting_deletion = %v after the sweep deleted the NEG, want 0", v)
	}
	if leaks, _ := metrics.NEGsCollected.Value("tenant-a"); leaks != leaksBefore {
		t.Errorf("multiproject_neg_garbage_collected_total went from %v to %v: a NEG awaiting deletion is no leak", leaksBefore, leaks)
	}
	if n := h.events.Count(corev1.EventTypeWarning, ReasonNEGsAwaitingDeletion); n != 1 {
		t.Errorf("%d %s Events, want 1: a sweep that finds the same NEGs held says nothing new", n, ReasonNEGsAwaitingDeletion)
	}
}

// Only a NEG the sweep will find is left to it. Otherwise, and for any error but "in use", the Translation keeps
// its finalizer as before: a NEG is never let go without something that deletes it.
func TestNEGInUseKeepsTheFinalizerUnlessTheSweepWouldDeleteIt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		marker string
		sweeps bool
		fault  *fakegce.Fault // on detach
	}{
		{name: "sweeps disabled", marker: sweepableMarker},
		{name: "a marker the sweep does not recognise", marker: testMarker, sweeps: true},
		{name: "the detach fails", marker: sweepableMarker, sweeps: true, fault: &fakegce.Fault{Code: 503}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := sweptTranslation(map[string]int{"us-central1-a": 2})
			tr.Spec.Resources[0].Description = tc.marker
			h := newHarness(t, nil, tr)
			if tc.sweeps {
				h.withSweeps(false)
			}
			h.waitSynced("web", metav1.ConditionTrue)
			if err := h.gce.SetInUseBy(testProject, "us-central1-a", "k8s1-web", "web-backend"); err != nil {
				t.Fatal(err)
			}
			if tc.fault != nil {
				h.gce.InjectFault(testProject, fakegce.MethodDetachEndpoints, *tc.fault)
			}
			h.markDeleted("web")
			h.waitFor("the status to say why the NEG is still there", func() bool {
				c := findCondition(h.get("web"))
				return c != nil && c.Status == metav1.ConditionFalse && c.Reason != ReasonPending && c.Reason != ReasonSynced
			})
			if got := h.get("web"); len(got.Finalizers) != 1 {
				t.Fatalf("finalizers %v, want the deleter's kept", got.Finalizers)
			}
			if h.events.Count(corev1.EventTypeWarning, ReasonNEGAwaitingDeletion) != 0 {
				t.Errorf("Events %v: the NEG was reported left to the sweep", h.events.With("Warning"))
			}
			if tc.fault == nil {
				if n := h.endpointCount("us-central1-a", "k8s1-web"); n != 2 {
					t.Errorf("the NEG has %d endpoints, want its 2 kept", n)
				}
				return
			}
			// Once the detach works, the NEG is emptied and the Translation released.
			h.gce.ClearFaults(testProject)
			h.waitReleased("web")
			if n := h.endpointCount("us-central1-a", "k8s1-web"); n != 0 {
				t.Errorf("the NEG has %d endpoints, want 0", n)
			}
		})
	}
}

// A cleanup's Pending waits for every NEG with the tenant's marker, not only those Translations list: a NEG left to
// the sweep keeps the tenant until the sweep deletes it, and the message names it.
func TestCleanupPendingWaitsForNEGsAwaitingDeletion(t *testing.T) {
	h := newHarness(t, nil, sweptTranslation(map[string]int{"us-central1-a": 2}))
	h.withSweeps(false)
	h.waitSynced("web", metav1.ConditionTrue)
	if err := h.gce.SetInUseBy(testProject, "us-central1-a", "k8s1-web", "web-backend"); err != nil {
		t.Fatal(err)
	}
	h.markDeleted("web")
	h.waitReleased("web")

	// Without a cleanup running, nothing can tell whether such NEGs are left.
	if msg, err := Pending(context.Background(), h.tctx); err != nil || !strings.Contains(msg, "cannot be ruled out") {
		t.Errorf("Pending without a cleanup = %q, %v; want it to say NEGs awaiting deletion cannot be ruled out", msg, err)
	}

	h.shutdown()
	h.start(true)
	var msg string
	h.waitFor("Pending to name the NEG in use", func() bool {
		var err error
		msg, err = Pending(context.Background(), h.tctx)
		return err == nil && strings.Contains(msg, "us-central1-a/k8s1-web") && strings.Contains(msg, "web-backend")
	})
	if err := h.gce.SetInUseBy(testProject, "us-central1-a", "k8s1-web"); err != nil {
		t.Fatal(err)
	}
	h.waitFor("Pending to find nothing left", func() bool {
		msg, err := Pending(context.Background(), h.tctx)
		return err == nil && msg == ""
	})
	if _, ok := h.gce.NEG(testProject, "us-central1-a", "k8s1-web"); ok {
		t.Error("Pending found nothing left while the NEG is still in GCE")
	}
	h.shutdown()
	if _, ok := cleanups.Load(h.tctx); ok {
		t.Error("the stopped cleanup is still registered for Pending")
	}
}

// A sweep's list that began before a NEG was deleted does not bring it back into what a cleanup waits for, nor does
// it drop a NEG handed over after it began.
func TestAwaitingSetOrdersListsAndChanges(t *testing.T) {
	a := &awaitingSet{track: true}
	x, y := negKey{project: "p", zone: "z", name: "x"}, negKey{project: "p", zone: "z", name: "y"}
	start := a.listStart()
	a.deleted(x)
	a.handedOver(y, "in use")
	a.listedMarked(start, []negKey{x, y})
	if a.marked[x] || !a.marked[y] {
		t.Errorf("marked = %v, want y only: x was deleted after the list began", a.marked)
	}
	a.swept(start, nil)
	if !a.wasHeld(y) {
		t.Error("a sweep whose list began before the hand-over dropped it")
	}
	if got := a.left("p", false); !strings.Contains(got, "z/y (in use)") || strings.Contains(got, "z/x") {
		t.Errorf("left = %q, want y awaiting deletion", got)
	}
	a.deleted(y)
	if got := a.left("p", false); got != "" {
		t.Errorf("left = %q after y was deleted, want nothing", got)
	}
}

// The Event about NEGs left to the sweep goes on the Service, or on its Namespace when that is being deleted (the
// API server accepts no new Event in it).
func TestHandOverEventTarget(t *testing.T) {
	tr := sweptTranslation(map[string]int{"us-central1-a": 1})
	namespaces := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	p := &Pusher{namespaces: namespaces}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace, UID: types.UID("ns-uid")}}
	if err := namespaces.Add(ns); err != nil {
		t.Fatal(err)
	}
	if ref, ok := p.handOverEventTarget(tr).(*corev1.ObjectReference); !ok || ref.Kind != "Service" || ref.Name != "web" || ref.UID != "svc-uid" || ref.Namespace != testNamespace {
		t.Errorf("target %+v, want the Service", p.handOverEventTarget(tr))
	}
	deleting := ns.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	if err := namespaces.Update(deleting); err != nil {
		t.Fatal(err)
	}
	if ref, ok := p.handOverEventTarget(tr).(*corev1.ObjectReference); !ok || ref.Kind != "Namespace" || ref.Name != testNamespace || ref.UID != "ns-uid" {
		t.Errorf("target %+v, want the Namespace being deleted", p.handOverEventTarget(tr))
	}
}

// A NEG awaiting deletion whose name a new Service asks for (a custom name) is declared by the new Translation with
// another marker: that Translation's pusher must not touch it (a name collision), so the sweep still deletes it once
// GCE lets it, and the new Translation gets its own NEG.
func TestSweepDeletesANEGDeclaredOnlyWithAnotherMarker(t *testing.T) {
	h := newHarness(t, nil)
	h.withSweeps(false)
	old, err := h.gce.SeedNEG(testProject, "us-central1-a", &compute.NetworkEndpointGroup{Name: "k8s1-web", Description: sweepableMarker,
		Network: "default", NetworkEndpointType: "GCE_VM_IP_PORT"})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.gce.SetInUseBy(testProject, "us-central1-a", "k8s1-web", "web-backend"); err != nil {
		t.Fatal(err)
	}
	successor := translation("web", map[string]int{"us-central1-a": 1}, true) // its marker is testMarker
	if _, err := h.client.MultiprojectV1alpha1().Translations(testNamespace).Create(context.Background(), successor, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitReason("web", metav1.ConditionFalse, ReasonNameCollision)
	h.waitFor("the sweep to report the NEG held", func() bool { return h.pusher.awaiting.count() == 1 })

	if err := h.gce.SetInUseBy(testProject, "us-central1-a", "k8s1-web"); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the new Translation's own NEG", func() bool {
		h.pusher.workers.Add(testNamespace + "/web")
		n, ok := h.gce.NEG(testProject, "us-central1-a", "k8s1-web")
		return ok && n.Id != old.Id && n.Description == testMarker
	})
	h.waitSynced("web", metav1.ConditionTrue)
}
