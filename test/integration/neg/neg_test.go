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
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/neg"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/neg/translator"
	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

const (
	projectA = "tenant-a-project"
	projectB = "tenant-b-project"
)

// negStatus is the Service's neg-status annotation.
type negStatus struct {
	NetworkEndpointGroups map[string]string `json:"network_endpoint_groups"`
	Zones                 []string          `json:"zones"`
}

func (e *env) negStatus(ns, name string) (negStatus, bool) {
	e.t.Helper()
	svc, err := e.adminKube.CoreV1().Services(ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	v, ok := svc.Annotations[negapi.StatusAnnotationKey]
	if !ok {
		return negStatus{}, false
	}
	var s negStatus
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		e.t.Fatalf("neg-status %q: %v", v, err)
	}
	return s, true
}

// waitConverged waits until the Service port's Translation is pushed and GCE holds exactly eps.
func (e *env) waitConverged(project, ns, service string, port int32, targetPort int64, eps []endpoint) (*mpv1alpha1.Translation, string) {
	e.t.Helper()
	var tr *mpv1alpha1.Translation
	why := "not looked yet"
	err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, 120*time.Second, true, func(context.Context) (bool, error) {
		tr = e.translation(ns, fmt.Sprintf("neg-v1-%s-%d", service, port))
		if !synced(tr) || len(tr.Spec.Resources) != len(zones) {
			why = "Translation not synced"
			return false, nil
		}
		var ok bool
		ok, why = e.gceMatches(project, tr.Spec.Resources[0].Name, targetPort, eps)
		return ok, nil
	})
	if err != nil {
		e.t.Fatalf("%s/%s port %d did not converge: %s", ns, service, port, why)
	}
	return tr, tr.Spec.Resources[0].Name
}

