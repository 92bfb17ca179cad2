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

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/component-base/metrics/testutil"

	tunnelv1alpha1 "github.com/multiproject/api/pangolin/tunnel/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/ingresstunnel"
)

// TestIngressStatusShowsPublishedHosts: the built manager, with the manifests' RBAC, lists in an Ingress's
// status.loadBalancer the hosts whose PangolinResources the Pangolin operator (played by the test, through the
// status subresource) reports published, as kubectl get ingress shows them. Rewrites of the same values by the
// operator cost no write of the Ingress status, counted by the API server. When the Ingress is handed to another
// ingress controller, the entries go.
func TestIngressStatusShowsPublishedHosts(t *testing.T) {
	resetLease(t)
	gce := startFakeGCE(t)
	w := newWorkload(t, gce)
	le := leaderElection{leaseDuration: 15 * time.Second, renewDeadline: 10 * time.Second, retryPeriod: time.Second}
	// One ingress-tunnel worker syncs Ingresses in the order they were enqueued: the barrier below relies on it.
	m := startManager(t, "a", managerKubeconfig(t), gce.Endpoint(), le, "--concurrent-ingress-tunnel-syncs=1")
	waitLeader(t, m.identity(), 2*time.Minute)

	hosts := []string{"www-" + w.tenant + ".example.com", "api-" + w.tenant + ".example.com"}
	barrierHost := "barrier-" + w.tenant + ".example.com"
	w.setIngress("web", hosts...)
	w.setIngress("barrier", barrierHost)
	w.waitConverged("the Ingresses' PangolinResources")
	if got := ingressHosts(t, w, "web"); len(got) != 0 {
		t.Errorf("hosts %v listed before the operator reported any", got)
	}

	w.operator("web", hosts[0], publishedOn(hosts[0]))
	w.operator("web", hosts[1], func(s *tunnelv1alpha1.PangolinResourceStatus) {
		s.Status = tunnelv1alpha1.ResourceStatusCreating
	})
	waitIngressHosts(t, w, "web", hosts[0])
	w.operator("web", hosts[1], publishedOn(hosts[1]))
	sorted := slices.Sorted(slices.Values(hosts))
	waitIngressHosts(t, w, "web", sorted...)

	// A barrier: whatever the manager received before is synced before the barrier Ingress shows the effect of a
	// status change of its resource (a TunnelResourceError), then of a change of itself (an InvalidAnnotation);
	// neither writes an Ingress status.
	rounds := 0
	barrier := func() {
		t.Helper()
		rounds++
		round := fmt.Sprintf("round%d", rounds)
		w.operator("barrier", barrierHost, func(s *tunnelv1alpha1.PangolinResourceStatus) {
			s.Status = tunnelv1alpha1.ResourceStatusError
			meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse,
				Reason: "ReconcileError", Message: "failed in " + round})
		})
		waitEvent(w.ctx, t, "Ingress", w.appNS, "barrier", ingresstunnel.ReasonTunnelResourceError, "failed in "+round)
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			ing, err := w.kube.NetworkingV1().Ingresses(w.appNS).Get(w.ctx, "barrier", metav1.GetOptions{})
			if err != nil {
				return err
			}
			ing.Annotations = map[string]string{ingresstunnel.AnnotationSSO: round}
			_, err = w.kube.NetworkingV1().Ingresses(w.appNS).Update(w.ctx, ing, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		waitEvent(w.ctx, t, "Ingress", w.appNS, "barrier", ingresstunnel.ReasonInvalidAnnotation, fmt.Sprintf("%q", round))
	}
	barrier()
	before := ingressStatusWrites(t)
	if before < 2 {
		t.Fatalf("the API server counted %d Ingress status writes, but listing the hosts took at least two", before)
	}
	for _, host := range hosts {
		w.operator("web", host, publishedOn(host))
		w.operator("web", host, func(s *tunnelv1alpha1.PangolinResourceStatus) {
			s.TargetIDs, s.TargetCount, s.ObservedGeneration = []string{"7"}, 1, s.ObservedGeneration+1
		})
	}
	barrier()
	if n := ingressStatusWrites(t) - before; n != 0 {
		t.Errorf("%d Ingress status writes while the operator rewrote the converged Ingress's resources, want none", n)
	}
	waitIngressHosts(t, w, "web", sorted...)

	// The tenant leaves: its cleanup takes the hosts out of the Ingresses' status before it deletes their
	// PangolinResources (the Ingresses stay, and stay Pangolin-class).
	if err := w.mp.MultiprojectV1alpha1().ProviderConfigs().Delete(w.ctx, w.tenant, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(w.ctx, 250*time.Millisecond, convergeTimeout, true, func(context.Context) (bool, error) {
		o, err := w.observe()
		return err == nil && o.pc == nil && len(o.resources) == 0, nil
	})
	if err != nil {
		t.Fatalf("the tenant %s or its PangolinResources are still there: %v", w.tenant, err)
	}
	for _, name := range []string{"web", "barrier"} {
		if got := ingressHosts(t, w, name); len(got) != 0 {
			t.Errorf("Ingress %s of a tenant that left still lists %v", name, got)
		}
	}
}

