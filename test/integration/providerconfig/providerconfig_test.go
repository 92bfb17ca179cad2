//go:build integration

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
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"

	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/options"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/registry"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/tenancy"
	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

const labelKey = mpv1alpha1.DefaultProviderConfigLabelKey

// views records, per tenant and probe generation, which Services the tenant's view currently holds, as told by
// its events.
type views struct {
	mu     sync.Mutex
	seen   map[string]map[string]bool // tenant → namespace/name → present
	starts map[string][]string        // tenant → cluster IDs of the probes started, in order
	runs   map[string]int             // tenant → probes running now
}

func newViews() *views {
	return &views{seen: map[string]map[string]bool{}, starts: map[string][]string{}, runs: map[string]int{}}
}

func (v *views) record(tenantName string, obj any, present bool) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.seen[tenantName] == nil {
		v.seen[tenantName] = map[string]bool{}
	}
	v.seen[tenantName][svc.Namespace+"/"+svc.Name] = present
}

func (v *views) sees(tenantName, key string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.seen[tenantName][key]
}

func (v *views) startedWith(tenantName string) []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.starts[tenantName])
}

func (v *views) running(tenantName string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.runs[tenantName]
}

// probeDescriptor is a per-tenant controller configured by spec.rancher: it watches the tenant's Services and
// reports Running once its view has synced.
func (v *views) probeDescriptor() *registry.Descriptor {
	return &registry.Descriptor{Name: "probe", DefaultConcurrentSyncs: 1, Factory: tenant.Factory{
		ConditionType: mpv1alpha1.ProviderConfigConditionNamespaceProjectReady,
		Section:       tenant.SectionOf(func(spec *mpv1alpha1.ProviderConfigSpec) **mpv1alpha1.RancherConfig { return &spec.Rancher }),
		New: func(ctx context.Context, c *tenant.Context) (tenant.Controller, error) {
			informer, err := c.Informers.Informer(informerset.Services)
			if err != nil {
				return nil, err
			}
			name := c.Name()
			// A new probe's view replays the tenant's objects; forget what the previous one was told. Before the
			// handler is added: its replay starts at once, and a reset after it could drop what it has told.
			v.mu.Lock()
			v.seen[name] = map[string]bool{}
			v.mu.Unlock()
			reg, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
				AddFunc:    func(obj any) { v.record(name, obj, true) },
				UpdateFunc: func(_, obj any) { v.record(name, obj, true) },
				DeleteFunc: func(obj any) { v.record(name, obj, false) },
			})
			if err != nil {
				return nil, err
			}
			v.mu.Lock()
			v.starts[name] = append(v.starts[name], c.ProviderConfig.Spec.Rancher.ClusterID)
			v.mu.Unlock()
			return probe{c: c, reg: reg, views: v}, nil
		},
	}}
}

type probe struct {
	c     *tenant.Context
	reg   cache.ResourceEventHandlerRegistration
	views *views
}

func (p probe) Run(ctx context.Context) {
	p.views.mu.Lock()
	p.views.runs[p.c.Name()]++
	p.views.mu.Unlock()
	defer func() {
		p.views.mu.Lock()
		p.views.runs[p.c.Name()]--
		p.views.mu.Unlock()
	}()
	if cache.WaitForCacheSync(ctx.Done(), p.reg.HasSynced) {
		p.c.Condition.Report(metav1.ConditionTrue, "Running", "probe running")
	}
	<-ctx.Done()
}

// env is one test's manager and clients.
type env struct {
	t     *testing.T
	ctx   context.Context
	kube  kubernetes.Interface
	mp    mpclientset.Interface
	views *views
	// stopManager stops the manager started last, if any, and waits for it.
	stopManager func()
}

func newEnv(t *testing.T) *env {
	t.Helper()
	fw := controlPlane.NewEnv(t, framework.EnvOptions{})
	e := &env{t: t, ctx: fw.Ctx, kube: fw.AdminKube, mp: fw.Admin, views: newViews(), stopManager: func() {}}
	t.Cleanup(func() {
		e.stopManager()
		// Leave no ProviderConfig (and its finalizer) behind for the next test.
		pcs, err := e.mp.MultiprojectV1alpha1().ProviderConfigs().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return
		}
		for _, pc := range pcs.Items {
			_, _ = e.mp.MultiprojectV1alpha1().ProviderConfigs().Patch(context.Background(), pc.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			_ = e.mp.MultiprojectV1alpha1().ProviderConfigs().Delete(context.Background(), pc.Name, metav1.DeleteOptions{})
		}
	})
	return e
}

// startManager runs the manager in process, as the manifests' ServiceAccount, with the probe as its only controller.
func (e *env) startManager() {
	e.t.Helper()
	e.startManagerWith(e.views.probeDescriptor())
}

