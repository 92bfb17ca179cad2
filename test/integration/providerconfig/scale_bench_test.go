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
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2/textlogger"
	"k8s.io/utils/ptr"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"

	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app"
	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/options"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/providerconfig"
	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
	"github.com/multiproject/multiproject-controller-manager/test/benchresult"
	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

// idleTenants is how many tenants BenchmarkIdleTenantsAndRestart runs (IDLE_TENANTS overrides it).
func idleTenants(b *testing.B) int {
	n := 1000
	if s := os.Getenv("IDLE_TENANTS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 2 {
			b.Fatalf("IDLE_TENANTS=%q: want a number ≥ 2", s)
		}
	}
	return n
}

// apiWrites keeps the write requests (create, update, patch, delete) of counts, by kind, and their total.
func apiWrites(counts map[string]int) (int, string) {
	n, parts := 0, []string{}
	for kind, c := range counts {
		if verb, _, _ := strings.Cut(kind, " "); verb == "create" || verb == "update" || verb == "patch" || verb == "delete" {
			n += c
			parts = append(parts, fmt.Sprintf("%s=%d", kind, c))
		}
	}
	return n, strings.Join(parts, " ")
}

// gathered sums the samples of a metric family of the in-process registry whose labels include every pair of want.
func gathered(b *testing.B, name string, want map[string]string) float64 {
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		b.Fatal(err)
	}
	sum := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue metric
				}
			}
			sum += value(m)
		}
	}
	return sum
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	}
	return 0
}

// BenchmarkIdleTenantsAndRestart runs the manager in process with every controller (neg with the fake GCE,
// namespace-project, ingress-tunnel) for idle tenants: ProviderConfigs with gcp, rancher and pangolin sections and
// no object to act on. It reports what one more idle tenant costs (goroutines, heap), the cold start to every
// tenant Ready, and then restarts the manager and counts every API write and mutating GCE call from the restart
// until every tenant's controllers run again and the ProviderConfig queue is empty, plus 10 s: a converged restart
// should write nothing. The client QPS is raised so that creating the tenants does not dominate.
func BenchmarkIdleTenantsAndRestart(b *testing.B) {
	n := idleTenants(b)
	for i := 0; i < b.N; i++ {
		runTenantsAndRestart(b, n, 0)
	}
}

// BenchmarkRestartAtScale is BenchmarkIdleTenantsAndRestart with 10 annotated Services per tenant (an EndpointSlice
// with an endpoint in each of three zones), all converged (every Translation synced, so every NEG in the fake GCE)
// before the restart: the restart must still write nothing and make no mutating GCE call.
func BenchmarkRestartAtScale(b *testing.B) {
	n := idleTenants(b)
	for i := 0; i < b.N; i++ {
		runTenantsAndRestart(b, n, 10)
	}
}

var benchZones = []string{"europe-west1-b", "europe-west1-c", "europe-west1-d"}

