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

package neg

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"

	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/names"
	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/options"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/neg/pusher"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/providerconfig"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

const (
	labelKey    = mpv1alpha1.DefaultProviderConfigLabelKey
	clusterName = "it-cluster"
	// clusterUID stands for the identity pkg/clusterid resolves in the binary.
	clusterUID = "it-cluster-uid"
)

var zones = []string{"europe-west1-b", "europe-west1-c", "europe-west1-d"}

// env is one test's world: a fake GCE, the manager's clients (its ServiceAccount), the shared informers routed
// into tenant views as the manager would have them, and the production Manager running the tenants' controllers.
type env struct {
	t         testing.TB
	ctx       context.Context
	gce       *fakegce.Server
	adminKube kubernetes.Interface
	admin     mpclientset.Interface
	kube      kubernetes.Interface
	mp        mpclientset.Interface
	manager   *framework.Manager
	tenancy   *framework.Tenancy
	// calls counts the requests of the manager's clients when envOptions.countCalls asked for it.
	calls *framework.APICalls
}

// envOptions vary what newEnvWith builds.
type envOptions struct {
	// countCalls counts every request the manager's clients send (the controllers' and the informers'), by verb and
	// resource, in env.calls.
	countCalls bool
	// resync is the shared informers' resync period (the manager's --resync-period); 0 disables it, as by default.
	resync time.Duration
	// batchPeriod is the manager's --neg-endpoint-batch-period; 0, as by default, syncs at once.
	batchPeriod time.Duration
	// logger, if set, is what the test's context logs with (a benchmark's quieter one); unset, the test's own.
	logger klog.Logger
}

func newEnv(t testing.TB) *env {
	t.Helper()
	return newEnvWith(t, envOptions{})
}

func newEnvWith(t testing.TB, opts envOptions) *env {
	t.Helper()
	// The manager's --kube-api-qps/burst would be set for scale too; the test's own clients of its identity get
	// the same.
	fw := controlPlane.NewEnv(t, framework.EnvOptions{GCE: &fakegce.Options{}, QPS: 200, Burst: 400, Logger: opts.logger})
	var manager framework.ManagerOptions
	var calls *framework.APICalls
	if opts.countCalls {
		calls = &framework.APICalls{}
		manager.Wrap = calls.Wrap
	}
	return startNEG(t, fw, calls, manager, 500, func(o *options.Options) {
		o.ClientConnection.QPS, o.ClientConnection.Burst = 200, 400
		o.ResyncPeriod.Duration = opts.resync
		o.TenantControllers.NEGEndpointBatchPeriod = opts.batchPeriod
	})
}

// startNEG runs on fw the manager with the neg controller, which runs for each tenant the test starts, with gceQPS
// Compute Engine calls per second each. manager says how the manager's clients are counted or limited (calls, if
// not nil, is what it counts with), flags set what else the manager's flags would.
func startNEG(t testing.TB, fw *framework.Env, calls *framework.APICalls, manager framework.ManagerOptions, gceQPS float32,
	flags func(*options.Options)) *env {
	t.Helper()
	e := &env{t: t, ctx: fw.Ctx, gce: fw.GCE, adminKube: fw.AdminKube, admin: fw.Admin, kube: fw.Kube, mp: fw.MP, calls: calls}
	manager.Controllers = []providerconfig.NamedFactory{framework.Enable(framework.Descriptor(names.NEGController), 5)}
	// The unfiltered Translations are shared too: there the translators meet other tenants' claims of custom NEG
	// names, as the manager's do.
	manager.Served = []schema.GroupVersionResource{informerset.Services, informerset.EndpointSlices, informerset.Nodes, informerset.Translations}
	manager.Flags = func(o *options.Options) {
		o.TenantControllers.ClusterName, o.TenantControllers.ClusterUID = clusterName, clusterUID
		o.TenantControllers.GCEEndpoint = e.gce.Endpoint()
		o.TenantControllers.GCEQPS, o.TenantControllers.GCEBurst = gceQPS, int(gceQPS)
		// The tests' NEGs outlive their tenants' Translations only where a test says so.
		o.TenantControllers.NEGGCPeriod = 0
		flags(o)
	}
	e.manager = framework.StartManager(t, fw, manager)
	e.tenancy = e.manager.Tenancy()
	return e
}

// tenantRun is one ProviderConfig and its neg controller.
type tenantRun struct {
	e       *env
	name    string
	project string
	tenant  *framework.Tenant
}

// newTenant makes a tenant; its name carries a random suffix because tenants are cluster-wide and a test's leftover
// objects (a namespace still terminating) must not reach another test's controllers.
func (e *env) newTenant(prefix, project string) *tenantRun {
	e.t.Helper()
	return e.newTenantWith(prefix, project, framework.TenantOptions{})
}

