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

package negpusher

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	compute "google.golang.org/api/compute/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"

	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/names"
	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/options"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/neg/pusher"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/providerconfig"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

const labelKey = mpv1alpha1.DefaultProviderConfigLabelKey

var zones = []string{"europe-west1-b", "europe-west1-c", "europe-west1-d"}

// env is one test's world: a namespace, a fake GCE, the manager's clients (its ServiceAccount), shared informers
// routed into tenant views, and the production Manager running the tenants' pushers.
type env struct {
	t         *testing.T
	ctx       context.Context
	namespace string
	gce       *fakegce.Server
	admin     mpclientset.Interface
	adminKube kubernetes.Interface
	kube      kubernetes.Interface
	mp        mpclientset.Interface
	manager   *framework.Manager
	tenancy   *framework.Tenancy
}

func newEnv(t *testing.T) *env { return newEnvWith(t, fakegce.Options{}) }

// newEnvWith takes the fake GCE's options, e.g. OperationPolls to make every operation need a wait.
func newEnvWith(t *testing.T, gceOptions fakegce.Options) *env {
	t.Helper()
	fw := controlPlane.NewEnv(t, framework.EnvOptions{GCE: &gceOptions})
	e := &env{t: t, ctx: fw.Ctx, namespace: controlPlane.CreateNamespace(t), gce: fw.GCE, admin: fw.Admin, adminKube: fw.AdminKube,
		kube: fw.Kube, mp: fw.MP}
	// The neg controller as the manager knows it, built as its pusher alone: the tests write the Translations.
	pusherOnly := framework.Enable(framework.Descriptor(names.NEGController), 2)
	pusherOnly.New = func(_ context.Context, c *tenant.Context) (tenant.Controller, error) {
		p, err := pusher.New(c)
		if err != nil {
			return nil, err
		}
		return p, nil
	}
	e.manager = framework.StartManager(t, fw, framework.ManagerOptions{
		Controllers: []providerconfig.NamedFactory{pusherOnly},
		Served:      []schema.GroupVersionResource{informerset.Translations},
		Flags: func(o *options.Options) {
			o.TenantControllers.ClusterName, o.TenantControllers.ClusterUID = "it-cluster", "it-cluster-uid"
			o.TenantControllers.GCEEndpoint = e.gce.Endpoint()
			o.TenantControllers.GCEQPS, o.TenantControllers.GCEBurst = 200, 200
			o.TenantControllers.NEGGCPeriod = 0
		},
	})
	e.tenancy = e.manager.Tenancy()
	return e
}

// tenantRun is one ProviderConfig and its pusher.
type tenantRun struct {
	e       *env
	name    string
	project string
	tenant  *framework.Tenant
}

// newTenant makes a tenant named after the test's namespace and suffix: tenants are cluster-wide, and a
// Translation another test left behind (its namespace terminating, its finalizer held) must not reach this test's
// pushers.
func (e *env) newTenant(suffix, project string) *tenantRun {
	e.t.Helper()
	name := e.namespace + "-" + suffix
	pc := &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: mpv1alpha1.ProviderConfigSpec{GCP: &mpv1alpha1.GCPConfig{ProjectID: project, Network: "default"}}}
	return &tenantRun{e: e, name: name, project: project, tenant: e.manager.Create(pc, framework.TenantOptions{})}
}

// start runs a new pusher (an empty cache, as after a process restart).
func (tr *tenantRun) start() {
	tr.e.t.Helper()
	tr.tenant.Start()
}

// stop ends the pusher and waits for it; a no-op when it is not running.
func (tr *tenantRun) stop() { tr.tenant.Stop() }

// tctx is the Context the pusher was last built with.
func (tr *tenantRun) tctx() *tenant.Context { return tr.tenant.Context(names.NEGController) }

// condition is the tenant's NEGReady condition as the Manager reports it.
func (tr *tenantRun) condition() (metav1.Condition, bool) {
	return tr.tenant.Condition(mpv1alpha1.ProviderConfigConditionNEGReady)
}

