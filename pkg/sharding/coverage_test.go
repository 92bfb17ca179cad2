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
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	apiserversharding "k8s.io/apiserver/pkg/sharding"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpfake "github.com/multiproject/client-go/clientset/versioned/fake"
	mpinformers "github.com/multiproject/client-go/informers/externalversions/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/tenancy"
)

const coverageLabel = mpv1alpha1.DefaultProviderConfigLabelKey

// honouringServices lists Services as kube-apiserver with the ShardedListAndWatch gate does: the selected ones, with
// ShardInfo. It goes through the fake's reactors, not its typed client, which drops ShardInfo.
func honouringServices(t *testing.T, client *fake.Clientset) *cache.ListWatch {
	gvr := corev1.SchemeGroupVersion.WithResource("services")
	gvk := corev1.SchemeGroupVersion.WithKind("Service")
	return &cache.ListWatch{
		ListWithContextFunc: func(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
			obj, err := client.Tracker().List(gvr, gvk, "")
			if err != nil {
				return nil, err
			}
			list := obj.(*corev1.ServiceList)
			sel, err := apiserversharding.Parse(o.ShardSelector)
			if err != nil {
				t.Errorf("kube-apiserver would refuse the selector %q: %v", o.ShardSelector, err)
				return nil, err
			}
			var items []corev1.Service
			for _, s := range list.Items {
				if ok, _ := sel.Matches(&s); ok {
					items = append(items, s)
				}
			}
			list.Items, list.ShardInfo = items, &metav1.ShardInfo{Selector: o.ShardSelector}
			return list, nil
		},
		WatchFuncWithContext: client.CoreV1().Services(metav1.NamespaceAll).Watch,
	}
}

type coverageFixture struct {
	kube  *fake.Clientset
	mp    *mpfake.Clientset
	scope *informerset.ShardScope
	cov   *Coverage
	clock *testingclock.FakeClock
	svcs  cache.SharedIndexInformer
	pcs   cache.SharedIndexInformer
	// namespaces is the Namespace informer Coverage reads a tenant's namespaces from.
	namespaces cache.SharedIndexInformer
	mu         sync.Mutex
	covered    []string
}

func (f *coverageFixture) coveredTenants() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.covered...)
}

func newCoverageFixture(t *testing.T, ctx context.Context, objs ...runtime.Object) *coverageFixture {
	return newCoverageFixtureWith(t, ctx, nil, objs...)
}

func newCoverageFixtureWith(t *testing.T, ctx context.Context, leftovers func(context.Context, []string) (map[string][]string, error),
	objs ...runtime.Object) *coverageFixture {
	f := &coverageFixture{clock: testingclock.NewFakeClock(time.Now())}
	var kubeObjs, mpObjs []runtime.Object
	for _, o := range objs {
		if _, ok := o.(*mpv1alpha1.ProviderConfig); ok {
			mpObjs = append(mpObjs, o)
		} else {
			kubeObjs = append(kubeObjs, o)
		}
	}
	f.kube, f.mp = fake.NewClientset(kubeObjs...), mpfake.NewClientset(mpObjs...)
	f.scope = informerset.NewShardScope(NamespaceSelector(nil))
	f.svcs = f.scope.NewInformer(informerset.Services, honouringServices(t, f.kube), &corev1.Service{}, 0, cache.Indexers{})
	factory := informers.NewSharedInformerFactory(f.kube, 0)
	namespaces := factory.Core().V1().Namespaces().Informer()
	if err := namespaces.AddIndexers(tenancy.Indexers(coverageLabel)); err != nil {
		t.Fatal(err)
	}
	pcs := mpinformers.NewProviderConfigInformer(f.mp, 0, cache.Indexers{})
	f.pcs = pcs
	f.namespaces = namespaces
	f.cov = NewCoverage(CoverageConfig{Scope: f.scope, Namespaces: namespaces, ProviderConfigs: pcs, LabelKey: coverageLabel,
		RebuildInterval: time.Hour, Clock: f.clock, Leftovers: leftovers})
	go f.svcs.RunWithContext(ctx)
	go namespaces.RunWithContext(ctx)
	go pcs.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), f.svcs.HasSynced, namespaces.HasSynced, pcs.HasSynced) {
		t.Fatal("no sync")
	}
	go func() {
		_ = f.cov.Run(ctx, func(tenant string) { f.mu.Lock(); f.covered = append(f.covered, tenant); f.mu.Unlock() })
	}()
	return f
}

func tenantNamespace(name, tenant string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{coverageLabel: tenant}}}
}

func (f *coverageFixture) waitCovered(t *testing.T, ctx context.Context, tenant string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return f.cov.Covers(tenant), nil
	})
	if err != nil {
		sel, gen := f.scope.Selector()
		t.Fatalf("tenant %s never covered (generation %d, listed %d, selector %s)", tenant, gen, f.scope.Listed(), sel)
	}
}

