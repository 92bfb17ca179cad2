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
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

// The gate and its reasons, as a user's Pod template and kubectl show them (ingress-gce's names).
const (
	negReadyGate                corev1.PodConditionType = "cloud.google.com/load-balancer-neg-ready"
	reasonNEGNotReady                                   = "LoadBalancerNegNotReady"
	reasonNEGWithoutHealthCheck                         = "LoadBalancerNegWithoutHealthCheck"
	reasonNEGReady                                      = "LoadBalancerNegReady"
	reasonNEGTimeout                                    = "LoadBalancerNegTimeout"
)

const (
	rolloutReplicas = 5
	// gceOperationDelay: real attach operations take seconds; this is the time a new Pod is Ready but not yet in
	// the load balancer when nothing waits for the NEG.
	gceOperationDelay = 3 * time.Second
	// negReadinessTimeout is the manager's --neg-readiness-timeout: short, for the timeout case, but far longer
	// than an attach, so that no other case ends by timing out (which they check).
	negReadinessTimeout = time.Minute
	servicePort         = 8080
)

// TestNEGReadinessGate: one manager, fake GCE operations taking gceOperationDelay, kube-controller-manager's
// deployment, replicaset and endpointslice controllers, and the stand-in kubelet; each case is a tenant of its own.
func TestNEGReadinessGate(t *testing.T) {
	resetLease(t)
	lists := &endpointLists{}
	gce := fakegce.New(fakegce.Options{OperationDelay: gceOperationDelay, OnCall: lists.record})
	gce.Start()
	t.Cleanup(gce.Close)
	args := []string{"--neg-readiness-timeout=" + negReadinessTimeout.String()}
	le := leaderElection{leaseDuration: 15 * time.Second, renewDeadline: 10 * time.Second, retryPeriod: time.Second}
	startManager(t, "a", managerKubeconfig(t), gce.Endpoint(), le, args...)
	// The two rollouts are the neg-readiness-rollout benchmark row, recorded once both ran (make bench runs this test).
	row := &rolloutRow{}
	t.Cleanup(func() { row.record(t) })

	t.Run("rollout without the gate", func(t *testing.T) {
		t.Parallel()
		row.set(false, testRolloutWithoutGate(t, gce))
	})
	t.Run("rollout with the gate", func(t *testing.T) {
		t.Parallel()
		row.set(true, testRolloutWithGate(t, gce))
	})
	t.Run("health, timeout and no NEG", func(t *testing.T) {
		t.Parallel()
		testHealthAndTimeout(t, gce, lists)
	})
	t.Run("rollout with the gate behind a backend service", func(t *testing.T) {
		t.Parallel()
		testRolloutBehindABackendService(t, gce)
	})
}

// testRolloutWithoutGate measures the window the gate closes: Pods without it are Ready as soon as their containers
// are, the Deployment deletes old Pods before the new ones are attached, and the NEG holds fewer serving endpoints
// meanwhile. Only what always holds is asserted (the rollout completes, the NEG ends with exactly the new Pods, no
// Pod gets the gate's condition); the minimum is logged.
func testRolloutWithoutGate(t *testing.T, gce *fakegce.Server) rolloutMeasure {
	r := newRollout(t, gce, "plain", false, netip.MustParsePrefix("10.241.0.0/24"))
	m := r.roll()
	t.Logf("without the gate: rollout of %d replicas (maxUnavailable 0) complete in %s, NEG converged in %s; "+
		"serving endpoints in the NEG: min %d over %d samples", rolloutReplicas, m.complete.Round(100*time.Millisecond),
		m.converged.Round(100*time.Millisecond), m.minServing, m.samples)
	for _, p := range r.pods() {
		if c := podCondition(&p, negReadyGate); c != nil {
			t.Errorf("Pod %s does not declare the gate but has its condition %+v", p.Name, *c)
		}
	}
	return m
}

// testRolloutWithGate: sampled throughout the rollout, the NEG always holds at least the Deployment's replicas of
// endpoints whose Pods have ready containers, and the rollout completes; the new Pods were let through because
// they are in a NEG that no backend service uses, not by the timeout.
func testRolloutWithGate(t *testing.T, gce *fakegce.Server) rolloutMeasure {
	r := newRollout(t, gce, "gated", true, netip.MustParsePrefix("10.242.0.0/24"))
	m := r.roll()
	t.Logf("with the gate: rollout complete in %s, NEG converged in %s; serving endpoints in the NEG: min %d over %d samples",
		m.complete.Round(100*time.Millisecond), m.converged.Round(100*time.Millisecond), m.minServing, m.samples)
	if m.minServing < rolloutReplicas {
		t.Errorf("during the rollout the NEG held only %d endpoints of Pods with ready containers, want at least %d",
			m.minServing, rolloutReplicas)
	}
	pods := r.pods()
	for _, p := range pods {
		if c := podCondition(&p, negReadyGate); c == nil || c.Status != corev1.ConditionTrue || c.Reason != reasonNEGWithoutHealthCheck {
			t.Errorf("Pod %s: gate condition %+v, want True %s", p.Name, c, reasonNEGWithoutHealthCheck)
		}
	}
	if len(pods) > 0 {
		waitPodEvent(t, pods[0].Namespace, pods[0].Name, corev1.EventTypeNormal, reasonNEGWithoutHealthCheck)
	}
	return m
}

