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
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2/ktesting"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpfake "github.com/multiproject/client-go/clientset/versioned/fake"
	mpinformers "github.com/multiproject/client-go/informers/externalversions/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant/tenanttest"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/tenancy"
)

const labelKey = mpv1alpha1.DefaultProviderConfigLabelKey

// fixture runs the ProviderConfig controller and manager on fake clientsets with real informers and a real router.
type fixture struct {
	t          *testing.T
	ctx        context.Context
	kube       *kubefake.Clientset
	mp         *mpfake.Clientset
	router     *tenancy.Router
	manager    *Manager
	controller *Controller
	probes     *probes
	events     *tenanttest.Events

	apisMu sync.Mutex
	apis   map[schema.GroupVersionResource]bool
	done   chan struct{}
	cancel context.CancelFunc
}

func newFixture(t *testing.T, workers int, required ...schema.GroupVersionResource) *fixture {
	t.Helper()
	return newFixtureWith(t, fixtureConfig{workers: workers, required: required})
}

// fixtureConfig varies the manager a fixture runs.
type fixtureConfig struct {
	workers  int
	required []schema.GroupVersionResource
	// optional are the probe's Factory.OptionalAPIs.
	optional []schema.GroupVersionResource
	// stopTimeout is the manager's StopTimeout (30 s if zero).
	stopTimeout time.Duration
	// disabled runs the probe as a controller --controllers disables.
	disabled bool
	// objects are in the fake clientset from the start, as if made before the manager started.
	objects []*mpv1alpha1.ProviderConfig
	// probes, if set, is the probe factory's state (to set it up before the manager starts).
	probes *probes
	// shard, if set, makes the controller run only the ProviderConfigs of that shard (Ownership.Shard).
	shard string
	// inCluster makes the probe a controller whose cleanup removes objects in the cluster only: it has no Abandon.
	inCluster bool
	// secrets makes the probe read credentials from the Secret probeSecret names for its section.
	secrets bool
	// holders, if set, makes the controller leave alone the tenants another live shard holds (Ownership.Holders).
	holders ShardHolders
	// coverage, if set, makes the shard wait until its informers have read a tenant's namespaces (Ownership.Coverage).
	coverage TenantCoverage
	// startingGrace, if set, replaces StartingReportGrace.
	startingGrace time.Duration
	// manual leaves the controller's workers off: the test calls its sync itself.
	manual bool
}

// probeSecret is the Secret a probe of a fixture with secrets reads for the cluster ID of its section.
func probeSecret(clusterID string) mpv1alpha1.SecretReference {
	return mpv1alpha1.SecretReference{Namespace: "creds", Name: "key-" + clusterID}
}

