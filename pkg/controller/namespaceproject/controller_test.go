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
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	clienttesting "k8s.io/client-go/testing"

	rancherv3 "github.com/multiproject/api/rancher/management/v3"
)

// TestSeedExampleIsOnePatchOfAnnotationLabelAndRecord: namespace my-app with appOwner=DevOps joins the Project whose
// display name is DevOps (in another case), with exactly the write Rancher expects, in one patch.
func TestSeedExampleIsOnePatchOfAnnotationLabelAndRecord(t *testing.T) {
	devops := project(testCluster, "p-devops", "devops")
	h := newHarness(t, namespace("my-app", "DevOps"), devops, project(testCluster, "p-other", "Other"))

	if err := h.syncNow("my-app"); err != nil {
		t.Fatal(err)
	}
	patches := h.patches()
	if len(patches) != 1 {
		t.Fatalf("sent %d patches, want 1", len(patches))
	}
	var got map[string]any
	if err := json.Unmarshal(patches[0].GetPatch(), &got); err != nil {
		t.Fatal(err)
	}
	meta := got["metadata"].(map[string]any)
	wantAnnotations := map[string]any{
		"field.cattle.io/projectId":           "local:p-devops",
		"multiproject.io/assigned-project-id": "local:p-devops",
		"multiproject.io/assigned-app-owner":  "DevOps",
	}
	if !reflect.DeepEqual(meta["annotations"], wantAnnotations) {
		t.Errorf("annotations = %v, want %v", meta["annotations"], wantAnnotations)
	}
	if want := map[string]any{"field.cattle.io/projectId": "p-devops"}; !reflect.DeepEqual(meta["labels"], want) {
		t.Errorf("labels = %v, want %v", meta["labels"], want)
	}
	cached, _ := h.controller.nsLister.Get("my-app")
	if rv, ok := meta["resourceVersion"]; !ok || rv != cached.ResourceVersion {
		t.Errorf("the patch is not conditional on the cached resourceVersion %q: %s", cached.ResourceVersion, patches[0].GetPatch())
	}
	if patches[0].GetPatchType() != "application/merge-patch+json" {
		t.Errorf("patch type = %s", patches[0].GetPatchType())
	}
	ns := h.namespace("my-app")
	if v := ns.Labels[rancherv3.ProjectIDLabelKey]; len(validation.IsValidLabelValue(v)) > 0 || v != "p-devops" {
		t.Errorf("label %s = %q: %v", rancherv3.ProjectIDLabelKey, v, validation.IsValidLabelValue(v))
	}
	if _, ok := ns.Labels["field.cattle.io/clusterId"]; ok {
		t.Error("wrote the seed's clusterId label, which Rancher does not have")
	}
	if e := h.events.with("my-app", ReasonAssigned); len(e) != 1 || !strings.Contains(e[0], "local:p-devops") {
		t.Errorf("Assigned events = %q", e)
	}

	// Converged: a second sync (as after a resync or a restart) writes nothing and reports nothing.
	h.kube.ClearActions()
	events := h.events.count()
	if err := h.syncNow("my-app"); err != nil {
		t.Fatal(err)
	}
	if n := len(h.patches()); n != 0 {
		t.Errorf("a converged namespace got %d patches", n)
	}
	if h.events.count() != events {
		t.Errorf("a converged namespace got events: %v", h.events.events[events:])
	}
}

func TestProjectNameLabelsMatchToo(t *testing.T) {
	for _, label := range projectNameLabels {
		t.Run(label, func(t *testing.T) {
			p := project(testCluster, "p-x1", "Platform Team")
			p.Labels = map[string]string{label: "devops"}
			h := newHarness(t, namespace("my-app", "DevOps"), p)
			if err := h.syncNow("my-app"); err != nil {
				t.Fatal(err)
			}
			if got := h.namespace("my-app").Annotations[rancherv3.ProjectIDAnnotationKey]; got != "local:p-x1" {
				t.Errorf("annotation = %q, want local:p-x1", got)
			}
		})
	}
}