// operator plays the Pangolin operator: it writes the status of the PangolinResource of an Ingress's host through
// the status subresource.
func (w *workload) operator(ingress, host string, change func(*tunnelv1alpha1.PangolinResourceStatus)) {
	w.t.Helper()
	client := w.mp.TunnelV1alpha1().PangolinResources(w.appNS)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		res, err := client.Get(w.ctx, ingresstunnel.ResourceName(w.appNS, ingress, host), metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(&res.Status)
		_, err = client.UpdateStatus(w.ctx, res, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		w.t.Fatalf("writing the status of the PangolinResource of %s: %v", host, err)
	}
}

// publishedOn is the operator's status of a resource it published on domain.
func publishedOn(domain string) func(*tunnelv1alpha1.PangolinResourceStatus) {
	return func(s *tunnelv1alpha1.PangolinResourceStatus) {
		s.ResourceID, s.BindingMode = "id-"+domain, "Created"
		s.FullDomain, s.URL, s.Status = domain, "https://"+domain, tunnelv1alpha1.ResourceStatusReady
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue,
			Reason: "ReconcileSuccess", Message: "Resource and target configured successfully"})
	}
}

// ingressHosts are the host names of an Ingress's status.loadBalancer.ingress, in order.
func ingressHosts(t *testing.T, w *workload, name string) []string {
	t.Helper()
	ing, err := w.kube.NetworkingV1().Ingresses(w.appNS).Get(w.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ing.Status.LoadBalancer.Ingress {
		out = append(out, entryString(e))
	}
	return out
}

func entryString(e networkingv1.IngressLoadBalancerIngress) string {
	if e.IP != "" || len(e.Ports) > 0 {
		return fmt.Sprintf("%+v", e)
	}
	return e.Hostname
}

func waitIngressHosts(t *testing.T, w *workload, name string, want ...string) {
	t.Helper()
	var got []string
	err := wait.PollUntilContextTimeout(w.ctx, 250*time.Millisecond, convergeTimeout, true, func(context.Context) (bool, error) {
		got = ingressHosts(t, w, name)
		return slices.Equal(got, want), nil
	})
	if err != nil {
		t.Fatalf("Ingress %s/%s lists %v, want %v", w.appNS, name, got, want)
	}
}

// ingressStatusWrites is the API server's count of write requests to any Ingress's status, whatever their outcome:
// the manager is the only client that writes them in these tests.
func ingressStatusWrites(t *testing.T) int {
	t.Helper()
	data, err := controlPlane.AdminClient().CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(t.Context())
	if err != nil {
		t.Fatalf("reading the API server's metrics: %v", err)
	}
	metrics := testutil.NewMetrics()
	if err := testutil.ParseMetrics(string(data), &metrics); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range metrics["apiserver_request_total"] {
		if s.Metric["resource"] == "ingresses" && s.Metric["subresource"] == "status" &&
			!slices.Contains([]string{"GET", "LIST", "WATCH"}, strings.ToUpper(string(s.Metric["verb"]))) {
			n += int(s.Value)
		}
	}
	return n
}