// startManagerWith runs the manager in process, as the manifests' ServiceAccount, with the given controllers.
func (e *env) startManagerWith(descriptors ...*registry.Descriptor) {
	e.t.Helper()
	reg, err := registry.New(descriptors...)
	if err != nil {
		e.t.Fatal(err)
	}
	c := controlPlane.ManagerProcessConfig(e.t, e.ctx, framework.ManagerProcess{Descriptors: reg, Flags: func(o *options.Options) {
		o.Controllers = nil
		for _, d := range descriptors {
			o.Controllers = append(o.Controllers, d.Name)
			*o.ConcurrentSyncs[d.Name] = 1
		}
		o.ProviderConfigWorkers = 2
		o.CacheSyncTimeout.Duration = time.Minute
	}})
	e.stopManager = framework.RunManager(e.t, e.ctx, c, reg)
}

func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	if err := wait.PollUntilContextTimeout(e.ctx, 20*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		e.t.Fatalf("waiting for %s: %v", what, err)
	}
}

func (e *env) createProviderConfig(name, clusterID string) {
	e.t.Helper()
	pc := &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: mpv1alpha1.ProviderConfigSpec{
		Rancher: &mpv1alpha1.RancherConfig{ClusterID: clusterID}}}
	if _, err := e.mp.MultiprojectV1alpha1().ProviderConfigs().Create(e.ctx, pc, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) providerConfig(name string) (*mpv1alpha1.ProviderConfig, error) {
	return e.mp.MultiprojectV1alpha1().ProviderConfigs().Get(e.ctx, name, metav1.GetOptions{})
}

func (e *env) ready(name string) func() bool {
	return func() bool {
		pc, err := e.providerConfig(name)
		return err == nil && meta.IsStatusConditionTrue(pc.Status.Conditions, mpv1alpha1.ProviderConfigConditionReady) &&
			pc.Status.ObservedGeneration == pc.Generation
	}
}

func (e *env) gone(name string) func() bool {
	return func() bool {
		_, err := e.providerConfig(name)
		return apierrors.IsNotFound(err)
	}
}

// tenantNamespace creates a namespace labeled for the tenant (or unlabeled when tenantName is "").
func (e *env) tenantNamespace(tenantName string) string {
	e.t.Helper()
	ns := controlPlane.CreateNamespace(e.t)
	if tenantName != "" {
		e.label("namespaces", "", ns, tenantName)
	}
	return ns
}

