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
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	rancherv3 "github.com/multiproject/api/rancher/management/v3"
	mpfake "github.com/multiproject/client-go/clientset/versioned/fake"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant/tenanttest"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/tenancy"
)

// servesProjects is discovery for informerset: every built-in group, and of the optional APIs only Rancher's
// Projects.
type servesProjects struct{}

func (servesProjects) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	if gv != informerset.Projects.GroupVersion().String() {
		return nil, apierrors.NewNotFound(schema.GroupResource{}, gv)
	}
	return &metav1.APIResourceList{GroupVersion: gv, APIResources: []metav1.APIResource{{Name: informerset.Projects.Resource}}}, nil
}

// interestsOf gives a controller its tenant's views and the shared informers, as the manager does, and remembers
// the Interests it registers.
type interestsOf struct {
	tenanttest.TenantInformers
	mu        sync.Mutex
	interests []*tenancy.Interest
}

func (i *interestsOf) Interest(gvr schema.GroupVersionResource) (*tenancy.Interest, error) {
	inf, err := i.Shared(gvr)
	if err != nil {
		return nil, err
	}
	in, err := inf.(*tenancy.Fanout).Interest()
	if err == nil {
		i.mu.Lock()
		i.interests = append(i.interests, in)
		i.mu.Unlock()
	}
	return in, err
}

func (i *interestsOf) keys() sets.Set[string] {
	i.mu.Lock()
	defer i.mu.Unlock()
	out := sets.New[string]()
	for _, in := range i.interests {
		if !in.Closed() {
			out = out.Union(in.Keys())
		}
	}
	return out
}

// TestProjectWatchDoesNotGrowWithTenants runs 1, then 50 tenants' controllers in one Rancher cluster on the
// production wiring (informerset.NewRouting): the shared Project informer carries the same handlers with 50 tenants
// as with 1; each tenant is interested in exactly the Projects its namespaces' app owners name, so a Project event
// reaches only that tenant (the Fanout's own tests pin delivery by key); a stopped tenant leaves no Interest and no
// key.
func TestProjectWatchDoesNotGrowWithTenants(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	const tenants = 50
	var namespaces []runtime.Object
	for i := range tenants {
		namespaces = append(namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ns-%d", i), Labels: map[string]string{
			mpv1alpha1.DefaultProviderConfigLabelKey: fmt.Sprintf("tenant-%d", i), appOwnerKey: fmt.Sprintf("Team-%d", i)}}})
	}
	kube := kubefake.NewClientset(namespaces...)
	rancher := mpfake.NewClientset()
	tn, err := informerset.NewRouting(informerset.RoutingConfig{Config: informerset.Config{
		Client: kube, MultiprojectClient: rancher, Discovery: servesProjects{}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := tn.Set.Start(ctx); err != nil {
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
		_ = tn.Close()
	})
	h := &harness{t: t, ctx: ctx, kube: kube, rancher: rancher}
	h.waitFor("Projects to be served", func() bool { return tn.Served(informerset.Projects) && tn.Set.HasSynced() })
	shared, _ := tn.Shared(informerset.Projects)
	fanout := shared.(*tenancy.Fanout)

	type running struct {
		informers *interestsOf
		stop      func()
	}
	start := func(i int) running {
		name := fmt.Sprintf("tenant-%d", i)
		views, err := tn.Router.Tenant(name)
		if err != nil {
			t.Fatal(err)
		}
		informers := &interestsOf{TenantInformers: tenanttest.TenantInformers{Views: views,
			SharedInformers: map[schema.GroupVersionResource]cache.SharedIndexInformer{informerset.Projects: shared}}}
		conditions := &tenanttest.Conditions{}
		c, err := New(&tenant.Context{
			Controller: "namespace-project",
			ProviderConfig: &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: mpv1alpha1.ProviderConfigSpec{Rancher: &mpv1alpha1.RancherConfig{ClusterID: testCluster}}},
			ProviderConfigLabelKey: mpv1alpha1.DefaultProviderConfigLabelKey,
			KubeClient:             kube, MultiprojectClient: rancher, Informers: informers,
			EventRecorder: &recorder{}, Condition: conditions,
			Options: tenant.Options{AppOwnerLabelKey: appOwnerKey}, Workers: 1,
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.Run(ctx)
			views.Close()
		}()
		h.waitFor(name+" to run", func() bool { _, ok := conditions.Last(); return ok })
		return running{informers: informers, stop: func() { stop(); <-done }}
	}
	wantKeys := func(i int) sets.Set[string] {
		return sets.New(informerset.ProjectKey(testCluster, fmt.Sprintf("team-%d", i)))
	}

	var all []running
	all = append(all, start(0))
	withOne := tn.Set.Handlers(informerset.Projects)
	if withOne != 1 {
		t.Errorf("1 tenant: %d handlers on the shared Project informer, want 1 (the Fanout's)", withOne)
	}
	for i := 1; i < tenants; i++ {
		all = append(all, start(i))
	}
	if got := tn.Set.Handlers(informerset.Projects); got != withOne {
		t.Errorf("%d tenants: %d handlers on the shared Project informer, %d with 1 tenant", tenants, got, withOne)
	}
	if got := fanout.RegistrationCount(); got != tenants {
		t.Errorf("%d Interests for %d tenants", got, tenants)
	}
	for i, r := range all {
		// The app owner enters the index from the namespace's initial Add.
		h.waitFor(fmt.Sprintf("tenant-%d's interest", i), func() bool { return r.informers.keys().Equal(wantKeys(i)) })
	}

	// A Project named for tenant 7's app owner is assigned there, and nowhere else.
	h.createProject(project(testCluster, "p-7", "team-7"))
	h.waitFor("ns-7 to be assigned", func() bool {
		return h.namespace("ns-7").Annotations[rancherv3.ProjectIDAnnotationKey] == testCluster+":p-7"
	})
	if n := len(h.patches()); n != 1 {
		t.Errorf("%d namespace patches, want 1", n)
	}

	// A namespace's new app owner replaces the old one among its tenant's keys.
	h.updateNamespace("ns-3", func(ns *corev1.Namespace) { ns.Labels[appOwnerKey] = "Other" })
	h.waitFor("tenant-3's interest to follow its app owner", func() bool {
		return all[3].informers.keys().Equal(sets.New(informerset.ProjectKey(testCluster, "other")))
	})

	// A stopped tenant leaves neither its Interest nor its key.
	all[7].stop()
	if got := fanout.RegistrationCount(); got != tenants-1 {
		t.Errorf("after tenant-7 stopped: %d Interests, want %d", got, tenants-1)
	}
	if got := fanout.KeyCount(); got != tenants-1 {
		t.Errorf("after tenant-7 stopped: %d keys, want %d", got, tenants-1)
	}
	for i, r := range all {
		if i != 7 {
			r.stop()
		}
	}
	if got, keys := fanout.RegistrationCount(), fanout.KeyCount(); got != 0 || keys != 0 {
		t.Errorf("after every tenant stopped: %d Interests, %d keys", got, keys)
	}
	if got := tn.Set.Handlers(informerset.Projects); got != withOne {
		t.Errorf("after every tenant stopped: %d handlers on the shared Project informer, want %d", got, withOne)
	}
}
