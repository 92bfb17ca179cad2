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
	"k8s.io/apimachinery/pkg/util/sets"
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

// leavingTenants is t1 and n tenants that will leave, each with one namespace.
func leavingTenants(n int) ([]runtime.Object, []string) {
	objs := []runtime.Object{&mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "t1"}}, tenantNamespace("t1-app", "t1")}
	var leaving []string
	for i := range n {
		name := "gone-" + strings.Repeat("x", i)
		leaving = append(leaving, name)
		objs = append(objs, &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: name}}, tenantNamespace(name+"-app", name))
	}
	return objs, leaving
}

// leave deletes the tenants and syncs once the Coverage's informer has seen them go.
func (f *coverageFixture) leave(t *testing.T, ctx context.Context, tenants ...string) {
	t.Helper()
	for _, name := range tenants {
		if err := f.mp.MultiprojectV1alpha1().ProviderConfigs().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		for _, name := range tenants {
			if _, ok, _ := f.pcs.GetStore().GetByKey(name); ok {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatal("the Coverage never saw the tenants leave")
	}
	f.sync(t, ctx)
}

func (f *coverageFixture) sync(t *testing.T, ctx context.Context) {
	t.Helper()
	if _, err := f.cov.sync(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestCoverageNarrowsOnceTheTenantsThatLeftHaveSettled: tenants that leave cost nothing at once (no LIST per
// departure); once the shard's tenants have stayed the same for DefaultRebuildSettle, a selector holding more than an
// eighth beyond what they need is narrowed, long before the rebuild interval.
func TestCoverageNarrowsOnceTheTenantsThatLeftHaveSettled(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	objs, leaving := leavingTenants(3 * rebuildSlack)
	f := newCoverageFixture(t, ctx, objs...)
	f.waitCovered(t, ctx, "t1")
	_, grown := f.scope.Selector()

	f.leave(t, ctx, leaving[1:]...)
	if _, gen := f.scope.Selector(); gen != grown {
		t.Fatal("the selector changed as the tenants left")
	}
	// Another departure within the settle time restarts it.
	f.clock.Step(DefaultRebuildSettle / 2)
	f.leave(t, ctx, leaving[0])
	f.clock.Step(DefaultRebuildSettle/2 + time.Second)
	f.sync(t, ctx)
	if _, gen := f.scope.Selector(); gen != grown {
		t.Fatal("the selector was narrowed before the tenants had stayed the same for the settle time")
	}
	f.clock.Step(DefaultRebuildSettle / 2)
	f.sync(t, ctx)
	if sel, _ := f.scope.Selector(); strings.Count(sel, "shardRange") != 1 {
		t.Fatalf("the settled selector was not narrowed to t1's one bucket: %s", sel)
	}
	f.waitCovered(t, ctx, "t1")
}

// TestCoverageKeepsASmallExcess: a selector that holds at most an eighth (plus rebuildSlack) beyond what its tenants
// need is not worth a LIST, neither once they settle nor at the rebuild interval.
func TestCoverageKeepsASmallExcess(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	objs, leaving := leavingTenants(rebuildSlack)
	f := newCoverageFixture(t, ctx, objs...)
	f.waitCovered(t, ctx, "t1")
	_, grown := f.scope.Selector()
	f.leave(t, ctx, leaving...)
	for _, step := range []time.Duration{DefaultRebuildSettle, time.Hour} {
		f.clock.Step(step)
		f.sync(t, ctx)
		if _, gen := f.scope.Selector(); gen != grown {
			t.Fatalf("%d unneeded buckets were dropped at the cost of a LIST", rebuildSlack)
		}
	}
}

// TestCoverageNarrowsAtTheRebuildIntervalWhileTenantsKeepMoving: tenants that never stay the same for the settle
// time do not keep a wide selector beyond the rebuild interval.
func TestCoverageNarrowsAtTheRebuildIntervalWhileTenantsKeepMoving(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	objs, leaving := leavingTenants(3 * rebuildSlack)
	f := newCoverageFixture(t, ctx, objs...)
	interval := 3 * DefaultRebuildSettle
	f.cov.mu.Lock()
	f.cov.cfg.RebuildInterval = interval
	f.cov.mu.Unlock()
	f.waitCovered(t, ctx, "t1")
	_, grown := f.scope.Selector()
	// Enough leave at once that the selector is wide, then one more every settle time less a second: never settled.
	f.leave(t, ctx, leaving[:2*rebuildSlack]...)
	leaving = leaving[2*rebuildSlack:]
	f.clock.Step(DefaultRebuildSettle - time.Second)
	elapsed := DefaultRebuildSettle - time.Second
	for elapsed < interval {
		if len(leaving) < 2 {
			t.Fatal("the test ran out of tenants to leave")
		}
		f.leave(t, ctx, leaving[0])
		if _, gen := f.scope.Selector(); gen != grown {
			t.Fatalf("the selector was narrowed %s after the start, while tenants kept leaving within the settle time", elapsed)
		}
		leaving = leaving[1:]
		f.clock.Step(DefaultRebuildSettle - time.Second)
		elapsed += DefaultRebuildSettle - time.Second
	}
	// The interval has passed, the last departure less than the settle time ago.
	f.sync(t, ctx)
	want := 1 + len(leaving)
	if sel, _ := f.scope.Selector(); strings.Count(sel, "shardRange") > want {
		t.Fatalf("the rebuild interval did not narrow the selector to the %d buckets of the tenants left: %s", want, sel)
	}
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

// TestCoverageRebuildKeepsWhatATenantLeftInANamespaceThatMovedAway: a namespace of one of this shard's tenants that
// moves to a tenant of another shard holds the Translations the first tenant wrote until it has undone them; a
// rebuild after other tenants left reads the leftovers again and keeps that namespace.
func TestCoverageRebuildKeepsWhatATenantLeftInANamespaceThatMovedAway(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	moved := false
	leftovers := func(_ context.Context, tenants []string) (map[string][]string, error) {
		mu.Lock()
		defer mu.Unlock()
		if moved {
			return map[string][]string{"t1": {"t1-old"}}, nil
		}
		return nil, nil
	}
	objs, leaving := leavingTenants(3 * rebuildSlack)
	objs = append(objs, tenantNamespace("t1-old", "t1"), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "t1-old", Name: "left"}})
	f := newCoverageFixtureWith(t, ctx, leftovers, objs...)
	f.waitCovered(t, ctx, "t1")

	// t1-old moves to a tenant of another shard, with t1's Translations still in it.
	mu.Lock()
	moved = true
	mu.Unlock()
	if _, err := f.kube.CoreV1().Namespaces().Update(ctx, tenantNamespace("t1-old", "someone-else"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		obj, ok, err := f.namespaces.GetStore().GetByKey("t1-old")
		return ok && obj.(*corev1.Namespace).Labels[coverageLabel] == "someone-else", err
	}); err != nil {
		t.Fatalf("the Namespace informer never saw t1-old move: %v", err)
	}
	f.leave(t, ctx, leaving...)
	_, grown := f.scope.Selector()
	f.clock.Step(DefaultRebuildSettle)
	f.sync(t, ctx)
	sel, gen := f.scope.Selector()
	if gen == grown {
		t.Fatal("the settled selector was not narrowed")
	}
	want := sets.New(NamespaceBucket("t1-app"), NamespaceBucket("t1-old"))
	if n := strings.Count(sel, "shardRange"); n > want.Len() {
		t.Fatalf("the rebuild kept %d ranges, want at most the %d of t1's namespace and its leftovers: %s", n, want.Len(), sel)
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return f.scope.Listed() >= gen, nil
	}); err != nil {
		t.Fatal("the informers never listed with the narrowed selector")
	}
	if _, ok, _ := f.svcs.GetStore().GetByKey("t1-old/left"); !ok {
		t.Fatal("the rebuild dropped the namespace where t1 left what it wrote")
	}
}

// TestDecideCoverage pins the pure decision of a Coverage sync: a wide selector is narrowed once the tenants have
// settled or at the periodic look, and sync comes back when the next rebuild would be.
func TestDecideCoverage(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	const interval = time.Hour
	needed := sets.New[uint32](1, 2, 3, 4, 5, 6, 7, 8)
	tests := []struct {
		name         string
		periodic     bool
		unneeded     int
		sinceRebuild time.Duration
		sinceTenants time.Duration
		want         coverageDecision
	}{
		{name: "narrow enough, between looks", unneeded: 0, sinceRebuild: 10 * time.Minute, sinceTenants: time.Hour,
			want: coverageDecision{next: 50 * time.Minute}},
		{name: "wide, tenants still changing", unneeded: rebuildSlack + 2, sinceRebuild: 10 * time.Minute, sinceTenants: 0,
			want: coverageDecision{wide: true, next: min(50*time.Minute, DefaultRebuildSettle)}},
		{name: "wide, tenants settled", unneeded: rebuildSlack + 2, sinceRebuild: 10 * time.Minute, sinceTenants: DefaultRebuildSettle,
			want: coverageDecision{wide: true, rebuild: true, markRebuilt: true, next: interval}},
		{name: "periodic, narrow enough", periodic: true, unneeded: 1, sinceRebuild: interval, sinceTenants: 0,
			want: coverageDecision{markRebuilt: true, next: interval}},
		{name: "periodic, wide", periodic: true, unneeded: rebuildSlack + 2, sinceRebuild: interval, sinceTenants: 0,
			want: coverageDecision{wide: true, rebuild: true, markRebuilt: true, next: interval}},
		{name: "never sooner than a second", unneeded: 0, sinceRebuild: interval - time.Millisecond, sinceTenants: time.Hour,
			want: coverageDecision{next: time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decideCoverage(coverageInput{now: now, lastRebuild: now.Add(-tt.sinceRebuild), tenantsChanged: now.Add(-tt.sinceTenants),
				interval: interval, periodic: tt.periodic, needed: needed, unneeded: tt.unneeded})
			if got != tt.want {
				t.Errorf("decideCoverage = %+v, want %+v", got, tt.want)
			}
		})
	}
}
