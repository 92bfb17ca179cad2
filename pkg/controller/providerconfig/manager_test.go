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

package providerconfig

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpfake "github.com/multiproject/client-go/clientset/versioned/fake"

	"github.com/multiproject/multiproject-controller-manager/pkg/claims"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/tenancy"
)

// TestRunStopSignalsFireWhenTheBoundContextEnds: a run started from a context derived from the one the manager is
// bound to gets a signal that the bound context's end fires (no StopAll needed); a run started from an unrelated
// context gets one that watches that context itself; once unbound, runs watch their own context again.
func TestRunStopSignalsFireWhenTheBoundContextEnds(t *testing.T) {
	m := NewManager(ManagerConfig{})
	parent, cancel := context.WithCancel(context.Background())
	undo := m.StopRunsWhenDone(parent)
	defer undo()

	syncCtx := klog.NewContext(parent, klog.Background()) // a sync's context: values over the bound one
	bound, isBound := m.stopSignal(syncCtx)
	other, cancelOther := context.WithCancel(context.Background())
	own, ownBound := m.stopSignal(other)
	if !isBound || ownBound {
		t.Fatalf("bound: %v for a context derived from the bound one, %v for an unrelated one; want true, false", isBound, ownBound)
	}
	m.tenant("a").setRunning(&controllerRun{controller: "x", stop: bound, stopsWithBound: true})
	m.tenant("b").setRunning(&controllerRun{controller: "x", stop: own})

	fired := func(what string, s interface{ Fired() bool }) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return s.Fired(), nil
		}); err != nil {
			t.Fatalf("%s: the signal did not fire", what)
		}
	}
	cancel()
	fired("the bound context ended", bound)
	if own.Fired() {
		t.Error("the end of the bound context fired the signal of a run started from an unrelated context")
	}
	cancelOther()
	fired("the unrelated context ended", own)

	undo()
	again, cancelAgain := context.WithCancel(context.Background())
	defer cancelAgain()
	unbound, _ := m.stopSignal(klog.NewContext(again, klog.Background()))
	cancelAgain()
	fired("unbound, the run's own context ended", unbound)
}