func runTenantsAndRestart(b *testing.B, n, services int) {
	// Logs go to stderr as the binary's do: a testing logger would keep every line in the benchmark's buffer,
	// and count it in the heap per tenant.
	fw := controlPlane.NewEnv(b, framework.EnvOptions{
		Logger:   textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(os.Stderr))),
		AdminQPS: 500, AdminBurst: 1000,
		GCE: &fakegce.Options{},
	})
	ctx, mp, kube, gce := fw.Ctx, fw.Admin, fw.AdminKube, fw.GCE
	// Each start counts its own manager's requests: writes the stopped manager's Event broadcaster still sends (the
	// last tenants' start Events, queued when it stopped) are not the restarted manager's.
	var calls *framework.APICalls

	var stop func()
	start := func() {
		calls = &framework.APICalls{}
		descriptors := app.NewControllerDescriptors()
		c := controlPlane.ManagerProcessConfig(b, ctx, framework.ManagerProcess{Descriptors: descriptors, Wrap: calls.Wrap,
			Flags: func(o *options.Options) {
				o.ClientConnection.QPS, o.ClientConnection.Burst = 500, 1000
				o.CacheSyncTimeout.Duration = time.Minute
				o.TenantControllers.ClusterName = "bench"
				o.TenantControllers.GCEEndpoint = gce.Endpoint()
			}})
		stop = framework.RunManager(b, ctx, c, descriptors)
	}
	b.Cleanup(func() { deleteTenants(mp, kube) })
	if services > 0 {
		createZoneNodes(b, ctx, kube)
	}
	create := func(from, to int) {
		sem := make(chan struct{}, 16)
		var wg sync.WaitGroup
		for i := from; i < to; i++ {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				if err := createTenantObjects(ctx, kube, i, services); err != nil {
					b.Error(err)
				}
				if _, err := mp.MultiprojectV1alpha1().ProviderConfigs().Create(ctx, idleTenant(i), metav1.CreateOptions{}); err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
		if b.Failed() {
			b.FailNow()
		}
	}
	allReady := func(what string, want int) {
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 15*time.Minute, true, func(ctx context.Context) (bool, error) {
			return readyTenants(ctx, mp) >= want && syncedTranslations(ctx, mp) >= want*services, nil
		}); err != nil {
			b.Fatalf("waiting for %s: %v", what, err)
		}
	}
	// The heap is what live objects take after a full collection (HeapAlloc); the spans that hold them
	// (HeapInuse) also count the allocator's partly empty spans, which depend on the size classes in use.
	heap := func() (goroutines int, live, inUse uint64) {
		var ms runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return runtime.NumGoroutine(), ms.HeapAlloc, ms.HeapInuse
	}
	// IDLE_HEAP_PROFILE=DIR writes the heap at one tenant and at all of them to DIR/one.pprof and DIR/all.pprof;
	// `go tool pprof -sample_index=inuse_space -base DIR/one.pprof DIR/all.pprof` shows what the other tenants cost.
	profileHeap := func(name string) {
		dir := os.Getenv("IDLE_HEAP_PROFILE")
		if dir == "" {
			return
		}
		f, err := os.Create(filepath.Join(dir, name+".pprof"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			b.Fatal(err)
		}
	}

	start()
	create(0, 1)
	allReady("the first tenant Ready", 1)
	g1, h1, spans1 := heap()
	profileHeap("one")
	began := time.Now()
	create(1, n)
	allReady(fmt.Sprintf("%d tenants Ready", n), n)
	coldStart := time.Since(began)
	// A measurement window, not a wait for a condition: a tenant's start leaves the ProviderConfig controller a
	// timer for StartingReportGrace (the look at a controller that has not reported), which an idle tenant no
	// longer holds once it has fired.
	time.Sleep(providerconfig.StartingReportGrace + time.Second)
	gN, hN, spansN := heap()
	profileHeap("all")
	per := "idle-tenant"
	if services > 0 {
		per = "tenant"
	}
	b.ReportMetric(float64(gN-g1)/float64(n-1), "goroutines/"+per)
	b.ReportMetric(float64(int64(hN)-int64(h1))/float64(n-1)/1024, "heap-KiB/"+per)
	b.ReportMetric(float64(int64(spansN)-int64(spans1))/float64(n-1)/1024, "heap-spans-KiB/"+per)
	b.ReportMetric(coldStart.Seconds(), "s-to-Ready")

	stop()
	mutatingBefore := gceMutations(gce, n)
	syncsBefore := gathered(b, "multiproject_provider_config_syncs_total", nil)
	began = time.Now()
	start()
	controllers := float64(3 * n)
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 15*time.Minute, true, func(context.Context) (bool, error) {
		return gathered(b, "multiproject_controllers_running", nil) >= controllers &&
			gathered(b, "multiproject_provider_config_syncs_total", nil)-syncsBefore >= float64(n) &&
			gathered(b, "workqueue_depth", map[string]string{"name": "providerconfig"}) == 0, nil
	}); err != nil {
		b.Fatalf("waiting for every tenant's controllers after the restart: %v", err)
	}
	restart := time.Since(began)
	// A measurement window, not a wait for a condition: late writes (conditions flipping once the controllers
	// report) would land in it.
	time.Sleep(10 * time.Second)
	total, detail := apiWrites(calls.Since(nil))
	mutations := gceMutations(gce, n) - mutatingBefore
	b.ReportMetric(restart.Seconds(), "s-to-running-after-restart")
	b.ReportMetric(float64(total), "API-writes-after-restart")
	b.ReportMetric(float64(mutations), "GCE-mutations-after-restart")
	fmt.Fprintf(os.Stderr, "%d tenants with %d Services each: %d goroutines and %.0f KiB heap for one tenant, %d and %.0f KiB for all; writes after the restart: %s\n",
		n, services, g1, float64(h1)/1024, gN, float64(hN)/1024, detail)
	stop()
	recordScaleRow(b, n, services, scaleFigures{
		goroutines: float64(gN-g1) / float64(n-1), liveKiB: float64(int64(hN)-int64(h1)) / float64(n-1) / 1024,
		spansKiB: float64(int64(spansN)-int64(spans1)) / float64(n-1) / 1024, toReady: coldStart, restart: restart,
		writes: total, mutations: mutations})
}