// label sets (or, with "", removes) the tenant label on a namespace or a Service.
func (e *env) label(resource, namespace, name, tenantName string) {
	e.t.Helper()
	value := `"` + tenantName + `"`
	if tenantName == "" {
		value = "null"
	}
	patch := []byte(`{"metadata":{"labels":{"` + labelKey + `":` + value + `}}}`)
	var err error
	if resource == "namespaces" {
		_, err = e.kube.CoreV1().Namespaces().Patch(e.ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	} else {
		_, err = e.kube.CoreV1().Services(namespace).Patch(e.ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) service(namespace, name string) string {
	e.t.Helper()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := e.kube.CoreV1().Services(namespace).Create(e.ctx, svc, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	return namespace + "/" + name
}

func TestOneProviderConfigGetsFinalizerControllersAndStatus(t *testing.T) {
	e := newEnv(t)
	ns := e.tenantNamespace("solo")
	web := e.service(ns, "web")
	e.startManager()
	e.createProviderConfig("solo", "c-1")

	e.waitFor("Ready", e.ready("solo"))
	pc, _ := e.providerConfig("solo")
	if !slices.Contains(pc.Finalizers, mpv1alpha1.ProviderConfigCleanupFinalizer) {
		t.Errorf("finalizers %v lack %s", pc.Finalizers, mpv1alpha1.ProviderConfigCleanupFinalizer)
	}
	if c := meta.FindStatusCondition(pc.Status.Conditions, mpv1alpha1.ProviderConfigConditionNamespaceProjectReady); c == nil || c.Reason != "Running" {
		t.Errorf("the controller's condition is %+v, want reason Running", c)
	}
	e.waitFor("the tenant's Service in its view", func() bool { return e.views.sees("solo", web) })
}

func TestSeveralTenantsAndDeletionLeavesOthersWorking(t *testing.T) {
	e := newEnv(t)
	nsA, nsB := e.tenantNamespace("alpha"), e.tenantNamespace("beta")
	e.startManager()
	e.createProviderConfig("alpha", "c-1")
	e.createProviderConfig("beta", "c-2")
	e.waitFor("both Ready", func() bool { return e.ready("alpha")() && e.ready("beta")() })
	a1, b1 := e.service(nsA, "a1"), e.service(nsB, "b1")
	e.waitFor("each tenant's Service", func() bool { return e.views.sees("alpha", a1) && e.views.sees("beta", b1) })
	if e.views.sees("alpha", b1) || e.views.sees("beta", a1) {
		t.Fatal("a tenant saw the other's Service")
	}

	if err := e.mp.MultiprojectV1alpha1().ProviderConfigs().Delete(e.ctx, "alpha", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("alpha to be deleted through its finalizer", e.gone("alpha"))
	e.waitFor("alpha's controller to stop", func() bool { return e.views.running("alpha") == 0 })

	// The shared informers still run: beta keeps receiving events.
	b2 := e.service(nsB, "b2")
	e.waitFor("beta's new Service", func() bool { return e.views.sees("beta", b2) })
	if got := len(e.views.startedWith("beta")); got != 1 {
		t.Errorf("beta's controller started %d times; deleting alpha disturbed it", got)
	}
}

func TestSpecChangeRestartsTheController(t *testing.T) {
	e := newEnv(t)
	e.startManager()
	e.createProviderConfig("mover", "c-1")
	e.waitFor("Ready", e.ready("mover"))
	patch := []byte(`{"spec":{"rancher":{"clusterID":"c-2"}}}`)
	if _, err := e.mp.MultiprojectV1alpha1().ProviderConfigs().Patch(e.ctx, "mover", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("a restart with the new spec", func() bool { return slices.Equal(e.views.startedWith("mover"), []string{"c-1", "c-2"}) })
	e.waitFor("Ready at the new generation", e.ready("mover"))
	if n := e.views.running("mover"); n != 1 {
		t.Errorf("%d probes running after the restart, want 1", n)
	}
}

func TestFinalizerStrippedByHandStopsTheTenant(t *testing.T) {
	e := newEnv(t)
	e.startManager()
	e.createProviderConfig("stripped", "c-1")
	e.waitFor("Ready", e.ready("stripped"))
	if _, err := e.mp.MultiprojectV1alpha1().ProviderConfigs().Patch(e.ctx, "stripped", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.mp.MultiprojectV1alpha1().ProviderConfigs().Delete(e.ctx, "stripped", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the object to vanish", e.gone("stripped"))
	e.waitFor("its controller to stop", func() bool { return e.views.running("stripped") == 0 })
}

func TestManagerRestartRebuildsFromTheAPI(t *testing.T) {
	e := newEnv(t)
	ns := e.tenantNamespace("durable")
	svc := e.service(ns, "kept")
	e.startManager()
	e.createProviderConfig("durable", "c-1")
	e.waitFor("Ready", e.ready("durable"))
	e.stopManager()
	if n := e.views.running("durable"); n != 0 {
		t.Fatalf("%d probes still running after the manager stopped", n)
	}

	// While the manager is down, the tenant is deleted: its finalizer keeps it until the manager is back.
	if err := e.mp.MultiprojectV1alpha1().ProviderConfigs().Delete(e.ctx, "durable", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.providerConfig("durable"); err != nil {
		t.Fatalf("the finalizer did not hold the ProviderConfig while the manager was down: %v", err)
	}
	e.createProviderConfig("fresh", "c-9")
	e.startManager()
	e.waitFor("the deleted tenant cleaned up after the restart", e.gone("durable"))
	e.waitFor("the new tenant Ready", e.ready("fresh"))
	_ = svc
}

// TestTheNamespaceDecidesAndItsRelabelMovesObjects: a Service's own tenant label grants nothing (it stays with its
// namespace's tenant, which a Warning Event on the Service says), and relabeling a namespace moves every object in
// it, labeled or not.
func TestTheNamespaceDecidesAndItsRelabelMovesObjects(t *testing.T) {
	e := newEnv(t)
	nsA := e.tenantNamespace("left")
	nsB := e.tenantNamespace("right")
	e.startManager()
	e.createProviderConfig("left", "c-1")
	e.createProviderConfig("right", "c-2")
	e.waitFor("both Ready", func() bool { return e.ready("left")() && e.ready("right")() })

	claims := e.service(nsA, "claims-right")
	e.waitFor("left sees the Service", func() bool { return e.views.sees("left", claims) })
	e.label("services", nsA, "claims-right", "right")
	// The router records the Event while it routes the relabel, so once the Event exists the relabel has been
	// routed: had it moved the Service, right would see it and left would have been told it is gone.
	e.waitFor("a TenantLabelIgnored Warning on the Service", func() bool {
		return e.warned(nsA, "claims-right", tenancy.ReasonTenantLabelIgnored,
			labelKey+"=right is ignored: namespace "+nsA+" belongs to tenant left")
	})
	if !e.views.sees("left", claims) || e.views.sees("right", claims) {
		t.Errorf("after its label named right, left sees the Service: %t, right sees it: %t; want only left",
			e.views.sees("left", claims), e.views.sees("right", claims))
	}

	// A namespace relabel moves every object in it.
	inB := e.service(nsB, "follows-namespace")
	e.waitFor("right sees the namespace's Service", func() bool { return e.views.sees("right", inB) })
	e.label("namespaces", "", nsB, "left")
	e.waitFor("the namespace's Service to move to left", func() bool { return e.views.sees("left", inB) && !e.views.sees("right", inB) })
	// Labeled ones too: the Service labeled for right goes with its namespace, whichever way.
	e.label("namespaces", "", nsA, "right")
	e.waitFor("the labeled Service to move with its namespace to right", func() bool {
		return e.views.sees("right", claims) && !e.views.sees("left", claims)
	})
}

// warned reports whether the object namespace/name has a Warning Event of reason whose message contains contains.
func (e *env) warned(namespace, name, reason, contains string) bool {
	e.t.Helper()
	list, err := e.kube.CoreV1().Events(namespace).List(e.ctx, metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.name": name, "reason": reason}.String()})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, ev := range list.Items {
		if ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Message, contains) {
			return true
		}
	}
	return false
}
