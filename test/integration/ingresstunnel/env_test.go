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

package ingresstunnel

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	tunnelv1alpha1 "github.com/multiproject/api/pangolin/tunnel/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"

	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/names"
	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/options"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/providerconfig"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

const labelKey = mpv1alpha1.DefaultProviderConfigLabelKey

// env is one test's world: the manager's clients (its ServiceAccount), shared informers routed into tenant views
// as the manager builds them, the production Manager running the tenants' controllers, and admin clients for the
// fixtures.
type env struct {
	t         testing.TB
	ctx       context.Context
	adminKube kubernetes.Interface
	admin     mpclientset.Interface
	kube      kubernetes.Interface
	mp        mpclientset.Interface
	manager   *framework.Manager
	resources cache.SharedIndexInformer
	ingresses cache.SharedIndexInformer
	// requests counts the manager's writes (its clients' requests other than GET), by "METHOD path".
	requests *requestCounter
}

// newEnv builds the env; the manager's clients get qps and burst.
func newEnv(t testing.TB, qps float32, burst int) *env {
	t.Helper()
	// Benchmarks log only errors: the per-object V(2) lines would cost more than what is measured.
	verbosity := 5
	if _, ok := t.(*testing.B); ok {
		verbosity = 0
	}
	fw := controlPlane.NewEnv(t, framework.EnvOptions{
		Logger:   ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(verbosity))),
		AdminQPS: 1000, AdminBurst: 2000,
		QPS: qps, Burst: burst,
	})
	e := &env{t: t, ctx: fw.Ctx, adminKube: fw.AdminKube, admin: fw.Admin, kube: fw.Kube, mp: fw.MP,
		requests: &requestCounter{counts: map[string]int{}}}
	e.manager = framework.StartManager(t, fw, framework.ManagerOptions{
		Controllers: []providerconfig.NamedFactory{framework.Enable(framework.Descriptor(names.IngressTunnelController), 0)},
		Served: []schema.GroupVersionResource{informerset.Ingresses, informerset.Services, informerset.PangolinResources,
			informerset.PangolinTunnels},
		Flags: func(o *options.Options) { o.ClientConnection.QPS, o.ClientConnection.Burst = qps, int32(burst) },
		Wrap:  e.requests.wrap,
	})
	tn := e.manager.Tenancy()
	e.resources = tn.Informers[informerset.PangolinResources]
	e.ingresses = tn.Informers[informerset.Ingresses]
	return e
}

// tenantRun is one ProviderConfig and its running controller.
type tenantRun struct {
	e      *env
	name   string
	tenant *framework.Tenant
}

// startTenant creates the ProviderConfig name with spec.pangolin config and has the Manager run its controller with
// workers workers, until it reports its condition True.
func (e *env) startTenant(name string, config *mpv1alpha1.PangolinConfig, workers int) *tenantRun {
	e.t.Helper()
	pc := &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: mpv1alpha1.ProviderConfigSpec{Pangolin: config}}
	tr := &tenantRun{e: e, name: name, tenant: e.manager.Create(pc, framework.TenantOptions{Workers: workers})}
	tr.tenant.Start()
	e.waitFor("tenant "+name+" to report Running", 30*time.Second, func() (bool, error) {
		c, ok := tr.tenant.Condition(mpv1alpha1.ProviderConfigConditionIngressTunnelReady)
		return ok && c.Status == metav1.ConditionTrue, nil
	})
	return tr
}

func (tr *tenantRun) stop() { tr.tenant.Stop() }

// syncs is how many successful syncs the tenant's controller has made.
func (tr *tenantRun) syncs() float64 {
	v, _ := metrics.Syncs.Value(tr.name, names.IngressTunnelController, "success")
	return v
}

var notInName = regexp.MustCompile(`[^a-z0-9]+`)

// tenantName names a tenant after the test, so that a namespace an earlier test left terminating never belongs to
// a tenant of this one.
func (e *env) tenantName(suffix string) string {
	name := strings.Trim(notInName.ReplaceAllString(strings.ToLower(e.t.Name()), "-"), "-")
	if len(name) > 40 {
		name = strings.TrimRight(name[:40], "-")
	}
	return name + "-" + suffix
}