// newPusherTenant makes a tenant whose neg controller is built as its pusher alone, for Translations the test
// writes itself.
func (e *env) newPusherTenant(prefix, project string) *tenantRun {
	e.t.Helper()
	return e.newTenantWith(prefix, project, framework.TenantOptions{Constructors: map[string]tenant.Constructor{
		names.NEGController: func(_ context.Context, c *tenant.Context) (tenant.Controller, error) {
			p, err := pusher.New(c)
			if err != nil {
				return nil, err
			}
			return p, nil
		}}})
}

func (e *env) newTenantWith(prefix, project string, opts framework.TenantOptions) *tenantRun {
	e.t.Helper()
	name := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1_000_000_000)
	pc := &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: mpv1alpha1.ProviderConfigSpec{GCP: &mpv1alpha1.GCPConfig{ProjectID: project, Network: "default"}}}
	return &tenantRun{e: e, name: name, project: project, tenant: e.manager.Create(pc, opts)}
}

// existingTenant is the tenant of a ProviderConfig the test applied itself.
func (e *env) existingTenant(name, project string) *tenantRun {
	e.t.Helper()
	return &tenantRun{e: e, name: name, project: project, tenant: e.manager.Existing(name, framework.TenantOptions{})}
}

// start runs the tenant's neg controller (translator and pusher) with empty queues.
func (tr *tenantRun) start() {
	tr.e.t.Helper()
	tr.tenant.Start()
}

func (tr *tenantRun) stop() { tr.tenant.Stop() }

// condition is the tenant's NEGReady condition as the Manager reports it.
func (tr *tenantRun) condition() (metav1.Condition, bool) {
	return tr.tenant.Condition(mpv1alpha1.ProviderConfigConditionNEGReady)
}

// namespace creates a namespace for the test and labels it for the tenant.
func (tr *tenantRun) namespace() string {
	e := tr.e
	e.t.Helper()
	ns := controlPlane.CreateNamespace(e.t)
	tr.label(ns)
	return ns
}

func (tr *tenantRun) label(ns string) {
	e := tr.e
	e.t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, labelKey, tr.name)
	if _, err := e.adminKube.CoreV1().Namespaces().Patch(e.ctx, ns, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// nodes creates count Nodes per zone, labeled for the tenant (visible only to it) or, with tenantName "", shared.
// They are deleted when the test ends.
func (e *env) nodes(prefix, tenantName string, perZone int) {
	e.t.Helper()
	for zi, zone := range zones {
		for i := range perZone {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%c-%d", prefix, 'b'+zi, i),
				Labels: map[string]string{corev1.LabelTopologyZone: zone}}}
			if tenantName != "" {
				n.Labels[labelKey] = tenantName
			}
			if _, err := e.adminKube.CoreV1().Nodes().Create(e.ctx, n, metav1.CreateOptions{}); err != nil {
				e.t.Fatal(err)
			}
			e.t.Cleanup(func() {
				_ = e.adminKube.CoreV1().Nodes().Delete(context.Background(), n.Name, metav1.DeleteOptions{})
			})
		}
	}
}

