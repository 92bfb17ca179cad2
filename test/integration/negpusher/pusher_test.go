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

package negpusher

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/neg/pusher"
	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
)

const projectA = "tenant-a-project"

// TestLifecycle: 1,200 endpoints over three zones, scale down, a resource removed, a restart of a converged
// pusher, and the foreground delete of the owning Service, which returns only once the NEGs are gone.
func TestLifecycle(t *testing.T) {
	e := newEnv(t)
	e.waitGCKnowsTranslations()
	a := e.newTenant("a", projectA)
	a.start()

	// The owner, as the translator would set it: blockOwnerDeletion holds a foreground delete of the Service.
	svc, err := e.adminKube.CoreV1().Services(e.namespace).Create(e.ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	counts := []int{700, 300, 200} // 1,200 endpoints
	tr := e.translation(a.name, "web", counts...)
	tr.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	e.create(tr)

	got := e.waitSynced("web")
	for i, res := range got.Spec.Resources {
		e.checkEndpoints(projectA, res)
		want := (counts[i] + 499) / 500
		if n := e.gce.ZoneCalls(projectA, res.Zone)[fakegce.MethodAttachEndpoints]; n > want {
			t.Errorf("zone %s: %d attach calls for %d endpoints, want at most %d", res.Zone, n, counts[i], want)
		}
		if s := got.Status.Resources[i]; s.State != mpv1alpha1.BackendResourceStateReady || int(s.EndpointCount) != counts[i] {
			t.Errorf("status of zone %s = %+v", res.Zone, s)
		}
	}

	// Scale down: detach only.
	e.gce.ResetCalls()
	e.update("web", func(tr *mpv1alpha1.Translation) {
		tr.Spec.Resources[0].NetworkEndpointGroup.Endpoints = tr.Spec.Resources[0].NetworkEndpointGroup.Endpoints[:50]
	})
	got = e.waitSynced("web")
	e.checkEndpoints(projectA, got.Spec.Resources[0])
	if calls := e.gce.Calls(projectA); calls[fakegce.MethodDetachEndpoints] != 2 || calls[fakegce.MethodAttachEndpoints] != 0 || calls[fakegce.MethodInsert] != 0 {
		t.Errorf("scale down from 700 to 50 made %v, want 2 detaches and nothing else mutating", calls)
	}

	// A resource removed from the spec: its NEG is deleted and its status entry goes.
	e.update("web", func(tr *mpv1alpha1.Translation) { tr.Spec.Resources = tr.Spec.Resources[:2] })
	e.waitFor("the removed NEG to be deleted", 60*time.Second, func() (bool, error) {
		tr, err := e.get("web")
		return err == nil && e.endpoints(projectA, zones[2], "k8s1-web") == -1 && len(tr.Status.Resources) == 2 &&
			tr.Status.ObservedGeneration == tr.Generation, err
	})

	// Restart of a converged pusher: no mutating call; reads fill the cache (one get per NEG, one listNetworkEndpoints
	// per 500 endpoints). The new pusher must find the last status in the cache, or it writes it again (a 409 and a
	// second round of reads).
	e.waitCacheCurrent("web")
	a.stop()
	e.gce.ResetCalls()
	a.start()
	e.waitFor("the restarted pusher to read every NEG", 30*time.Second, func() (bool, error) {
		return e.gce.Calls(projectA)[fakegce.MethodListEndpoints] >= 2, nil
	})
	// The status it would write equals the stored one; give the workers the time of one more round of reads.
	e.waitSynced("web")
	calls := e.gce.Calls(projectA)
	if n := e.gce.MutatingCalls(projectA); n != 0 {
		t.Errorf("a restart of a converged pusher made %d mutating calls: %v", n, calls)
	}
	t.Logf("reads after a restart with 2 NEGs of 50 and 300 endpoints: %v", calls)
	if calls[fakegce.MethodGet] != 2 || calls[fakegce.MethodListEndpoints] != 2 {
		t.Errorf("restart reads = %v, want 2 gets and 2 listNetworkEndpoints", calls)
	}

	// Foreground delete of the Service: it is held until the Translation's NEGs are deleted and the finalizer removed.
	err = e.adminKube.CoreV1().Services(e.namespace).Delete(e.ctx, "web", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)})
	if err != nil {
		t.Fatal(err)
	}
	e.waitFor("the Service to be gone", 90*time.Second, func() (bool, error) {
		_, err := e.adminKube.CoreV1().Services(e.namespace).Get(e.ctx, "web", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		// While the Service exists, its Translation and NEGs may too; once it is gone, neither may.
		return false, err
	})
	for _, z := range zones {
		if n := e.endpoints(projectA, z, "k8s1-web"); n != -1 {
			t.Errorf("NEG in %s still exists after the Service's foreground delete returned", z)
		}
	}
	e.waitGone("web")
}