// --- a Deployment behind a NEG Service ---------------------------------------------------------------------------

// rollout is a tenant with a Deployment of rolloutReplicas (maxUnavailable 0) behind a Service with the neg
// annotation, its Pods on one fake Node of the tenant, run by a kubelet stand-in.
type rollout struct {
	t    *testing.T
	w    *workload
	name string
	// healthy, if set, counts the endpoints a backend service reports HEALTHY, sampled with the NEGs.
	healthy func() (int, error)
}

func newRollout(t *testing.T, gce *fakegce.Server, name string, gate bool, podCIDR netip.Prefix) *rollout {
	return newRolloutWith(t, gce, name, gate, podCIDR, nil)
}

// newRolloutWith is newRollout with prepare run on the tenant before its Service and Deployment are made.
func newRolloutWith(t *testing.T, gce *fakegce.Server, name string, gate bool, podCIDR netip.Prefix, prepare func(w *workload)) *rollout {
	t.Helper()
	w := newWorkload(t, gce)
	var nodes []string
	for zi := range zones {
		nodes = append(nodes, w.nodeName(zi, 0), w.nodeName(zi, 1))
	}
	startKubelet(t, w, nodes, podCIDR)
	if prepare != nil {
		prepare(w)
	}
	createNEGService(t, w, name)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.appNS, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](rolloutReplicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: ptr.To(intstr.FromInt32(0))}},
			Template: podTemplate(w, name, gate),
		},
	}
	if _, err := w.kube.AppsV1().Deployments(w.appNS).Create(w.ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return &rollout{t: t, w: w, name: name}
}

// startKubelet starts a kubelet stand-in for the workload's namespace and, when the test ends, deletes the
// namespace's Deployments and Pods while it still runs: without a kubelet to confirm their termination, Pods bound
// to a Node would keep the namespace from going away.
func startKubelet(t *testing.T, w *workload, nodes []string, podCIDR netip.Prefix) {
	t.Helper()
	startKubeletWith(t, w, framework.KubeletOptions{Nodes: nodes, PodCIDR: podCIDR})
}

// startKubeletWith is startKubelet with every option of the stand-in; the namespace is the workload's.
func startKubeletWith(t *testing.T, w *workload, opts framework.KubeletOptions) {
	t.Helper()
	opts.Namespace = w.appNS
	framework.StartKubelet(t, w.kube, opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		foreground := metav1.DeletePropagationForeground
		all := metav1.ListOptions{}
		if err := w.kube.AppsV1().Deployments(w.appNS).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &foreground}, all); err != nil {
			t.Logf("deleting the Deployments of %s: %v", w.appNS, err)
		}
		if err := w.kube.CoreV1().Pods(w.appNS).DeleteCollection(ctx, metav1.DeleteOptions{}, all); err != nil {
			t.Logf("deleting the Pods of %s: %v", w.appNS, err)
		}
		err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			pods, err := w.kube.CoreV1().Pods(w.appNS).List(ctx, all)
			return err == nil && len(pods.Items) == 0, nil
		})
		if err != nil {
			t.Logf("Pods of %s left after a minute: %v", w.appNS, err)
		}
	})
}

// createNEGService creates a Service selecting the Pods labeled app=name, port 80 to the Pods' 8080, exposed in
// NEGs.
func createNEGService(t *testing.T, w *workload, name string) {
	t.Helper()
	_, err := w.kube.CoreV1().Services(w.appNS).Create(w.ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.appNS, Name: name,
			Annotations: map[string]string{negapi.AnnotationKey: `{"exposed_ports":{"80":{}}}`}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name}, Ports: []corev1.ServicePort{{Name: "http",
			Port: 80, TargetPort: intstr.FromInt32(servicePort), Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// podTemplate is a Pod of app name on the tenant's first Node (the test plays the scheduler), declaring the gate
// as docs/neg.md shows when gate is set.
func podTemplate(w *workload, name string, gate bool) corev1.PodTemplateSpec {
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}, Annotations: map[string]string{"revision": "1"}},
		Spec: corev1.PodSpec{
			NodeName: w.nodeName(0, 0),
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: servicePort}}}},
		},
	}
	if gate {
		tmpl.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: negReadyGate}}
	}
	return tmpl
}

// rolloutMeasure is what roll saw: how long until the Deployment's rollout completed and until the NEG held
// exactly the new Pods, and the fewest endpoints of Pods with ready containers the NEG held at any sample.
type rolloutMeasure struct {
	complete, converged time.Duration
	minServing, samples int
	// minHealthy is the fewest endpoints the backend service reported HEALTHY at any sample (with rollout.healthy).
	minHealthy int
}