func (e *env) events(ns, name, reason string) []corev1.Event {
	e.t.Helper()
	list, err := e.adminKube.CoreV1().Events(ns).List(e.ctx, metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.name": name, "reason": reason}.String()})
	if err != nil {
		e.t.Fatal(err)
	}
	return list.Items
}

// TestServiceLifecycle: a Service with 1,200 endpoints over three zones gets exactly those endpoints with at most
// ceil(n/500) attach calls per zone; scale down; a port removed from the annotation; a malformed annotation on
// another Service; a background delete (Translation collected, NEGs deleted, finalizer removed); and a foreground
// delete that returns only once the NEGs are gone.
func TestServiceLifecycle(t *testing.T) {
	e := newEnv(t)
	a := e.newTenant("a", projectA)
	ns := a.namespace()
	e.waitGCKnowsTranslations(ns)
	e.nodes(a.name, a.name, 3)
	a.start()

	counts := []int{700, 300, 200}
	eps := podsIn(a.name, 0, 3, counts...)
	e.setSlices(ns, "web", "http", 8080, eps)
	tlsEps := podsIn(a.name, 100, 3, 5, 5, 5)
	e.setSlices(ns, "web", "https", 8443, tlsEps)
	e.service(ns, "web", `{"exposed_ports":{"80":{},"443":{}}}`)

	tr, name := e.waitConverged(projectA, ns, "web", 80, 8080, eps)
	for i, z := range zones {
		if n, max := e.gce.ZoneCalls(projectA, z)[fakegce.MethodAttachEndpoints], (counts[i]+499)/500+1; n > max {
			// +1: port 443's NEG in the same zone takes one attach call.
			t.Errorf("zone %s: %d attach calls for %d + 5 endpoints, want at most %d", z, n, counts[i], max)
		}
	}
	if ref := metav1.GetControllerOf(tr); ref == nil || ref.Name != "web" || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("owner reference = %+v", ref)
	}
	if tr.Labels[labelKey] != a.name || tr.Labels[mpv1alpha1.TranslationOwnerUIDLabelKey] == "" {
		t.Errorf("labels = %v", tr.Labels)
	}
	_, tlsName := e.waitConverged(projectA, ns, "web", 443, 8443, tlsEps)
	e.waitFor("the neg-status annotation", 30*time.Second, func() (bool, error) {
		s, ok := e.negStatus(ns, "web")
		return ok && s.NetworkEndpointGroups["80"] == name && s.NetworkEndpointGroups["443"] == tlsName &&
			strings.Join(s.Zones, ",") == strings.Join(zones, ","), nil
	})
	e.waitFor("NEGReady True/Running", 10*time.Second, func() (bool, error) {
		c, ok := a.condition()
		return ok && c.Status == metav1.ConditionTrue && c.Reason == neg.ReasonRunning, nil
	})

	// Scale down: 1,200 → 300 endpoints; detaches only.
	e.gce.ResetCalls()
	eps = podsIn(a.name, 0, 3, 100, 100, 100)
	e.setSlices(ns, "web", "http", 8080, eps)
	e.waitConverged(projectA, ns, "web", 80, 8080, eps)
	if calls := e.gce.Calls(projectA); calls[fakegce.MethodAttachEndpoints] != 0 || calls[fakegce.MethodInsert] != 0 ||
		calls[fakegce.MethodDetachEndpoints] > 4 {
		t.Errorf("scale down made %v; want no attach or insert and at most 4 detaches (2 in zone b)", calls)
	}

	// Port 443 removed: its Translation goes, its NEGs are deleted, the status forgets it; port 80 is untouched.
	e.gce.ResetCalls()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, negapi.AnnotationKey, `{"exposed_ports":{"80":{}}}`)
	if _, err := e.adminKube.CoreV1().Services(ns).Patch(e.ctx, "web", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("port 443's Translation and NEGs to be gone", 60*time.Second, func() (bool, error) {
		return e.translation(ns, "neg-v1-web-443") == nil && e.negsGone(projectA, tlsName), nil
	})
	e.waitFor("the neg-status to forget port 443", 30*time.Second, func() (bool, error) {
		s, _ := e.negStatus(ns, "web")
		_, has := s.NetworkEndpointGroups["443"]
		return !has && s.NetworkEndpointGroups["80"] == name, nil
	})
	if calls := e.gce.Calls(projectA); calls[fakegce.MethodAttachEndpoints]+calls[fakegce.MethodDetachEndpoints] != 0 {
		t.Errorf("removing port 443 changed endpoints: %v", calls)
	}

	// A malformed annotation on another Service is a Warning on it, and the rest keeps working.
	e.service(ns, "broken", `{"exposed_ports":{"80":{}}`)
	e.waitFor("the InvalidNEGAnnotation Warning", 30*time.Second, func() (bool, error) {
		return len(e.events(ns, "broken", translator.ReasonInvalidAnnotation)) > 0, nil
	})

	// Background delete of a second Service: the collector deletes its Translation; the pusher deletes the NEGs
	// and then removes the finalizer, so the Translation disappears only after the NEGs.
	other := podsIn(a.name, 200, 3, 10, 10, 10)
	e.setSlices(ns, "other", "http", 8080, other)
	e.service(ns, "other", `{"exposed_ports":{"80":{}}}`)
	_, otherName := e.waitConverged(projectA, ns, "other", 80, 8080, other)
	if err := e.adminKube.CoreV1().Services(ns).Delete(e.ctx, "other", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the collected Translation to be gone", 60*time.Second, func() (bool, error) {
		tr := e.translation(ns, "neg-v1-other-80")
		if tr == nil && !e.negsGone(projectA, otherName) {
			return false, fmt.Errorf("the Translation is gone but its NEGs are not")
		}
		return tr == nil, nil
	})

	// Foreground delete: the Service stays until its Translation, and so its NEGs, are gone.
	err := e.adminKube.CoreV1().Services(ns).Delete(e.ctx, "web", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)})
	if err != nil {
		t.Fatal(err)
	}
	e.waitFor("the Service to be gone", 90*time.Second, func() (bool, error) {
		_, err := e.adminKube.CoreV1().Services(ns).Get(e.ctx, "web", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if !e.negsGone(projectA, name) {
		t.Error("the Service's foreground delete returned while its NEGs still exist")
	}
	if tr := e.translation(ns, "neg-v1-web-80"); tr != nil {
		t.Errorf("Translation still exists: %+v", tr.ObjectMeta)
	}
}

// TestTwoTenantsNEGsLandInTheirOwnProjects: two tenants with the same Service name, on shared (unlabeled) Nodes,
// each get their NEGs in their own project, under different names, and neither sees the other's objects.
func TestTwoTenantsNEGsLandInTheirOwnProjects(t *testing.T) {
	e := newEnv(t)
	a := e.newTenant("a", projectA)
	b := e.newTenant("b", projectB)
	nsA, nsB := a.namespace(), b.namespace()
	e.nodes("shared", "", 2)
	a.start()
	b.start()

	epsA := podsIn("shared", 0, 2, 20, 30, 40)
	epsB := podsIn("shared", 50, 2, 5, 6, 7)
	e.setSlices(nsA, "web", "http", 8080, epsA)
	e.setSlices(nsB, "web", "http", 8080, epsB)
	e.service(nsA, "web", `{"exposed_ports":{"80":{}}}`)
	e.service(nsB, "web", `{"exposed_ports":{"80":{}}}`)

	trA, nameA := e.waitConverged(projectA, nsA, "web", 80, 8080, epsA)
	trB, nameB := e.waitConverged(projectB, nsB, "web", 80, 8080, epsB)
	if nameA == nameB {
		t.Errorf("both tenants use NEG name %s", nameA)
	}
	if trA.Labels[labelKey] != a.name || trB.Labels[labelKey] != b.name {
		t.Errorf("tenant labels: %v, %v", trA.Labels, trB.Labels)
	}
	if !e.negsGone(projectA, nameB) || !e.negsGone(projectB, nameA) {
		t.Error("a tenant's NEG landed in the other tenant's project")
	}
	for _, p := range []string{projectA, projectB} {
		if negs := e.gce.NEGs(p); len(negs) != len(zones) {
			t.Errorf("project %s has %d NEGs, want %d", p, len(negs), len(zones))
		}
	}
}

// TestServiceMovesToAnotherTenant: relabeling the namespace from tenant a to tenant b moves the Service: a's
// translator releases it (its Translation deleted, so a's pusher deletes the NEGs in a's project) and b's translator
// declares it anew, so the NEGs end up in b's project only.
func TestServiceMovesToAnotherTenant(t *testing.T) {
	e := newEnv(t)
	a := e.newTenant("a", projectA)
	b := e.newTenant("b", projectB)
	ns := a.namespace()
	e.nodes("move", "", 1)
	a.start()
	b.start()

	eps := podsIn("move", 0, 1, 3, 4, 5)
	e.setSlices(ns, "web", "http", 8080, eps)
	e.service(ns, "web", `{"exposed_ports":{"80":{}}}`)
	_, nameA := e.waitConverged(projectA, ns, "web", 80, 8080, eps)

	b.label(ns)
	e.waitFor("the NEGs to move to project b", 90*time.Second, func() (bool, error) {
		tr := e.translation(ns, "neg-v1-web-80")
		if tr == nil || tr.Labels[labelKey] != b.name || !synced(tr) {
			return false, nil
		}
		ok, _ := e.gceMatches(projectB, tr.Spec.Resources[0].Name, 8080, eps)
		return ok && e.negsGone(projectA, nameA), nil
	})
	e.waitFor("the neg-status to name b's NEG", 30*time.Second, func() (bool, error) {
		s, _ := e.negStatus(ns, "web")
		return s.NetworkEndpointGroups["80"] != "" && s.NetworkEndpointGroups["80"] != nameA, nil
	})
}
