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
	"net/netip"
	"path"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

// standInStatus is what the stand-in for GKE's controller writes in cloud.google.com/neg-status.
const standInStatus = `{"network_endpoint_groups":{"80":"k8s1-gke-standin"},"zones":["europe-west1-b"]}`

// TestBesideGKEsNEGController runs the manager on its own keys beside a stand-in for GKE's NEG controller, which
// sets cloud.google.com/load-balancer-neg-ready True at once on every Pod that declares a readiness gate ("not
// selected by any NEG" of its own) and writes its own cloud.google.com/neg-status on every Service annotated
// cloud.google.com/neg. A Pod gated on the manager's condition (alone, or beside ingress-gce's) is never Ready
// before its endpoint is in the tenant's NEG; only the Service annotated with the manager's key gets NEGs in the
// tenant's project; and each status annotation keeps its own writer's value.
func TestBesideGKEsNEGController(t *testing.T) {
	keys, flags := negapi.Keys{Annotation: myNEGAnnotation, StatusAnnotation: myNEGStatus, ReadinessGate: myNEGGate}, myNEGKeyFlags
	resetLease(t)
	// Attaches take a while, as in GCE: a Pod made Ready by the other controller's condition would be seen Ready
	// before its endpoint is in the NEG.
	gce := fakegce.New(fakegce.Options{OperationDelay: time.Second})
	gce.Start()
	t.Cleanup(gce.Close)
	w := newWorkload(t, gce)
	startKubelet(t, w, []string{w.nodeName(0, 0)}, netip.MustParsePrefix("10.246.0.0/24"))
	runStandInGKEController(t, w)
	le := leaderElection{leaseDuration: 15 * time.Second, renewDeadline: 10 * time.Second, retryPeriod: 500 * time.Millisecond}
	m := startManager(t, "a", managerKubeconfig(t), gce.Endpoint(), le, flags...)
	waitLeader(t, m.identity(), 2*time.Minute)

	samples := sampleReadyBeforeNEG(t, w)
	createKeyedService(t, w, "mine", map[string]string{keys.Annotation: `{"exposed_ports":{"80":{}}}`})
	createKeyedService(t, w, "theirs", map[string]string{negapi.AnnotationKey: `{"exposed_ports":{"80":{}}}`})
	createKeyedService(t, w, "both", map[string]string{keys.Annotation: `{"exposed_ports":{"80":{}}}`,
		negapi.AnnotationKey: `{"exposed_ports":{"80":{}}}`})
	for name, gates := range map[string][]corev1.PodConditionType{
		"mine-1": {keys.ReadinessGate}, "mine-2": {keys.ReadinessGate, negapi.ReadinessGate}} {
		tmpl := podTemplate(w, "mine", false)
		for _, g := range gates {
			if gate := (corev1.PodReadinessGate{ConditionType: g}); !slices.Contains(tmpl.Spec.ReadinessGates, gate) {
				tmpl.Spec.ReadinessGates = append(tmpl.Spec.ReadinessGates, gate)
			}
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.appNS, Name: name, Labels: tmpl.Labels}, Spec: tmpl.Spec}
		if _, err := w.kube.CoreV1().Pods(w.appNS).Create(w.ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"mine-1", "mine-2"} {
		waitPodState(t, w, name, "Ready", func(p *corev1.Pod) bool { return isPodConditionTrue(p, corev1.PodReady) })
	}
	if bad := samples.stop(); len(bad) > 0 {
		t.Errorf("Pods Ready before their endpoint was in the tenant's NEG: %v", bad)
	}
	waitPodEvent(t, w.appNS, "mine-2", corev1.EventTypeWarning, negapi.ReasonGatedOnBoth)
	waitWarning(t, w, "both", negapi.ReasonAnnotatedForBoth)

	// NEGs in the tenant's project only for the Services annotated with the manager's key.
	trs, err := w.mp.MultiprojectV1alpha1().Translations(w.appNS).List(w.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tr := range trs.Items {
		got = append(got, tr.Name)
	}
	if want := []string{translationName("both"), translationName("mine")}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Translations %v, want %v", got, want)
	}
	for _, name := range []string{"mine", "both"} {
		waitServiceAnnotation(t, w, name, keys.StatusAnnotation)
	}
	for name, want := range map[string]struct{ mine, theirs bool }{
		"mine": {mine: true}, "theirs": {theirs: true}, "both": {mine: true, theirs: true}} {
		a := serviceAnnotations(t, w, name)
		if _, ok := a[keys.StatusAnnotation]; ok != want.mine {
			t.Errorf("Service %s: %s present %v, want %v", name, keys.StatusAnnotation, ok, want.mine)
		}
		if v, ok := a[negapi.StatusAnnotationKey]; ok != want.theirs || (ok && v != standInStatus) {
			t.Errorf("Service %s: %s %q (present %v), want the stand-in's only where it is asked (%v)",
				name, negapi.StatusAnnotationKey, v, ok, want.theirs)
		}
	}
}