func newFixtureWith(t *testing.T, fc fixtureConfig) *fixture {
	t.Helper()
	workers, required := fc.workers, fc.required
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	if fc.probes == nil {
		fc.probes = newProbes()
	}
	f := &fixture{t: t, ctx: ctx, cancel: cancel, kube: kubefake.NewClientset(), mp: mpfake.NewClientset(),
		probes: fc.probes, apis: map[schema.GroupVersionResource]bool{}, done: make(chan struct{})}

	factory := informers.NewSharedInformerFactory(f.kube, 0)
	namespaces := factory.Core().V1().Namespaces().Informer()
	services := factory.Core().V1().Services().Informer()
	for _, inf := range []cache.SharedIndexInformer{namespaces, services} {
		if err := inf.AddIndexers(tenancy.Indexers(labelKey)); err != nil {
			t.Fatal(err)
		}
	}
	router, err := tenancy.NewRouter(labelKey, namespaces)
	if err != nil {
		t.Fatal(err)
	}
	if err := router.AddResource(informerset.Services, services, tenancy.Namespaced); err != nil {
		t.Fatal(err)
	}
	f.router = router
	pcInformer := mpinformers.NewProviderConfigInformer(f.mp, 0, cache.Indexers{})

	cfg := ManagerConfig{
		KubeClient:         f.kube,
		MultiprojectClient: f.mp,
		Router:             router,
		Shared: func(gvr schema.GroupVersionResource) (cache.SharedIndexInformer, bool) {
			return nil, false
		},
		APIServed: func(gvr schema.GroupVersionResource) bool {
			f.apisMu.Lock()
			defer f.apisMu.Unlock()
			return f.apis[gvr]
		},
		Enabled:     []NamedFactory{f.probes.factory(required...)},
		LabelKey:    labelKey,
		EventSink:   discardSink{},
		StopTimeout: fc.stopTimeout,
	}
	cfg.Enabled[0].OptionalAPIs = fc.optional
	if fc.inCluster {
		cfg.Enabled[0].Abandon = nil
	}
	if fc.secrets {
		cfg.Enabled[0].Secrets = func(spec *mpv1alpha1.ProviderConfigSpec) []mpv1alpha1.SecretReference {
			if spec.Rancher == nil {
				return nil
			}
			return []mpv1alpha1.SecretReference{probeSecret(spec.Rancher.ClusterID)}
		}
	}
	if fc.disabled {
		cfg.Disabled, cfg.Enabled = cfg.Enabled, nil
	}
	for _, pc := range fc.objects {
		if err := f.mp.Tracker().Add(pc); err != nil {
			t.Fatal(err)
		}
	}
	// Every ProviderConfig write gets a resourceVersion, as from an API server: the controller tells its own
	// writes' results from stale copies by them.
	f.mp.PrependReactor("*", "providerconfigs", clienttesting.ObjectReaction(&versioningTracker{ObjectTracker: f.mp.Tracker()}))
	f.events = &tenanttest.Events{}
	f.manager, f.controller = NewManagerAndController(cfg, f.mp, pcInformer, f.events,
		Ownership{Shard: fc.shard, Holders: fc.holders, Coverage: fc.coverage})
	if fc.startingGrace > 0 {
		f.controller.startingGrace = fc.startingGrace
	}

	factory.Start(ctx.Done())
	go pcInformer.RunWithContext(ctx)
	go func() {
		defer close(f.done)
		if fc.manual {
			<-ctx.Done()
			f.manager.StopAll(context.WithoutCancel(ctx))
			return
		}
		if err := f.controller.Run(ctx, workers); err != nil {
			t.Errorf("controller: %v", err)
		}
	}()
	t.Cleanup(f.stop)
	return f
}

// stop ends the controller and waits until every tenant has stopped.
func (f *fixture) stop() {
	f.cancel()
	<-f.done
	_ = f.router.Close()
}

func (f *fixture) serveAPI(gvr schema.GroupVersionResource) {
	f.apisMu.Lock()
	f.apis[gvr] = true
	f.apisMu.Unlock()
	f.controller.EnqueueAll()
}

func providerConfig(name, clusterID string) *mpv1alpha1.ProviderConfig {
	pc := &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if clusterID != "" {
		pc.Spec.Rancher = &mpv1alpha1.RancherConfig{ClusterID: clusterID}
	}
	return pc
}

func (f *fixture) create(pc *mpv1alpha1.ProviderConfig) {
	f.t.Helper()
	if _, err := f.mp.MultiprojectV1alpha1().ProviderConfigs().Create(f.ctx, pc, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) get(name string) *mpv1alpha1.ProviderConfig {
	f.t.Helper()
	pc, err := f.mp.MultiprojectV1alpha1().ProviderConfigs().Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return pc
}

// update changes the ProviderConfig as a user would, again on a conflict with the controller's own writes.
func (f *fixture) update(name string, mutate func(*mpv1alpha1.ProviderConfig)) {
	f.t.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pc := f.get(name)
		mutate(pc)
		_, err := f.mp.MultiprojectV1alpha1().ProviderConfigs().Update(f.ctx, pc, metav1.UpdateOptions{})
		return err
	}); err != nil {
		f.t.Fatal(err)
	}
}

