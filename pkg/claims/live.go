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
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/pager"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"
)

// TenantRuns reads from the API server whether tenant still runs the controller for the objects of namespace: the
// namespace is labeled (labelKey) with tenant, and the tenant's ProviderConfig exists, is not being deleted and
// has the section runs looks for. A replica whose ProviderConfig informer holds only its own shard's tenants
// cannot tell this from its cache; a LiveFunc asks it about another process's claimant.
func TenantRuns(ctx context.Context, kube kubernetes.Interface, mp mpclientset.Interface, labelKey, tenant, namespace string,
	runs func(*mpv1alpha1.ProviderConfig) bool) (bool, error) {
	pc, err := runningConfig(ctx, kube, mp, labelKey, tenant, namespace, runs)
	return pc != nil, err
}

// runningConfig is TenantRuns that returns the tenant's ProviderConfig as read, nil when the tenant does not run the
// controller for namespace.
func runningConfig(ctx context.Context, kube kubernetes.Interface, mp mpclientset.Interface, labelKey, tenant, namespace string,
	runs func(*mpv1alpha1.ProviderConfig) bool) (*mpv1alpha1.ProviderConfig, error) {
	ns, err := kube.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil || ns.Labels[labelKey] != tenant {
		return nil, err
	}
	pc, err := mp.MultiprojectV1alpha1().ProviderConfigs().Get(ctx, tenant, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil || pc.DeletionTimestamp != nil || !runs(pc) {
		return nil, err
	}
	return pc, nil
}

// TenantObjects describes, for a Kind, a kind of claimant that is an object of a tenant's namespace (an Ingress,
// a Service) and the objects that publish its names (PangolinResources, Translations): only what differs between
// the controllers that claim names.
type TenantObjects[Claimer metav1.Object, Publisher any] struct {
	// Kube and MP read the claimants' namespaces and the tenants' ProviderConfigs (TenantRuns).
	Kube kubernetes.Interface
	MP   mpclientset.Interface
	// LabelKey is the label that names a namespace's tenant.
	LabelKey string
	// GetClaimant reads a claimant from the API server.
	GetClaimant func(ctx context.Context, namespace, name string) (Claimer, error)
	// ClaimedNames are the names a claimant, as read, claims now.
	ClaimedNames func(Claimer) []string
	// Runs says whether a tenant's ProviderConfig has the controller's section.
	Runs func(*mpv1alpha1.ProviderConfig) bool
	// ScopeNames, if set, turns the names a claimant asks for (ClaimedNames) into the names it claims, given its
	// tenant's ProviderConfig: a custom NEG name is claimed in the tenant's GCP project. nil: the names as they are.
	ScopeNames func(pc *mpv1alpha1.ProviderConfig, names []string) []string
	// GetPublisher reads an object of the holdings resource from the API server.
	GetPublisher func(ctx context.Context, namespace, name string) (Publisher, error)
	// HoldingOf says what an object of the holdings resource publishes.
	HoldingOf HoldingFunc
	// ListPublishers lists one page of the holdings resource's objects of every namespace (a typed client's List
	// over metav1.NamespaceAll); nil: the Kind has no Publishers.
	ListPublishers func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error)
}

// Kind returns the Kind of such claimants, named name, whose names the objects of holdings publish: Live reads a
// recorded holder, its names and its tenant; Object reads a previous holder's object.
func (o TenantObjects[Claimer, Publisher]) Kind(name string, holdings schema.GroupVersionResource) Kind {
	kind := Kind{Name: name, Holdings: holdings, HoldingOf: o.HoldingOf, Live: o.live, Object: o.publishes}
	if o.ListPublishers != nil {
		kind.Publishers = o.publishers
	}
	return kind
}

// live is the LiveFunc of TenantObjects: a claimant that is gone, was replaced (another UID), claims nothing or
// whose tenant no longer runs the controller claims nothing; the others claim their names in their tenant's scope
// as it is now (ScopeNames).
func (o TenantObjects[Claimer, Publisher]) live(ctx context.Context, tenant, key string, uid types.UID) ([]string, error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil, nil
	}
	claimant, err := o.GetClaimant(ctx, namespace, name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil || claimant.GetUID() != uid {
		return nil, err
	}
	names := o.ClaimedNames(claimant)
	if len(names) == 0 {
		return nil, nil
	}
	pc, err := runningConfig(ctx, o.Kube, o.MP, o.LabelKey, tenant, namespace, o.Runs)
	if pc == nil {
		return nil, err
	}
	if o.ScopeNames != nil {
		names = o.ScopeNames(pc, names)
	}
	return names, nil
}

// publishes is the ObjectFunc of TenantObjects.
func (o TenantObjects[Claimer, Publisher]) publishes(ctx context.Context, key, name string) (bool, error) {
	namespace, objectName, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return false, nil
	}
	obj, err := o.GetPublisher(ctx, namespace, objectName)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	h, publishes := o.HoldingOf(obj)
	return publishes && slices.Contains(h.Names, name), nil
}

// publishers is the PublishersFunc of TenantObjects: it pages through every object of the holdings resource (the
// API server has no index of the names they publish), keeping only those that publish name.
func (o TenantObjects[Claimer, Publisher]) publishers(ctx context.Context, name string) (map[string]Holding, error) {
	found := map[string]Holding{}
	err := pager.New(o.ListPublishers).EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		if h, publishes := o.HoldingOf(obj); publishes && slices.Contains(h.Names, name) {
			key, err := cache.MetaNamespaceKeyFunc(obj)
			if err != nil {
				return err
			}
			found[key] = h
		}
		return nil
	})
	return found, err
}