func TestOnlyProjectsOfTheTenantsClusterMatch(t *testing.T) {
	h := newHarness(t, namespace("my-app", "DevOps"), project("c-other", "p-devops", "DevOps"))
	if err := h.syncNow("my-app"); err != nil {
		t.Fatal(err)
	}
	if n := len(h.patches()); n != 0 {
		t.Fatalf("assigned to a Project of another cluster (%d patches)", n)
	}
	if e := h.events.with("my-app", ReasonProjectNotFound); len(e) != 1 {
		t.Errorf("ProjectNotFound events = %q", e)
	}
}

func TestAmbiguousProjectIsReportedOnceAndNotAssigned(t *testing.T) {
	h := newHarness(t, namespace("my-app", "DevOps"),
		project(testCluster, "p-a", "DevOps"), project(testCluster, "p-b", "DEVOPS"))
	for range 3 {
		if err := h.syncNow("my-app"); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(h.patches()); n != 0 {
		t.Fatalf("an ambiguous app owner got %d patches", n)
	}
	e := h.events.with("my-app", ReasonAmbiguousProject)
	if len(e) != 1 || !strings.Contains(e[0], "local:p-a, local:p-b") || !strings.HasPrefix(strings.SplitN(e[0], " ", 3)[1], corev1.EventTypeWarning) {
		t.Errorf("AmbiguousProject events = %q, want one Warning naming both", e)
	}
}

func TestProjectBeingDeletedDoesNotMatch(t *testing.T) {
	gone := project(testCluster, "p-a", "DevOps")
	gone.DeletionTimestamp = &metav1.Time{}
	gone.Finalizers = []string{"controller.cattle.io/example"}
	h := newHarness(t, namespace("my-app", "DevOps"), gone, project(testCluster, "p-b", "DevOps"))
	if err := h.syncNow("my-app"); err != nil {
		t.Fatal(err)
	}
	if got := h.namespace("my-app").Annotations[rancherv3.ProjectIDAnnotationKey]; got != "local:p-b" {
		t.Errorf("annotation = %q, want local:p-b", got)
	}
}

func TestManualAssignmentToAnotherProjectIsLeftAlone(t *testing.T) {
	for name, annotations := range map[string]map[string]string{
		"never ours": {rancherv3.ProjectIDAnnotationKey: "local:p-manual"},
		"ours, then moved by hand": {rancherv3.ProjectIDAnnotationKey: "local:p-manual",
			AssignedProjectAnnotationKey: "local:p-devops", AssignedAppOwnerAnnotationKey: "DevOps"},
	} {
		t.Run(name, func(t *testing.T) {
			ns := namespace("my-app", "DevOps")
			ns.Annotations = annotations
			h := newHarness(t, ns, project(testCluster, "p-devops", "DevOps"), project(testCluster, "p-manual", "Manual"))
			for range 2 {
				if err := h.syncNow("my-app"); err != nil {
					t.Fatal(err)
				}
			}
			if n := len(h.patches()); n != 0 {
				t.Fatalf("overwrote a manual assignment (%d patches)", n)
			}
			if e := h.events.with("my-app", ReasonAssignedElsewhere); len(e) != 1 || !strings.Contains(e[0], "local:p-manual") {
				t.Errorf("AssignedElsewhere events = %q", e)
			}
		})
	}
}

// TestManualAssignmentToTheSameProjectIsAdopted: someone (Rancher's UI) put the namespace where its app owner says;
// the controller records it as its own, so a later app-owner change moves it, and says nothing.
func TestManualAssignmentToTheSameProjectIsAdopted(t *testing.T) {
	ns := namespace("my-app", "DevOps")
	ns.Annotations = map[string]string{rancherv3.ProjectIDAnnotationKey: "local:p-devops"}
	ns.Labels[rancherv3.ProjectIDLabelKey] = "p-devops"
	h := newHarness(t, ns, project(testCluster, "p-devops", "DevOps"))
	if err := h.syncNow("my-app"); err != nil {
		t.Fatal(err)
	}
	patches := h.patches()
	if len(patches) != 1 || strings.Contains(string(patches[0].GetPatch()), `"labels"`) {
		t.Fatalf("patches = %d, want one with only our record", len(patches))
	}
	if got := h.namespace("my-app").Annotations[AssignedProjectAnnotationKey]; got != "local:p-devops" {
		t.Errorf("record = %q", got)
	}
	if h.events.count() != 0 {
		t.Errorf("events = %q, want none", h.events.events)
	}
}

func TestAppOwnerChangeMovesOurAssignment(t *testing.T) {
	devops, ops := project(testCluster, "p-devops", "DevOps"), project(testCluster, "p-ops", "Ops")
	h := newHarness(t, assignedTo(namespace("my-app", "Ops"), devops, "DevOps"), devops, ops)
	if err := h.syncNow("my-app"); err != nil {
		t.Fatal(err)
	}
	if n := len(h.patches()); n != 1 {
		t.Fatalf("%d patches, want 1", n)
	}
	want := assignedTo(namespace("my-app", "Ops"), ops, "Ops")
	got := h.namespace("my-app")
	if !reflect.DeepEqual(got.Annotations, want.Annotations) || !reflect.DeepEqual(got.Labels, want.Labels) {
		t.Errorf("namespace = %v %v, want %v %v", got.Labels, got.Annotations, want.Labels, want.Annotations)
	}
	if e := h.events.with("my-app", ReasonAssigned); len(e) != 1 || !strings.Contains(e[0], "moved from Project local:p-devops to local:p-ops") {
		t.Errorf("Assigned events = %q", e)
	}
}

func TestNoAppOwnerNoWrite(t *testing.T) {
	devops := project(testCluster, "p-devops", "DevOps")
	// Removing the label does not unassign: leaving a Project changes who may use the namespace.
	h := newHarness(t, namespace("plain", ""), assignedTo(namespace("was-devops", ""), devops, "DevOps"), devops)
	for _, name := range []string{"plain", "was-devops", "gone"} {
		if err := h.syncNow(name); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(h.patches()); n != 0 || h.events.count() != 0 {
		t.Errorf("%d patches, events %q; want none", n, h.events.events)
	}
}

func TestPatchErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		err       error
		wantErr   bool
		wantEvent bool
	}{
		"conflict: decide again":          {err: apierrors.NewConflict(schema.GroupResource{Resource: "namespaces"}, "my-app", errors.New("changed")), wantErr: true},
		"webhook refused: tell and retry": {err: apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "my-app", errors.New("manage-namespaces")), wantErr: true, wantEvent: true},
		"namespace gone":                  {err: apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "my-app")},
		"server error: retry":             {err: apierrors.NewInternalError(errors.New("etcd")), wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, namespace("my-app", "DevOps"), project(testCluster, "p-devops", "DevOps"))
			h.kube.PrependReactor("patch", "namespaces", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, tc.err
			})
			err := h.syncNow("my-app")
			if (err != nil) != tc.wantErr {
				t.Errorf("sync error = %v, want error: %v", err, tc.wantErr)
			}
			if got := len(h.events.with("my-app", ReasonAssignFailed)); got != map[bool]int{false: 0, true: 1}[tc.wantEvent] {
				t.Errorf("AssignFailed events = %d", got)
			}
			if n := len(h.events.with("my-app", ReasonAssigned)); n != 0 {
				t.Errorf("reported Assigned after a failed patch")
			}
		})
	}
}

