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
	"sync/atomic"
	"testing"
	"time"

	compute "google.golang.org/api/compute/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	gceclient "github.com/multiproject/multiproject-controller-manager/pkg/gce/client"
	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
)

const otherProject = "tenant-a-new-project"

// A changed spec.gcp.projectID is a migration: the NEGs are created in the new project first, and only then deleted
// from the old one (with the tenant's credentials); the status follows them.
func TestProjectChangeCreatesInTheNewProjectBeforeDeletingFromTheOld(t *testing.T) {
	h := newHarness(t, nil, translation("web", map[string]int{"us-central1-a": 2, "us-central1-b": 1}, true))
	h.waitSynced("web", metav1.ConditionTrue)

	// The old project refuses deletes for now, so the order is visible: new NEGs exist while old ones remain.
	h.gce.InjectFault(testProject, fakegce.MethodDelete, fakegce.Fault{Code: 503})
	h.restart(&mpv1alpha1.GCPConfig{ProjectID: otherProject, Network: "default"}, false)
	h.waitFor("the NEGs in the new project", func() bool {
		return h.countIn(otherProject, "us-central1-a", "k8s1-web") == 2 && h.countIn(otherProject, "us-central1-b", "k8s1-web") == 1
	})
	if _, ok := h.gce.NEG(testProject, "us-central1-a", "k8s1-web"); !ok {
		t.Fatal("the old NEG went before the delete was allowed")
	}
	h.waitFor("the status to list the old NEGs as Deleting", func() bool {
		deleting := 0
		for _, r := range h.get("web").Status.Resources {
			if r.Project == testProject && r.State == mpv1alpha1.BackendResourceStateDeleting {
				deleting++
			}
		}
		return deleting == 2
	})

	h.gce.ClearFaults(testProject)
	tr := h.waitSynced("web", metav1.ConditionTrue)
	for _, zone := range []string{"us-central1-a", "us-central1-b"} {
		if _, ok := h.gce.NEG(testProject, zone, "k8s1-web"); ok {
			t.Errorf("NEG k8s1-web in %s is left in the old project", zone)
		}
	}
	for _, r := range tr.Status.Resources {
		if r.Project != otherProject || r.State != mpv1alpha1.BackendResourceStateReady {
			t.Errorf("status entry %+v, want only Ready NEGs of %s", r, otherProject)
		}
	}
}

