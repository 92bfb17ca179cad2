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

package namespaceproject

import (
	"fmt"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	rancherv3 "github.com/multiproject/api/rancher/management/v3"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/namespaceproject"
	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

// TestSeedExampleEndToEnd: the seed's example as make local-up's demo applies it (namespace my-app of tenant-a,
// appOwner=DevOps, Rancher cluster local) gets the write Rancher expects; the seed's own label value is shown to be
// rejected by the API server; the manager's ServiceAccount has the verb Rancher's webhook checks; a restarted
// controller writes nothing to a converged namespace.
func TestSeedExampleEndToEnd(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.applyDemo("namespace-project-demo.yaml")
	a := e.newNamedTenant("tenant-a", "local", 1) // docs/examples/providerconfig.yaml
	a.start()
	a.waitRunning()

	ns := e.waitAssigned("my-app", "local:p-devops")
	label := ns.Labels[rancherv3.ProjectIDLabelKey]
	if label != "p-devops" || len(validation.IsValidLabelValue(label)) > 0 {
		t.Errorf("label %s = %q, want the valid label value p-devops", rancherv3.ProjectIDLabelKey, label)
	}
	if got := ns.Annotations[namespaceproject.AssignedProjectAnnotationKey]; got != "local:p-devops" {
		t.Errorf("our record of the project = %q", got)
	}
	if got := ns.Annotations[namespaceproject.AssignedAppOwnerAnnotationKey]; got != "DevOps" {
		t.Errorf("our record of the app owner = %q", got)
	}
	for key := range ns.Labels {
		if key == "field.cattle.io/clusterId" {
			t.Error("wrote the seed's clusterId label, which Rancher does not have")
		}
	}
	if ev := e.waitEvent("my-app", namespaceproject.ReasonAssigned); ev.Type != corev1.EventTypeNormal || !strings.Contains(ev.Message, "local:p-devops") {
		t.Errorf("Assigned event = %s %q", ev.Type, ev.Message)
	}

	// The seed's write (a label value with the cluster part) is what a real API server rejects (ERRATA).
	seedPatch := []byte(`{"metadata":{"labels":{"field.cattle.io/projectId":"local:p-devops"}}}`)
	_, err := e.adminKube.CoreV1().Namespaces().Patch(e.ctx, "my-app", types.MergePatchType, seedPatch, metav1.PatchOptions{})
	if !apierrors.IsInvalid(err) {
		t.Errorf("the seed's label write: err = %v, want Invalid", err)
	}

	// Rancher's webhook admits the annotation only if the writer may manage-namespaces on the Project.
	review, err := e.adminKube.AuthorizationV1().SubjectAccessReviews().Create(e.ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: fmt.Sprintf("system:serviceaccount:%s:%s", framework.ManagerServiceAccountNamespace, framework.ManagerServiceAccountName),
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "local", Verb: "manage-namespaces",
				Group: "management.cattle.io", Resource: "projects", Name: "p-devops"},
		}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !review.Status.Allowed {
		t.Errorf("the manager may not manage-namespaces on projects: %+v", review.Status)
	}

	// A restart (an empty cache) re-decides my-app and writes nothing. With one worker the queue is FIFO: once a
	// namespace created after the restart is assigned, my-app has been decided.
	before := ns.ResourceVersion
	a.stop()
	a.start()
	a.waitRunning()
	later := e.createNamespace("later-", a.name, "devops", nil)
	e.waitAssigned(later.Name, "local:p-devops")
	if after := e.namespace("my-app").ResourceVersion; after != before {
		t.Errorf("a converged namespace was written after a restart (resourceVersion %s → %s)", before, after)
	}
	if n := len(e.events("my-app", namespaceproject.ReasonAssigned)); n != 1 {
		t.Errorf("%d Assigned events on my-app, want 1", n)
	}
}

func TestProjectCreatedAfterTheNamespace(t *testing.T) {
	e := newEnv(t, envOptions{})
	cluster := e.clusterNamespace()
	a := e.newTenant(cluster, 2)
	ns := e.createNamespace("app-", a.name, "Payments", nil)
	a.start()

	ev := e.waitEvent(ns.Name, namespaceproject.ReasonProjectNotFound)
	if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, `"Payments"`) {
		t.Errorf("ProjectNotFound event = %s %q", ev.Type, ev.Message)
	}
	if got := e.namespace(ns.Name).Annotations[rancherv3.ProjectIDAnnotationKey]; got != "" {
		t.Fatalf("assigned to %q before any Project existed", got)
	}
	// A Project of the same name in another cluster does not count.
	e.createProject(e.clusterNamespace(), "p-pay", "Payments")
	e.createProject(cluster, "p-pay", "payments")
	e.waitAssigned(ns.Name, cluster+":p-pay")
}

func TestAmbiguousProjectIsNotGuessed(t *testing.T) {
	e := newEnv(t, envOptions{})
	cluster := e.clusterNamespace()
	e.createProject(cluster, "p-one", "DevOps")
	e.createProject(cluster, "p-two", "devops")
	a := e.newTenant(cluster, 2)
	ns := e.createNamespace("app-", a.name, "DevOps", nil)
	a.start()

	ev := e.waitEvent(ns.Name, namespaceproject.ReasonAmbiguousProject)
	want := fmt.Sprintf("%s:p-one, %s:p-two", cluster, cluster)
	if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, want) {
		t.Errorf("AmbiguousProject event = %s %q, want it to name %s", ev.Type, ev.Message, want)
	}
	if got := e.namespace(ns.Name).Annotations[rancherv3.ProjectIDAnnotationKey]; got != "" {
		t.Fatalf("an ambiguous app owner was assigned to %q", got)
	}
	// Once the duplicate is gone, the namespace joins the one left.
	if err := e.admin.ManagementV3().Projects(cluster).Delete(e.ctx, "p-two", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitAssigned(ns.Name, cluster+":p-one")
}