// translation builds a Translation of tenant with one NEG per zone; counts[i] endpoints in zones[i].
func (e *env) translation(tenantName, name string, counts ...int) *mpv1alpha1.Translation {
	tr := &mpv1alpha1.Translation{ObjectMeta: metav1.ObjectMeta{Namespace: e.namespace, Name: name,
		Labels:     map[string]string{labelKey: tenantName},
		Finalizers: []string{mpv1alpha1.TranslationDeleterFinalizer}}}
	for i, n := range counts {
		tr.Spec.Resources = append(tr.Spec.Resources, negResource(e.namespace, name, zones[i], n))
	}
	return tr
}

func negResource(namespace, name, zone string, n int) mpv1alpha1.BackendResource {
	params := &mpv1alpha1.NetworkEndpointGroupParameters{Network: "default", Port: 8080}
	zi := zone[len(zone)-1] - 'a'
	for i := range n {
		params.Endpoints = append(params.Endpoints, mpv1alpha1.NetworkEndpoint{
			Instance:  fmt.Sprintf("node-%s-%d", zone[len(zone)-1:], i/110),
			IPAddress: fmt.Sprintf("10.%d.%d.%d", zi, i/250, i%250+1),
		})
	}
	return mpv1alpha1.BackendResource{Kind: mpv1alpha1.BackendResourceKindNetworkEndpointGroup, Name: "k8s1-" + name,
		Zone: zone, Description: fmt.Sprintf(`{"cluster":"it","service":"%s/%s"}`, namespace, name), NetworkEndpointGroup: params}
}

func (e *env) create(tr *mpv1alpha1.Translation) *mpv1alpha1.Translation {
	e.t.Helper()
	out, err := e.admin.MultiprojectV1alpha1().Translations(tr.Namespace).Create(e.ctx, tr, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("creating Translation %s: %v", tr.Name, err)
	}
	return out
}

func (e *env) get(name string) (*mpv1alpha1.Translation, error) {
	return e.admin.MultiprojectV1alpha1().Translations(e.namespace).Get(e.ctx, name, metav1.GetOptions{})
}

// update changes a Translation's spec as the translator would, retrying on conflicts with the pusher's writes.
func (e *env) update(name string, change func(*mpv1alpha1.Translation)) {
	e.t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		tr, err := e.get(name)
		if err != nil {
			return false, err
		}
		change(tr)
		_, err = e.admin.MultiprojectV1alpha1().Translations(e.namespace).Update(ctx, tr, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		e.t.Fatalf("updating Translation %s: %v", name, err)
	}
}