// runStandInGKEController plays GKE's NEG controller until the test ends.
func runStandInGKEController(t *testing.T, w *workload) {
	ctx, cancel := context.WithCancel(w.ctx)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		wait.UntilWithContext(ctx, func(ctx context.Context) {
			pods, err := w.kube.CoreV1().Pods(w.appNS).List(ctx, metav1.ListOptions{})
			if err != nil {
				return
			}
			for i := range pods.Items {
				p := &pods.Items[i]
				if len(p.Spec.ReadinessGates) == 0 || isPodConditionTrue(p, negapi.ReadinessGate) {
					continue
				}
				p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: negapi.ReadinessGate,
					Status: corev1.ConditionTrue, Reason: reasonNEGReady, Message: "not selected by any NEG",
					LastTransitionTime: metav1.Now()})
				_, _ = w.kube.CoreV1().Pods(w.appNS).UpdateStatus(ctx, p, metav1.UpdateOptions{})
			}
			svcs, err := w.kube.CoreV1().Services(w.appNS).List(ctx, metav1.ListOptions{})
			if err != nil {
				return
			}
			for _, s := range svcs.Items {
				if _, asked := s.Annotations[negapi.AnnotationKey]; !asked || s.Annotations[negapi.StatusAnnotationKey] == standInStatus {
					continue
				}
				patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, negapi.StatusAnnotationKey, standInStatus)
				_, _ = w.kube.CoreV1().Services(w.appNS).Patch(ctx, s.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			}
		}, 100*time.Millisecond)
	}()
}

func createKeyedService(t *testing.T, w *workload, name string, annotations map[string]string) {
	t.Helper()
	_, err := w.kube.CoreV1().Services(w.appNS).Create(w.ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.appNS, Name: name, Annotations: annotations},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "mine"}, Ports: []corev1.ServicePort{{Name: "http",
			Port: 80, TargetPort: intstr.FromInt32(servicePort), Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// readySampler watches the tenant's Pods and, at each change that shows one Ready, looks whether its IP is in a
// NEG of the tenant's project.
type readySampler struct {
	mu   sync.Mutex
	bad  []string
	stop func() []string
}

func sampleReadyBeforeNEG(t *testing.T, w *workload) *readySampler {
	t.Helper()
	s := &readySampler{}
	watcher, err := w.kube.CoreV1().Pods(w.appNS).Watch(w.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range watcher.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Deleted || !isPodConditionTrue(p, corev1.PodReady) || inTenantNEG(w, p.Status.PodIP) {
				continue
			}
			s.mu.Lock()
			s.bad = append(s.bad, fmt.Sprintf("%s (%s) at resourceVersion %s", p.Name, p.Status.PodIP, p.ResourceVersion))
			s.mu.Unlock()
		}
	}()
	s.stop = func() []string {
		watcher.Stop()
		<-done
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.bad
	}
	t.Cleanup(func() { s.stop() })
	return s
}

func inTenantNEG(w *workload, ip string) bool {
	for _, n := range w.gce.NEGs(w.project) {
		eps, _ := w.gce.Endpoints(w.project, path.Base(n.Zone), n.Name)
		for _, ep := range eps {
			if ep.IpAddress == ip {
				return true
			}
		}
	}
	return false
}
