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

package neg

import (
	"encoding/json"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	compute "google.golang.org/api/compute/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/neg/translator"
	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
)

// TestOrphanDeleteThenRecreateReplacesTheTranslation: a Service deleted with --cascade=orphan leaves its
// Translation (the garbage collector removes the owner reference, the finalizer stays). A Service created again
// with the same name gets a new UID; its translator deletes the predecessor's Translation (the pusher deletes the
// NEGs with the old UID's marker), says so in an Event, and creates the Service's own once the old one is gone.
func TestOrphanDeleteThenRecreateReplacesTheTranslation(t *testing.T) {
	e := newEnv(t)
	a := e.newTenant("a", projectA)
	ns := a.namespace()
	e.waitGCKnowsTranslations(ns)
	e.nodes(a.name, a.name, 1)
	eps := podsIn(a.name, 0, 1, 3, 2, 1)
	e.setSlices(ns, "web", "http", 8080, eps)
	a.start()
	old := e.service(ns, "web", `{"exposed_ports":{"80":{}}}`)
	oldTr, name := e.waitConverged(projectA, ns, "web", 80, 8080, eps)

	// The controller is stopped while the Service is deleted and created again, so that the new Service meets its
	// predecessor's Translation (running, the sync of the deleted Service may delete it first: the case of
	// TestOrphanDeleteWithoutRecreateDeletesTheTranslation).
	a.stop()
	e.orphanDelete(ns, "web")
	orphaned := e.translation(ns, oldTr.Name)
	if orphaned == nil || orphaned.UID != oldTr.UID || len(orphaned.OwnerReferences) != 0 ||
		!slices.Contains(orphaned.Finalizers, mpv1alpha1.TranslationDeleterFinalizer) ||
		orphaned.Labels[mpv1alpha1.TranslationOwnerUIDLabelKey] != string(old.UID) {
		t.Fatalf("after the orphan delete the Translation should be left without owner, with its finalizer and label: %+v", orphaned)
	}
	e.gce.ResetCalls()
	svc := e.service(ns, "web", `{"exposed_ports":{"80":{}}}`)
	a.start()

	newMarker := ownershipMarker(a.name, ns, "web", svc.UID, 80)
	e.waitFor("the new Service's Translation to be synced with NEGs of its own", 120*time.Second, func() (bool, error) {
		tr := e.translation(ns, oldTr.Name)
		if tr == nil || tr.UID == oldTr.UID || !synced(tr) || tr.Labels[mpv1alpha1.TranslationOwnerUIDLabelKey] != string(svc.UID) {
			return false, nil
		}
		if ok, _ := e.gceMatches(projectA, name, 8080, eps); !ok {
			return false, nil
		}
		for _, z := range zones {
			if n, ok := e.gce.NEG(projectA, z, name); !ok || n.Description != newMarker {
				return false, nil
			}
		}
		return true, nil
	})
	if ref := metav1.GetControllerOf(e.translation(ns, oldTr.Name)); ref == nil || ref.UID != svc.UID {
		t.Errorf("the new Translation's controller = %+v, want the new Service", ref)
	}
	// The predecessor's NEGs (same name, the old UID's marker) were deleted before the new ones were created.
	if n := e.gce.Calls(projectA)[fakegce.MethodDelete]; n != len(zones) {
		t.Errorf("%d NEG deletes, want %d (the predecessor's NEGs)", n, len(zones))
	}
	for _, n := range e.gce.NEGs(projectA) {
		if strings.Contains(n.Description, string(old.UID)) {
			t.Errorf("NEG %s in %s still carries the old Service's marker", n.Name, path.Base(n.Zone))
		}
	}
	e.waitFor("the "+translator.ReasonStaleTranslationDeleted+" Event on the new Service", 30*time.Second, func() (bool, error) {
		for _, ev := range e.events(ns, "web", translator.ReasonStaleTranslationDeleted) {
			if ev.InvolvedObject.UID == svc.UID && ev.Type == "Normal" && strings.Contains(ev.Message, string(old.UID)) {
				return true, nil
			}
		}
		return false, nil
	})
	e.audit(projectA, ns)
}

