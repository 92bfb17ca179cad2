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

package framework

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	mpclientset "github.com/multiproject/client-go/clientset/versioned"
	mpinformers "github.com/multiproject/client-go/informers/externalversions"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant/tenanttest"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/tenancy"
)

// Tenancy is what the manager builds once per process, for integration tests that run one controller without the
// manager: shared informers on the test's clients (trimmed and indexed as the InformerSet does) and a tenancy
// Router that gives each tenant its filtered views.
type Tenancy struct {
	Router    *tenancy.Router
	Informers map[schema.GroupVersionResource]cache.SharedIndexInformer
}

// StartTenancy starts informers for routed (each tenant sees only its own objects, with the scopes the manager
// routes them by: see RoutingScope) and for shared (read unfiltered through Informers.Shared, like Rancher
// Projects), waits until they have synced, and stops them when the test ends. The Namespace informer is always
// created: ownership needs it. Unlike the manager's, this router records no Events.
func StartTenancy(t testing.TB, ctx context.Context, kube kubernetes.Interface, mp mpclientset.Interface, labelKey string,
	routed []schema.GroupVersionResource, shared ...schema.GroupVersionResource) *Tenancy {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	kubeFactory := kubeinformers.NewSharedInformerFactory(kube, 0)
	mpFactory := mpinformers.NewSharedInformerFactory(mp, 0)
	informer := func(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
		if generic, err := kubeFactory.ForResource(gvr); err == nil {
			return generic.Informer()
		}
		generic, err := mpFactory.ForResource(gvr)
		if err != nil {
			t.Fatalf("framework: no informer for %s: %v", gvr, err)
		}
		return generic.Informer()
	}
	tn := &Tenancy{Informers: map[schema.GroupVersionResource]cache.SharedIndexInformer{}}
	for _, gvr := range append(append([]schema.GroupVersionResource{informerset.Namespaces}, routed...), shared...) {
		inf := informer(gvr)
		if _, done := tn.Informers[gvr]; done {
			continue
		}
		if err := inf.SetTransform(informerset.DropManagedFields); err != nil {
			t.Fatal(err)
		}
		if err := inf.AddIndexers(tenancy.Indexers(labelKey)); err != nil {
			t.Fatal(err)
		}
		tn.Informers[gvr] = inf
	}
	router, err := tenancy.NewRouter(labelKey, tn.Informers[informerset.Namespaces])
	if err != nil {
		t.Fatal(err)
	}
	for _, gvr := range routed {
		if err := router.AddResource(gvr, tn.Informers[gvr], RoutingScope(gvr)); err != nil {
			t.Fatal(err)
		}
	}
	tn.Router = router
	kubeFactory.Start(ctx.Done())
	mpFactory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		kubeFactory.Shutdown()
		mpFactory.Shutdown()
	})
	kubeFactory.WaitForCacheSync(ctx.Done())
	mpFactory.WaitForCacheSync(ctx.Done())
	return tn
}

// RoutingScope is how the manager (cmd/multiproject-controller-manager/app) routes a resource: Nodes by their label
// or shared, the objects only the manager writes (Translations, PangolinResources) by the label it gave them, and
// every other namespaced resource by its namespace.
func RoutingScope(gvr schema.GroupVersionResource) tenancy.Scope {
	switch gvr {
	case informerset.Nodes:
		return tenancy.ClusterScoped
	case informerset.Translations, informerset.PangolinResources:
		return tenancy.ManagerWritten
	default:
		return tenancy.Namespaced
	}
}

// TenantInformers returns what a controller of the named tenant is given: its views and the shared informers.
func (tn *Tenancy) TenantInformers(t testing.TB, tenantName string) tenanttest.TenantInformers {
	t.Helper()
	views, err := tn.Router.Tenant(tenantName)
	if err != nil {
		t.Fatal(err)
	}
	return tenanttest.TenantInformers{Views: views, SharedInformers: tn.Informers}
}
