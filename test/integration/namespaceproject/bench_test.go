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

package namespaceproject

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	rancherv3 "github.com/multiproject/api/rancher/management/v3"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/namespaceproject"
	"github.com/multiproject/multiproject-controller-manager/test/benchresult"
)

const (
	benchTenants             = 10
	benchNamespacesPerTenant = 100
	benchRoundLabel          = "bench.multiproject.io/round"
)

// BenchmarkAssign1000NamespacesAcross10Tenants times the controllers of 10 tenants (each with its own Rancher
// cluster and DevOps Project) assigning 100 namespaces each, from their start until an observer has seen all 1,000
// assigned, against a baseline that sends the same 1,000 patches in a plain loop with a client of the same QPS and
// burst. ns/op is the controllers' time per round of 1,000.
func BenchmarkAssign1000NamespacesAcross10Tenants(b *testing.B) {
	clients := []envOptions{{qps: 20, burst: 30}, {qps: 500, burst: 1000}}
	var figures benchresult.Figures
	for _, client := range clients {
		b.Run(fmt.Sprintf("kube-api-qps=%v,burst=%d", client.qps, client.burst), func(b *testing.B) {
			controller, baseline := benchmarkAssign(b, client)
			figures.Set(clientLabel(client)+"/controller", controller)
			figures.Set(clientLabel(client)+"/baseline", baseline)
		})
	}
	var measures []benchresult.Measure
	for _, client := range clients {
		v, missing := figures.Get(clientLabel(client)+"/controller", clientLabel(client)+"/baseline")
		if missing != "" || b.Failed() {
			b.Logf("benchmark row not recorded: %s did not run", missing)
			return
		}
		measures = append(measures, benchresult.Measure{Label: clientLabel(client), Ours: v[0] / 1e6, Baseline: benchresult.Float(v[1] / 1e6), Unit: "ms"})
	}
	benchresult.Record(b, benchresult.Row{
		ID: "namespaceproject-assign", Benchmark: "BenchmarkAssign1000NamespacesAcross10Tenants", Package: "test/integration/namespaceproject",
		What: "assign 1,000 existing namespaces across 10 tenants (100 each, 5 workers a tenant) to their DevOps Projects, " +
			"real API server, time per namespace until a watch saw all assigned",
		Baseline: "the same 1,000 patches in a plain loop through a client of the same QPS and burst",
		Measures: measures,
		Notes: "At 20/30 both sides are bound by the client's token bucket and the controllers' 1,000 Assigned Events " +
			"spend the same budget; at 500/1000 the tenants' workers overlap the round trips a plain loop waits out. " +
			"The second sub-benchmark shares the API server with the namespace controller finalizing the first one's " +
			"2,000 namespaces.",
		Command:  "make bench BENCH=Assign1000",
		Settings: benchresult.GoTestSettings(map[string]string{"tenants": "10", "namespacesPerTenant": "100"}),
		Doc:      "docs/namespace-project.md#benchmark",
	})
}

func clientLabel(c envOptions) string { return fmt.Sprintf("client QPS/burst %v/%d", c.qps, c.burst) }

// benchmarkAssign runs the rounds and returns the controllers' and the baseline's time per namespace, in ns.
func benchmarkAssign(b *testing.B, client envOptions) (controller, baseline float64) {
	e := newEnv(b, client)
	creator := newBulkCreator(b)
	observer := newAssignmentObserver(e.ctx, b)

	tenants := make([]*tenantRun, benchTenants)
	for i := range tenants {
		cluster := e.clusterNamespace()
		e.createProject(cluster, "p-devops", "DevOps")
		tenants[i] = e.newTenant(cluster, namespaceproject.DefaultConcurrentSyncs)
	}

	total := benchTenants * benchNamespacesPerTenant
	var controllerTime, baselineTime time.Duration
	b.ResetTimer()
	b.StopTimer()
	for round := range b.N {
		// Baseline: the same patches (annotation, label, our record, conditional on the resourceVersion), one
		// after another. Its namespaces carry no tenant label, so no controller sees them.
		roundID := fmt.Sprintf("%d-baseline", round)
		plain := creator.create(roundID, total, func(int) string { return "" })
		observer.expect(roundID, total)
		start := time.Now()
		for i, ns := range plain {
			cluster := tenants[i/benchNamespacesPerTenant].clusterID
			if _, err := e.kube.CoreV1().Namespaces().Patch(e.ctx, ns.Name, types.MergePatchType,
				assignmentPatch(ns.ResourceVersion, cluster, "p-devops", "DevOps"), metav1.PatchOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		observer.wait(roundID)
		baselineTime += time.Since(start)

		// The controllers, started on namespaces that already exist (as after a deploy or a leader change).
		roundID = fmt.Sprintf("%d-controller", round)
		creator.create(roundID, total, func(i int) string { return tenants[i/benchNamespacesPerTenant].name })
		observer.expect(roundID, total)
		start = time.Now()
		b.StartTimer()
		for _, tr := range tenants {
			tr.start()
		}
		observer.wait(roundID)
		b.StopTimer()
		controllerTime += time.Since(start)
		for _, tr := range tenants {
			tr.stop()
		}
	}
	perNamespace := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N*total) }
	b.ReportMetric(perNamespace(controllerTime), "controller-ns/namespace")
	b.ReportMetric(perNamespace(baselineTime), "baseline-ns/namespace")
	b.ReportMetric(float64(controllerTime)/float64(baselineTime), "controller/baseline")
	return perNamespace(controllerTime), perNamespace(baselineTime)
}

