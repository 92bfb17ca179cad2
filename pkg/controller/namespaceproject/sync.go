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
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	rancherv3 "github.com/multiproject/api/rancher/management/v3"
	rancherlisters "github.com/multiproject/client-go/listers/management/v3"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
)

// Our record of an assignment, on the Namespace next to Rancher's annotation. A namespace whose Rancher annotation
// equals AssignedProjectAnnotationKey's value was assigned by this controller; anything else was assigned by someone
// else (a person, Rancher's UI, Fleet) and is left alone.
const (
	// AssignedAppOwnerAnnotationKey is the app owner the controller assigned the namespace for.
	AssignedAppOwnerAnnotationKey = "multiproject.io/assigned-app-owner"
	// AssignedProjectAnnotationKey is the "<cluster>:<project>" the controller wrote to Rancher's annotation.
	AssignedProjectAnnotationKey = "multiproject.io/assigned-project-id"
)

// Event reasons, on the Namespace.
const (
	// ReasonAssigned (Normal): the namespace was put into, or moved to, the app owner's Project.
	ReasonAssigned = "Assigned"
	// ReasonAmbiguousProject (Warning): several Projects of the cluster match the app owner; nothing is changed.
	ReasonAmbiguousProject = "AmbiguousProject"
	// ReasonProjectNotFound (Warning): no Project of the cluster matches yet; the namespace is assigned as soon as
	// one appears.
	ReasonProjectNotFound = "ProjectNotFound"
	// ReasonAssignedElsewhere (Warning): someone else put the namespace into another Project; it is left there.
	ReasonAssignedElsewhere = "AssignedElsewhere"
	// ReasonAssignFailed (Warning): the API server (or Rancher's webhook) refused the assignment.
	ReasonAssignFailed = "AssignFailed"
)

// fieldManager names the controller's writes in managedFields.
const fieldManager = "multiproject-namespace-project"

// sync decides one namespace. It writes only when the namespace differs from the decision, with one patch
// conditional on the resourceVersion it decided on, so a concurrent manual assignment is never overwritten.
func (c *Controller) sync(ctx context.Context, name string) error {
	projects, ok := c.clusterProjects()
	if !ok {
		// The management cluster does not answer: leave the namespace as it is. Once it answers, every namespace
		// is decided again.
		return nil
	}
	ns, err := c.nsLister.Get(name)
	if apierrors.IsNotFound(err) {
		c.warnings.Forget(name)
		return nil
	}
	if err != nil {
		return err
	}
	owner := ns.Labels[c.appOwnerKey]
	if owner == "" || ns.DeletionTimestamp != nil {
		// Removing the label does not take the namespace out of its Project: that would change who may use it.
		c.warnings.Forget(name)
		return nil
	}

	project, ok, err := c.chooseProject(ns, projects, owner)
	if err != nil || !ok {
		return err
	}
	return c.assign(ctx, ns, project, owner)
}

// chooseProject returns the one Project of the cluster that matches owner, if the namespace may be assigned to it:
// it is in no Project, in the one the controller assigned, or already in this one. Otherwise it warns why not.
func (c *Controller) chooseProject(ns *corev1.Namespace, projects rancherlisters.ProjectNamespaceLister,
	owner string) (*rancherv3.Project, bool, error) {
	current := ns.Annotations[rancherv3.ProjectIDAnnotationKey]
	ours := current == "" || current == ns.Annotations[AssignedProjectAnnotationKey]
	candidates, err := candidates(projects, owner)
	if err != nil {
		return nil, false, err
	}
	switch len(candidates) {
	case 0:
		c.warn(ns, ReasonProjectNotFound, fmt.Sprintf("no Project of Rancher cluster %s has the display name %q; "+
			"the namespace joins one as soon as it exists", c.clusterID, owner))
		return nil, false, nil
	case 1:
	default:
		c.warn(ns, ReasonAmbiguousProject, fmt.Sprintf("%d Projects of Rancher cluster %s match %q (%s); "+
			"the namespace is not assigned until exactly one does", len(candidates), c.clusterID, owner, projectIDs(candidates)))
		return nil, false, nil
	}
	project := candidates[0]
	if want := projectID(project); !ours && current != want {
		c.warn(ns, ReasonAssignedElsewhere, fmt.Sprintf("the namespace is in Project %s, set by someone else; "+
			"app owner %q names %s (%s); leaving it", current, owner, want, project.Spec.DisplayName))
		return nil, false, nil
	}
	return project, true, nil
}