// TestOrphanDeleteWithoutRecreateDeletesTheTranslation: a Service deleted with --cascade=orphan and not created
// again: the translator deletes its orphaned Translation, so the pusher deletes the NEGs and removes the finalizer.
func TestOrphanDeleteWithoutRecreateDeletesTheTranslation(t *testing.T) {
	e := newEnv(t)
	a := e.newTenant("a", projectA)
	ns := a.namespace()
	e.waitGCKnowsTranslations(ns)
	e.nodes(a.name, a.name, 1)
	eps := podsIn(a.name, 0, 1, 2, 2, 2)
	e.setSlices(ns, "web", "http", 8080, eps)
	a.start()
	e.service(ns, "web", `{"exposed_ports":{"80":{}}}`)
	tr, name := e.waitConverged(projectA, ns, "web", 80, 8080, eps)

	e.orphanDelete(ns, "web")
	e.waitFor("the orphaned Translation and its NEGs to be gone", 90*time.Second, func() (bool, error) {
		return e.translation(ns, tr.Name) == nil && e.negsGone(projectA, name), nil
	})
	e.audit(projectA, ns)
}

// TestVersionBumpDeletesOnlyTheStaleVersionsNEGs: a Translation of an older version (made by hand here, as the
// previous version would have left it, with its NEGs in GCE) names other NEGs than the current version. The current
// Translation's NEGs are pushed first; only then is the old Translation deleted, and the pusher deletes its NEGs
// and no other.
func TestVersionBumpDeletesOnlyTheStaleVersionsNEGs(t *testing.T) {
	e := newEnv(t)
	a := e.newTenant("a", projectA)
	ns := a.namespace()
	e.nodes(a.name, a.name, 1)
	eps := podsIn(a.name, 0, 1, 2, 3, 1)
	e.setSlices(ns, "web", "http", 8080, eps)
	svc := e.service(ns, "web", `{"exposed_ports":{"80":{}}}`)

	// What the previous version left: its Translation and its NEGs, with the Service's marker.
	const oldName = "mp0-web-80-old"
	marker := ownershipMarker(a.name, ns, "web", svc.UID, 80)
	old := &mpv1alpha1.Translation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "neg-v0-web-80",
		Labels:     map[string]string{labelKey: a.name, mpv1alpha1.TranslationOwnerUIDLabelKey: string(svc.UID)},
		Finalizers: []string{mpv1alpha1.TranslationDeleterFinalizer},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "web", UID: svc.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}}}
	for _, z := range zones {
		if _, err := e.gce.SeedNEG(projectA, z, &compute.NetworkEndpointGroup{Name: oldName, Description: marker,
			NetworkEndpointType: "GCE_VM_IP_PORT", Network: "default"}); err != nil {
			t.Fatal(err)
		}
		old.Spec.Resources = append(old.Spec.Resources, mpv1alpha1.BackendResource{
			Kind: mpv1alpha1.BackendResourceKindNetworkEndpointGroup, Name: oldName, Zone: z, Description: marker,
			NetworkEndpointGroup: &mpv1alpha1.NetworkEndpointGroupParameters{Network: "default"}})
	}
	old, err := e.admin.MultiprojectV1alpha1().Translations(ns).Create(e.ctx, old, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	history := e.watchTranslations(ns, old.ResourceVersion)
	a.start()

	current, name := e.waitConverged(projectA, ns, "web", 80, 8080, eps)
	if name == oldName {
		t.Fatalf("the current version declares the old version's NEG %s", name)
	}
	e.waitFor("the old Translation and its NEGs to be gone", 60*time.Second, func() (bool, error) {
		return e.translation(ns, old.Name) == nil && e.negsGone(projectA, oldName), nil
	})
	if ok, why := e.gceMatches(projectA, name, 8080, eps); !ok {
		t.Errorf("the current NEGs were touched: %s", why)
	}
	if n := e.gce.Calls(projectA)[fakegce.MethodDelete]; n != len(zones) {
		t.Errorf("%d NEG deletes, want %d (the old version's NEGs only)", n, len(zones))
	}
	if evs := e.events(ns, current.Name, "NEGDeleted"); len(evs) != 0 {
		t.Errorf("NEGs of the current Translation were deleted: %v", evs[0].Message)
	}
	// The new NEGs first: the current Translation was synced before the old one was marked for deletion.
	syncedAt, deletedAt := history.first(func(tr *mpv1alpha1.Translation) bool { return tr.Name == current.Name && synced(tr) }),
		history.first(func(tr *mpv1alpha1.Translation) bool { return tr.Name == old.Name && tr.DeletionTimestamp != nil })
	if syncedAt < 0 || deletedAt < 0 || syncedAt > deletedAt {
		t.Errorf("the current Translation was synced at watch event %d and the old one marked for deletion at %d; "+
			"want the new NEGs before the old ones go", syncedAt, deletedAt)
	}
	e.audit(projectA, ns)
}