func TestCoverageGrowsToItsTenantsNamespacesAndSaysWhenTheyAreRead(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f := newCoverageFixture(t, ctx,
		&mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "t1"}},
		tenantNamespace("t1-app", "t1"), tenantNamespace("other-app", "other"),
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "t1-app", Name: "web"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "other-app", Name: "web"}})

	f.waitCovered(t, ctx, "t1")
	if _, ok, _ := f.svcs.GetStore().GetByKey("t1-app/web"); !ok {
		t.Fatal("t1 counts as covered before its Service was listed")
	}
	if _, ok, _ := f.svcs.GetStore().GetByKey("other-app/web"); ok && NamespaceBucket("other-app") != NamespaceBucket("t1-app") {
		t.Error("a namespace of a tenant of another shard was listed")
	}

	// A tenant that moves in: not covered until its namespace is listed, then handed to OnCovered.
	if _, err := f.kube.CoreV1().Namespaces().Create(ctx, tenantNamespace("t2-app", "t2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.kube.CoreV1().Services("t2-app").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "t2-app", Name: "api"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Coverage knows a tenant's namespaces from the Namespace informer: a tenant none of whose namespaces it has
	// seen yet needs nothing read. So the tenant arrives once its namespace is known, as a tenant that moves in does.
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, ok, err := f.namespaces.GetStore().GetByKey("t2-app")
		return ok, err
	}); err != nil {
		t.Fatalf("the Namespace informer never saw t2-app: %v", err)
	}
	if _, err := f.mp.MultiprojectV1alpha1().ProviderConfigs().Create(ctx, &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "t2"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitCovered(t, ctx, "t2")
	if _, ok, _ := f.svcs.GetStore().GetByKey("t2-app/api"); !ok {
		t.Fatal("t2 counts as covered before its Service was listed")
	}
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		for _, tenant := range f.coveredTenants() {
			if tenant == "t2" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("OnCovered never got t2 (got %v)", f.coveredTenants())
	}
	sel, _ := f.scope.Selector()
	if n := strings.Count(sel, "shardRange"); n < 1 || n > 2 {
		t.Errorf("two namespaces need one or two ranges, the selector has %d: %s", n, sel)
	}
}

func TestCoverageOnlyGrowsUntilARebuild(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	objs := []runtime.Object{&mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "t1"}}, tenantNamespace("t1-app", "t1")}
	// Enough tenants that, once they leave, the selector holds more than twice what is needed plus the slack.
	var leaving []string
	for i := range 3 * rebuildSlack {
		name := "gone-" + strings.Repeat("x", i)
		leaving = append(leaving, name)
		objs = append(objs, &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: name}}, tenantNamespace(name+"-app", name))
	}
	f := newCoverageFixture(t, ctx, objs...)
	f.waitCovered(t, ctx, "t1")
	_, grown := f.scope.Selector()

	for _, name := range leaving {
		if err := f.mp.MultiprojectV1alpha1().ProviderConfigs().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Tenants that leave change nothing before the rebuild is due: no LIST for them.
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return len(f.pcs.GetStore().ListKeys()) == 1, nil
	})
	if err != nil {
		t.Fatal("the Coverage never saw the tenants leave")
	}
	if _, err := f.cov.sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, gen := f.scope.Selector(); gen != grown {
		t.Fatal("the selector changed before the rebuild interval passed")
	}

	f.clock.Step(time.Hour)
	if _, err := f.cov.sync(ctx); err != nil {
		t.Fatal(err)
	}
	if sel, _ := f.scope.Selector(); strings.Count(sel, "shardRange") != 1 {
		t.Fatalf("the rebuild did not narrow the selector to t1's one bucket: %s", sel)
	}
	f.waitCovered(t, ctx, "t1")
}

// TestCoverageReadsWhatATenantLeftInANamespaceThatMovedAway: a tenant that moves to this shard may have left
// Translations in a namespace that now belongs to another tenant; it must still read them to undo what they did, so
// the selector covers that namespace too, and the tenant is covered only once it has been listed.
func TestCoverageReadsWhatATenantLeftInANamespaceThatMovedAway(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var asked [][]string
	leftovers := func(_ context.Context, tenants []string) (map[string][]string, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, tenants)
		return map[string][]string{"t1": {"moved-away"}}, nil
	}
	f := newCoverageFixtureWith(t, ctx, leftovers,
		&mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "t1"}},
		tenantNamespace("t1-app", "t1"), tenantNamespace("moved-away", "someone-else"),
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "moved-away", Name: "left"}})
	f.waitCovered(t, ctx, "t1")
	if _, ok, _ := f.svcs.GetStore().GetByKey("moved-away/left"); !ok {
		t.Fatal("t1 counts as covered before the namespace of its leftovers was listed")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 1 || len(asked[0]) != 1 || asked[0][0] != "t1" {
		t.Errorf("leftovers asked %v, want once for t1", asked)
	}
}