// assign puts the namespace into project for owner, with one patch conditional on the resourceVersion it was decided
// on, unless it is there already; only a move between Projects, or into the first, is news for its users.
func (c *Controller) assign(ctx context.Context, ns *corev1.Namespace, project *rancherv3.Project, owner string) error {
	current, want := ns.Annotations[rancherv3.ProjectIDAnnotationKey], projectID(project)
	patch, changed := assignmentPatch(ns, project, owner)
	if !changed {
		c.warnings.Forget(ns.Name)
		return nil
	}
	_, err := c.kube.CoreV1().Namespaces().Patch(ctx, ns.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return fmt.Errorf("namespace changed while deciding; deciding again: %w", err)
	case apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		c.warn(ns, ReasonAssignFailed, fmt.Sprintf("could not assign the namespace to Project %s (%s): %v",
			want, project.Spec.DisplayName, err))
		return err
	case err != nil:
		return err
	}

	c.warnings.Forget(ns.Name)
	klog.FromContext(ctx).V(2).Info("Assigned namespace", "project", want, "appOwner", owner, "previous", current)
	switch current {
	case want:
		// Only the derived label or our record changed: bookkeeping, not news for the namespace's users.
	case "":
		c.recorder.Eventf(ns, corev1.EventTypeNormal, ReasonAssigned, "assigned to Project %s (%s) of Rancher cluster %s for app owner %q",
			want, project.Spec.DisplayName, c.clusterID, owner)
	default:
		c.recorder.Eventf(ns, corev1.EventTypeNormal, ReasonAssigned, "moved from Project %s to %s (%s) of Rancher cluster %s: app owner is now %q",
			current, want, project.Spec.DisplayName, c.clusterID, owner)
	}
	return nil
}

// candidates returns the Projects of the tenant's cluster that match owner. The lister reads only the cluster's
// namespace (the informer's namespace index), so this costs O(Projects of the cluster).
func candidates(lister rancherlisters.ProjectNamespaceLister, owner string) ([]*rancherv3.Project, error) {
	projects, err := lister.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	folded := fold(owner)
	var out []*rancherv3.Project
	for _, p := range projects {
		if matches(p, folded) {
			out = append(out, p)
		}
	}
	return out, nil
}

// warn records a Warning Event on the namespace unless the namespace's last Warning said the same.
func (c *Controller) warn(ns *corev1.Namespace, reason, message string) {
	c.warnings.Report(ns.Name, ns, tenant.Warning{Reason: reason, Message: message})
}

// projectID is the value of Rancher's namespace annotation for p: "<clusterID>:<projectID>".
func projectID(p *rancherv3.Project) string { return p.Namespace + ":" + p.Name }

func projectIDs(projects []*rancherv3.Project) string {
	ids := make([]string, 0, len(projects))
	for _, p := range projects {
		ids = append(ids, projectID(p))
	}
	slices.Sort(ids)
	return strings.Join(ids, ", ")
}

// namespacePatch is a JSON merge patch of a Namespace's metadata; resourceVersion makes it conditional.
type namespacePatch struct {
	Metadata struct {
		ResourceVersion string            `json:"resourceVersion"`
		Labels          map[string]string `json:"labels,omitempty"`
		Annotations     map[string]string `json:"annotations,omitempty"`
	} `json:"metadata"`
}

// assignmentPatch returns the patch that assigns ns to project for owner, holding only the keys that differ, and
// whether anything differs.
func assignmentPatch(ns *corev1.Namespace, project *rancherv3.Project, owner string) ([]byte, bool) {
	var p namespacePatch
	p.Metadata.ResourceVersion = ns.ResourceVersion
	p.Metadata.Labels = missing(ns.Labels, map[string]string{rancherv3.ProjectIDLabelKey: project.Name})
	p.Metadata.Annotations = missing(ns.Annotations, map[string]string{
		rancherv3.ProjectIDAnnotationKey: projectID(project),
		AssignedProjectAnnotationKey:     projectID(project),
		AssignedAppOwnerAnnotationKey:    owner,
	})
	if len(p.Metadata.Labels) == 0 && len(p.Metadata.Annotations) == 0 {
		return nil, false
	}
	data, err := json.Marshal(p)
	if err != nil {
		panic(err) // maps of strings always marshal
	}
	return data, true
}

// missing returns the entries of want that have, or lack, another value in have.
func missing(have, want map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			out[k] = v
		}
	}
	return out
}