// TestTheClaimsSeeHoldingsWhileAndAfterAControllerIsDetached: a controller that outlives the stop timeout still
// runs, and the run's claims (ManagerConfig.Claims, handed to every controller) keep seeing the objects that
// publish names while it is detached and after it returned: the claims watch the shared informer themselves, not
// through a member controller's handlers, which the manager removes.
func TestTheClaimsSeeHoldingsWhileAndAfterAControllerIsDetached(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	kube := kubefake.NewClientset()
	factory := informers.NewSharedInformerFactory(kube, 0)
	namespaces := factory.Core().V1().Namespaces().Informer()
	if err := namespaces.AddIndexers(tenancy.Indexers(labelKey)); err != nil {
		t.Fatal(err)
	}
	configMaps := factory.Core().V1().ConfigMaps().Informer()
	router, err := tenancy.NewRouter(labelKey, namespaces)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = router.Close() }()
	configMapsGVR := corev1.SchemeGroupVersion.WithResource("configmaps")

	// A holding is a ConfigMap whose data names a host.
	holdingOf := func(obj any) (claims.Holding, bool) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok || cm.Data["host"] == "" {
			return claims.Holding{}, false
		}
		return claims.Holding{Names: []string{cm.Data["host"]}, Holder: "ConfigMap " + cm.Name}, true
	}
	hold := make(chan struct{})
	var membersMu sync.Mutex
	members := map[string]*claims.Member{}
	returned := make(chan struct{})
	shared := func(gvr schema.GroupVersionResource) (cache.SharedIndexInformer, bool) {
		return configMaps, gvr == configMapsGVR
	}
	set := claims.NewService(claims.ServiceConfig{Informers: shared})
	defer func() { _ = set.Close() }()
	widgets := claims.Kind{Name: "Widget", Holdings: configMapsGVR, HoldingOf: holdingOf}
	m := NewManager(ManagerConfig{
		KubeClient: kube, MultiprojectClient: mpfake.NewClientset(), Router: router, LabelKey: labelKey, EventSink: discardSink{},
		StopTimeout: 50 * time.Millisecond,
		Shared:      shared,
		Claims:      set,
		Enabled: []NamedFactory{{Name: "claimer", Workers: 1, Factory: tenant.Factory{
			ConditionType: mpv1alpha1.ProviderConfigConditionNamespaceProjectReady,
			Section:       tenant.SectionOf(rancherSection),
			New: func(_ context.Context, c *tenant.Context) (tenant.Controller, error) {
				member, err := c.Claims.Join(widgets, c.Name(), func(string) {})
				if err != nil {
					return nil, err
				}
				membersMu.Lock()
				members[c.Name()] = member
				membersMu.Unlock()
				return runFunc(func(ctx context.Context) {
					<-ctx.Done()
					if c.Name() == "a" {
						// Tenant a's controller drains past the stop timeout.
						<-hold
						defer close(returned)
					}
					member.Leave()
				}), nil
			},
		}}},
	})
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	// a joins first, and the registry starts watching then.
	for _, name := range []string{"a", "b"} {
		if _, err := m.Sync(ctx, providerConfig(name, "c-"+name)); err != nil {
			t.Fatal(err)
		}
	}
	membersMu.Lock()
	b := members["b"]
	membersMu.Unlock()
	poll := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return cond(), nil
		}); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	poll("the registry to sync", b.HasSynced)

	m.Stop(ctx, "a")
	if m.Quiet("a") {
		t.Fatal("tenant a is quiet although its controller has not returned")
	}
	// A name published while a's controller, detached, still runs.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "published"}, Data: map[string]string{"host": "x.example.com"}}
	if _, err := kube.CoreV1().ConfigMaps("ns").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	self := claims.Claimant{Key: "ns/ingress-b", UID: "uid-b", Created: metav1.Now()}
	refuses := func() bool {
		_, ok := b.Reserve("x.example.com", self, "ns/resource-b")
		return !ok
	}
	poll("the registry to see the ConfigMap that publishes the name while a's controller is detached", refuses)

	close(hold)
	<-returned
	poll("tenant a to be quiet", func() bool { return m.Quiet("a") })
	if !refuses() {
		t.Error("once a's controller returned, the registry let b publish a name another object publishes")
	}
	m.Stop(ctx, "b")
}

// runFunc is a tenant.Controller made of its Run.
type runFunc func(ctx context.Context)

func (f runFunc) Run(ctx context.Context) { f(ctx) }

// TestAppliedCopy: Sync and Record change a copy of status.appliedSpec, never the informer's object, and start from
// an empty record when there is none.
func TestAppliedCopy(t *testing.T) {
	recorded := &mpv1alpha1.ProviderConfigSpec{GCP: &mpv1alpha1.GCPConfig{ProjectID: "tenant-a-project"}}
	for _, tc := range []struct {
		name    string
		applied *mpv1alpha1.ProviderConfigSpec
	}{
		{"nothing recorded", nil},
		{"a section recorded", recorded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc := &mpv1alpha1.ProviderConfig{Status: mpv1alpha1.ProviderConfigStatus{AppliedSpec: tc.applied}}
			got := appliedCopy(pc)
			want := mpv1alpha1.ProviderConfigSpec{}
			if tc.applied != nil {
				want = *tc.applied.DeepCopy()
			}
			if got == nil || !apiequality.Semantic.DeepEqual(*got, want) {
				t.Fatalf("appliedCopy = %+v, want %+v", got, want)
			}
			got.GCP = &mpv1alpha1.GCPConfig{ProjectID: "changed"}
			if tc.applied != nil && pc.Status.AppliedSpec.GCP.ProjectID != "tenant-a-project" {
				t.Error("changing the copy changed the ProviderConfig's status")
			}
		})
	}
}