// roll waits until the first revision is out and in the NEG, changes the template and samples the NEG every
// 100 ms until the rollout is complete and the NEG holds exactly the new Pods.
func (r *rollout) roll() rolloutMeasure {
	r.t.Helper()
	r.waitSettled("first revision")
	patch := `{"spec":{"template":{"metadata":{"annotations":{"revision":"2"}}}}}`
	_, err := r.w.kube.AppsV1().Deployments(r.w.appNS).Patch(r.w.ctx, r.name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	start := time.Now()
	m := rolloutMeasure{minServing: rolloutReplicas * 2, minHealthy: rolloutReplicas * 2}
	why := "not looked yet"
	err = wait.PollUntilContextTimeout(r.w.ctx, 100*time.Millisecond, convergeTimeout, true, func(context.Context) (bool, error) {
		s, err := r.sample()
		if err != nil {
			why = err.Error()
			return false, nil
		}
		if r.healthy != nil {
			healthy, err := r.healthy()
			if err != nil {
				why = err.Error()
				return false, nil
			}
			m.minHealthy = min(m.minHealthy, healthy)
		}
		m.samples++
		m.minServing = min(m.minServing, s.serving)
		if s.complete && m.complete == 0 {
			m.complete = time.Since(start)
		}
		why = s.why
		return s.complete && s.why == "", nil
	})
	if err != nil {
		r.t.Fatalf("rollout of %s: not complete and in the NEG within %s: %s", r.name, convergeTimeout, why)
	}
	m.converged = time.Since(start)
	return m
}

// waitSettled waits until the Deployment's rollout is complete and the NEG holds exactly its Pods.
func (r *rollout) waitSettled(what string) {
	r.t.Helper()
	why := "not looked yet"
	err := wait.PollUntilContextTimeout(r.w.ctx, 250*time.Millisecond, convergeTimeout, true, func(context.Context) (bool, error) {
		s, err := r.sample()
		if err != nil {
			why = err.Error()
			return false, nil
		}
		why = s.why
		return s.complete && s.why == "", nil
	})
	if err != nil {
		r.t.Fatalf("%s of %s: not complete and in the NEG within %s: %s", what, r.name, convergeTimeout, why)
	}
}

// sample is one look at the rollout: whether the Deployment reports it complete, how many endpoints of the NEGs
// belong to Pods with ready containers (serving), and why the NEGs do not hold exactly the live Pods ("" when they
// do). The Pods are read before the NEGs: a Pod deleted in between still counts, and is detached seconds later.
type sample struct {
	complete bool
	serving  int
	why      string
}

func (r *rollout) sample() (sample, error) {
	var s sample
	d, err := r.w.kube.AppsV1().Deployments(r.w.appNS).Get(r.w.ctx, r.name, metav1.GetOptions{})
	if err != nil {
		return s, err
	}
	st := d.Status
	s.complete = st.ObservedGeneration >= d.Generation && st.UpdatedReplicas == rolloutReplicas &&
		st.Replicas == rolloutReplicas && st.AvailableReplicas == rolloutReplicas
	ready := sets.New[string]()
	for _, p := range r.pods() {
		if p.DeletionTimestamp == nil && isPodConditionTrue(&p, corev1.ContainersReady) {
			ready.Insert(p.Status.PodIP)
		}
	}
	inNEG := sets.New[string]()
	for _, n := range r.w.gce.NEGs(r.w.project) {
		eps, _ := r.w.gce.Endpoints(r.w.project, path.Base(n.Zone), n.Name)
		for _, ep := range eps {
			inNEG.Insert(ep.IpAddress)
			if ready.Has(ep.IpAddress) {
				s.serving++
			}
		}
	}
	if !inNEG.Equal(ready) {
		s.why = fmt.Sprintf("NEG endpoints %v, ready Pods %v", sets.List(inNEG), sets.List(ready))
	}
	return s, nil
}

// pods lists the Deployment's Pods.
func (r *rollout) pods() []corev1.Pod {
	r.t.Helper()
	list, err := r.w.kube.CoreV1().Pods(r.w.appNS).List(r.w.ctx, metav1.ListOptions{LabelSelector: "app=" + r.name})
	if err != nil {
		r.t.Fatal(err)
	}
	return list.Items
}

func podCondition(p *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == typ {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func isPodConditionTrue(p *corev1.Pod, typ corev1.PodConditionType) bool {
	c := podCondition(p, typ)
	return c != nil && c.Status == corev1.ConditionTrue
}

// waitPodEvent waits until the Pod has an Event of type and reason (Events are recorded asynchronously).
func waitPodEvent(t *testing.T, ns, name, eventType, reason string) {
	t.Helper()
	var seen []string
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, convergeTimeout, true, func(ctx context.Context) (bool, error) {
		seen = nil
		for _, ev := range events(ctx, t, "Pod", ns, name, reason) {
			seen = append(seen, ev.Type+" "+ev.Message)
			if ev.Type == eventType {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("no %s Event %s on Pod %s/%s within %s; its %s Events: %q", eventType, reason, ns, name, convergeTimeout, reason, seen)
	}
}
