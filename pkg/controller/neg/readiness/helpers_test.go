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

package readiness

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	compute "google.golang.org/api/compute/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpfake "github.com/multiproject/client-go/clientset/versioned/fake"
	mpinformers "github.com/multiproject/client-go/informers/externalversions"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant/tenanttest"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

const (
	testNamespace = "web"
	testProject   = "tenant-a-project"
	testTenant    = "tenant-a"
)

// fakeHealth is the GCE health list of the unit tests: each NEG's endpoints by IP, with the state a test sets
// ("" for no health entry: no backend service health checks the NEG). The fake GCE behind the real client is
// health_test.go's.
type fakeHealth struct {
	mu     sync.Mutex
	states map[string]map[string]string // NEG name → IP → state
	err    error
	calls  map[string]int
	// block, if set, holds every list until it is closed; entered receives once per list that waits on it.
	block   chan struct{}
	entered chan struct{}
}

func newFakeHealth() *fakeHealth {
	return &fakeHealth{states: map[string]map[string]string{}, calls: map[string]int{}}
}

func (f *fakeHealth) set(neg, ip, state string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.states[neg] == nil {
		f.states[neg] = map[string]string{}
	}
	f.states[neg][ip] = state
}

func (f *fakeHealth) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *fakeHealth) callsOf(neg string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[neg]
}

func (f *fakeHealth) ListEndpointHealths(ctx context.Context, _, name string) ([]*compute.NetworkEndpointWithHealthStatus, error) {
	f.mu.Lock()
	f.calls[name]++
	block, entered := f.block, f.entered
	f.mu.Unlock()
	if block != nil {
		entered <- struct{}{}
		select {
		case <-block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	var out []*compute.NetworkEndpointWithHealthStatus
	for ip, state := range f.states[name] {
		it := &compute.NetworkEndpointWithHealthStatus{NetworkEndpoint: &compute.NetworkEndpoint{IpAddress: ip, Port: 8080}}
		if state != "" {
			it.Healths = []*compute.HealthStatusForNetworkEndpoint{{HealthState: state,
				BackendService: &compute.BackendServiceReference{BackendService: "bs-1"}}}
		}
		out = append(out, it)
	}
	return out, nil
}

type harness struct {
	t      *testing.T
	kube   *kubefake.Clientset
	mp     *mpfake.Clientset
	events *tenanttest.Events
	health *fakeHealth
	r      *Reflector
	stop   context.CancelFunc
	done   chan struct{}
}

// newHarness runs a reflector on fake clientsets holding objects (kube's and Translations), with timeout.
// configure, if set, changes the harness (its reflector, its fake GCE) before the reflector starts.
func newHarness(t *testing.T, timeout time.Duration, configure func(*harness), objects ...runtime.Object) *harness {
	t.Helper()
	return newHarnessWith(t, tenant.Options{NEGReadinessTimeout: timeout}, configure, objects...)
}

// newHarnessWith is newHarness with the tenant options given.
func newHarnessWith(t *testing.T, options tenant.Options, configure func(*harness), objects ...runtime.Object) *harness {
	t.Helper()
	var kubeObjects, mpObjects []runtime.Object
	for _, o := range objects {
		if _, ok := o.(*mpv1alpha1.Translation); ok {
			mpObjects = append(mpObjects, o)
		} else {
			kubeObjects = append(kubeObjects, o)
		}
	}
	h := &harness{t: t, kube: kubefake.NewClientset(kubeObjects...), mp: mpfake.NewClientset(mpObjects...),
		events: &tenanttest.Events{}, health: newFakeHealth(), done: make(chan struct{})}
	kubeFactory := kubeinformers.NewSharedInformerFactory(h.kube, 0)
	mpFactory := mpinformers.NewSharedInformerFactory(h.mp, 0)
	// The owner index, as informerset installs it on the shared informer (the factory's has the namespace index).
	translations := mpFactory.Multiproject().V1alpha1().Translations().Informer()
	if err := translations.AddIndexers(cache.Indexers{
		informerset.TranslationsByOwner: informerset.TranslationIndexers()[informerset.TranslationsByOwner]}); err != nil {
		t.Fatal(err)
	}
	c := &tenant.Context{
		Controller: "neg",
		ProviderConfig: &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: testTenant},
			Spec: mpv1alpha1.ProviderConfigSpec{GCP: &mpv1alpha1.GCPConfig{ProjectID: testProject, Network: "default"}}},
		KubeClient:         h.kube,
		MultiprojectClient: h.mp,
		Informers: tenanttest.Informers{
			informerset.Pods:         kubeFactory.Core().V1().Pods().Informer(),
			informerset.Services:     kubeFactory.Core().V1().Services().Informer(),
			informerset.Translations: translations,
		},
		EventRecorder: h.events,
		Options:       options,
		Workers:       2,
	}
	r, err := New(c, func(context.Context, string) (HealthLister, error) { return h.health, nil })
	if err != nil {
		t.Fatal(err)
	}
	h.r = r
	if configure != nil {
		configure(h)
	}
	_, ctx := ktesting.NewTestContext(t)
	ctx, h.stop = context.WithCancel(ctx)
	kubeFactory.Start(ctx.Done())
	mpFactory.Start(ctx.Done())
	r.Start(ctx, func() { close(h.done) })
	t.Cleanup(h.shutdown)
	return h
}