func (e *env) waitFor(what string, timeout time.Duration, cond func() (bool, error)) {
	e.t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond()
	})
	if err != nil {
		e.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// waitSynced waits for Synced=True at the Translation's current generation and returns it.
func (e *env) waitSynced(name string) *mpv1alpha1.Translation {
	e.t.Helper()
	return e.waitCondition(name, metav1.ConditionTrue, pusher.ReasonSynced)
}

func (e *env) waitCondition(name string, status metav1.ConditionStatus, reason string) *mpv1alpha1.Translation {
	e.t.Helper()
	var tr *mpv1alpha1.Translation
	e.waitFor(fmt.Sprintf("Translation %s Synced=%s/%s", name, status, reason), 60*time.Second, func() (bool, error) {
		var err error
		if tr, err = e.get(name); err != nil {
			return false, err
		}
		for _, c := range tr.Status.Conditions {
			if c.Type == mpv1alpha1.TranslationConditionSynced {
				return c.Status == status && c.Reason == reason && c.ObservedGeneration == tr.Generation, nil
			}
		}
		return false, nil
	})
	return tr
}

// waitGone waits until the Translation no longer exists.
func (e *env) waitGone(name string) {
	e.t.Helper()
	e.waitFor("Translation "+name+" to be gone", 60*time.Second, func() (bool, error) {
		_, err := e.get(name)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// endpoints returns the endpoint count of a NEG in GCE, or -1 when it does not exist.
func (e *env) endpoints(project, zone, name string) int {
	eps, ok := e.gce.Endpoints(project, zone, name)
	if !ok {
		return -1
	}
	return len(eps)
}

// checkEndpoints checks that GCE holds exactly the endpoints the resource lists.
func (e *env) checkEndpoints(project string, res mpv1alpha1.BackendResource) {
	e.t.Helper()
	eps, ok := e.gce.Endpoints(project, res.Zone, res.Name)
	if !ok {
		e.t.Errorf("NEG %s in %s does not exist", res.Name, res.Zone)
		return
	}
	want := map[string]bool{}
	for _, ep := range res.NetworkEndpointGroup.Endpoints {
		want[fmt.Sprintf("%s/%s:%d", ep.Instance, ep.IPAddress, res.NetworkEndpointGroup.Port)] = true
	}
	got := map[string]bool{}
	for _, ep := range eps {
		got[fmt.Sprintf("%s/%s:%d", ep.Instance, ep.IpAddress, ep.Port)] = true
	}
	missing, extra := 0, 0
	for k := range want {
		if !got[k] {
			missing++
		}
	}
	for k := range got {
		if !want[k] {
			extra++
		}
	}
	if missing+extra > 0 {
		e.t.Errorf("NEG %s in %s: %d endpoints missing, %d extra (GCE has %d, the spec %d)", res.Name, res.Zone, missing, extra, len(got), len(want))
	}
}

func seedForeign(t *testing.T, gce *fakegce.Server, project, zone, name string) {
	t.Helper()
	neg := &compute.NetworkEndpointGroup{Name: name, Description: "created by hand", NetworkEndpointType: "GCE_VM_IP_PORT", DefaultPort: 80}
	if _, err := gce.SeedNEG(project, zone, neg, &compute.NetworkEndpoint{Instance: "vm-1", IpAddress: "192.168.0.1"}); err != nil {
		t.Fatal(err)
	}
}

var gcKnowsTranslations sync.Once

// waitGCKnowsTranslations waits until kube-controller-manager's garbage collector tracks Translations. It learns
// about CRDs by periodic discovery (every 30 s), and the CRDs are installed after it starts; until then it would
// delete a Service without waiting for its Translations. The probe: a ConfigMap owning a Translation (no
// finalizer), deleted in the foreground, blocks until the collector has deleted the Translation.
func (e *env) waitGCKnowsTranslations() {
	e.t.Helper()
	gcKnowsTranslations.Do(func() {
		e.waitFor("the garbage collector to track Translations", 120*time.Second, func() (bool, error) {
			owner, err := e.adminKube.CoreV1().ConfigMaps(e.namespace).Create(e.ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "gc-probe-"}}, metav1.CreateOptions{})
			if err != nil {
				return false, err
			}
			probe := &mpv1alpha1.Translation{ObjectMeta: metav1.ObjectMeta{Namespace: e.namespace, Name: owner.Name,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}}}
			if _, err := e.admin.MultiprojectV1alpha1().Translations(e.namespace).Create(e.ctx, probe, metav1.CreateOptions{}); err != nil {
				return false, err
			}
			// Background deletion: the collector deletes the dependent only if it knows the resource.
			if err := e.adminKube.CoreV1().ConfigMaps(e.namespace).Delete(e.ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
				return false, err
			}
			err = wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
				_, err := e.get(owner.Name)
				return apierrors.IsNotFound(err), nil
			})
			if err != nil {
				_ = e.admin.MultiprojectV1alpha1().Translations(e.namespace).Delete(e.ctx, owner.Name, metav1.DeleteOptions{})
				return false, nil
			}
			return true, nil
		})
	})
}

// waitCacheCurrent waits until the shared Translation informer, which every pusher reads, holds the Translation as
// the API server has it now: a pusher started before would act on an older status.
func (e *env) waitCacheCurrent(name string) {
	e.t.Helper()
	e.waitFor("the informer to hold Translation "+name+" as stored", 30*time.Second, func() (bool, error) {
		stored, err := e.get(name)
		if err != nil {
			return false, err
		}
		cached, ok, err := e.tenancy.Informers[informerset.Translations].GetIndexer().GetByKey(e.namespace + "/" + name)
		if err != nil || !ok {
			return false, err
		}
		return cached.(*mpv1alpha1.Translation).ResourceVersion == stored.ResourceVersion, nil
	})
}
