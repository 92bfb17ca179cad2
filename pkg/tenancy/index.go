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

package tenancy

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// IndexName is the name of the ownership index that [Indexers] installs for labelKey. The label key is part of the
// name so that a [Router] can check that its informers were indexed for the same key it routes by.
func IndexName(labelKey string) string {
	return "multiproject.io/tenancy-owner:" + labelKey
}

// Indexers returns the ownership index to install on every shared informer that a [Router] routes, before the
// informer starts. An index function sees one object and not the resource's [Scope], so it files each object under
// every value a scope may list it by:
//
//   - a namespaced object under its namespace, where the namespace's label decides ([Namespaced]); it is looked up
//     when listing, so a namespace relabel changes nothing in this index;
//   - and, if it carries the tenant label, also under that label ([ManagerWritten]);
//   - a cluster-scoped object under its label, or under a shared value when unlabeled (shared by every tenant for
//     [ClusterScoped] resources, owned by nobody for Namespaces).
func Indexers(labelKey string) cache.Indexers {
	return cache.Indexers{IndexName(labelKey): ownershipIndexFunc(labelKey)}
}

func ownershipIndexFunc(labelKey string) cache.IndexFunc {
	return func(obj any) ([]string, error) {
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil, fmt.Errorf("tenancy: cannot index %T by owner: %w", obj, err)
		}
		tenant := tenantLabel(m, labelKey)
		if ns := m.GetNamespace(); ns != "" {
			if tenant != "" {
				return []string{namespaceIndexValue(ns), labelIndexValue(tenant)}, nil
			}
			return []string{namespaceIndexValue(ns)}, nil
		}
		if tenant != "" {
			return []string{labelIndexValue(tenant)}, nil
		}
		return []string{sharedIndexValue}, nil
	}
}

// The three kinds of index value carry different prefixes, so a tenant and a namespace of the same name never
// collide. Neither label values nor namespace names may contain '/'.
const sharedIndexValue = "shared"

// TenantNamespaces returns the names of the Namespaces in indexer (a Namespace informer's, with the ownership index
// [Indexers] installs) that are labeled with tenant: the namespaces whose objects the tenant owns.
func TenantNamespaces(indexer cache.Indexer, labelKey, tenant string) ([]string, error) {
	objs, err := indexer.ByIndex(IndexName(labelKey), labelIndexValue(tenant))
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(objs))
	for _, obj := range objs {
		if m, err := meta.Accessor(obj); err == nil && m.GetNamespace() == "" {
			names = append(names, m.GetName())
		}
	}
	return names, nil
}

func labelIndexValue(tenant string) string { return "label/" + tenant }

func namespaceIndexValue(namespace string) string { return "namespace/" + namespace }

// tenantLabel returns the tenant named by the object's own label, or "" when the label is absent or empty: an empty
// value names no tenant.
func tenantLabel(m metav1.Object, labelKey string) string {
	return m.GetLabels()[labelKey]
}
