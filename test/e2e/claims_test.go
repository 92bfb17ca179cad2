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
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/claims"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/ingresstunnel"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/neg/translator"
	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

// TestClaimsHoldAcrossShardedReplicas: three replicas of the built binary with --sharding=true share six tenants,
// three in one GCP project and three in another; each tenant creates, at the same moment, an Ingress publishing one
// host and a Service asking for one custom NEG name, the same host and name for all six. Exactly one
// PangolinResource publishes the host, and in each project exactly one Translation declares the name (a custom NEG
// name is held per GCP project), however the tenants fall on the replicas; the others get HostConflict and
// NEGNameConflict Warnings naming their holder. Watches running through the whole test fail it if two objects ever
// published the host, or declared the name in one project, at once.
func TestClaimsHoldAcrossShardedReplicas(t *testing.T) {
	const tenants = 6
	resetLease(t)
	cleanupShardLeases(t)
	cleanupClaimRecords(t)
	installShardedRBAC(t)
	gce := startFakeGCE(t)
	ws := make([]*workload, tenants)
	for i := range ws {
		ws[i] = newWorkloadWithoutProviderConfig(t, gce)
		if i >= 2 {
			ws[i].project = ws[i%2].project
		}
		ws[i].createProviderConfig()
	}
	host := "shared-" + ws[0].tenant + ".example.com"
	negName := "shared-" + ws[0].tenant
	hostCounter := countPublishers(t, ws[0].mp, host)
	negCounter := countDeclarers(t, ws[0], negName)

	kubeconfig := managerKubeconfig(t)
	// The shipped durations: nothing here waits for a Lease to expire, and a 4 s renew deadline was missed on a
	// loaded machine while a replica stopped (it then exits 1, as it must, and the test failed).
	le := leaderElection{leaseDuration: 15 * time.Second, renewDeadline: 10 * time.Second, retryPeriod: time.Second}
	replicas := []*manager{
		startManager(t, "claims-a", kubeconfig, gce.Endpoint(), le, "--sharding=true"),
		startManager(t, "claims-b", kubeconfig, gce.Endpoint(), le, "--sharding=true"),
		startManager(t, "claims-c", kubeconfig, gce.Endpoint(), le, "--sharding=true"),
	}
	names := shardNames(t, replicas)
	waitShardsRun(t, ws, names)
	logShares(t, ws, names)

	// All at once: each tenant's Ingress and Service are created by a goroutine of its own, released together.
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 2*tenants)
	for _, w := range ws {
		wg.Go(func() {
			<-start
			ing := pangolinIngress(w.appNS, "web", host)
			if _, err := w.kube.NetworkingV1().Ingresses(w.appNS).Create(w.ctx, ing, metav1.CreateOptions{}); err != nil {
				errs <- err
			}
		})
		wg.Go(func() {
			<-start
			svc := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: w.appNS, Name: "api",
					Annotations: map[string]string{negapi.AnnotationKey: fmt.Sprintf(`{"exposed_ports":{"80":{"name":%q}}}`, negName)}},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
			}
			if _, err := w.kube.CoreV1().Services(w.appNS).Create(w.ctx, svc, metav1.CreateOptions{}); err != nil {
				errs <- err
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// One Ingress, and one Service in each project, end up publishing: the first whose publication the API server
	// took (among claimants nobody holds, an earlier one may take the claim record before the later one's object is
	// announced in it, never after). Once one publishes, it keeps the name.
	var pub published
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, convergeTimeout, true, func(ctx context.Context) (bool, error) {
		var err error
		pub, err = publishersOf(ctx, ws[0], host, negName)
		return err == nil && len(pub.resources) == 1 && len(pub.translations) == 2, nil
	})
	if err != nil {
		t.Fatalf("host %s published from %v, NEG name %s declared from %v; want one host and a name in each project",
			host, pub.resources, negName, pub.translations)
	}
	ingHolder := workloadIn(t, ws, pub.resources[0])
	svcHolders := map[string]*workload{} // project → the tenant whose Service holds the name there
	for _, ns := range pub.translations {
		w := workloadIn(t, ws, ns)
		svcHolders[w.project] = w
		t.Logf("the NEG name is declared in project %s by tenant %s", w.project, w.tenant)
	}
	if len(svcHolders) != 2 {
		t.Fatalf("NEG name %s declared from %v, both in one project", negName, pub.translations)
	}
	t.Logf("the host is published by tenant %s", ingHolder.tenant)

	// The others are told who holds the host and, in their project, the name.
	for _, w := range ws {
		if w != ingHolder {
			waitEvent(w.ctx, t, "Ingress", w.appNS, "web", ingresstunnel.ReasonHostConflict, host, "Ingress "+ingHolder.appNS+"/web")
		}
		if holder := svcHolders[w.project]; w != holder {
			waitEvent(w.ctx, t, "Service", w.appNS, "api", translator.ReasonNameConflict, negName, "GCP project "+w.project,
				"Service "+holder.appNS+"/api")
		}
	}
	// And the holders still publish, alone.
	declared := pub.translations
	if pub, err = publishersOf(t.Context(), ws[0], host, negName); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(pub.resources, []string{ingHolder.appNS}) || !slices.Equal(pub.translations, declared) {
		t.Fatalf("host %s published from %v (want only %s), NEG name %s declared from %v (want only %v)",
			host, pub.resources, ingHolder.appNS, negName, pub.translations, declared)
	}
	if n := hostCounter.stop(); n != 1 {
		t.Errorf("%d PangolinResources published %s at once, want 1", n, host)
	}
	if n := negCounter.stop(); n != 1 {
		t.Errorf("%d Translations declared NEG name %s in one project at once, want 1", n, negName)
	}
	for _, m := range replicas {
		stopGracefully(t, m)
	}
}