// scaleFigures are what runTenantsAndRestart measured.
type scaleFigures struct {
	goroutines, liveKiB, spansKiB float64
	toReady, restart              time.Duration
	writes, mutations             int
}

// recordScaleRow records BenchmarkIdleTenantsAndRestart's row (services == 0) or BenchmarkRestartAtScale's.
func recordScaleRow(b *testing.B, n, services int, f scaleFigures) {
	per := "idle tenant"
	row := benchresult.Row{ID: "providerconfig-idle-tenants", Benchmark: "BenchmarkIdleTenantsAndRestart", Package: "test/integration/providerconfig",
		What: fmt.Sprintf("%d idle tenants (gcp, rancher and pangolin sections, nothing to act on; NEG garbage sweep every 2 min), "+
			"every real controller in process, real API server and fake GCE: what one more tenant costs, the start, and a restart", n),
		Command: "IDLE_TENANTS=1000 WHAT=./test/integration/providerconfig hack/test-integration.sh -race=false -run '^$' -bench IdleTenantsAndRestart -benchtime 1x",
		Doc:     "docs/architecture.md#what-an-idle-tenant-costs", Notes: os.Getenv("BENCH_NOTES"),
		Settings: map[string]string{"tenants": strconv.Itoa(n), "kube-api-qps": "500", "kube-api-burst": "1000"}}
	if services > 0 {
		per = "tenant"
		row.ID, row.Benchmark = "providerconfig-restart-at-scale", "BenchmarkRestartAtScale"
		row.What = fmt.Sprintf("%d tenants × %d annotated Services converged (every Translation synced, every NEG in the fake GCE), "+
			"then the manager restarted", n, services)
		row.Command = "IDLE_TENANTS=1000 WHAT=./test/integration/providerconfig hack/test-integration.sh -race=false -run '^$' -bench RestartAtScale -benchtime 1x -timeout 60m"
	}
	row.Measures = []benchresult.Measure{
		{Label: "goroutines per " + per, Ours: f.goroutines},
		{Label: "live heap per " + per, Ours: f.liveKiB, Unit: "KiB"},
		{Label: "heap spans per " + per, Ours: f.spansKiB, Unit: "KiB"},
		{Label: "every tenant Ready after creation", Ours: f.toReady.Seconds(), Unit: "s"},
		{Label: "every controller running after a restart", Ours: f.restart.Seconds(), Unit: "s"},
		{Label: "API writes after the restart", Ours: float64(f.writes)},
		{Label: "mutating GCE calls after the restart", Ours: float64(f.mutations)},
	}
	benchresult.Record(b, row)
}

func idleTenant(i int) *mpv1alpha1.ProviderConfig {
	name := fmt.Sprintf("idle-%04d", i)
	return &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: mpv1alpha1.ProviderConfigSpec{
		GCP:      &mpv1alpha1.GCPConfig{ProjectID: name + "-project", ProjectNumber: int64(100000 + i), Network: "default"},
		Rancher:  &mpv1alpha1.RancherConfig{ClusterID: "c-" + name},
		Pangolin: &mpv1alpha1.PangolinConfig{TunnelNamespace: "pangolin-system", DefaultTunnel: "main"},
	}}
}

