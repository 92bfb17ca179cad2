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
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/textlogger"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"
	mpinformers "github.com/multiproject/client-go/informers/externalversions"

	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app"
	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/options"
	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
	"github.com/multiproject/multiproject-controller-manager/test/benchresult"
	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

// coldStartQPS is the manager's --kube-api-qps in BenchmarkColdStart (burst twice that): 500, as a user at scale
// sets it, unless COLD_START_QPS says otherwise.
func coldStartQPS(b *testing.B) int {
	n := 500
	if s := os.Getenv("COLD_START_QPS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			b.Fatalf("COLD_START_QPS=%q: want a number ≥ 1", s)
		}
	}
	return n
}

// plainLoopWorkers is the plain loop's concurrency: enough requests in flight that the client's QPS or the API
// server, not the round trips of a few workers, bounds it.
const plainLoopWorkers = 64

// coldStartWrites are the API writes one idle tenant's first start needs, by client: on the multiproject client the
// finalizer, status.appliedSpec (declared before the controllers start, so a cleanup can find what they make) and
// the status that says the controllers run (Ready, observedGeneration); on the core client the Event
// ControllersStarted. docs/providerconfig.md justifies each one.
var coldStartWrites = map[string]int{
	"patch providerconfigs":        1,
	"patch providerconfigs/status": 2,
	"create events":                1,
	// The cluster's identity (pkg/clusterid), once per cluster, not per tenant.
	"create configmaps": 1,
}

// coldStartWorkers is the manager's --concurrent-provider-config-syncs in BenchmarkColdStart: the flag's default, 5,
// unless COLD_START_WORKERS says otherwise (more did not start 1,000 tenants sooner on the 2-core machine, whose
// API server is the bound; docs/providerconfig.md).
func coldStartWorkers(b *testing.B) int32 {
	n := 5
	if s := os.Getenv("COLD_START_WORKERS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			b.Fatalf("COLD_START_WORKERS=%q: want a number ≥ 1", s)
		}
	}
	return int32(n)
}

// coldStartTenants is the list of tenant counts BenchmarkColdStart measures (COLD_START_TENANTS, comma-separated,
// overrides it).
func coldStartTenants(b *testing.B) []int {
	spec := os.Getenv("COLD_START_TENANTS")
	if spec == "" {
		return []int{1000}
	}
	var out []int
	for _, s := range strings.Split(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			b.Fatalf("COLD_START_TENANTS=%q: want numbers ≥ 1, comma-separated", spec)
		}
		out = append(out, n)
	}
	return out
}

// BenchmarkColdStart measures the manager's first start over tenants that exist already (installed onto a cluster
// that has them, or started with every tenant new): N idle ProviderConfigs with gcp, rancher and pangolin sections
// and nothing to act on, every real controller in process, client QPS 500 (COLD_START_QPS). It reports the time from
// the start to every tenant Ready at its generation, and two baselines: the writes a cold start needs
// (coldStartWrites, on the busier of the manager's two clients, which send in parallel) divided by the client QPS,
// and the same writes in a plain loop (plainLoop) on the same API server, which is the limit where the API server
// cannot serve the QPS. It also counts every
// write per tenant, which must not exceed what the start needs (checked), and, with COLD_START_PROFILE=DIR, writes
// a CPU profile of the start to DIR/coldstart-<N>.pprof.
//
//	COLD_START_TENANTS=1000,5000,10000 WHAT=./test/integration/providerconfig hack/test-integration.sh -race=false \
//	  -run '^$' -bench ColdStart -benchtime 1x -timeout 60m
func BenchmarkColdStart(b *testing.B) {
	row := benchresult.Row{
		ID: "providerconfig-cold-start", Benchmark: "BenchmarkColdStart", Package: "test/integration/providerconfig",
		What: "the manager's first start over N idle tenants that exist already (gcp, rancher and pangolin sections, " +
			"every real controller, real API server, fake GCE, client QPS " + strconv.Itoa(coldStartQPS(b)) + "): time until every tenant is Ready at its generation",
		Baseline: "the writes a cold start needs on the busier client (per tenant: the finalizer, status.appliedSpec, " +
			"the status that says the controllers run) ÷ the client QPS; and the same writes in a plain loop of " +
			strconv.Itoa(plainLoopWorkers) + " workers at that QPS, the API server's limit where it cannot serve the QPS",
		Command: "COLD_START_TENANTS=1000,5000,10000 WHAT=./test/integration/providerconfig hack/test-integration.sh " +
			"-race=false -run '^$' -bench ColdStart -benchtime 1x -timeout 60m",
		Settings: map[string]string{"kube-api-qps": strconv.Itoa(coldStartQPS(b)), "kube-api-burst": strconv.Itoa(2 * coldStartQPS(b)),
			"concurrent-provider-config-syncs": strconv.Itoa(int(coldStartWorkers(b)))},
		Doc:   "docs/providerconfig.md#a-cold-start",
		Notes: os.Getenv("COLD_START_NOTES"),
	}
	// Go may run a sub-benchmark's function more than once (b.N = 1 first, unless -benchtime 1x): the last run's
	// measures are the row's.
	measures := map[int][]benchresult.Measure{}
	counts := coldStartTenants(b)
	for _, n := range counts {
		// A sub-benchmark each, so that each count's tenants are deleted before the next count's are created.
		b.Run(fmt.Sprintf("tenants=%d", n), func(b *testing.B) {
			var took, plain time.Duration
			var perTenant map[string]float64
			for i := 0; i < b.N; i++ {
				took, plain, perTenant = runColdStart(b, n)
			}
			baseline := coldStartBaseline(b, n)
			b.ReportMetric(took.Seconds(), "s-to-Ready")
			b.ReportMetric(plain.Seconds(), "s-plain-loop")
			b.ReportMetric(float64(took)/float64(baseline), "time/(writes÷QPS)")
			b.ReportMetric(float64(took)/float64(plain), "time/plain-loop")
			b.Logf("%d tenants: Ready after %v (needed writes ÷ QPS: %v, the same writes in a plain loop: %v); writes per tenant: %v",
				n, took, baseline, plain, perTenant)
			measures[n] = []benchresult.Measure{
				{Label: fmt.Sprintf("%d tenants", n), Ours: took.Seconds(),
					Baseline: benchresult.Float(baseline.Seconds()), Unit: "s", Goal: benchresult.Float(1.2)},
				{Label: fmt.Sprintf("%d tenants, against the same writes in a plain loop", n), Ours: took.Seconds(),
					Baseline: benchresult.Float(plain.Seconds()), Unit: "s"}}
		})
	}
	for _, n := range counts {
		row.Measures = append(row.Measures, measures[n]...)
	}
	if len(row.Measures) == 0 {
		return
	}
	benchresult.Record(b, row)
}