func TestManualAssignmentIsRespected(t *testing.T) {
	e := newEnv(t, envOptions{})
	cluster := e.clusterNamespace()
	e.createProject(cluster, "p-devops", "DevOps")
	e.createProject(cluster, "p-manual", "Manual")
	a := e.newTenant(cluster, 2)
	manual := cluster + ":p-manual"
	byHand := e.createNamespace("by-hand-", a.name, "DevOps", map[string]string{rancherv3.ProjectIDAnnotationKey: manual})
	movedByHand := e.createNamespace("moved-", a.name, "DevOps", nil)
	a.start()

	ev := e.waitEvent(byHand.Name, namespaceproject.ReasonAssignedElsewhere)
	if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, manual) {
		t.Errorf("AssignedElsewhere event = %s %q", ev.Type, ev.Message)
	}
	got := e.namespace(byHand.Name)
	if got.Annotations[rancherv3.ProjectIDAnnotationKey] != manual || got.Annotations[namespaceproject.AssignedProjectAnnotationKey] != "" {
		t.Errorf("a manual assignment was written to: %v", got.Annotations)
	}

	// Ours at first, then moved by a person (as Rancher's UI does: annotation and label): left where they put it.
	e.waitAssigned(movedByHand.Name, cluster+":p-devops")
	e.updateNamespace(movedByHand.Name, func(ns *corev1.Namespace) {
		ns.Annotations[rancherv3.ProjectIDAnnotationKey] = manual
		ns.Labels[rancherv3.ProjectIDLabelKey] = "p-manual"
	})
	e.waitEvent(movedByHand.Name, namespaceproject.ReasonAssignedElsewhere)
	if got := e.namespace(movedByHand.Name).Annotations[rancherv3.ProjectIDAnnotationKey]; got != manual {
		t.Errorf("a namespace moved by hand was moved back to %q", got)
	}
}

func TestAppOwnerChangeMovesOurAssignment(t *testing.T) {
	e := newEnv(t, envOptions{})
	cluster := e.clusterNamespace()
	e.createProject(cluster, "p-devops", "DevOps")
	e.createProject(cluster, "p-ops", "Ops")
	a := e.newTenant(cluster, 2)
	ns := e.createNamespace("app-", a.name, "DevOps", nil)
	a.start()
	e.waitAssigned(ns.Name, cluster+":p-devops")

	e.updateNamespace(ns.Name, func(ns *corev1.Namespace) { ns.Labels[appOwnerKey] = "Ops" })
	got := e.waitAssigned(ns.Name, cluster+":p-ops")
	if got.Labels[rancherv3.ProjectIDLabelKey] != "p-ops" || got.Annotations[namespaceproject.AssignedAppOwnerAnnotationKey] != "Ops" ||
		got.Annotations[namespaceproject.AssignedProjectAnnotationKey] != cluster+":p-ops" {
		t.Errorf("after the move: labels %v, annotations %v", got.Labels, got.Annotations)
	}
	e.waitFor("the move's Assigned event", 30*time.Second, func() (bool, error) {
		for _, ev := range e.events(ns.Name, namespaceproject.ReasonAssigned) {
			if strings.Contains(ev.Message, "moved from Project "+cluster+":p-devops") {
				return true, nil
			}
		}
		return false, nil
	})
}

// TestTwoTenantsSameDisplayNameInDifferentClusters: each tenant's namespaces join the DevOps Project of its own
// cluster (both Projects are even named p-devops); a namespace of no tenant is nobody's; a namespace relabeled to
// the other tenant follows that tenant's cluster.
func TestTwoTenantsSameDisplayNameInDifferentClusters(t *testing.T) {
	e := newEnv(t, envOptions{})
	clusterA, clusterB := e.clusterNamespace(), e.clusterNamespace()
	e.createProject(clusterA, "p-devops", "DevOps")
	e.createProject(clusterB, "p-devops", "DevOps")
	a, b := e.newTenant(clusterA, 2), e.newTenant(clusterB, 2)
	nsA := e.createNamespace("app-a-", a.name, "DevOps", nil)
	nsB := e.createNamespace("app-b-", b.name, "DevOps", nil)
	orphan := e.createNamespace("no-tenant-", "", "DevOps", nil)
	a.start()
	b.start()

	e.waitAssigned(nsA.Name, clusterA+":p-devops")
	e.waitAssigned(nsB.Name, clusterB+":p-devops")

	// nsB moves to tenant a: a's controller gets it (an Add in a's view) and, the assignment being ours, moves it
	// to cluster A's DevOps.
	e.updateNamespace(nsB.Name, func(ns *corev1.Namespace) { ns.Labels[labelKey] = a.name })
	e.waitAssigned(nsB.Name, clusterA+":p-devops")

	// Both controllers have handled everything created before the relabel; the namespace of no tenant is untouched.
	if got := e.namespace(orphan.Name); got.Annotations[rancherv3.ProjectIDAnnotationKey] != "" || len(e.events(orphan.Name, namespaceproject.ReasonProjectNotFound)) > 0 {
		t.Errorf("a namespace of no tenant was handled: %v", got.Annotations)
	}
}