// workloadIn returns the workload whose app namespace is namespace.
func workloadIn(t *testing.T, ws []*workload, namespace string) *workload {
	t.Helper()
	for _, w := range ws {
		if w.appNS == namespace {
			return w
		}
	}
	t.Fatalf("no tenant has namespace %s", namespace)
	return nil
}

// published lists the namespaces whose PangolinResources publish a host and whose Translations declare a NEG name.
type published struct{ resources, translations []string }

func publishersOf(ctx context.Context, w *workload, host, negName string) (published, error) {
	var pub published
	resources, err := w.mp.TunnelV1alpha1().PangolinResources("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return pub, err
	}
	for _, r := range resources.Items {
		if r.Spec.HTTPConfig != nil && r.Spec.HTTPConfig.Subdomain+"."+r.Spec.HTTPConfig.DomainName == host {
			pub.resources = append(pub.resources, r.Namespace)
		}
	}
	translations, err := w.mp.MultiprojectV1alpha1().Translations("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return pub, err
	}
	for _, tr := range translations.Items {
		if declaresNEG(&tr, negName) {
			pub.translations = append(pub.translations, tr.Namespace)
		}
	}
	return pub, nil
}

func declaresNEG(tr *mpv1alpha1.Translation, name string) bool {
	return slices.ContainsFunc(tr.Spec.Resources, func(r mpv1alpha1.BackendResource) bool { return r.Name == name })
}

// declarers counts, from one watch of every Translation, the most that ever declared one NEG name in one GCP
// project at once (one being deleted still counts: its pusher deletes the NEGs before its finalizer goes).
type declarers struct {
	w    watch.Interface
	done chan struct{}
	mu   sync.Mutex
	max  int
}

func countDeclarers(t *testing.T, w *workload, name string) *declarers {
	t.Helper()
	list, err := w.mp.MultiprojectV1alpha1().Translations("").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d := &declarers{done: make(chan struct{})}
	live := map[string]map[types.UID]bool{} // project → the Translations that declare the name there
	observe := func(typ watch.EventType, tr *mpv1alpha1.Translation) {
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, declaring := range live {
			delete(declaring, tr.UID)
		}
		if typ == watch.Deleted || !declaresNEG(tr, name) {
			return
		}
		for _, project := range declaredIn(tr, name) {
			if live[project] == nil {
				live[project] = map[types.UID]bool{}
			}
			live[project][tr.UID] = true
			d.max = max(d.max, len(live[project]))
		}
	}
	for i := range list.Items {
		observe(watch.Added, &list.Items[i])
	}
	if d.w, err = w.mp.MultiprojectV1alpha1().Translations("").Watch(t.Context(), metav1.ListOptions{ResourceVersion: list.ResourceVersion}); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(d.done)
		for ev := range d.w.ResultChan() {
			if tr, ok := ev.Object.(*mpv1alpha1.Translation); ok {
				observe(ev.Type, tr)
			}
		}
	}()
	return d
}

// declaredIn are the GCP projects where a Translation that declares the NEG name may have a NEG of it: the one its
// translator declared it in, and those its pusher's status lists.
func declaredIn(tr *mpv1alpha1.Translation, name string) []string {
	projects := []string{tr.Annotations[mpv1alpha1.TranslationNEGProjectAnnotationKey]}
	for _, r := range tr.Status.Resources {
		if r.Name == name && r.Project != "" {
			projects = append(projects, r.Project)
		}
	}
	slices.Sort(projects)
	return slices.Compact(projects)
}

func (d *declarers) stop() int {
	d.w.Stop()
	<-d.done
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.max
}

// cleanupClaimRecords deletes the claim records (Leases labeled claims.KindLabel) before and after the test, so no
// earlier test's holder lingers in kube-system.
func cleanupClaimRecords(t *testing.T) {
	t.Helper()
	clean := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = controlPlane.AdminClient().CoordinationV1().Leases(metav1.NamespaceSystem).DeleteCollection(ctx,
			metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: claims.KindLabel})
	}
	clean()
	t.Cleanup(clean)
}