// TestDeletionWhileStopped: a Translation deleted while the pusher is down keeps its finalizer (so the NEGs are not
// forgotten) and is cleaned up when the pusher comes back; Pending reports it meanwhile.
func TestDeletionWhileStopped(t *testing.T) {
	e := newEnv(t)
	a := e.newTenant("a", projectA)
	a.start()
	e.create(e.translation(a.name, "web", 20, 20, 20))
	e.waitSynced("web")
	a.stop()

	if err := e.admin.MultiprojectV1alpha1().Translations(e.namespace).Delete(e.ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the deletion mark", 30*time.Second, func() (bool, error) {
		tr, err := e.get("web")
		return err == nil && tr.DeletionTimestamp != nil, err
	})
	msg, err := pusher.Pending(e.ctx, a.tctx())
	if err != nil || !strings.Contains(msg, "1 Translation with NEGs not yet deleted: "+e.namespace+"/web") {
		t.Errorf("Pending = %q, %v", msg, err)
	}
	for _, z := range zones {
		if e.endpoints(projectA, z, "k8s1-web") != 20 {
			t.Errorf("NEG in %s changed while the pusher was stopped", z)
		}
	}

	a.start()
	e.waitGone("web")
	for _, z := range zones {
		if e.endpoints(projectA, z, "k8s1-web") != -1 {
			t.Errorf("NEG in %s was not deleted", z)
		}
	}
	e.waitFor("Pending to be empty", 30*time.Second, func() (bool, error) {
		msg, err := pusher.Pending(e.ctx, a.tctx())
		return msg == "", err
	})
}

// TestFaultsConverge: rate limits (403 rateLimitExceeded, 429), 5xx, failed operations and a NEG deleted behind
// the pusher's back; the end state is exactly the spec.
func TestFaultsConverge(t *testing.T) {
	e := newEnvWith(t, fakegce.Options{OperationPolls: 1}) // every operation needs a wait call

	e.gce.InjectFault(projectA, fakegce.MethodAttachEndpoints, fakegce.Fault{Code: 503, EveryNth: 2})
	e.gce.InjectFault(projectA, fakegce.MethodAttachEndpoints, fakegce.Fault{Code: 500, Async: true, Times: 1})
	e.gce.InjectFault(projectA, fakegce.MethodInsert, fakegce.Fault{Code: 403, Reason: fakegce.ReasonRateLimitExceeded, Times: 3})
	e.gce.InjectFault(projectA, fakegce.MethodOperationWait, fakegce.Fault{Code: 429, Times: 2})
	e.gce.InjectFault(projectA, fakegce.MethodGet, fakegce.Fault{Code: 502, Times: 2})
	a := e.newTenant("a", projectA)
	a.start()
	e.create(e.translation(a.name, "web", 1200, 600, 30))
	got := e.waitSynced("web")
	for _, res := range got.Spec.Resources {
		e.checkEndpoints(projectA, res)
	}
	errs := e.gce.Errors(projectA)
	for _, m := range []fakegce.Method{fakegce.MethodAttachEndpoints, fakegce.MethodInsert, fakegce.MethodOperationWait, fakegce.MethodGet} {
		if errs[m] == 0 {
			t.Errorf("no fault fired on %s", m)
		}
	}
	t.Logf("errors answered: %v", errs)

	// A NEG deleted by hand is recreated on the next change.
	e.gce.ClearFaults(projectA)
	if err := deleteByHand(e, projectA, zones[1], "k8s1-web"); err != nil {
		t.Fatal(err)
	}
	e.update("web", func(tr *mpv1alpha1.Translation) {
		tr.Spec.Resources[1].NetworkEndpointGroup.Endpoints = tr.Spec.Resources[1].NetworkEndpointGroup.Endpoints[:400]
	})
	got = e.waitSynced("web")
	e.checkEndpoints(projectA, got.Spec.Resources[1])
}