// orphanDelete deletes the Service as `kubectl delete --cascade=orphan` does and waits until it is gone, which is
// after the garbage collector has removed the owner references of its dependents.
func (e *env) orphanDelete(ns, name string) {
	e.t.Helper()
	err := e.adminKube.CoreV1().Services(ns).Delete(e.ctx, name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan)})
	if err != nil {
		e.t.Fatal(err)
	}
	e.waitFor("the orphan-deleted Service to be gone", 60*time.Second, func() (bool, error) {
		_, err := e.adminKube.CoreV1().Services(ns).Get(e.ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// ownershipMarker is the NEG description the translator writes (docs/neg.md, "Names"), its fields in that order.
func ownershipMarker(tenant, ns, service string, uid types.UID, port int) string {
	b, err := json.Marshal(struct {
		Cluster    string `json:"cluster-name"`
		ClusterUID string `json:"cluster-uid"`
		Tenant     string `json:"provider-config"`
		Namespace  string `json:"namespace"`
		Service    string `json:"service-name"`
		UID        string `json:"service-uid"`
		Port       string `json:"port"`
		ManagedBy  string `json:"managed-by"`
	}{clusterName, clusterUID, tenant, ns, service, string(uid), strconv.Itoa(port), "multiproject-controller-manager"})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// audit checks the end state of a namespace: every NEG of the project that carries our marker is listed (zone, name
// and marker) by a Translation that is not being deleted, and every Translation that still has the deleter
// finalizer has its Service, with the UID it was made for.
func (e *env) audit(project, ns string) {
	e.t.Helper()
	list, err := e.admin.MultiprojectV1alpha1().Translations(ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, tr := range list.Items {
		if tr.DeletionTimestamp != nil {
			continue
		}
		for _, r := range tr.Spec.Resources {
			listed[r.Zone+"/"+r.Name+"/"+r.Description] = true
		}
	}
	for _, n := range e.gce.NEGs(project) {
		if strings.Contains(n.Description, `"managed-by":"multiproject-controller-manager"`) && !listed[path.Base(n.Zone)+"/"+n.Name+"/"+n.Description] {
			e.t.Errorf("NEG %s in %s carries our marker and no live Translation lists it: %s", n.Name, path.Base(n.Zone), n.Description)
		}
	}
	for _, tr := range list.Items {
		if !slices.Contains(tr.Finalizers, mpv1alpha1.TranslationDeleterFinalizer) {
			continue
		}
		service := serviceNamed(&tr)
		svc, err := e.adminKube.CoreV1().Services(ns).Get(e.ctx, service, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			e.t.Errorf("Translation %s keeps its finalizer and its Service %s is gone", tr.Name, service)
		case err != nil:
			e.t.Fatal(err)
		case string(svc.UID) != tr.Labels[mpv1alpha1.TranslationOwnerUIDLabelKey]:
			e.t.Errorf("Translation %s keeps its finalizer and was made for Service UID %s, not the live %s", tr.Name,
				tr.Labels[mpv1alpha1.TranslationOwnerUIDLabelKey], svc.UID)
		}
	}
}

// serviceNamed is the Service a Translation names: its controller's, else the one in neg-<version>-<service>-<port>.
func serviceNamed(tr *mpv1alpha1.Translation) string {
	if ref := metav1.GetControllerOf(tr); ref != nil {
		return ref.Name
	}
	rest := strings.TrimPrefix(tr.Name, "neg-")
	_, rest, _ = strings.Cut(rest, "-")
	if i := strings.LastIndexByte(rest, '-'); i > 0 {
		return rest[:i]
	}
	return rest
}

// translationHistory is every Translation of a namespace as one watch saw it, in the order of the writes.
type translationHistory struct {
	mu     sync.Mutex
	states []*mpv1alpha1.Translation
}

// first returns the index of the first state that matches, or -1.
func (h *translationHistory) first(match func(*mpv1alpha1.Translation) bool) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.IndexFunc(h.states, match)
}

// watchTranslations records the Translations of the namespace written after resourceVersion until the test ends.
func (e *env) watchTranslations(ns, resourceVersion string) *translationHistory {
	e.t.Helper()
	w, err := e.admin.MultiprojectV1alpha1().Translations(ns).Watch(e.ctx, metav1.ListOptions{ResourceVersion: resourceVersion,
		TimeoutSeconds: ptr.To[int64](600)})
	if err != nil {
		e.t.Fatal(err)
	}
	h := &translationHistory{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if tr, ok := ev.Object.(*mpv1alpha1.Translation); ok && ev.Type != watch.Error {
				h.mu.Lock()
				h.states = append(h.states, tr)
				h.mu.Unlock()
			}
		}
	}()
	e.t.Cleanup(func() {
		w.Stop()
		<-done
	})
	return h
}
