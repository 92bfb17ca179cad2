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
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	mpclientset "github.com/multiproject/client-go/clientset/versioned"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant/tenanttest"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/tenancy"
)

// tenancySyncTimeout bounds the wait for the shared informers, as the manager's default --cache-sync-timeout does.
const tenancySyncTimeout = 2 * time.Minute

// Tenancy is what the manager builds once per leadership term, for integration tests that run one controller
// without the manager: the shared informers on the test's clients and the tenancy Router that gives each tenant its
// filtered views, both built by the manager's own code (informerset.NewTenancy).
type Tenancy struct {
	Router *tenancy.Router
	// Informers holds the shared informer of every resource the manager always watches, and of each optional one
	// StartTenancy was given.
	Informers map[schema.GroupVersionResource]cache.SharedIndexInformer
	// Production is what informerset.NewTenancy built; its Served and Shared are the binary's (they also count an
	// optional API StartTenancy was not given once the cluster serves it).
	Production *informerset.Tenancy
}

// StartTenancy builds the manager's shared informers and Router (informerset.NewTenancy) on the test's clients,
// starts them, waits until they have synced and until every resource in routed and shared is served (an optional
// API, a CRD, is routed once discovery shows it, as in the manager), and stops them when the test ends. routed are
// resources the manager routes to tenants (see RoutingScope), shared ones that tenants read unfiltered through
// Informers.Shared, like Rancher Projects; every resource must be one the manager watches
// (informerset.Resources). Unlike the manager's, this router records no Events.
func StartTenancy(t testing.TB, ctx context.Context, kube kubernetes.Interface, mp mpclientset.Interface, labelKey string,
	routed []schema.GroupVersionResource, shared ...schema.GroupVersionResource) *Tenancy {
	t.Helper()
	return StartTenancyWithResync(t, ctx, kube, mp, labelKey, 0, routed, shared...)
}

// StartTenancyWithResync is StartTenancy with the shared informers resyncing every resync period, as the manager's
// do with --min-resync-period (0: never).
func StartTenancyWithResync(t testing.TB, ctx context.Context, kube kubernetes.Interface, mp mpclientset.Interface, labelKey string,
	resync time.Duration, routed []schema.GroupVersionResource, shared ...schema.GroupVersionResource) *Tenancy {
	t.Helper()
	for _, gvr := range routed {
		if RoutingScope(gvr) == informerset.NotRouted {
			t.Fatalf("framework: the manager does not route %s to tenants; pass it as shared", gvr)
		}
	}
	for _, gvr := range shared {
		if _, ok := informerset.LookupResource(gvr); !ok {
			t.Fatalf("framework: the manager does not watch %s", gvr)
		}
	}
	tn, err := informerset.NewTenancy(informerset.TenancyConfig{
		Config:   informerset.Config{Client: kube, MultiprojectClient: mp, ResyncPeriod: resync},
		LabelKey: labelKey,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	if err := tn.Set.Start(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	routing := make(chan struct{})
	go func() {
		defer close(routing)
		tn.RouteOptionals(ctx, nil)
	}()
	t.Cleanup(func() {
		cancel()
		<-routing
		if err := tn.Close(); err != nil {
			t.Error(err)
		}
	})
	if err := tn.Set.WaitForCacheSync(ctx, tenancySyncTimeout); err != nil {
		t.Fatal(err)
	}
	wanted := slices.Concat(routed, shared)
	notServed := func() []schema.GroupVersionResource {
		return slices.DeleteFunc(slices.Clone(wanted), tn.Served)
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, tenancySyncTimeout, true, func(context.Context) (bool, error) {
		return len(notServed()) == 0, nil
	}); err != nil {
		t.Fatalf("framework: not served, synced and routed: %v (is its CRD installed?)", notServed())
	}

	informers := map[schema.GroupVersionResource]cache.SharedIndexInformer{}
	for _, r := range informerset.Resources {
		if r.Optional && !slices.Contains(wanted, r.GVR) {
			continue
		}
		inf, _ := tn.Shared(r.GVR)
		informers[r.GVR] = inf
	}
	return &Tenancy{Router: tn.Router, Informers: informers, Production: tn}
}

// RoutingScope is how the manager routes a resource to tenants, as informerset.Resources says: Nodes by their label
// or shared, the objects only the manager writes (Translations, PangolinResources) by the label it gave them, every
// other routed resource by its namespace; informerset.NotRouted for a resource tenants read unfiltered, or one the
// manager does not watch.
func RoutingScope(gvr schema.GroupVersionResource) tenancy.Scope {
	r, _ := informerset.LookupResource(gvr)
	return r.Scope
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
