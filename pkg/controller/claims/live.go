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

package claims

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"
)

// TenantRuns reads from the API server whether tenant still runs the controller for the objects of namespace: the
// namespace is labeled (labelKey) with tenant, and the tenant's ProviderConfig exists, is not being deleted and
// has the section runs looks for. A replica whose ProviderConfig informer holds only its own shard's tenants
// cannot tell this from its cache; a LiveFunc asks it about another process's claimant.
func TenantRuns(ctx context.Context, kube kubernetes.Interface, mp mpclientset.Interface, labelKey, tenant, namespace string,
	runs func(*mpv1alpha1.ProviderConfig) bool) (bool, error) {
	ns, err := kube.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil || ns.Labels[labelKey] != tenant {
		return false, err
	}
	pc, err := mp.MultiprojectV1alpha1().ProviderConfigs().Get(ctx, tenant, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return pc.DeletionTimestamp == nil && runs(pc), nil
}