func readyTenants(ctx context.Context, mp mpclientset.Interface) int {
	list, err := mp.MultiprojectV1alpha1().ProviderConfigs().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0
	}
	n := 0
	for _, pc := range list.Items {
		for _, c := range pc.Status.Conditions {
			if c.Type == mpv1alpha1.ProviderConfigConditionReady && c.Status == metav1.ConditionTrue && pc.Status.ObservedGeneration == pc.Generation {
				n++
			}
		}
	}
	return n
}

// deleteTenants removes every ProviderConfig and the benchmark's namespaces, finalizers first (the manager has
// stopped, so nothing would remove them).
func deleteTenants(mp mpclientset.Interface, kube kubernetes.Interface) {
	ctx := context.Background()
	unfinalize := []byte(`{"metadata":{"finalizers":null}}`)
	if trs, err := mp.MultiprojectV1alpha1().Translations("").List(ctx, metav1.ListOptions{}); err == nil {
		for _, tr := range trs.Items {
			_, _ = mp.MultiprojectV1alpha1().Translations(tr.Namespace).Patch(ctx, tr.Name, types.MergePatchType, unfinalize, metav1.PatchOptions{})
		}
	}
	list, err := mp.MultiprojectV1alpha1().ProviderConfigs().List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, pc := range list.Items {
		_, _ = mp.MultiprojectV1alpha1().ProviderConfigs().Patch(ctx, pc.Name, types.MergePatchType, unfinalize, metav1.PatchOptions{})
		_ = mp.MultiprojectV1alpha1().ProviderConfigs().Delete(ctx, pc.Name, metav1.DeleteOptions{})
		_ = kube.CoreV1().Namespaces().Delete(ctx, pc.Name, metav1.DeleteOptions{})
	}
}

// gceMutations sums the mutating calls the fake GCE received for the projects of the first n idle tenants.
func gceMutations(gce *fakegce.Server, n int) int {
	total := 0
	for i := 0; i < n; i++ {
		total += gce.MutatingCalls(idleTenant(i).Spec.GCP.ProjectID)
	}
	return total
}

// createZoneNodes makes one Node per zone, shared by every tenant (no tenant label), for the endpoints' zones.
func createZoneNodes(b *testing.B, ctx context.Context, kube kubernetes.Interface) {
	for _, zone := range benchZones {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bench-" + zone, Labels: map[string]string{corev1.LabelTopologyZone: zone}}}
		if _, err := kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = kube.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{}) })
	}
}

// createTenantObjects makes tenant i's namespace with services annotated Services, each with one EndpointSlice of
// an endpoint per zone. The namespace is deleted with the tenant at the end (deleteTenants).
func createTenantObjects(ctx context.Context, kube kubernetes.Interface, i, services int) error {
	if services == 0 {
		return nil
	}
	ns := idleTenant(i).Name
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{labelKey: ns}}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	for k := range services {
		name := fmt.Sprintf("web-%d", k)
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Annotations: map[string]string{"cloud.google.com/neg": `{"exposed_ports":{"80":{}}}`}},
			// Headless: the test control plane's Service IP range holds 254 addresses.
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
		if _, err := kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			return err
		}
		slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-http",
			Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}}}
		for zi, zone := range benchZones {
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
				Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", zi, i%250, k+1)},
				NodeName:   ptr.To("bench-" + zone),
				Zone:       ptr.To(zone),
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
		}
		if _, err := kube.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// syncedTranslations counts the Translations whose current generation the pusher has pushed.
func syncedTranslations(ctx context.Context, mp mpclientset.Interface) int {
	list, err := mp.MultiprojectV1alpha1().Translations("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0
	}
	n := 0
	for _, tr := range list.Items {
		for _, c := range tr.Status.Conditions {
			if c.Type == mpv1alpha1.TranslationConditionSynced && c.Status == metav1.ConditionTrue && c.ObservedGeneration == tr.Generation {
				n++
			}
		}
	}
	return n
}