func deleteByHand(e *env, project, zone, name string) error {
	svc, err := e.gce.ComputeService(context.Background())
	if err != nil {
		return err
	}
	_, err = svc.NetworkEndpointGroups.Delete(project, zone, name).Do()
	return err
}

// TestTenantsAreIsolated: two tenants' NEGs land in their own projects, each pusher sees only its tenant's
// Translations, and one tenant's failing GCE does not hold up the other.
func TestTenantsAreIsolated(t *testing.T) {
	const projectB = "tenant-b-project"
	e := newEnv(t)
	a := e.newTenant("a", projectA)
	b := e.newTenant("b", projectB)
	// Tenant A's project answers every call with 503, slowly.
	e.gce.InjectFault(projectA, fakegce.AnyMethod, fakegce.Fault{Code: 503})
	e.gce.SetLatency(projectA, fakegce.AnyMethod, 200*time.Millisecond)
	a.start()
	b.start()
	e.create(e.translation(a.name, "web-a", 10, 10))
	e.create(e.translation(b.name, "web-b", 10, 10))

	e.waitSynced("web-b")
	if e.endpoints(projectB, zones[0], "k8s1-web-b") != 10 || e.endpoints(projectB, zones[1], "k8s1-web-b") != 10 {
		t.Error("tenant B's NEGs are not in its project")
	}
	if e.endpoints(projectA, zones[0], "k8s1-web-b") != -1 || e.endpoints(projectB, zones[0], "k8s1-web-a") != -1 {
		t.Error("a NEG landed in the other tenant's project")
	}
	e.waitCondition("web-a", metav1.ConditionFalse, pusher.ReasonGCEError)

	e.gce.ClearFaults(projectA)
	e.waitSynced("web-a")
	if e.endpoints(projectA, zones[0], "k8s1-web-a") != 10 {
		t.Error("tenant A's NEGs are not in its project")
	}
}

// TestForeignNEGIsNeverTouched: a NEG without our marker is a collision (Warning Event, Synced=False, NEGReady
// condition) and survives the Translation's deletion.
func TestForeignNEGIsNeverTouched(t *testing.T) {
	e := newEnv(t)
	seedForeign(t, e.gce, projectA, zones[0], "k8s1-web")
	a := e.newTenant("a", projectA)
	a.start()
	e.create(e.translation(a.name, "web", 5, 5))

	got := e.waitCondition("web", metav1.ConditionFalse, pusher.ReasonNameCollision)
	if s := got.Status.Resources[0]; s.State != mpv1alpha1.BackendResourceStateError || s.LastError == "" {
		t.Errorf("status of the colliding NEG = %+v", s)
	}
	e.checkEndpoints(projectA, got.Spec.Resources[1])
	e.waitFor("a Warning event on the Translation", 30*time.Second, func() (bool, error) {
		events, err := e.adminKube.CoreV1().Events(e.namespace).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, ev := range events.Items {
			if ev.Reason == pusher.ReasonNameCollision && ev.Type == corev1.EventTypeWarning && ev.InvolvedObject.Name == "web" &&
				ev.InvolvedObject.Kind == "Translation" {
				return true, nil
			}
		}
		return false, nil
	})
	// The ProviderConfig controller writes the report into the tenant's status after the pusher made it.
	e.waitFor("NEGReady False/"+pusher.ReasonNameCollision, 30*time.Second, func() (bool, error) {
		c, ok := a.condition()
		return ok && c.Status == metav1.ConditionFalse && c.Reason == pusher.ReasonNameCollision, nil
	})

	if err := e.admin.MultiprojectV1alpha1().Translations(e.namespace).Delete(e.ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("web")
	if e.endpoints(projectA, zones[1], "k8s1-web") != -1 {
		t.Error("our NEG was not deleted")
	}
	neg, ok := e.gce.NEG(projectA, zones[0], "k8s1-web")
	if !ok || neg.Description != "created by hand" || e.endpoints(projectA, zones[0], "k8s1-web") != 1 {
		t.Errorf("the foreign NEG was changed or deleted: %v %+v", ok, neg)
	}
	if errs := e.gce.Calls(projectA); errs[fakegce.MethodDelete] != 1 {
		t.Errorf("delete calls = %d, want 1 (ours only)", errs[fakegce.MethodDelete])
	}
}