// coldStartBaseline is the time the writes a cold start of n tenants needs take at the client QPS: those of the
// multiproject client, the busier one (the core client's Events go out beside them).
func coldStartBaseline(b *testing.B, n int) time.Duration {
	need := 0
	for kind, c := range coldStartWrites {
		if strings.HasSuffix(kind, " providerconfigs") || strings.HasSuffix(kind, " providerconfigs/status") {
			need += c
		}
	}
	return time.Duration(float64(need*n) / float64(coldStartQPS(b)) * float64(time.Second))
}

// runColdStart creates n idle tenants with the manager stopped, starts it, and returns the time until every tenant
// is Ready, the time the same writes take in a plain loop on the same API server (plainLoop, after the manager
// stopped), and the manager's writes per tenant by kind. It fails if the start wrote more of a kind than
// coldStartWrites allows.
func runColdStart(b *testing.B, n int) (time.Duration, time.Duration, map[string]float64) {
	b.StopTimer()
	fw := controlPlane.NewEnv(b, framework.EnvOptions{
		Logger:   textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(os.Stderr))),
		AdminQPS: 2000, AdminBurst: 4000,
		GCE: &fakegce.Options{},
	})
	ctx, mp, kube := fw.Ctx, fw.Admin, fw.AdminKube
	b.Cleanup(func() { deleteTenants(mp, kube) })
	createIdleTenants(b, ctx, fw, n)
	ready := watchReady(b, ctx, fw)

	calls := &framework.APICalls{}
	descriptors := app.NewControllerDescriptors()
	c := controlPlane.ManagerProcessConfig(b, ctx, framework.ManagerProcess{Descriptors: descriptors, Wrap: calls.Wrap,
		Flags: func(o *options.Options) {
			o.ClientConnection.QPS, o.ClientConnection.Burst = float32(coldStartQPS(b)), int32(2*coldStartQPS(b))
			o.ProviderConfigWorkers = coldStartWorkers(b)
			o.CacheSyncTimeout.Duration = time.Minute
			o.TenantControllers.ClusterName = "bench"
			o.TenantControllers.GCEEndpoint = fw.GCE.Endpoint()
		}})
	stopProfile := profileCPU(b, n)
	cpuBefore := processCPU()
	b.StartTimer()
	began := time.Now()
	stop := framework.RunManager(b, ctx, c, descriptors)
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Minute, true, func(context.Context) (bool, error) {
		return ready() >= n, nil
	})
	took := time.Since(began)
	b.StopTimer()
	stopProfile()
	if err != nil {
		b.Fatalf("waiting for %d tenants Ready: %v (%d are)", n, err, ready())
	}
	b.ReportMetric((processCPU()-cpuBefore).Seconds()*1000/float64(n), fmt.Sprintf("CPU-ms-per-tenant/%d", n))
	// The Events of the last tenants may still be on their way: wait for them before counting (the broadcaster
	// sends them asynchronously).
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return calls.Since(nil)["create events"] >= n, nil
	})
	stop()
	counts := calls.Since(nil)
	b.Logf("%d tenants: every request of the manager but watches and discovery: %v; answered 409 Conflict: %d", n, counts, calls.ConflictsSince(nil))
	perTenant := map[string]float64{}
	for kind, c := range counts {
		if verb, _, _ := strings.Cut(kind, " "); verb == "create" || verb == "update" || verb == "patch" || verb == "delete" {
			perTenant[kind] = float64(c) / float64(n)
		}
	}
	for kind, per := range perTenant {
		if allowed := coldStartWrites[kind]; per > float64(allowed) {
			b.Errorf("%d tenants: %.2f %q per tenant, more than the %d a cold start needs", n, per, kind, allowed)
		}
	}
	return took, plainLoop(b, ctx, n), perTenant
}