func (h *harness) shutdown() {
	h.stop()
	<-h.done
}

func gatedPod(name, ip string, labels map[string]string) *corev1.Pod {
	p := plainPod(name, ip, labels)
	p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: negapi.ReadinessGate}}
	return p
}

func plainPod(name, ip string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, UID: types.UID("uid-" + name), Labels: labels,
			CreationTimestamp: metav1.Now()},
		Spec: corev1.PodSpec{NodeName: "node-a"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, Conditions: []corev1.PodCondition{
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}}},
	}
}

// negService asks for a NEG of port 80 for the Pods labeled app=name.
func negService(name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, UID: types.UID("uid-" + name),
			Annotations: map[string]string{negapi.AnnotationKey: `{"exposed_ports":{"80":{}}}`}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name}},
	}
}

// translation lists the IPs in NEG neg of zone-a; synced says the pusher has attached them.
func translation(name, neg string, synced bool, ips ...string) *mpv1alpha1.Translation {
	var endpoints []mpv1alpha1.NetworkEndpoint
	for _, ip := range ips {
		endpoints = append(endpoints, mpv1alpha1.NetworkEndpoint{Instance: "node-a", IPAddress: ip, Port: 8080})
	}
	tr := &mpv1alpha1.Translation{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, Generation: 1},
		Spec: mpv1alpha1.TranslationSpec{Resources: []mpv1alpha1.BackendResource{{
			Kind: mpv1alpha1.BackendResourceKindNetworkEndpointGroup, Name: neg, Zone: "zone-a",
			NetworkEndpointGroup: &mpv1alpha1.NetworkEndpointGroupParameters{Network: "default", Port: 8080, Endpoints: endpoints},
		}}},
	}
	if synced {
		markSynced(tr)
	}
	return tr
}

func markSynced(tr *mpv1alpha1.Translation) {
	tr.Status.ObservedGeneration = tr.Generation
	tr.Status.Conditions = []metav1.Condition{{Type: mpv1alpha1.TranslationConditionSynced, Status: metav1.ConditionTrue,
		Reason: "Synced", ObservedGeneration: tr.Generation, LastTransitionTime: metav1.Now()}}
}

// waitCondition waits until the Pod's condition has the status and reason, and returns it.
func (h *harness) waitCondition(name string, status corev1.ConditionStatus, reason string) corev1.PodCondition {
	h.t.Helper()
	var got *corev1.PodCondition
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true,
		func(ctx context.Context) (bool, error) {
			pod, err := h.kube.CoreV1().Pods(testNamespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			got = h.r.keys.Condition(pod)
			return got != nil && got.Status == status && got.Reason == reason, nil
		})
	if err != nil {
		h.t.Fatalf("Pod %s: condition %+v, want %s/%s", name, got, status, reason)
	}
	return *got
}

// waitFor waits until cond holds.
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		h.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// podWrites returns the requests that wrote Pod name, as "verb/subresource".
func (h *harness) podWrites(name string) []string {
	var out []string
	for _, a := range h.kube.Actions() {
		if a.GetResource().Resource != "pods" || (a.GetVerb() != "patch" && a.GetVerb() != "update") {
			continue
		}
		if n, ok := a.(interface{ GetName() string }); ok && n.GetName() != name {
			continue
		}
		out = append(out, fmt.Sprintf("%s/%s", a.GetVerb(), a.GetSubresource()))
	}
	return out
}

var errGCE = errors.New("googleapi: Error 503: injected, backendError")
