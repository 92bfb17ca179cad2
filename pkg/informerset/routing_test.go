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
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpfake "github.com/multiproject/client-go/clientset/versioned/fake"
)

func TestResourcesTableIsConsistent(t *testing.T) {
	seen := sets.New[schema.GroupVersionResource]()
	for _, r := range Resources {
		if seen.Has(r.GVR) {
			t.Errorf("%s is listed twice", r.GVR)
		}
		seen.Insert(r.GVR)
		if r.NewInformer == nil {
			t.Errorf("%s has no informer constructor", r.GVR)
		}
		if r.Optional && !r.CRD {
			t.Errorf("%s is optional but built in: discovery would be asked about a group the cluster always serves", r.GVR)
		}
		if got, ok := LookupResource(r.GVR); !ok || got.GVR != r.GVR {
			t.Errorf("LookupResource(%s) = %v, %v", r.GVR, got.GVR, ok)
		}
	}
	// The Router is built on the Namespace informer; routing it again would be an error.
	if r, _ := LookupResource(Namespaces); r.Scope != NotRouted || r.Optional {
		t.Errorf("Namespaces: scope %v, optional %v; want a core resource the Router owns", r.Scope, r.Optional)
	}
	if _, ok := LookupResource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}); ok {
		t.Error("LookupResource found a resource the table does not list")
	}
}

// servedDiscovery serves the built-in groups and the optional resources it is told to, safely under -race.
type servedDiscovery struct {
	mu     sync.Mutex
	served sets.Set[schema.GroupVersionResource]
}

func (d *servedDiscovery) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	list := &metav1.APIResourceList{GroupVersion: gv}
	for gvr := range d.served {
		if gvr.GroupVersion().String() == gv {
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: gvr.Resource})
		}
	}
	if len(list.APIResources) == 0 {
		return nil, apierrors.NewNotFound(schema.GroupResource{}, gv)
	}
	return list, nil
}

func (d *servedDiscovery) serve(gvr schema.GroupVersionResource) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.served.Insert(gvr)
}

func TestTenancyRoutesByTheTableAndOptionalsOnceServed(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	const labelKey = mpv1alpha1.DefaultProviderConfigLabelKey
	kube := fake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a-ns", Labels: map[string]string{labelKey: "a"}}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "a-ns", Name: "web"}},
	)
	mp := mpfake.NewClientset(&mpv1alpha1.Translation{ObjectMeta: metav1.ObjectMeta{
		Namespace: "a-ns", Name: "t", Labels: map[string]string{labelKey: "a"}}})
	disco := &servedDiscovery{served: sets.New[schema.GroupVersionResource]()}
	tn, err := NewRouting(RoutingConfig{
		Config:   Config{Client: kube, MultiprojectClient: mp, Discovery: disco, DiscoveryInterval: 10 * time.Millisecond},
		LabelKey: labelKey,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tn.Set.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tn.Set.WaitForCacheSync(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	served := make(chan schema.GroupVersionResource, len(Resources))
	routed := make(chan struct{})
	go func() {
		defer close(routed)
		tn.RouteOptionals(ctx, func(gvr schema.GroupVersionResource) { served <- gvr })
	}()
	defer func() {
		cancel()
		<-routed
		if err := tn.Close(); err != nil {
			t.Error(err)
		}
	}()

	tenant, err := tn.Router.Tenant("a")
	if err != nil {
		t.Fatal(err)
	}
	defer tenant.Close()
	for _, r := range Resources {
		_, viewErr := tenant.Informer(r.GVR)
		routedNow := (r.Scope != NotRouted && !r.Optional) || r.GVR == Namespaces
		if routedNow != (viewErr == nil) {
			t.Errorf("%s: tenant view error %v, want a view: %v", r.GVR, viewErr, routedNow)
		}
		// The claim records are watched only by sharded replicas, and this one is not.
		want := !r.Optional && !r.Sharded
		if tn.Served(r.GVR) != want {
			t.Errorf("%s: Served = %v before any optional API is served", r.GVR, tn.Served(r.GVR))
		}
		if _, ok := tn.Shared(r.GVR); ok != want {
			t.Errorf("%s: Shared ok = %v before any optional API is served", r.GVR, ok)
		}
	}
	view, _ := tenant.Informer(Services)
	if _, exists, _ := view.GetIndexer().GetByKey("a-ns/web"); !exists {
		t.Error("tenant a does not see the Service in its namespace")
	}

	// A routed optional resource reaches the tenant once served; one that is not routed is only Shared.
	for _, gvr := range []schema.GroupVersionResource{Translations, Projects} {
		disco.serve(gvr)
		select {
		case got := <-served:
			if got != gvr {
				t.Fatalf("served %s, want %s", got, gvr)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s was never served", gvr)
		}
		if !tn.Served(gvr) {
			t.Errorf("%s: not Served after onServed", gvr)
		}
		if inf, ok := tn.Shared(gvr); !ok || inf == nil {
			t.Errorf("%s: no shared informer once served", gvr)
		}
	}
	if _, err := tenant.Informer(Projects); err == nil {
		t.Error("Projects are routed, want them read only through Shared")
	}
	translations, err := tenant.Informer(Translations)
	if err != nil {
		t.Fatalf("Translations are not routed once served: %v", err)
	}
	if _, exists, _ := translations.GetIndexer().GetByKey("a-ns/t"); !exists {
		t.Error("tenant a does not see the Translation its label gives it")
	}
	if tn.Served(PangolinResources) {
		t.Error("PangolinResources Served while the cluster does not serve them")
	}
}

func TestNewTenancyNeedsBothClients(t *testing.T) {
	if _, err := NewRouting(RoutingConfig{Config: Config{Client: fake.NewClientset()}}); err == nil {
		t.Error("NewRouting without a multiproject client succeeded")
	}
}
