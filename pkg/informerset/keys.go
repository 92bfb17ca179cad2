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

package informerset

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"

	rancherv3 "github.com/multiproject/api/rancher/management/v3"
)

// The interest keys of the shared resources that belong to no tenant: a tenant's controller names the keys it
// needs (tenancy.Interest) and gets the events of the objects filed under them, and of no others.

// ProjectNameLabels are the Project labels that name a Project besides its display name; Rancher users set them to
// give a Project a stable, selectable name, and an app owner matches any of them.
var ProjectNameLabels = []string{"project.cattle.io/name", "cattle.io/projectName", "field.cattle.io/projectName"}

// FoldProjectName is the one case-insensitive form of a Project name, used for the keys and for matching alike, so
// the two never disagree.
func FoldProjectName(s string) string { return strings.ToLower(s) }

// ProjectNames returns the folded names a Project answers to: its display name and its name labels. A deleted
// Project still has them, so that whoever it matched hears of its deletion.
func ProjectNames(p *rancherv3.Project) []string {
	if p == nil {
		return nil
	}
	names := make([]string, 0, 1+len(ProjectNameLabels))
	if p.Spec.DisplayName != "" {
		names = append(names, FoldProjectName(p.Spec.DisplayName))
	}
	for _, label := range ProjectNameLabels {
		if v := p.Labels[label]; v != "" {
			names = append(names, FoldProjectName(v))
		}
	}
	return names
}

// ProjectKey is the interest key of the Projects of Rancher cluster (the namespace Rancher keeps them in) that
// answer to foldedName.
func ProjectKey(cluster, foldedName string) string { return cluster + "/" + foldedName }

// ProjectKeys files a Project under ProjectKey(its namespace, n) for each of its ProjectNames.
func ProjectKeys(obj any) []string {
	p, ok := obj.(*rancherv3.Project)
	if !ok {
		return nil
	}
	names := ProjectNames(p)
	for i, n := range names {
		names[i] = ProjectKey(p.Namespace, n)
	}
	return names
}

// TunnelKey is the interest key of the PangolinTunnel namespace/name.
func TunnelKey(namespace, name string) string { return namespace + "/" + name }

// ObjectKeys files an object under its namespace/name (TunnelKey for PangolinTunnels).
func ObjectKeys(obj any) []string {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil
	}
	return []string{TunnelKey(m.GetNamespace(), m.GetName())}
}
