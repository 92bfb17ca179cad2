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

package sharding

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/metadata"

	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/tenancy"
)

// leftoverBatch is how many tenants one label-selected LIST asks for: the selector stays a few KB.
const leftoverBatch = 100

// ManagerWritten are the resources whose objects the manager writes labeled with the tenant whose controller wrote
// them (tenancy.ManagerWritten in informerset.Resources): a tenant that moved here may have left some in namespaces
// that are no longer its own.
func ManagerWritten() []schema.GroupVersionResource {
	var out []schema.GroupVersionResource
	for _, r := range informerset.Resources {
		if r.Scope == tenancy.ManagerWritten {
			out = append(out, r.GVR)
		}
	}
	return out
}

// Leftovers returns, per tenant, the namespaces that hold objects of resources labeled (labelKey) with it, read
// from the API server with label-selected metadata LISTs, a batch of tenants at a time. A resource the cluster does
// not serve holds none.
func Leftovers(ctx context.Context, client metadata.Interface, resources []schema.GroupVersionResource, labelKey string,
	tenants []string) (map[string][]string, error) {
	out := map[string][]string{}
	for batch := range slices.Chunk(tenants, leftoverBatch) {
		req, err := labels.NewRequirement(labelKey, selection.In, batch)
		if err != nil {
			return nil, err
		}
		opts := metav1.ListOptions{LabelSelector: labels.NewSelector().Add(*req).String()}
		for _, gvr := range resources {
			list, err := client.Resource(gvr).Namespace(metav1.NamespaceAll).List(ctx, opts)
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("listing the %s of this shard's tenants: %w", gvr.Resource, err)
			}
			for _, m := range list.Items {
				if tenant := m.Labels[labelKey]; tenant != "" && !slices.Contains(out[tenant], m.Namespace) {
					out[tenant] = append(out[tenant], m.Namespace)
				}
			}
		}
	}
	return out, nil
}