// assignmentPatch is the patch the controller sends for a namespace it has not assigned yet.
func assignmentPatch(resourceVersion, cluster, project, owner string) []byte {
	id := cluster + ":" + project
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": resourceVersion,
		"labels":          map[string]string{rancherv3.ProjectIDLabelKey: project},
		"annotations": map[string]string{
			rancherv3.ProjectIDAnnotationKey:               id,
			namespaceproject.AssignedProjectAnnotationKey:  id,
			namespaceproject.AssignedAppOwnerAnnotationKey: owner,
		},
	}})
	if err != nil {
		panic(err)
	}
	return data
}

// bulkCreator creates and finally deletes the benchmark's namespaces as the admin, in parallel, outside the timing.
type bulkCreator struct {
	b       testing.TB
	client  kubernetes.Interface
	mu      sync.Mutex
	created []string
}

const bulkWorkers = 8

func newBulkCreator(b testing.TB) *bulkCreator {
	cfg := controlPlane.AdminConfig()
	cfg.QPS, cfg.Burst = 1000, 1000
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	c := &bulkCreator{b: b, client: client}
	b.Cleanup(c.deleteAll)
	return c
}

// create makes n namespaces labeled appOwner=DevOps and with the round; tenantOf(i) names the i-th one's tenant.
func (c *bulkCreator) create(round string, n int, tenantOf func(int) string) []*corev1.Namespace {
	out := make([]*corev1.Namespace, n)
	c.parallel(n, func(i int) error {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-",
			Labels: map[string]string{appOwnerKey: "DevOps", benchRoundLabel: round}}}
		if t := tenantOf(i); t != "" {
			ns.Labels[labelKey] = t
		}
		created, err := c.client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		out[i] = created
		c.mu.Lock()
		c.created = append(c.created, created.Name)
		c.mu.Unlock()
		return nil
	})
	return out
}

func (c *bulkCreator) deleteAll() {
	c.parallel(len(c.created), func(i int) error {
		err := c.client.CoreV1().Namespaces().Delete(context.Background(), c.created[i], metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

func (c *bulkCreator) parallel(n int, do func(i int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, bulkWorkers)
	for range bulkWorkers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := do(i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		c.b.Fatal(err)
	}
}

// assignmentObserver watches Namespaces as the admin and counts, per round, those that got Rancher's annotation.
type assignmentObserver struct {
	b       testing.TB
	mu      sync.Mutex
	pending map[string]int
	done    map[string]chan struct{}
}

func newAssignmentObserver(ctx context.Context, b testing.TB) *assignmentObserver {
	o := &assignmentObserver{b: b, pending: map[string]int{}, done: map[string]chan struct{}{}}
	factory := kubeinformers.NewSharedInformerFactory(controlPlane.AdminClient(), 0)
	informer := factory.Core().V1().Namespaces().Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			oldNS, newNS := oldObj.(*corev1.Namespace), newObj.(*corev1.Namespace)
			if oldNS.Annotations[rancherv3.ProjectIDAnnotationKey] == "" && newNS.Annotations[rancherv3.ProjectIDAnnotationKey] != "" {
				o.assigned(newNS.Labels[benchRoundLabel])
			}
		},
	}); err != nil {
		b.Fatal(err)
	}
	// Its own stop: cleanups run last-in first-out, so Shutdown must not wait for a context ended by an earlier one.
	ctx, cancel := context.WithCancel(ctx)
	factory.Start(ctx.Done())
	b.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	factory.WaitForCacheSync(ctx.Done())
	return o
}

// expect announces that n namespaces of round are to be assigned.
func (o *assignmentObserver) expect(round string, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pending[round] = n
	o.done[round] = make(chan struct{})
}

func (o *assignmentObserver) assigned(round string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.pending[round]; !ok {
		return
	}
	o.pending[round]--
	if o.pending[round] == 0 {
		close(o.done[round])
	}
}

func (o *assignmentObserver) wait(round string) {
	o.mu.Lock()
	done := o.done[round]
	o.mu.Unlock()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		o.mu.Lock()
		defer o.mu.Unlock()
		o.b.Fatalf("round %s: %d namespaces still unassigned after 5 minutes", round, o.pending[round])
	}
}