// markDeleted stands in for the API server's handling of a DELETE of an object with finalizers.
func (f *fixture) markDeleted(name string) {
	f.update(name, func(pc *mpv1alpha1.ProviderConfig) {
		now := metav1.Now()
		pc.DeletionTimestamp = &now
	})
}

func (f *fixture) waitFor(what string, cond func() bool) {
	f.t.Helper()
	if err := wait.PollUntilContextTimeout(f.ctx, 5*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		f.t.Fatalf("waiting for %s: %v", what, err)
	}
}

func (f *fixture) condition(name, conditionType string) *metav1.Condition {
	pc, err := f.mp.MultiprojectV1alpha1().ProviderConfigs().Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return meta.FindStatusCondition(pc.Status.Conditions, conditionType)
}

func (f *fixture) conditionIs(name, conditionType string, status metav1.ConditionStatus, reason string) func() bool {
	return func() bool {
		c := f.condition(name, conditionType)
		return c != nil && c.Status == status && (reason == "" || c.Reason == reason)
	}
}

func (f *fixture) createNamespace(name, tenantName string) {
	f.t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{labelKey: tenantName}}}
	if _, err := f.kube.CoreV1().Namespaces().Create(f.ctx, ns, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) createService(namespace, name string) {
	f.t.Helper()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if _, err := f.kube.CoreV1().Services(namespace).Create(f.ctx, svc, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// versioningTracker stamps a new resourceVersion on every object it stores, as the API server does (the fake
// clientset's tracker leaves it empty), and refuses a write whose resourceVersion is not the stored one.
type versioningTracker struct {
	clienttesting.ObjectTracker

	mu   sync.Mutex
	last int
}

func (t *versioningTracker) stamp(gvr schema.GroupVersionResource, obj runtime.Object, ns string, store func() error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	if current, err := t.ObjectTracker.Get(gvr, ns, m.GetName()); err == nil && m.GetResourceVersion() != "" {
		if c, err := meta.Accessor(current); err == nil && c.GetResourceVersion() != m.GetResourceVersion() {
			return apierrors.NewConflict(gvr.GroupResource(), m.GetName(), errors.New("the object has been modified"))
		}
	}
	t.last++
	m.SetResourceVersion(strconv.Itoa(t.last))
	return store()
}

func (t *versioningTracker) Create(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.CreateOptions) error {
	return t.stamp(gvr, obj, ns, func() error { return t.ObjectTracker.Create(gvr, obj, ns, opts...) })
}

func (t *versioningTracker) Update(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.UpdateOptions) error {
	return t.stamp(gvr, obj, ns, func() error { return t.ObjectTracker.Update(gvr, obj, ns, opts...) })
}

func (t *versioningTracker) Patch(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.PatchOptions) error {
	return t.stamp(gvr, obj, ns, func() error { return t.ObjectTracker.Patch(gvr, obj, ns, opts...) })
}

type discardSink struct{}

func (discardSink) Create(e *corev1.Event) (*corev1.Event, error) { return e, nil }
func (discardSink) Update(e *corev1.Event) (*corev1.Event, error) { return e, nil }
func (discardSink) Patch(e *corev1.Event, _ []byte) (*corev1.Event, error) {
	return e, nil
}

var errBoom = errors.New("boom")

// objectName names the object a create, update or patch action wrote.
func objectName(a clienttesting.Action) string {
	switch x := a.(type) {
	case clienttesting.PatchAction:
		return x.GetName()
	case clienttesting.UpdateAction:
		if m, err := meta.Accessor(x.GetObject()); err == nil {
			return m.GetName()
		}
	case clienttesting.CreateAction:
		if m, err := meta.Accessor(x.GetObject()); err == nil {
			return m.GetName()
		}
	}
	return ""
}

func rancherSection(spec *mpv1alpha1.ProviderConfigSpec) **mpv1alpha1.RancherConfig {
	return &spec.Rancher
}
