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
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/ingresstunnel"
)

// TestTenantsPublishOnlyTheirAllowedHosts: the built manager runs two tenants, a allowed *.<a's zone> and b allowed
// *.<b's zone> (spec.pangolin.allowedHostnames). Tenant a's Ingress, created first, asks for a host in each zone: it
// publishes its own, and the other gets a HostNotAllowed Warning naming the host and the tenant and no
// PangolinResource. Tenant b's Ingress, created later, asks for that host and publishes it: a refused host claims
// nothing, so an earlier Ingress of another tenant does not keep it from its owner. Then tenant a's list drops its
// zone: the manager restarts its controller with the new spec, and its published host is withdrawn. A watch of every
// PangolinResource, running through the whole test, fails it if two ever published b's host at once.
func TestTenantsPublishOnlyTheirAllowedHosts(t *testing.T) {
	resetLease(t)
	gce := startFakeGCE(t)
	a, b := newWorkload(t, gce), newWorkload(t, gce)
	// Zones of this run's own, since a host is published once in the whole control plane.
	zoneA, zoneB := a.tenant+".example.com", b.tenant+".example.com"
	hostA, hostB := "web."+zoneA, "web."+zoneB
	a.setAllowedHostnames("*." + zoneA)
	b.setAllowedHostnames("*." + zoneB)
	counter := countPublishers(t, a.mp, hostB)
	le := leaderElection{leaseDuration: 15 * time.Second, renewDeadline: 10 * time.Second, retryPeriod: time.Second}
	m := startManager(t, "a", managerKubeconfig(t), gce.Endpoint(), le)
	waitLeader(t, m.identity(), 2*time.Minute)

	a.setIngress("web", hostA, hostB)
	a.refuse("web", hostB)
	a.waitConverged("tenant a publishes its own host only")
	waitEvent(a.ctx, t, "Ingress", a.appNS, "web", ingresstunnel.ReasonHostNotAllowed, "Host "+hostB+" is not among", "tenant "+a.tenant)

	b.setIngress("web", hostB)
	b.waitConverged("tenant b publishes the host tenant a asked for first")
	if evs := events(b.ctx, t, "Ingress", b.appNS, "web", ingresstunnel.ReasonHostConflict); len(evs) > 0 {
		t.Errorf("tenant b's Ingress got HostConflict Warnings: %q", evs[0].Message)
	}

	// Tenant a may publish another host of its zone only: the manager restarts its controller with the new spec,
	// which withdraws the host it published.
	a.setAllowedHostnames("shop." + zoneA)
	a.refuse("web", hostA)
	a.waitConverged("tenant a's host withdrawn once its list drops it")
	waitEvent(a.ctx, t, "Ingress", a.appNS, "web", ingresstunnel.ReasonHostNotAllowed, "Host "+hostA+" is not among", "tenant "+a.tenant)
	b.waitConverged("tenant b, untouched")
	if n := counter.stop(); n != 1 {
		t.Errorf("%d PangolinResources published %s at once, want 1", n, hostB)
	}
}

// setAllowedHostnames replaces the tenant's spec.pangolin.allowedHostnames.
func (w *workload) setAllowedHostnames(entries ...string) {
	w.t.Helper()
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"pangolin": map[string]any{"allowedHostnames": entries}}})
	if err != nil {
		w.t.Fatal(err)
	}
	if _, err := w.mp.MultiprojectV1alpha1().ProviderConfigs().Patch(w.ctx, w.tenant, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		w.t.Fatalf("setting the allowed hostnames of %s: %v", w.tenant, err)
	}
}

// refuse says that the tenant may not publish host: the Ingress asks for it and gets no PangolinResource for it.
func (w *workload) refuse(ingress, host string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ingresses[ingress].Delete(host)
}
