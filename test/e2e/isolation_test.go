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
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/ingresstunnel"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/namespaceproject"
	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
	"github.com/multiproject/multiproject-controller-manager/test/benchresult"
)

// faultyLatency is added to every GCE call of the faulty tenant's project, before the call fails with 503.
const faultyLatency = 2 * time.Second

// isolationEnv is one manager (the leader) and the fake GCE it talks to.
type isolationEnv struct {
	gce *fakegce.Server
	m   *manager
}

func startIsolationEnv(tb testing.TB) *isolationEnv {
	tb.Helper()
	resetLease(tb)
	gce := startFakeGCE(tb)
	le := leaderElection{leaseDuration: 15 * time.Second, renewDeadline: 10 * time.Second, retryPeriod: time.Second}
	m := startManager(tb, "a", managerKubeconfig(tb), gce.Endpoint(), le)
	waitLeader(tb, m.identity(), 2*time.Minute)
	return &isolationEnv{gce: gce, m: m}
}

// The workload of each tenant: Services with NEGs in 3 zones (endpointsPerZone each), three-host Ingresses, and
// namespaces to assign.
const (
	isolationServices         = 12
	isolationEndpointsPerZone = 20
	isolationIngresses        = 20
	isolationNamespaces       = 6
)

// convergeHealthy creates a fresh healthy tenant's objects (the isolation* constants), then its ProviderConfig, and
// returns the time from the ProviderConfig's creation until the API and GCE hold exactly the wanted state: the
// tenant's start and all of its controllers' work, none of the test's own object creation. The tenant is torn down
// afterwards, so every measurement starts from the same state.
func convergeHealthy(tb testing.TB, env *isolationEnv, what string) time.Duration {
	tb.Helper()
	w := newWorkloadWithoutProviderConfig(tb, env.gce)
	for i := range isolationServices {
		w.setService(fmt.Sprintf("svc-%d", i), w.endpoints(i, 0, isolationEndpointsPerZone))
	}
	for i := range isolationIngresses {
		w.setIngress(fmt.Sprintf("ing-%d", i), hosts(i, "a", "b", "c")...)
	}
	for i := range isolationNamespaces {
		w.addNamespace([]string{"alpha", "beta", "gamma"}[i%3])
	}
	start := time.Now()
	w.createProviderConfig()
	w.waitConverged(what + ": healthy tenant " + w.tenant)
	d := time.Since(start)
	w.teardown()
	return d
}

// faultyTenant is a tenant whose every backend fails: its GCP project answers every call with 503 after
// faultyLatency, its default tunnel does not exist, and its Rancher cluster has no Projects. It has the same
// workload as a healthy tenant.
type faultyTenant struct {
	w          *workload
	services   []string
	ingresses  []string
	namespaces []string
}

func startFaultyTenant(tb testing.TB, env *isolationEnv) *faultyTenant {
	tb.Helper()
	w := newWorkload(tb, env.gce)
	f := &faultyTenant{w: w}
	env.gce.SetLatency(w.project, fakegce.AnyMethod, faultyLatency)
	env.gce.InjectFault(w.project, fakegce.AnyMethod, fakegce.Fault{Code: 503})
	// No tunnel, no Projects: delete what newWorkload made.
	if err := w.mp.TunnelV1alpha1().PangolinTunnels(w.tunnelNS).Delete(w.ctx, tunnelName, metav1.DeleteOptions{}); err != nil {
		tb.Fatal(err)
	}
	for _, p := range owners {
		if err := w.mp.ManagementV3().Projects(w.clusterID).Delete(w.ctx, p, metav1.DeleteOptions{}); err != nil {
			tb.Fatal(err)
		}
	}
	for i := range isolationServices {
		name := fmt.Sprintf("svc-%d", i)
		w.setService(name, w.endpoints(i, 0, isolationEndpointsPerZone))
		f.services = append(f.services, name)
	}
	for i := range isolationIngresses {
		name := fmt.Sprintf("ing-%d", i)
		// Hosts of its own: a host is published once in the cluster, and the faulty tenant's Ingresses, created
		// first, would otherwise hold the healthy tenant's.
		w.setIngress(name, hosts(i, "faulty-a", "faulty-b", "faulty-c")...)
		f.ingresses = append(f.ingresses, name)
	}
	// Not through addNamespace: these are never assigned, so they are not part of any wanted state.
	for i := range isolationNamespaces {
		ns := controlPlane.CreateNamespace(tb)
		owner := []string{"alpha", "beta", "gamma"}[i%3]
		w.patchNamespaceLabels(ns, map[string]*string{labelKey: &w.tenant, appOwnerKey: &owner})
		f.namespaces = append(f.namespaces, ns)
	}
	return f
}

