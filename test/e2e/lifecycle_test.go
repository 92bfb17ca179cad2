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
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/neg/pusher"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/providerconfig"
	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
)

// lifecycleElection keeps the Lease with the leader for the whole test on a loaded machine.
var lifecycleElection = leaderElection{leaseDuration: 30 * time.Second, renewDeadline: 20 * time.Second, retryPeriod: time.Second}

// TestTenantExitLeavesNothingBehind walks a tenant through the exits that used to leak: spec.gcp removed (its NEGs
// are deleted from the recorded project), spec.gcp back with another project (a migration: new NEGs first, none
// left in the old project), and the ProviderConfig deleted while no manager runs (the next manager, which never ran
// the tenant's controllers, still cleans up before the finalizer goes). After each step the fake GCE and the API are
// audited; at the end the app namespace is deleted and must not hang.
func TestTenantExitLeavesNothingBehind(t *testing.T) {
	resetLease(t)
	gce := startFakeGCE(t)
	w := newWorkload(t, gce)
	kubeconfig := managerKubeconfig(t)
	a := startManager(t, "a", kubeconfig, gce.Endpoint(), lifecycleElection)
	waitLeader(t, a.identity(), 2*time.Minute)

	w.setService("svc-0", w.endpoints(0, 0, 2))
	w.setService("svc-1", w.endpoints(1, 0, 2))
	w.setIngress("ing-0", hosts(0, "a", "b")...)
	w.waitConverged("the tenant's NEGs and PangolinResources")
	firstProject := w.project
	gcp := w.providerConfig().Spec.GCP.DeepCopy()

	// Case: spec.gcp removed. The neg controller's cleanup deletes the Translations and their NEGs; NEGReady and
	// the recorded section go once nothing is left.
	w.patchProviderConfig(`{"spec":{"gcp":null}}`)
	waitUntil(t, "the NEGs and Translations of the removed spec.gcp to go", func() (bool, string) {
		pc := w.providerConfig()
		negs, trs := len(gce.NEGs(firstProject)), w.translationCount()
		cond := meta.FindStatusCondition(pc.Status.Conditions, mpv1alpha1.ProviderConfigConditionNEGReady)
		recorded := pc.Status.AppliedSpec != nil && pc.Status.AppliedSpec.GCP != nil
		return negs == 0 && trs == 0 && cond == nil && !recorded,
			fmt.Sprintf("NEGs %d, Translations %d, NEGReady %+v, recorded gcp %v", negs, trs, cond, recorded)
	})
	auditNothingLeaked(t, gce, w.tenant, firstProject)

	// Case: spec.gcp back, then its project changed: the NEGs are made in the new project and deleted from the old.
	w.setGCP(gcp)
	w.waitConverged("spec.gcp restored")
	secondProject := w.tenant + "-p2"
	gcp.ProjectID = secondProject
	w.setGCP(gcp)
	w.project = secondProject
	w.waitConverged("the NEGs in the new project")
	waitUntil(t, "nothing left in the old project", func() (bool, string) {
		n := len(gce.NEGs(firstProject))
		return n == 0, fmt.Sprintf("%d NEGs in %s", n, firstProject)
	})
	auditNothingLeaked(t, gce, w.tenant, firstProject, secondProject)

	// Case: deleted while no manager runs. The manager that starts next never ran this tenant's controllers.
	stopGracefully(t, a)
	if err := w.mp.MultiprojectV1alpha1().ProviderConfigs().Delete(w.ctx, w.tenant, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	b := startManager(t, "b", kubeconfig, gce.Endpoint(), lifecycleElection)
	waitLeader(t, b.identity(), 2*time.Minute)
	waitUntil(t, "the deleted tenant to be cleaned up and gone", func() (bool, string) {
		o, err := w.observe()
		if err != nil {
			return false, err.Error()
		}
		negs := len(gce.NEGs(firstProject)) + len(gce.NEGs(secondProject))
		if o.pc != nil {
			return false, fmt.Sprintf("ProviderConfig still there: %+v", o.pc.Status.Conditions)
		}
		return negs == 0 && len(o.translations) == 0 && len(o.resources) == 0,
			fmt.Sprintf("NEGs %d, Translations %d, PangolinResources %d", negs, len(o.translations), len(o.resources))
	})
	auditNothingLeaked(t, gce, w.tenant, firstProject, secondProject)

	// Nothing of ours holds the app namespace: it goes away.
	if err := w.kube.CoreV1().Namespaces().Delete(w.ctx, w.appNS, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the app namespace to be deleted", func() (bool, string) {
		ns, err := w.kube.CoreV1().Namespaces().Get(w.ctx, w.appNS, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("phase %s, conditions %+v", ns.Status.Phase, ns.Status.Conditions)
	})
}

// TestBlockedCleanupKeepsTheFinalizerUntilAbandoned: a manager that runs with --controllers=*,-neg cannot delete a
// tenant's NEGs. Deleting the tenant then keeps the finalizer, and the condition says what is left and why; the
// operator's abandon annotation ends the deletion, releases the Translations and lists the abandoned NEGs in an
// Event. The NEGs stay in GCE: that is what abandoning means.
func TestBlockedCleanupKeepsTheFinalizerUntilAbandoned(t *testing.T) {
	resetLease(t)
	gce := startFakeGCE(t)
	w := newWorkload(t, gce)
	kubeconfig := managerKubeconfig(t)
	a := startManager(t, "a", kubeconfig, gce.Endpoint(), lifecycleElection)
	waitLeader(t, a.identity(), 2*time.Minute)
	w.setService("svc-0", w.endpoints(0, 0, 2))
	w.waitConverged("the tenant's NEGs")
	negsBefore := len(gce.NEGs(w.project))

	stopGracefully(t, a)
	b := startManager(t, "b", kubeconfig, gce.Endpoint(), lifecycleElection, "--controllers=*,-neg")
	waitLeader(t, b.identity(), 2*time.Minute)
	if err := w.mp.MultiprojectV1alpha1().ProviderConfigs().Delete(w.ctx, w.tenant, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "NEGReady=False CleanupBlocked", func() (bool, string) {
		pc := w.providerConfig()
		c := meta.FindStatusCondition(pc.Status.Conditions, mpv1alpha1.ProviderConfigConditionNEGReady)
		return c != nil && c.Reason == providerconfig.ReasonCleanupBlocked && strings.Contains(c.Message, "--controllers") &&
			strings.Contains(c.Message, translationName("svc-0")), fmt.Sprintf("NEGReady %+v", c)
	})
	if pc := w.providerConfig(); !slices.Contains(pc.Finalizers, mpv1alpha1.ProviderConfigCleanupFinalizer) {
		t.Fatal("the finalizer went although the NEGs could not be deleted")
	}
	if n := len(gce.NEGs(w.project)); n != negsBefore {
		t.Fatalf("%d NEGs in GCE, want the %d made before", n, negsBefore)
	}

	w.patchProviderConfig(fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, mpv1alpha1.AbandonCloudResourcesAnnotation))
	waitUntil(t, "the ProviderConfig and its Translations to go", func() (bool, string) {
		o, err := w.observe()
		if err != nil {
			return false, err.Error()
		}
		return o.pc == nil && len(o.translations) == 0, fmt.Sprintf("ProviderConfig gone: %v, Translations %d", o.pc == nil, len(o.translations))
	})
	events, err := w.kube.CoreV1().Events(metav1.NamespaceDefault).List(w.ctx, metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.name": w.tenant, "reason": providerconfig.EventCloudResourcesAbandoned}.String()})
	if err != nil {
		t.Fatal(err)
	}
	if len(events.Items) != 1 {
		t.Fatalf("%d %s Events, want 1", len(events.Items), providerconfig.EventCloudResourcesAbandoned)
	}
	for _, n := range gce.NEGs(w.project) {
		if !strings.Contains(events.Items[0].Message, path.Base(n.Zone)+"/"+n.Name) {
			t.Errorf("the Event %q does not list abandoned NEG %s/%s", events.Items[0].Message, path.Base(n.Zone), n.Name)
		}
	}
	if n := len(gce.NEGs(w.project)); n != negsBefore {
		t.Errorf("%d NEGs in GCE after abandoning, want the %d abandoned", n, negsBefore)
	}
}

func (w *workload) providerConfig() *mpv1alpha1.ProviderConfig {
	w.t.Helper()
	pc, err := w.mp.MultiprojectV1alpha1().ProviderConfigs().Get(w.ctx, w.tenant, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return pc
}

func (w *workload) patchProviderConfig(patch string) {
	w.t.Helper()
	if _, err := w.mp.MultiprojectV1alpha1().ProviderConfigs().Patch(w.ctx, w.tenant, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

func (w *workload) setGCP(gcp *mpv1alpha1.GCPConfig) {
	w.t.Helper()
	b, err := json.Marshal(map[string]any{"spec": map[string]any{"gcp": gcp}})
	if err != nil {
		w.t.Fatal(err)
	}
	w.patchProviderConfig(string(b))
}

func (w *workload) translationCount() int {
	trs, err := w.mp.MultiprojectV1alpha1().Translations(w.appNS).List(w.ctx, metav1.ListOptions{})
	if err != nil {
		return -1
	}
	return len(trs.Items)
}

// waitUntil polls cond until it holds; its second result says what was seen, for the failure message.
func waitUntil(t testing.TB, what string, cond func() (bool, string)) {
	t.Helper()
	var seen string
	start := time.Now()
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, convergeTimeout, true, func(context.Context) (bool, error) {
		var ok bool
		ok, seen = cond()
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v; last seen: %s", what, err, seen)
	}
	t.Logf("%s: after %s", what, time.Since(start).Round(100*time.Millisecond))
}

// auditNothingLeaked checks the promises a tenant's exit must keep: every NEG carrying our marker in the projects is
// listed by a live Translation's status in that project; no Translation of the tenant keeps the deleter finalizer
// once its ProviderConfig is gone; no Service of the cluster hangs in a foreground deletion.
func auditNothingLeaked(t testing.TB, gce *fakegce.Server, tenant string, projects ...string) {
	t.Helper()
	ctx := t.Context()
	kube := controlPlane.AdminClient()
	mp, err := mpclientset.NewForConfig(controlPlane.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	trs, err := mp.MultiprojectV1alpha1().Translations(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pcs, err := mp.MultiprojectV1alpha1().ProviderConfigs().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tenants := map[string]bool{}
	for _, pc := range pcs.Items {
		tenants[pc.Name] = true
	}
	listed := map[string]bool{}
	for _, tr := range trs.Items {
		for _, r := range tr.Status.Resources {
			listed[r.Project+"/"+r.Zone+"/"+r.Name] = true
		}
		if tr.Labels[labelKey] == tenant && !tenants[tenant] && slices.Contains(tr.Finalizers, mpv1alpha1.TranslationDeleterFinalizer) {
			t.Errorf("Translation %s/%s keeps %s for tenant %q, which is gone", tr.Namespace, tr.Name, mpv1alpha1.TranslationDeleterFinalizer, tenant)
		}
	}
	for _, project := range projects {
		for _, n := range gce.NEGs(project) {
			if strings.Contains(n.Description, `"managed-by":"multiproject-controller-manager"`) && !listed[project+"/"+path.Base(n.Zone)+"/"+n.Name] {
				t.Errorf("NEG %s in %s of project %s carries our marker but no Translation lists it", n.Name, path.Base(n.Zone), project)
			}
		}
	}
	svcs, err := kube.CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, svc := range svcs.Items {
		if svc.DeletionTimestamp != nil && slices.Contains(svc.Finalizers, metav1.FinalizerDeleteDependents) {
			t.Errorf("Service %s/%s hangs in a foreground deletion", svc.Namespace, svc.Name)
		}
	}
}

// TestSweepCollectsALeakedNEG: while no manager runs, a person strips the finalizer of a Service's Translation and
// deletes it with the Service, so nothing will ever delete its NEGs through the Translation. The next manager's
// garbage sweep finds them (our marker, no Translation claims them) and deletes them within one sweep period.
func TestSweepCollectsALeakedNEG(t *testing.T) {
	resetLease(t)
	gce := startFakeGCE(t)
	w := newWorkload(t, gce)
	kubeconfig := managerKubeconfig(t)
	const period = 5 * time.Second
	a := startManager(t, "a", kubeconfig, gce.Endpoint(), lifecycleElection)
	waitLeader(t, a.identity(), 2*time.Minute)
	w.setService("svc-0", w.endpoints(0, 0, 2))
	w.setService("svc-1", w.endpoints(1, 0, 2))
	w.waitConverged("the tenant's NEGs")
	leaked := w.translation(translationName("svc-0"))

	stopGracefully(t, a)
	w.patchTranslation(leaked.Name, `{"metadata":{"finalizers":null}}`)
	if err := w.mp.MultiprojectV1alpha1().Translations(w.appNS).Delete(w.ctx, leaked.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.deleteService("svc-0")
	if n := len(gce.NEGs(w.project)); n != 2*len(zones) {
		t.Fatalf("%d NEGs before the sweep, want %d (both Services' NEGs: the leak)", n, 2*len(zones))
	}

	b := startManager(t, "b", kubeconfig, gce.Endpoint(), lifecycleElection, "--neg-gc-period="+period.String())
	started := time.Now()
	waitLeader(t, b.identity(), 2*time.Minute)
	waitUntil(t, "the leaked NEGs to be swept", func() (bool, string) {
		var left []string
		for _, n := range gce.NEGs(w.project) {
			if r := leaked.Spec.Resources; len(r) > 0 && n.Name == r[0].Name {
				left = append(left, path.Base(n.Zone)+"/"+n.Name)
			}
		}
		return len(left) == 0, fmt.Sprintf("leaked NEGs still in GCE: %v", left)
	})
	// One period until the first sweep after start, plus the sweep's grace and its calls.
	if took := time.Since(started); took > period+30*time.Second {
		t.Errorf("the sweep took %s, want within one period (%s) plus its grace", took, period)
	}
	w.waitConverged("svc-1 untouched")
	auditNothingLeaked(t, gce, w.tenant, w.project)
}

func (w *workload) translation(name string) *mpv1alpha1.Translation {
	w.t.Helper()
	tr, err := w.mp.MultiprojectV1alpha1().Translations(w.appNS).Get(w.ctx, name, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return tr
}

func (w *workload) patchTranslation(name, patch string) {
	w.t.Helper()
	if _, err := w.mp.MultiprojectV1alpha1().Translations(w.appNS).Patch(w.ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

// stopGracefully stops a manager with SIGTERM and waits for its exit.
func stopGracefully(t testing.TB, m *manager) {
	t.Helper()
	start := time.Now()
	m.signal(syscall.SIGTERM)
	if err := m.waitExit(time.Minute); err != nil {
		t.Fatalf("manager %s did not shut down: %v", m.name, err)
	}
	t.Logf("manager %s shut down in %s", m.name, time.Since(start).Round(100*time.Millisecond))
}

// TestDeletionDoesNotWaitForALoadBalancer: a backend service uses a Service's NEGs, so GCE refuses to delete them.
// Deleting the Service's namespace does not wait for it: the NEGs are emptied, the Translation released, and the
// namespace is gone within a minute; a Warning Event and multiproject_neg_awaiting_deletion say which NEGs wait.
// The tenant, deleted meanwhile, keeps its finalizer, its NEGReady condition naming the NEGs, until the backend
// service lets them go and the garbage sweep deletes them; then nothing is left.
func TestDeletionDoesNotWaitForALoadBalancer(t *testing.T) {
	resetLease(t)
	gce := startFakeGCE(t)
	w := newWorkload(t, gce)
	const period = 5 * time.Second
	m := startManager(t, "a", managerKubeconfig(t), gce.Endpoint(), lifecycleElection, "--neg-gc-period="+period.String())
	waitLeader(t, m.identity(), 2*time.Minute)
	w.setService("svc-0", w.endpoints(0, 0, 2))
	w.waitConverged("the Service's NEGs")
	held := w.translation(translationName("svc-0")).Spec.Resources
	for _, r := range held {
		if err := gce.SetInUseBy(w.project, r.Zone, r.Name, "web-backend"); err != nil {
			t.Fatal(err)
		}
	}

	deleted := time.Now()
	if err := w.kube.CoreV1().Namespaces().Delete(w.ctx, w.appNS, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the namespace to be deleted", func() (bool, string) {
		ns, err := w.kube.CoreV1().Namespaces().Get(w.ctx, w.appNS, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("phase %s, conditions %+v", ns.Status.Phase, ns.Status.Conditions)
	})
	if took := time.Since(deleted); took > time.Minute {
		t.Errorf("the namespace took %s to go, want under a minute: it waited for the load balancer", took)
	}
	for _, r := range held {
		eps, ok := gce.Endpoints(w.project, r.Zone, r.Name)
		if !ok {
			t.Fatalf("NEG %s/%s is gone although a backend service uses it", r.Zone, r.Name)
		}
		if len(eps) != 0 {
			t.Errorf("NEG %s/%s keeps %d endpoints after its namespace was deleted, want none", r.Zone, r.Name, len(eps))
		}
	}
	waitUntil(t, "a Warning Event for each NEG left to the sweep", func() (bool, string) {
		events, err := w.kube.CoreV1().Events(metav1.NamespaceAll).List(w.ctx, metav1.ListOptions{
			FieldSelector: fields.Set{"reason": pusher.ReasonNEGAwaitingDeletion}.String()})
		if err != nil {
			return false, err.Error()
		}
		var named []string
		for _, r := range held {
			for _, e := range events.Items {
				if strings.Contains(e.Message, r.Name) && strings.Contains(e.Message, r.Zone) && strings.Contains(e.Message, "web-backend") &&
					(e.InvolvedObject.Name == w.appNS || e.InvolvedObject.Name == "svc-0") {
					named = append(named, r.Zone)
					break
				}
			}
		}
		return len(named) == len(held), fmt.Sprintf("Events name the NEGs in %v of %d zones", named, len(held))
	})
	client := adminHTTPClient(t)
	defer client.CloseIdleConnections()
	waitUntil(t, "multiproject_neg_awaiting_deletion to count the NEGs", func() (bool, string) {
		for _, s := range scrape(t, client, m)["multiproject_neg_awaiting_deletion"] {
			if string(s.Metric["provider_config"]) == w.tenant {
				return int(s.Value) == len(held), fmt.Sprintf("%v", s.Value)
			}
		}
		return false, "no series for the tenant"
	})

	// The tenant, deleted now, stays until its NEGs are gone, and says which hold it.
	if err := w.mp.MultiprojectV1alpha1().ProviderConfigs().Delete(w.ctx, w.tenant, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "NEGReady to name the NEGs that hold the deleted tenant", func() (bool, string) {
		pc := w.providerConfig()
		c := meta.FindStatusCondition(pc.Status.Conditions, mpv1alpha1.ProviderConfigConditionNEGReady)
		if c == nil || c.Status != metav1.ConditionFalse {
			return false, fmt.Sprintf("NEGReady %+v", c)
		}
		for _, r := range held {
			if !strings.Contains(c.Message, r.Zone+"/"+r.Name) || !strings.Contains(c.Message, "web-backend") {
				return false, fmt.Sprintf("NEGReady %+v does not name NEG %s/%s and its backend service", c, r.Zone, r.Name)
			}
		}
		return true, ""
	})
	// Two sweeps of the cleanup later (each tries every NEG again) it is still there: nothing of it leaks.
	deletes := gce.Calls(w.project)[fakegce.MethodDelete]
	waitUntil(t, "two more sweeps", func() (bool, string) {
		n := gce.Calls(w.project)[fakegce.MethodDelete] - deletes
		return n >= 2*len(held), fmt.Sprintf("%d deletes refused since", n)
	})
	if pc := w.providerConfig(); !slices.Contains(pc.Finalizers, mpv1alpha1.ProviderConfigCleanupFinalizer) {
		t.Fatalf("the tenant's finalizer went while its NEGs were still in GCE: %v", pc.Finalizers)
	}

	released := time.Now()
	for _, r := range held {
		if err := gce.SetInUseBy(w.project, r.Zone, r.Name); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "the sweep to delete the NEGs and the tenant to go", func() (bool, string) {
		o, err := w.observe()
		if err != nil {
			return false, err.Error()
		}
		negs := len(gce.NEGs(w.project))
		return o.pc == nil && negs == 0, fmt.Sprintf("ProviderConfig gone %v, NEGs %d", o.pc == nil, negs)
	})
	// One period until the next sweep, plus the sweep's grace and its calls.
	if took := time.Since(released); took > period+30*time.Second {
		t.Errorf("the NEGs went %s after the backend service let them go, want within one sweep period (%s) plus its grace", took, period)
	}
	auditNothingLeaked(t, gce, w.tenant, w.project)
}
