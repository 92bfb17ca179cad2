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
	"path"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/ingresstunnel"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/neg/translator"
	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

// TestAnOlderObjectTakesNoPublishedName: the two takeovers a tenant's user could make by editing an older object of
// their own, tried on the built binary with the shipped RBAC, as that user (the built-in edit ClusterRole in their
// namespace only). The tenants share a GCP project (custom NEG names are held per project). Tenant B's Service and
// Ingress are created first; tenant A's newer Service then publishes a
// custom NEG name (its NEGs in A's project, with their endpoints) and A's newer Ingress a host. B's user annotates the
// older Service with the same custom name and changes the older Ingress's host to A's. A keeps both: B gets one
// NEGNameConflict and one HostConflict naming A's objects, and nothing of the names. A restart of the manager in the
// middle of the attempt changes nothing. A sampler reads A's NEGs and PangolinResources every 200 ms throughout: each
// NEG keeps its GCE id and never falls below its endpoints, the PangolinResource keeps its UID.
func TestAnOlderObjectTakesNoPublishedName(t *testing.T) {
	resetLease(t)
	gce := startFakeGCE(t)
	// Both tenants in one GCP project: a custom NEG name is held per project, so only there can one tenant's Service
	// reach another's NEG.
	a, b := newWorkload(t, gce), newWorkloadWithoutProviderConfig(t, gce)
	b.project = a.project
	b.createProviderConfig()
	negName := "shop-" + a.tenant
	appHost, otherHost := "app-"+a.tenant+".example.com", "other-"+a.tenant+".example.com"
	userB := editorOf(t, b.appNS)

	// B's objects come first: a Service without the NEG annotation and an Ingress publishing another host.
	if _, err := userB.CoreV1().Services(b.appNS).Create(b.ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: b.appNS, Name: "old"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("B's user creating a Service: %v", err)
	}
	if _, err := userB.NetworkingV1().Ingresses(b.appNS).Create(b.ctx, pangolinIngress(b.appNS, "old", otherHost), metav1.CreateOptions{}); err != nil {
		t.Fatalf("B's user creating an Ingress: %v", err)
	}

	le := leaderElection{leaseDuration: 15 * time.Second, renewDeadline: 10 * time.Second, retryPeriod: time.Second}
	m := startManager(t, "incumbent-a", managerKubeconfig(t), gce.Endpoint(), le)
	waitLeader(t, m.identity(), 2*time.Minute)

	// A's newer Service with the custom name, and its newer Ingress.
	a.setNamedService("web", negName, a.endpoints(1, 0, 2))
	a.setIngress("web", appHost)
	held := a.waitConverged("tenant A publishes its custom NEG name and its host")
	waitPublishedIn(t, b, otherHost)
	sampler := sampleHolder(t, a, held)

	// B's user aims its older objects at A's names.
	svc, err := userB.CoreV1().Services(b.appNS).Get(b.ctx, "old", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Annotations = map[string]string{negapi.AnnotationKey: fmt.Sprintf(`{"exposed_ports":{"80":{"name":%q}}}`, negName)}
	if _, err := userB.CoreV1().Services(b.appNS).Update(b.ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("B's user annotating its older Service: %v", err)
	}
	ing, err := userB.NetworkingV1().Ingresses(b.appNS).Get(b.ctx, "old", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ing.Spec.Rules[0].Host = appHost
	if _, err := userB.NetworkingV1().Ingresses(b.appNS).Update(b.ctx, ing, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("B's user changing its older Ingress's host: %v", err)
	}
	holderService, holderIngress := "Service "+a.appNS+"/web", "Ingress "+a.appNS+"/web"
	nameConflicts := waitEvent(b.ctx, t, "Service", b.appNS, "old", translator.ReasonNameConflict, negName, holderService)
	hostConflicts := waitEvent(b.ctx, t, "Ingress", b.appNS, "old", ingresstunnel.ReasonHostConflict, appHost, holderIngress)

	// A restart in the middle of the attempt: the new process decides from the cluster, and tells B again.
	stopGracefully(t, m)
	m = startManager(t, "incumbent-b", managerKubeconfig(t), gce.Endpoint(), le)
	waitLeader(t, m.identity(), 2*time.Minute)
	waitEventCount(t, "Service", b.appNS, "old", translator.ReasonNameConflict, eventCount(nameConflicts)+1)
	waitEventCount(t, "Ingress", b.appNS, "old", ingresstunnel.ReasonHostConflict, eventCount(hostConflicts)+1)
	a.waitConverged("tenant A after the restart")
	if n := b.translationCount(); n != 0 {
		t.Errorf("tenant B has %d Translations, want none", n)
	}
	if got := publishedIn(t, b, appHost); len(got) != 0 {
		t.Errorf("tenant B publishes %s through %v", appHost, got)
	}
	if problems := sampler.stop(); len(problems) > 0 {
		t.Errorf("tenant A's NEGs or PangolinResource changed during the attempt:\n%s", strings.Join(problems, "\n"))
	}
	for kind, reason := range map[string]string{"Service": translator.ReasonNameConflict, "Ingress": ingresstunnel.ReasonHostConflict} {
		if evs := events(a.ctx, t, kind, a.appNS, "web", reason); len(evs) > 0 {
			t.Errorf("tenant A's %s got %s: %s", kind, reason, evs[0].Message)
		}
	}
	stopGracefully(t, m)
}

// setNamedService is setService for a Service whose port 80 asks for the custom NEG name negName.
func (w *workload) setNamedService(name, negName string, eps []endpoint) {
	w.t.Helper()
	if _, err := w.kube.DiscoveryV1().EndpointSlices(w.appNS).Create(w.ctx, endpointSlice(w.appNS, name, eps), metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	if _, err := w.kube.CoreV1().Services(w.appNS).Create(w.ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.appNS, Name: name,
			Annotations: map[string]string{w.negAnnotation: fmt.Sprintf(`{"exposed_ports":{"80":{"name":%q}}}`, negName)}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	w.mu.Lock()
	w.services[name] = eps
	w.mu.Unlock()
}

// waitEventCount waits until the Events of one object with reason count at least n (their counts summed).
func waitEventCount(t *testing.T, kind, namespace, name, reason string, n int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, convergeTimeout, true, func(ctx context.Context) (bool, error) {
		return eventCount(events(ctx, t, kind, namespace, name, reason)) >= n, nil
	})
	if err != nil {
		t.Fatalf("%s %s/%s never had %d %s Events", kind, namespace, name, n, reason)
	}
}

// holderSampler reads a tenant's NEGs (in the fake GCE) and PangolinResources every 200 ms and remembers every
// departure from what they were when it started: a NEG gone or with another GCE id, fewer endpoints than it had, a
// PangolinResource gone or replaced (another UID).
type holderSampler struct {
	cancel   context.CancelFunc
	done     chan struct{}
	mu       sync.Mutex
	problems []string
	samples  int
}

func sampleHolder(t *testing.T, w *workload, start *observed) *holderSampler {
	t.Helper()
	ids, endpoints := map[string]string{}, map[string]int{}
	for key, id := range start.negs {
		ids[key], endpoints[key] = id, start.negEndpoints[key].Len()
	}
	uids := map[string]types.UID{}
	for name, r := range start.resources {
		uids[name] = r.UID
	}
	ctx, cancel := context.WithCancel(t.Context())
	s := &holderSampler{cancel: cancel, done: make(chan struct{})}
	seen := sets.New[string]()
	report := func(format string, args ...any) {
		if p := fmt.Sprintf(format, args...); !seen.Has(p) {
			seen.Insert(p)
			s.mu.Lock()
			s.problems = append(s.problems, time.Now().Format("15:04:05.000")+" "+p)
			s.mu.Unlock()
		}
	}
	go func() {
		defer close(s.done)
		_ = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			got := map[string]string{}
			for _, n := range w.gce.NEGs(w.project) {
				key := path.Base(n.Zone) + "/" + n.Name
				got[key] = fmt.Sprint(n.Id)
				if eps, _ := w.gce.Endpoints(w.project, path.Base(n.Zone), n.Name); len(eps) < endpoints[key] {
					report("NEG %s: %d endpoints, had %d", key, len(eps), endpoints[key])
				}
			}
			for key, id := range ids {
				if got[key] != id {
					report("NEG %s: GCE id %q, was %s", key, got[key], id)
				}
			}
			list, err := w.mp.TunnelV1alpha1().PangolinResources(w.appNS).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			have := map[string]types.UID{}
			for _, r := range list.Items {
				have[r.Name] = r.UID
				if r.DeletionTimestamp != nil {
					report("PangolinResource %s is being deleted", r.Name)
				}
			}
			for name, uid := range uids {
				if have[name] != uid {
					report("PangolinResource %s: UID %q, was %s", name, have[name], uid)
				}
			}
			s.mu.Lock()
			s.samples++
			s.mu.Unlock()
			return false, nil
		})
	}()
	return s
}

// stop ends the sampling and returns what departed, sorted by time.
func (s *holderSampler) stop() []string {
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	sort.Strings(s.problems)
	if s.samples == 0 {
		return []string{"no sample was taken"}
	}
	return s.problems
}