// waitFailing waits until each of the faulty tenant's controllers reports why it cannot do its work: every
// Translation's NEGs in state Error with GCE's 503 as lastError, TunnelNotFound on every Ingress, ProjectNotFound
// on every namespace. Then nothing of it exists in GCE or in the API.
func (f *faultyTenant) waitFailing(tb testing.TB) {
	tb.Helper()
	w := f.w
	var why string
	err := wait.PollUntilContextTimeout(w.ctx, 250*time.Millisecond, convergeTimeout, true, func(ctx context.Context) (bool, error) {
		for _, svc := range f.services {
			tr, err := w.mp.MultiprojectV1alpha1().Translations(w.appNS).Get(ctx, translationName(svc), metav1.GetOptions{})
			if err != nil {
				why = fmt.Sprintf("Translation of %s: %v", svc, err)
				return false, nil
			}
			if len(tr.Status.Resources) != len(zones) {
				why = fmt.Sprintf("Translation %s: status lists %d NEGs, want %d", tr.Name, len(tr.Status.Resources), len(zones))
				return false, nil
			}
			for _, r := range tr.Status.Resources {
				if r.State != mpv1alpha1.BackendResourceStateError || !strings.Contains(r.LastError, "503") {
					why = fmt.Sprintf("Translation %s NEG %s/%s: state %s, lastError %q, want Error with 503", tr.Name, r.Zone, r.Name, r.State, r.LastError)
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		tb.Fatalf("the faulty tenant's GCE failures are not reported in its Translations: %s", why)
	}
	for _, ing := range f.ingresses {
		waitEvent(w.ctx, tb, "Ingress", w.appNS, ing, ingresstunnel.ReasonTunnelNotFound, w.tunnelNS+"/"+tunnelName)
	}
	for _, ns := range f.namespaces {
		waitEvent(w.ctx, tb, "Namespace", "", ns, namespaceproject.ReasonProjectNotFound, w.clusterID)
	}
	f.assertNothingDone(tb)
}

// assertNothingDone: no NEG in the failing project, no PangolinResource, no namespace assigned.
func (f *faultyTenant) assertNothingDone(tb testing.TB) {
	tb.Helper()
	o, err := f.w.observe()
	if err != nil {
		tb.Fatal(err)
	}
	if len(o.negs) != 0 || len(o.resources) != 0 || len(o.assigned) != 0 {
		tb.Errorf("the faulty tenant has NEGs %v, PangolinResources %d, assignments %v; want none", o.negs, len(o.resources), o.assigned)
	}
	for _, tr := range o.translations {
		if synced(tr) {
			tb.Errorf("the faulty tenant's Translation %s is Synced although every GCE call fails", tr.Name)
		}
	}
}

// remove clears the GCE faults and deletes the faulty tenant's Services, Ingresses and ProviderConfig, waiting
// until the ProviderConfig is gone (its Translations' NEGs, never created, are deleted as NotFound).
func (f *faultyTenant) remove(tb testing.TB, env *isolationEnv) {
	tb.Helper()
	w := f.w
	env.gce.ClearFaults(w.project)
	for _, svc := range f.services {
		w.deleteService(svc)
	}
	for _, ing := range f.ingresses {
		if err := w.kube.NetworkingV1().Ingresses(w.appNS).Delete(w.ctx, ing, metav1.DeleteOptions{}); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.mp.MultiprojectV1alpha1().ProviderConfigs().Delete(w.ctx, w.tenant, metav1.DeleteOptions{}); err != nil {
		tb.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(w.ctx, 250*time.Millisecond, convergeTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := w.mp.MultiprojectV1alpha1().ProviderConfigs().Get(ctx, w.tenant, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		tb.Fatalf("the faulty tenant %s was not cleaned up once its faults were cleared: %v", w.tenant, err)
	}
}

// isolationRound measures a healthy tenant's convergence alone, then with a faulty tenant present and failing in
// the same manager, and checks that the faulty tenant kept failing (and said why) throughout.
func isolationRound(tb testing.TB, env *isolationEnv) (alone, withFaulty time.Duration) {
	tb.Helper()
	alone = convergeHealthy(tb, env, "alone")

	f := startFaultyTenant(tb, env)
	f.waitFailing(tb)
	errorsBefore := totalCalls(env.gce.Errors(f.w.project))
	withFaulty = convergeHealthy(tb, env, "with a faulty tenant")
	// Still failing, and still retrying (with backoff): it is not given up on.
	f.assertNothingDone(tb)
	err := wait.PollUntilContextTimeout(f.w.ctx, 250*time.Millisecond, convergeTimeout, true, func(context.Context) (bool, error) {
		return totalCalls(env.gce.Errors(f.w.project)) > errorsBefore, nil
	})
	if err != nil {
		tb.Errorf("the faulty tenant stopped retrying GCE: %d failed calls before the healthy tenant's round, no more after", errorsBefore)
	}
	o, err := f.w.observe()
	if err != nil {
		tb.Fatal(err)
	}
	f.assertNothingDone(tb)
	var conds []string
	for _, c := range o.pc.Status.Conditions {
		conds = append(conds, c.Type+"="+conditionString(&c))
	}
	tb.Logf("faulty tenant %s: %d failed GCE calls; conditions: %s", f.w.tenant, totalCalls(env.gce.Errors(f.w.project)), strings.Join(conds, "; "))
	f.remove(tb, env)
	return alone, withFaulty
}

func totalCalls(byMethod map[fakegce.Method]int) int {
	n := 0
	for _, c := range byMethod {
		n += c
	}
	return n
}

// TestFaultyTenantDoesNotSlowHealthyTenant: two tenants in two GCP projects under one manager. The faulty one's
// GCP project fails every call with 503 after 2 s, its default tunnel does not exist and its Rancher cluster has no
// Projects; it reports each problem (Translation status, TunnelNotFound, ProjectNotFound) and keeps retrying. A
// healthy tenant's workload converges exactly both without and with the faulty tenant present. The two durations
// and their ratio are logged, not asserted (BenchmarkHealthyTenantConvergence reports the ratio).
func TestFaultyTenantDoesNotSlowHealthyTenant(t *testing.T) {
	env := startIsolationEnv(t)
	alone, withFaulty := isolationRound(t, env)
	t.Logf("healthy tenant converged in %s alone, %s with a faulty tenant: ratio %.2f",
		alone.Round(10*time.Millisecond), withFaulty.Round(10*time.Millisecond), withFaulty.Seconds()/alone.Seconds())
}

// BenchmarkHealthyTenantConvergence reports with-faulty/alone: the healthy tenant's convergence time with the
// faulty tenant present and failing, over its time alone, both measured in each round in the same manager process.
// 1 means one tenant's faults cost another nothing.
func BenchmarkHealthyTenantConvergence(b *testing.B) {
	env := startIsolationEnv(b)
	var alone, withFaulty time.Duration
	rounds := 0
	for b.Loop() {
		a, f := isolationRound(b, env)
		alone += a
		withFaulty += f
		rounds++
	}
	b.ReportMetric(alone.Seconds()/float64(rounds), "alone-s/op")
	b.ReportMetric(withFaulty.Seconds()/float64(rounds), "with-faulty-s/op")
	b.ReportMetric(withFaulty.Seconds()/alone.Seconds(), "with-faulty/alone")
	if b.Failed() {
		return
	}
	benchresult.Record(b, benchresult.Row{
		ID: "isolation-healthy-tenant", Benchmark: "BenchmarkHealthyTenantConvergence", Package: "test/e2e",
		What: "a healthy tenant's workload converges beside a tenant whose GCE project fails every call (503 after " +
			faultyLatency.String() + "), whose default tunnel and Rancher Projects are missing; the built binary, real API server, fake GCE",
		Baseline: "the same tenant's convergence alone, in the same manager process and round",
		Measures: []benchresult.Measure{{
			Ours: withFaulty.Seconds() / float64(rounds), Baseline: benchresult.Float(alone.Seconds() / float64(rounds)), Unit: "s",
		}},
		Notes:    fmt.Sprintf("Mean of %d rounds.", rounds),
		Command:  "make bench BENCH=HealthyTenantConvergence",
		Settings: benchresult.GoTestSettings(nil),
		Doc:      "docs/operations.md#bad-input-and-tenant-isolation",
	})
}
