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
	"fmt"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	tunnelv1alpha1 "github.com/multiproject/api/pangolin/tunnel/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/names"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/ingresstunnel"
	"github.com/multiproject/multiproject-controller-manager/test/benchresult"
	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

const (
	benchIngresses = 1000
	// benchQPS and benchBurst are the client settings of both the controller and the baseline. The manager's
	// defaults (--kube-api-qps 20, --kube-api-burst 30) would make both runs about 150 s of waiting on the token
	// bucket; these keep the run short while the client still limits both the same way.
	benchQPS   = 200
	benchBurst = 400
)

// BenchmarkConverge1000Ingresses measures how long the controller takes to converge 1,000 existing three-host
// Ingresses (3,000 PangolinResources) from its start, with the default worker count, against a baseline that
// creates the same 3,000 objects (same labels, owner references and specs, in another namespace owned by the same
// number of Ingresses) in a plain loop with a client of the same QPS and burst. ratio = controller / baseline.
func BenchmarkConverge1000Ingresses(b *testing.B) {
	e := newEnv(b, benchQPS, benchBurst)
	tunnelNS := controlPlane.CreateNamespace(b)
	e.createTunnel(tunnelNS, "main")
	workers := framework.Descriptor(names.IngressTunnelController).DefaultConcurrentSyncs

	var controllerTime, baselineTime time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		tenantName := e.tenantName(fmt.Sprint(i))
		controllerNS := e.tenantNamespace(tenantName)
		baselineNS := controlPlane.CreateNamespace(b)
		e.createBenchIngresses(controllerNS, "pangolin")
		baselineOwners := e.createBenchIngresses(baselineNS, "other")
		e.waitFor("the Ingresses in the informer", 2*time.Minute, func() (bool, error) {
			return e.countIn(e.ingresses, controllerNS) == benchIngresses, nil
		})

		b.StartTimer()
		start := time.Now()
		tr := e.startTenant(tenantName, &mpv1alpha1.PangolinConfig{TunnelNamespace: tunnelNS, DefaultTunnel: "main"}, workers)
		e.waitForEvery("convergence", 10*time.Minute, 20*time.Millisecond, func() (bool, error) {
			return e.countIn(e.resources, controllerNS) == 3*benchIngresses, nil
		})
		controllerTime += time.Since(start)
		b.StopTimer()
		tr.stop()

		// The baseline writes exactly what the controller wrote, re-homed to its own namespace and owners.
		objects, err := e.admin.TunnelV1alpha1().PangolinResources(controllerNS).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		var copies []*tunnelv1alpha1.PangolinResource
		for _, r := range objects.Items {
			owner := baselineOwners[r.Labels[ingresstunnel.LabelIngressName]]
			c := &tunnelv1alpha1.PangolinResource{
				ObjectMeta: metav1.ObjectMeta{Namespace: baselineNS, Name: r.Name, Labels: r.Labels,
					OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(owner, networkingv1.SchemeGroupVersion.WithKind("Ingress"))}},
				Spec: r.Spec,
			}
			copies = append(copies, c)
		}
		b.StartTimer()
		start = time.Now()
		for _, c := range copies {
			if _, err := e.mp.TunnelV1alpha1().PangolinResources(baselineNS).Create(e.ctx, c, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		baselineTime += time.Since(start)
		b.StopTimer()
		// The next run (or -count) must not compete with the deletion of these 8,000 objects.
		e.deleteNamespaces(controllerNS, baselineNS)
	}
	b.ReportMetric(controllerTime.Seconds()/float64(b.N), "controller-s")
	b.ReportMetric(baselineTime.Seconds()/float64(b.N), "baseline-s")
	b.ReportMetric(float64(controllerTime)/float64(baselineTime), "ratio")
	b.ReportMetric(0, "ns/op")
	if b.Failed() {
		return
	}
	benchresult.Record(b, benchresult.Row{
		ID: "ingresstunnel-converge", Benchmark: "BenchmarkConverge1000Ingresses", Package: "test/integration/ingresstunnel",
		What: fmt.Sprintf("%s existing three-host Ingresses converge to %s PangolinResources from the controller's start "+
			"(%d workers), real API server", "1,000", "3,000", workers),
		Baseline: "the same PangolinResources created in a plain loop through a client of the same QPS and burst",
		Measures: []benchresult.Measure{{
			Ours: controllerTime.Seconds() / float64(b.N), Baseline: benchresult.Float(baselineTime.Seconds() / float64(b.N)), Unit: "s",
		}},
		Notes: fmt.Sprintf("Both sides sit on the client's token bucket: 3,000 writes at %d QPS after a burst of %d take at "+
			"least 13 s, so a ratio near 1 means the controller's own work costs nothing measurable.", benchQPS, benchBurst),
		Command:  "make bench BENCH=Converge1000Ingresses",
		Settings: benchresult.GoTestSettings(map[string]string{"QPS": fmt.Sprint(benchQPS), "burst": fmt.Sprint(benchBurst)}),
		Doc:      "docs/ingress-tunnel.md#benchmark",
	})
}

// createBenchIngresses creates benchIngresses three-host Ingresses (the seed's shape, unique hosts) and their
// Service, and returns the Ingresses by name.
func (e *env) createBenchIngresses(namespace, class string) map[string]*networkingv1.Ingress {
	e.t.Helper()
	svc, template := seedObjects(namespace, "", class)
	if _, err := e.adminKube.CoreV1().Services(namespace).Create(e.ctx, svc, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	out := make(map[string]*networkingv1.Ingress, benchIngresses)
	for i := range benchIngresses {
		ing := template.DeepCopy()
		ing.Name = fmt.Sprintf("web-%04d", i)
		ing.Spec.IngressClassName = ptr.To(class)
		for j := range ing.Spec.Rules {
			ing.Spec.Rules[j].Host = fmt.Sprintf("%s-%04d.example.com", []string{"app", "api", "admin"}[j], i)
		}
		created, err := e.adminKube.NetworkingV1().Ingresses(namespace).Create(e.ctx, ing, metav1.CreateOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		out[created.Name] = created
	}
	return out
}

// deleteNamespaces deletes namespaces and waits until the namespace controller has removed them.
func (e *env) deleteNamespaces(names ...string) {
	e.t.Helper()
	for _, ns := range names {
		if err := e.adminKube.CoreV1().Namespaces().Delete(e.ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			e.t.Fatal(err)
		}
	}
	e.waitForEvery("the namespaces to be deleted", 10*time.Minute, time.Second, func() (bool, error) {
		for _, ns := range names {
			if _, err := e.adminKube.CoreV1().Namespaces().Get(e.ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, nil
			}
		}
		return true, nil
	})
}

func (e *env) countIn(informer cache.SharedIndexInformer, namespace string) int {
	objs, err := informer.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
	if err != nil {
		e.t.Fatal(err)
	}
	return len(objs)
}