// service creates a selector-less Service (so no EndpointSlice controller competes with the test's slices) with
// the given neg annotation and ports named http (80 → 8080) and https (443 → 8443).
func (e *env) service(ns, name, annotation string) *corev1.Service {
	e.t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{negapi.AnnotationKey: annotation}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP},
			{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP},
		}},
	}
	out, err := e.adminKube.CoreV1().Services(ns).Create(e.ctx, svc, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// endpoint is one Pod: its IP and its Node (zone field left to the Node's label for every other endpoint).
type endpoint struct {
	ip, node, zone string
	zoneIndex      int
}

// podsIn makes counts[i] endpoints on the nodes of zones[i] (nodes named <nodePrefix>-<zone letter>-<i>), 50 per
// node, with IPs unique within the test.
func podsIn(nodePrefix string, ipBase int, perZoneNodes int, counts ...int) []endpoint {
	var out []endpoint
	for zi, n := range counts {
		for i := range n {
			ep := endpoint{ip: fmt.Sprintf("10.%d.%d.%d", ipBase+zi, i/250, i%250+1),
				node: fmt.Sprintf("%s-%c-%d", nodePrefix, 'b'+zi, (i/50)%perZoneNodes), zoneIndex: zi}
			if i%2 == 0 {
				ep.zone = zones[zi]
			}
			out = append(out, ep)
		}
	}
	return out
}

// setSlices makes the Service port's EndpointSlices hold exactly eps, 100 per slice as the EndpointSlice controller
// does, creating, updating and deleting slices named <service>-<port>-<i>.
func (e *env) setSlices(ns, service, portName string, port int32, eps []endpoint) {
	e.t.Helper()
	client := e.adminKube.DiscoveryV1().EndpointSlices(ns)
	want := (len(eps) + 99) / 100
	for i := 0; i*100 < len(eps); i++ {
		s := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%s-%d", service, portName, i),
				Labels: map[string]string{discoveryv1.LabelServiceName: service}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(portName), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
		}
		for _, ep := range eps[i*100 : min(len(eps), (i+1)*100)] {
			de := discoveryv1.Endpoint{Addresses: []string{ep.ip}, NodeName: ptr.To(ep.node),
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}
			if ep.zone != "" {
				de.Zone = ptr.To(ep.zone)
			}
			s.Endpoints = append(s.Endpoints, de)
		}
		existing, err := client.Get(e.ctx, s.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = client.Create(e.ctx, s, metav1.CreateOptions{})
		case err == nil:
			s.ResourceVersion = existing.ResourceVersion
			_, err = client.Update(e.ctx, s, metav1.UpdateOptions{})
		}
		if err != nil {
			e.t.Fatal(err)
		}
	}
	for i := want; ; i++ {
		err := client.Delete(e.ctx, fmt.Sprintf("%s-%s-%d", service, portName, i), metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		if err != nil {
			e.t.Fatal(err)
		}
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

// translation returns the Translation or nil when it does not exist.
func (e *env) translation(ns, name string) *mpv1alpha1.Translation {
	e.t.Helper()
	tr, err := e.admin.MultiprojectV1alpha1().Translations(ns).Get(e.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return tr
}

// synced reports whether the pusher has pushed the Translation's current generation.
func synced(tr *mpv1alpha1.Translation) bool {
	if tr == nil {
		return false
	}
	for _, c := range tr.Status.Conditions {
		if c.Type == mpv1alpha1.TranslationConditionSynced {
			return c.Status == metav1.ConditionTrue && c.ObservedGeneration == tr.Generation
		}
	}
	return false
}

// gceMatches reports whether GCE holds exactly eps (per zone) in the NEGs named name of the project, ports
// included, and nothing else in those zones.
func (e *env) gceMatches(project, name string, port int64, eps []endpoint) (bool, string) {
	want := map[string]map[string]bool{}
	for _, z := range zones {
		want[z] = map[string]bool{}
	}
	for _, ep := range eps {
		want[zones[ep.zoneIndex]][fmt.Sprintf("%s/%s:%d", ep.node, ep.ip, port)] = true
	}
	for _, z := range zones {
		got, ok := e.gce.Endpoints(project, z, name)
		if !ok {
			return false, fmt.Sprintf("no NEG %s in %s", name, z)
		}
		if len(got) != len(want[z]) {
			return false, fmt.Sprintf("NEG %s in %s has %d endpoints, want %d", name, z, len(got), len(want[z]))
		}
		for _, g := range got {
			if !want[z][fmt.Sprintf("%s/%s:%d", g.Instance, g.IpAddress, g.Port)] {
				return false, fmt.Sprintf("NEG %s in %s has unexpected endpoint %s/%s:%d", name, z, g.Instance, g.IpAddress, g.Port)
			}
		}
	}
	return true, ""
}

// negsGone reports whether no NEG named name exists in the project.
func (e *env) negsGone(project, name string) bool {
	for _, z := range zones {
		if _, ok := e.gce.NEG(project, z, name); ok {
			return false
		}
	}
	return true
}

var gcKnowsTranslations sync.Once

// waitGCKnowsTranslations waits until kube-controller-manager's garbage collector tracks Translations. It learns
// about CRDs by periodic discovery, and the CRDs are installed after it starts; until then it would delete a
// Service without waiting for its Translations. The probe: a ConfigMap owning a Translation (no finalizer), deleted
// in the background, whose Translation the collector then deletes.
func (e *env) waitGCKnowsTranslations(ns string) {
	e.t.Helper()
	gcKnowsTranslations.Do(func() {
		e.waitFor("the garbage collector to track Translations", 120*time.Second, func() (bool, error) {
			owner, err := e.adminKube.CoreV1().ConfigMaps(ns).Create(e.ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "gc-probe-"}}, metav1.CreateOptions{})
			if err != nil {
				return false, err
			}
			probe := &mpv1alpha1.Translation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: owner.Name,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}}}
			if _, err := e.admin.MultiprojectV1alpha1().Translations(ns).Create(e.ctx, probe, metav1.CreateOptions{}); err != nil {
				return false, err
			}
			if err := e.adminKube.CoreV1().ConfigMaps(ns).Delete(e.ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
				return false, err
			}
			err = wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
				return e.translation(ns, owner.Name) == nil, nil
			})
			if err != nil {
				_ = e.admin.MultiprojectV1alpha1().Translations(ns).Delete(e.ctx, owner.Name, metav1.DeleteOptions{})
				return false, nil
			}
			return true, nil
		})
	})
}