// tenantNamespace creates a namespace for the test that belongs to tenant through its label.
func (e *env) tenantNamespace(tenantName string) string {
	e.t.Helper()
	name := controlPlane.CreateNamespace(e.t)
	ns, err := e.adminKube.CoreV1().Namespaces().Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[labelKey] = tenantName
	if _, err := e.adminKube.CoreV1().Namespaces().Update(e.ctx, ns, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	return name
}

func (e *env) createTunnel(namespace, name string) {
	e.t.Helper()
	_, err := e.admin.TunnelV1alpha1().PangolinTunnels(namespace).Create(e.ctx, &tunnelv1alpha1.PangolinTunnel{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       tunnelv1alpha1.PangolinTunnelSpec{OrganizationRef: tunnelv1alpha1.OrganizationReference{Name: "org"}, SiteName: name},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
}

// seedObjects are the seed's three-host Ingress and its Service: app.example.com (/, /api), api.example.com
// (/v1, /v2) and admin.example.com (/), with named and numbered ports.
func seedObjects(namespace, name, class string) (*corev1.Service, *networkingv1.Ingress) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "demo-app"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Name: "http", Port: 80}, {Name: "api", Port: 8080},
		}},
	}
	p := func(path string, pathType networkingv1.PathType, port networkingv1.ServiceBackendPort) networkingv1.HTTPIngressPath {
		return networkingv1.HTTPIngressPath{Path: path, PathType: ptr.To(pathType),
			Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "demo-app", Port: port}}}
	}
	rule := func(host string, paths ...networkingv1.HTTPIngressPath) networkingv1.IngressRule {
		return networkingv1.IngressRule{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}}}
	}
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: networkingv1.IngressSpec{
			IngressClassName: ptr.To(class),
			Rules: []networkingv1.IngressRule{
				rule("app.example.com",
					p("/", networkingv1.PathTypePrefix, networkingv1.ServiceBackendPort{Name: "http"}),
					p("/api", networkingv1.PathTypePrefix, networkingv1.ServiceBackendPort{Name: "api"})),
				rule("api.example.com",
					p("/v1", networkingv1.PathTypePrefix, networkingv1.ServiceBackendPort{Number: 8080}),
					p("/v2", networkingv1.PathTypeExact, networkingv1.ServiceBackendPort{Number: 8080})),
				rule("admin.example.com", p("/", networkingv1.PathTypePrefix, networkingv1.ServiceBackendPort{Name: "http"})),
			},
		},
	}
	return svc, ing
}

func (e *env) createSeed(namespace, name, class string) *networkingv1.Ingress {
	e.t.Helper()
	svc, ing := seedObjects(namespace, name, class)
	if _, err := e.adminKube.CoreV1().Services(namespace).Create(e.ctx, svc, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	out, err := e.adminKube.NetworkingV1().Ingresses(namespace).Create(e.ctx, ing, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

func (e *env) updateIngress(namespace, name string, change func(*networkingv1.Ingress)) {
	e.t.Helper()
	ing, err := e.adminKube.NetworkingV1().Ingresses(namespace).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	change(ing)
	if _, err := e.adminKube.NetworkingV1().Ingresses(namespace).Update(e.ctx, ing, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// resources lists the PangolinResources of a namespace from the API server, by host.
func (e *env) resourcesByHost(namespace string) map[string]*tunnelv1alpha1.PangolinResource {
	e.t.Helper()
	list, err := e.admin.TunnelV1alpha1().PangolinResources(namespace).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]*tunnelv1alpha1.PangolinResource{}
	for i := range list.Items {
		r := &list.Items[i]
		parts := strings.SplitN(r.Spec.Name, "/", 3)
		out[parts[len(parts)-1]] = r
	}
	return out
}

// waitHosts waits until the namespace holds exactly one PangolinResource for each host, and returns them.
func (e *env) waitHosts(namespace string, timeout time.Duration, hosts ...string) map[string]*tunnelv1alpha1.PangolinResource {
	e.t.Helper()
	var got map[string]*tunnelv1alpha1.PangolinResource
	sort.Strings(hosts)
	e.waitFor(fmt.Sprintf("PangolinResources for %v in %s", hosts, namespace), timeout, func() (bool, error) {
		got = e.resourcesByHost(namespace)
		if len(got) != len(hosts) {
			return false, nil
		}
		for _, h := range hosts {
			if got[h] == nil {
				return false, nil
			}
		}
		return true, nil
	})
	return got
}

// events returns the reasons of the Events recorded on an Ingress, as the API server stores them.
func (e *env) eventCount(namespace, ingress, eventType, reason string) int {
	e.t.Helper()
	list, err := e.adminKube.CoreV1().Events(namespace).List(e.ctx, metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.kind": "Ingress", "involvedObject.name": ingress, "reason": reason, "type": eventType}.String()})
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for _, ev := range list.Items {
		n += int(max(ev.Count, 1))
	}
	return n
}

func (e *env) waitEvent(namespace, ingress, eventType, reason string, atLeast int) {
	e.t.Helper()
	e.waitFor(fmt.Sprintf("%d %s %s Event(s) on Ingress %s/%s", atLeast, eventType, reason, namespace, ingress), 30*time.Second, func() (bool, error) {
		return e.eventCount(namespace, ingress, eventType, reason) >= atLeast, nil
	})
}

func (e *env) waitFor(what string, timeout time.Duration, cond func() (bool, error)) {
	e.t.Helper()
	e.waitForEvery(what, timeout, 50*time.Millisecond, cond)
}

func (e *env) waitForEvery(what string, timeout, interval time.Duration, cond func() (bool, error)) {
	e.t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, interval, timeout, true, func(context.Context) (bool, error) {
		return cond()
	})
	if err != nil {
		e.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// requestCounter counts the write requests a client sends, by "METHOD path", whatever their outcome: a write that
// changed nothing is a write too, which resourceVersions would not show.
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method != http.MethodGet {
			c.mu.Lock()
			c.counts[req.Method+" "+req.URL.Path]++
			c.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

// count is how many requests of method to path were sent.
func (c *requestCounter) count(method, path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[method+" "+path]
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