// plainLoop makes the writes of a cold start of n tenants as a plain loop would, on the same API server: a client
// with the manager's QPS and burst, plainLoopWorkers workers each making one write at a time (per tenant a metadata
// patch and two status patches, in no order), and the tenants' Events created one at a time beside them, as the
// manager's one broadcaster sends them. Its time is the physical limit of those writes in the run: the client's QPS
// where the API server keeps up with it, the API server's CPU where it does not. The time ends when the
// ProviderConfig writes are done, as Ready does not wait for the Events; those still unsent then are given up. No
// informer, no decision, no controller.
func plainLoop(b *testing.B, ctx context.Context, n int) time.Duration {
	cfg := controlPlane.AdminConfig()
	cfg.QPS, cfg.Burst = float32(coldStartQPS(b)), 2*coldStartQPS(b)
	mp, err := mpclientset.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	type write struct{ name, patch, sub string }
	b.StartTimer()
	defer b.StopTimer()
	began := time.Now()
	writes := make(chan write)
	var wg, events sync.WaitGroup
	eventsCtx, stopEvents := context.WithCancel(ctx)
	for range plainLoopWorkers {
		wg.Go(func() {
			pcs := mp.MultiprojectV1alpha1().ProviderConfigs()
			for w := range writes {
				var sub []string
				if w.sub != "" {
					sub = []string{w.sub}
				}
				if _, err := pcs.Patch(ctx, w.name, types.MergePatchType, []byte(w.patch), metav1.PatchOptions{}, sub...); err != nil {
					b.Error(err)
				}
			}
		})
	}
	events.Go(func() {
		for i := range n {
			if eventsCtx.Err() != nil {
				return
			}
			ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, GenerateName: "plain-"},
				InvolvedObject: corev1.ObjectReference{Kind: "ProviderConfig", Name: idleTenant(i).Name, APIVersion: mpv1alpha1.SchemeGroupVersion.String()},
				Reason:         "ControllersStarted", Message: "plain loop", Type: corev1.EventTypeNormal}
			if _, err := kube.CoreV1().Events(metav1.NamespaceDefault).Create(eventsCtx, ev, metav1.CreateOptions{}); err != nil && eventsCtx.Err() == nil {
				b.Error(err)
			}
		}
	})
	for i := range n {
		name := idleTenant(i).Name
		writes <- write{name: name, patch: `{"metadata":{"annotations":{"bench.multiproject.io/plain":"1"}}}`}
		writes <- write{name: name, patch: `{"status":{"shard":"plain-1"}}`, sub: "status"}
		writes <- write{name: name, patch: `{"status":{"shard":"plain-2"}}`, sub: "status"}
	}
	close(writes)
	wg.Wait()
	took := time.Since(began)
	stopEvents()
	events.Wait()
	return took
}

// createIdleTenants creates the ProviderConfigs of idleTenant(0..n-1), 32 at a time.
func createIdleTenants(b *testing.B, ctx context.Context, fw *framework.Env, n int) {
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if _, err := fw.Admin.MultiprojectV1alpha1().ProviderConfigs().Create(ctx, idleTenant(i), metav1.CreateOptions{}); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
}

// watchReady follows the ProviderConfigs with an informer of the test's own (a LIST of thousands every poll would
// load the API server the manager is measured on) and returns a count of those Ready at their generation, kept by
// its handler so that counting costs nothing per poll.
func watchReady(b *testing.B, ctx context.Context, fw *framework.Env) func() int {
	factory := mpinformers.NewSharedInformerFactory(fw.Admin, 0)
	informer := factory.Multiproject().V1alpha1().ProviderConfigs().Informer()
	var mu sync.Mutex
	ready := map[string]bool{}
	observe := func(obj any) {
		pc, ok := obj.(*mpv1alpha1.ProviderConfig)
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		ready[pc.Name] = meta.IsStatusConditionTrue(pc.Status.Conditions, mpv1alpha1.ProviderConfigConditionReady) &&
			pc.Status.ObservedGeneration == pc.Generation
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: observe,
		UpdateFunc: func(_, obj any) { observe(obj) }}); err != nil {
		b.Fatal(err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		b.Fatal("the test's ProviderConfig informer did not sync")
	}
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, r := range ready {
			if r {
				n++
			}
		}
		return n
	}
}

// profileCPU writes a CPU profile of the cold start to COLD_START_PROFILE/coldstart-<n>.pprof when that is set.
func profileCPU(b *testing.B, n int) (stop func()) {
	dir := os.Getenv("COLD_START_PROFILE")
	if dir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("coldstart-%d.pprof", n)))
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}
}

// processCPU is the CPU time of this process (the manager, the test's informer and the fake GCE) from the kernel's
// accounting.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