// A changed network cannot be applied in place: the NEG is deleted and created again in the new network.
func TestNetworkChangeRecreatesTheNEG(t *testing.T) {
	h := newHarness(t, nil, translation("web", map[string]int{"us-central1-a": 2}, true))
	h.waitSynced("web", metav1.ConditionTrue)
	before, _ := h.gce.NEG(testProject, "us-central1-a", "k8s1-web")

	tr := h.get("web")
	tr.Spec.Resources[0].NetworkEndpointGroup.Network = "other-vpc"
	tr.Generation++
	if _, err := h.client.MultiprojectV1alpha1().Translations(testNamespace).Update(context.Background(), tr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := h.waitSynced("web", metav1.ConditionTrue)
	after, ok := h.gce.NEG(testProject, "us-central1-a", "k8s1-web")
	if !ok || after.Id == before.Id || !strings.HasSuffix(after.Network, "/networks/other-vpc") {
		t.Fatalf("NEG after the change: %+v (before: id %d), want a new NEG in other-vpc", after, before.Id)
	}
	if n := h.endpointCount("us-central1-a", "k8s1-web"); n != 2 {
		t.Errorf("the recreated NEG has %d endpoints, want 2", n)
	}
	if r := got.Status.Resources; len(r) != 1 || r[0].Network != "other-vpc" {
		t.Errorf("status = %+v, want one entry in other-vpc", r)
	}
	if h.events.Count(corev1.EventTypeNormal, ReasonNEGRecreated) != 1 {
		t.Errorf("Events %v, want one %s", h.events.With(""), ReasonNEGRecreated)
	}
}

// A cleanup-only pusher never creates anything for a live Translation, and deletes the NEGs of one being deleted.
func TestCleanupOnlyPusherDeletesAndNeverCreates(t *testing.T) {
	h := newHarness(t, nil, translation("web", map[string]int{"us-central1-a": 2}, true))
	h.waitSynced("web", metav1.ConditionTrue)
	h.restart(h.tctx.ProviderConfig.Spec.GCP, true)
	h.gce.ResetCalls()

	other := translation("api", map[string]int{"us-central1-a": 1}, true)
	if _, err := h.client.MultiprojectV1alpha1().Translations(testNamespace).Create(context.Background(), other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr := h.get("web")
	now := metav1.Now()
	tr.DeletionTimestamp = &now
	if _, err := h.client.MultiprojectV1alpha1().Translations(testNamespace).Update(context.Background(), tr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the finalizer to go", func() bool { return len(h.get("web").Finalizers) == 0 })
	if _, ok := h.gce.NEG(testProject, "us-central1-a", "k8s1-web"); ok {
		t.Error("the deleted Translation's NEG is still in GCE")
	}
	h.shutdown()
	if n := h.gce.Calls(testProject)[fakegce.MethodInsert]; n != 0 {
		t.Errorf("a cleanup-only pusher created %d NEGs", n)
	}
}

// A rotated credentials Secret is read again and the clients rebuilt, without a restart.
func TestRotatedCredentialsAreUsedWithoutARestart(t *testing.T) {
	gcp := &mpv1alpha1.GCPConfig{ProjectID: testProject, Network: "default",
		CredentialsSecretRef: &mpv1alpha1.SecretKeyReference{Namespace: "kube-system", Name: "tenant-a-gcp", Key: "key.json"}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "tenant-a-gcp"},
		Data: map[string][]byte{"key.json": []byte(`{"type":"authorized_user"}`)}}
	h := newHarness(t, gcp)
	if _, err := h.kube.CoreV1().Secrets("kube-system").Create(context.Background(), secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.shutdown()
	h.tctx.ProviderConfig.Spec.GCP = gcp
	h.start(false)
	h.pusher.credentialsRefresh = 50 * time.Millisecond
	if _, err := h.client.MultiprojectV1alpha1().Translations(testNamespace).Create(context.Background(),
		translation("web", map[string]int{"us-central1-a": 1}, true), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitReason("web", metav1.ConditionFalse, ReasonCredentialsUnavailable)

	secret.Data["key.json"] = []byte(`{"type":"service_account","client_email":"neg@tenant-a-project.iam.gserviceaccount.com","private_key":"-----BEGIN PRIVATE KEY-----\n"}`)
	if _, err := h.kube.CoreV1().Secrets("kube-system").Update(context.Background(), secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitSynced("web", metav1.ConditionTrue)
	first := h.client0()

	secret.Data["key.json"] = []byte(`{"type":"service_account","client_email":"neg2@tenant-a-project.iam.gserviceaccount.com","private_key":"-----BEGIN PRIVATE KEY-----\n"}`)
	if _, err := h.kube.CoreV1().Secrets("kube-system").Update(context.Background(), secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitFor("a client built with the rotated key", func() bool {
		h.pusher.workers.Add(testNamespace + "/web")
		c := h.client0()
		return c != nil && c != first
	})
}

// client0 is the pusher's current client for the test project.
func (h *harness) client0() any {
	h.pusher.gceMu.Lock()
	defer h.pusher.gceMu.Unlock()
	if c := h.pusher.clients[testProject]; c != nil {
		return c
	}
	return nil
}

func (h *harness) countIn(project, zone, name string) int {
	eps, ok := h.gce.Endpoints(project, zone, name)
	if !ok {
		return -1
	}
	return len(eps)
}

// The garbage sweep deletes a NEG that carries the tenant's marker but that no Translation claims (a finalizer
// stripped by hand, say), and leaves alone the NEGs a Translation claims and those of another tenant or cluster.
func TestSweepDeletesOnlyOurUnclaimedNEGs(t *testing.T) {
	h := newHarness(t, nil, translation("web", map[string]int{"us-central1-a": 1}, true))
	h.waitSynced("web", metav1.ConditionTrue)
	gce, err := gceclient.New(context.Background(), gceclient.Config{ProjectID: testProject, Endpoint: h.gce.Endpoint()})
	if err != nil {
		t.Fatal(err)
	}
	marker := func(uid, tenant string) string {
		return fmt.Sprintf(`{"cluster-name":"default","cluster-uid":%q,"provider-config":%q,"managed-by":"multiproject-controller-manager"}`, uid, tenant)
	}
	for name, description := range map[string]string{
		"leaked":       marker(testClusterUID, "tenant-a"),
		"other-tenant": marker(testClusterUID, "tenant-b"),
		// Another cluster of the same --cluster-name: only the UID tells it apart.
		"other-cluster": marker("uid-of-another-cluster", "tenant-a"),
		// Made before the cluster's UID entered markers: nothing proves it is this cluster's.
		"legacy":    `{"cluster-name":"default","provider-config":"tenant-a","managed-by":"multiproject-controller-manager"}`,
		"hand-made": "made by a person",
	} {
		neg := &compute.NetworkEndpointGroup{Name: name, Description: description, Network: "default", NetworkEndpointType: "GCE_VM_IP_PORT"}
		if _, err := gce.InsertNEG(context.Background(), "us-central1-a", neg); err != nil {
			t.Fatal(err)
		}
	}

	h.shutdown()
	h.tctx.Options.NEGGCPeriod = 100 * time.Millisecond
	h.gcGrace = 50 * time.Millisecond
	h.start(false)
	h.waitFor("the leaked NEG to be swept", func() bool {
		_, ok := h.gce.NEG(testProject, "us-central1-a", "leaked")
		return !ok
	})
	for _, name := range []string{"other-tenant", "other-cluster", "legacy", "hand-made", "k8s1-web"} {
		if _, ok := h.gce.NEG(testProject, "us-central1-a", name); !ok {
			t.Errorf("the sweep deleted NEG %s, which is not ours to collect", name)
		}
	}
	h.waitFor("the Event on the ProviderConfig", func() bool { return h.events.Count(corev1.EventTypeNormal, ReasonNEGsCollected) == 1 })
}

// A previous project the tenant can no longer reach keeps its NEGs listed, with a Warning Event, until the operator
// abandons them; then the entries go and the NEGs are left where they are.
func TestUnreachableOldProjectWaitsForTheAbandonAnnotation(t *testing.T) {
	h := newHarness(t, nil, translation("web", map[string]int{"us-central1-a": 1}, true))
	h.waitSynced("web", metav1.ConditionTrue)
	h.gce.InjectFault(testProject, fakegce.MethodDelete, fakegce.Fault{Code: 403, Reason: "forbidden", Message: "project is being deleted"})
	var abandoned atomic.Bool
	h.tctx.CloudResourcesAbandoned = abandoned.Load
	h.restart(&mpv1alpha1.GCPConfig{ProjectID: otherProject, Network: "default"}, false)

	h.waitFor("a Warning that the old NEG cannot be deleted", func() bool {
		return h.events.Count(corev1.EventTypeWarning, ReasonMigrationBlocked) > 0
	})
	if _, ok := h.gce.NEG(otherProject, "us-central1-a", "k8s1-web"); !ok {
		t.Fatal("the NEG was not created in the new project")
	}
	abandoned.Store(true)
	h.pusher.workers.Add(testNamespace + "/web")
	tr := h.waitSynced("web", metav1.ConditionTrue)
	for _, r := range tr.Status.Resources {
		if r.Project != otherProject {
			t.Errorf("status still lists %+v after it was abandoned", r)
		}
	}
	if h.events.Count(corev1.EventTypeWarning, ReasonNEGAbandoned) != 1 {
		t.Errorf("Events %v, want one %s", h.events.With(""), ReasonNEGAbandoned)
	}
	if _, ok := h.gce.NEG(testProject, "us-central1-a", "k8s1-web"); !ok {
		t.Error("an abandoned NEG was deleted after all")
	}
}

// A NEG two Translations declare (a custom name kept across a version bump) is not deleted with the first of them
// to go: the other still claims it. It goes with the last.
func TestNEGClaimedByAnotherTranslationIsNotDeleted(t *testing.T) {
	older := translation("web", map[string]int{"us-central1-a": 1}, true)
	older.Name = "neg-v0-web-80"
	newer := translation("web", map[string]int{"us-central1-a": 1}, true)
	h := newHarness(t, nil, older, newer)
	h.waitSynced("web", metav1.ConditionTrue)
	h.waitSynced(older.Name, metav1.ConditionTrue)

	for _, name := range []string{older.Name, "web"} {
		tr := h.get(name)
		now := metav1.Now()
		tr.DeletionTimestamp = &now
		if _, err := h.client.MultiprojectV1alpha1().Translations(testNamespace).Update(context.Background(), tr, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		h.waitFor("the finalizer of "+name+" to go", func() bool { return len(h.get(name).Finalizers) == 0 })
		_, exists := h.gce.NEG(testProject, "us-central1-a", "k8s1-web")
		if name == older.Name && !exists {
			t.Fatal("the NEG went with the older Translation although the newer one still claims it")
		}
		if name == "web" && exists {
			t.Fatal("the NEG is left after the last Translation claiming it was deleted")
		}
	}
}