// TestRunAssignsWhenTheProjectAppears runs the controller: a namespace waits (ProjectNotFound) and joins the Project
// as soon as it is created; a renamed Project takes the namespaces of its new name. On stop Run leaves no handler.
func TestRunAssignsWhenTheProjectAppearsOrIsRenamed(t *testing.T) {
	h := newHarness(t, namespace("my-app", "DevOps"), namespace("web", "Web"), project(testCluster, "p-web", "Old name"))
	stop := h.run()
	h.waitFor("ProjectNotFound", func() bool { return len(h.events.with("my-app", ReasonProjectNotFound)) == 1 })
	if c, ok := h.conditions.Last(); !ok || c.Status != metav1.ConditionTrue || c.Reason != "Running" {
		t.Errorf("condition = %+v, want True/Running", c)
	}

	h.createProject(project(testCluster, "p-devops", "DevOps"))
	h.waitFor("my-app to be assigned", func() bool {
		return h.namespace("my-app").Annotations[rancherv3.ProjectIDAnnotationKey] == "local:p-devops"
	})

	p, err := h.rancher.ManagementV3().Projects(testCluster).Get(h.ctx, "p-web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.DisplayName = "web"
	if _, err := h.rancher.ManagementV3().Projects(testCluster).Update(h.ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitFor("web to be assigned", func() bool {
		return h.namespace("web").Annotations[rancherv3.ProjectIDAnnotationKey] == "local:p-web"
	})

	// The app owner changes to one without a Project: nothing moves, the namespace is told.
	h.updateNamespace("web", func(ns *corev1.Namespace) { ns.Labels[appOwnerKey] = "Nobody" })
	h.waitFor("ProjectNotFound for Nobody", func() bool {
		e := h.events.with("web", ReasonProjectNotFound)
		return len(e) > 0 && strings.Contains(e[len(e)-1], `"Nobody"`)
	})
	stop()
	if h.namespaces.live() != 0 || h.projects.live() != 0 {
		t.Errorf("handlers left after Run returned: namespaces %d, projects %d", h.namespaces.live(), h.projects.live())
	}
	if got := h.namespace("web").Annotations[rancherv3.ProjectIDAnnotationKey]; got != "local:p-web" {
		t.Errorf("web moved to %q", got)
	}
}

// TestProjectEventsEnqueueOnlyMatchingNamespaces checks the Project handler's cost: it reads the app-owner index
// and enqueues the namespaces of the Project's old and new names, nothing else, and ignores other clusters.
func TestProjectEventsEnqueueOnlyMatchingNamespaces(t *testing.T) {
	h := newHarness(t)
	c := h.controller
	for i, owner := range []string{"DevOps", "devops", "Ops", "Web", ""} {
		c.onNamespace(namespace("ns-"+string(rune('a'+i)), owner))
	}
	// affectedBy is what onProject enqueues.
	old, renamed := project(testCluster, "p-1", "DEVOPS"), project(testCluster, "p-1", "Ops")
	renamed.ResourceVersion = "2"
	if got, want := c.affectedBy(old, renamed), []string{"ns-a", "ns-b", "ns-c"}; !reflect.DeepEqual(got, want) {
		t.Errorf("rename enqueued %v, want %v", got, want)
	}
	status := renamed.DeepCopy()
	status.Status.BackingNamespace = "local-p-1"
	if got := c.affectedBy(renamed, status); len(got) != 0 {
		t.Errorf("a status change enqueued %v", got)
	}
	if got := c.affectedBy(nil, project("c-other", "p-9", "Web")); len(got) != 0 {
		t.Errorf("a Project of another cluster enqueued %v", got)
	}
	if got, want := c.affectedBy(project(testCluster, "p-2", "Web"), nil), []string{"ns-d"}; !reflect.DeepEqual(got, want) {
		t.Errorf("delete enqueued %v, want %v", got, want)
	}
	c.onNamespaceDelete(namespace("ns-d", "Web"))
	if got := c.affectedBy(nil, project(testCluster, "p-2", "Web")); len(got) != 0 || c.owners.len() != 3 {
		t.Errorf("a deleted namespace is still indexed: enqueued %v, %d indexed", got, c.owners.len())
	}
}

func TestOwnerIndexFollowsRelabels(t *testing.T) {
	x := newOwnerIndex(nil)
	x.set("a", "DevOps")
	x.set("b", "devops")
	x.set("a", "Ops")
	if got := sortedCopy(x.namespaces("devops")); !reflect.DeepEqual(got, []string{"b"}) {
		t.Errorf("devops → %v", got)
	}
	x.set("b", "")
	x.remove("a")
	x.remove("never")
	if x.len() != 0 || len(x.byOwner) != 0 {
		t.Errorf("index not empty: %v %v", x.ownerOf, x.byOwner)
	}
}

func TestNewNeedsARancherCluster(t *testing.T) {
	h := newHarness(t)
	if _, err := New(h.tenantContext("t", "c-1")); err != nil {
		t.Errorf("New: %v", err)
	}
	noRancher := h.tenantContext("t", "c-1")
	noRancher.ProviderConfig.Spec.Rancher = nil
	if _, err := New(noRancher); err == nil {
		t.Error("New without spec.rancher succeeded")
	}
}

func sortedCopy(s []string) []string { return slices.Sorted(slices.Values(s)) }
