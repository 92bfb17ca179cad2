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

package namespaceproject

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	rancherv3 "github.com/multiproject/api/rancher/management/v3"
	mpfake "github.com/multiproject/client-go/clientset/versioned/fake"
	mpinformers "github.com/multiproject/client-go/informers/externalversions"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant/tenanttest"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
)

const (
	testTenant  = "tenant-a"
	testCluster = "local"
	appOwnerKey = "appOwner"
)

// recorder remembers events; client-go's FakeRecorder blocks once its channel is full.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) Event(obj runtime.Object, eventtype, reason, message string) {
	name := ""
	if m, err := meta.Accessor(obj); err == nil {
		name = m.GetName()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, name+" "+eventtype+" "+reason+" "+message)
}

func (r *recorder) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	r.Event(obj, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

func (r *recorder) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventtype, reason, messageFmt string, args ...any) {
	r.Eventf(obj, eventtype, reason, messageFmt, args...)
}

// with returns the events of namespace with reason.
func (r *recorder) with(namespace, reason string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		f := strings.SplitN(e, " ", 4)
		if f[0] == namespace && f[2] == reason {
			out = append(out, e)
		}
	}
	return out
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

// countingInformer counts the handlers added to and removed from an informer, so a test can check that Run leaves
// none behind.
type countingInformer struct {
	cache.SharedIndexInformer
	mu      sync.Mutex
	added   int
	removed int
}

func (i *countingInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	r, err := i.SharedIndexInformer.AddEventHandler(h)
	if err == nil {
		i.mu.Lock()
		i.added++
		i.mu.Unlock()
	}
	return r, err
}

func (i *countingInformer) RemoveEventHandler(r cache.ResourceEventHandlerRegistration) error {
	err := i.SharedIndexInformer.RemoveEventHandler(r)
	if err == nil {
		i.mu.Lock()
		i.removed++
		i.mu.Unlock()
	}
	return err
}

func (i *countingInformer) live() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.added - i.removed
}

// harness is one tenant's controller on fake clientsets with plain informers.
type harness struct {
	t          *testing.T
	ctx        context.Context
	kube       *kubefake.Clientset
	rancher    *mpfake.Clientset
	events     *recorder
	conditions *tenanttest.Conditions
	namespaces *countingInformer
	projects   *countingInformer
	controller *Controller
}

func newHarness(t *testing.T, objects ...runtime.Object) *harness {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	var kubeObjects, rancherObjects []runtime.Object
	for _, o := range objects {
		if _, ok := o.(*rancherv3.Project); ok {
			rancherObjects = append(rancherObjects, o)
		} else {
			kubeObjects = append(kubeObjects, o)
		}
	}
	h := &harness{t: t, ctx: ctx, kube: kubefake.NewClientset(kubeObjects...), rancher: mpfake.NewClientset(rancherObjects...),
		events: &recorder{}, conditions: &tenanttest.Conditions{}}
	kubeFactory := kubeinformers.NewSharedInformerFactory(h.kube, 0)
	rancherFactory := mpinformers.NewSharedInformerFactory(h.rancher, 0)
	h.namespaces = &countingInformer{SharedIndexInformer: kubeFactory.Core().V1().Namespaces().Informer()}
	h.projects = &countingInformer{SharedIndexInformer: rancherFactory.Management().V3().Projects().Informer()}
	kubeFactory.Start(ctx.Done())
	rancherFactory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		kubeFactory.Shutdown()
		rancherFactory.Shutdown()
	})
	kubeFactory.WaitForCacheSync(ctx.Done())
	rancherFactory.WaitForCacheSync(ctx.Done())

	c, err := New(h.tenantContext(testTenant, testCluster))
	if err != nil {
		t.Fatal(err)
	}
	h.controller = c
	h.kube.ClearActions()
	return h
}

func (h *harness) tenantContext(name, cluster string) *tenant.Context {
	return &tenant.Context{
		Controller: "namespace-project",
		ProviderConfig: &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: mpv1alpha1.ProviderConfigSpec{Rancher: &mpv1alpha1.RancherConfig{ClusterID: cluster}}},
		ProviderConfigLabelKey: mpv1alpha1.DefaultProviderConfigLabelKey,
		KubeClient:             h.kube,
		MultiprojectClient:     h.rancher,
		Informers: tenanttest.Informers{
			informerset.Namespaces: h.namespaces,
			informerset.Projects:   h.projects,
		},
		EventRecorder: h.events,
		Condition:     h.conditions,
		Options:       tenant.Options{AppOwnerLabelKey: appOwnerKey},
		Workers:       2,
	}
}

// run starts the controller and returns a function that stops it and waits for Run to return.
func (h *harness) run() func() {
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.controller.Run(ctx)
	}()
	stop := func() {
		cancel()
		<-done
	}
	h.t.Cleanup(stop)
	return stop
}

// syncNow waits until the informers hold what the clientsets hold and then syncs name directly.
func (h *harness) syncNow(name string) error {
	h.t.Helper()
	h.waitCaches()
	return h.controller.sync(h.ctx, name)
}

func (h *harness) waitCaches() {
	h.t.Helper()
	nsList, _ := h.kube.CoreV1().Namespaces().List(h.ctx, metav1.ListOptions{})
	prList, _ := h.rancher.ManagementV3().Projects("").List(h.ctx, metav1.ListOptions{})
	h.waitFor("informers to catch up", func() bool {
		for _, ns := range nsList.Items {
			got, ok, _ := h.namespaces.GetIndexer().GetByKey(ns.Name)
			if !ok || !reflect.DeepEqual(got, &ns) {
				return false
			}
		}
		for _, p := range prList.Items {
			got, ok, _ := h.projects.GetIndexer().GetByKey(p.Namespace + "/" + p.Name)
			if !ok || !reflect.DeepEqual(got, &p) {
				return false
			}
		}
		return len(h.namespaces.GetIndexer().ListKeys()) == len(nsList.Items) &&
			len(h.projects.GetIndexer().ListKeys()) == len(prList.Items)
	})
}

func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	err := wait.PollUntilContextTimeout(h.ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		h.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// patches returns the namespace patches the controller sent.
func (h *harness) patches() []clienttesting.PatchAction {
	var out []clienttesting.PatchAction
	for _, a := range h.kube.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok && a.GetResource().Resource == "namespaces" {
			out = append(out, p)
		}
	}
	return out
}

func (h *harness) namespace(name string) *corev1.Namespace {
	h.t.Helper()
	ns, err := h.kube.CoreV1().Namespaces().Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return ns
}

func (h *harness) createProject(p *rancherv3.Project) {
	h.t.Helper()
	if _, err := h.rancher.ManagementV3().Projects(p.Namespace).Create(h.ctx, p, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) updateNamespace(name string, change func(*corev1.Namespace)) {
	h.t.Helper()
	ns := h.namespace(name)
	change(ns)
	if _, err := h.kube.CoreV1().Namespaces().Update(h.ctx, ns, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func project(cluster, name, displayName string) *rancherv3.Project {
	return &rancherv3.Project{ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: name},
		Spec: rancherv3.ProjectSpec{DisplayName: displayName, ClusterName: cluster}}
}

func namespace(name, owner string) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		mpv1alpha1.DefaultProviderConfigLabelKey: testTenant}}}
	if owner != "" {
		ns.Labels[appOwnerKey] = owner
	}
	return ns
}

// assignedTo returns ns with the annotations and label of an assignment the controller made.
func assignedTo(ns *corev1.Namespace, p *rancherv3.Project, owner string) *corev1.Namespace {
	if ns.Annotations == nil {
		ns.Annotations = map[string]string{}
	}
	ns.Annotations[rancherv3.ProjectIDAnnotationKey] = p.Namespace + ":" + p.Name
	ns.Annotations[AssignedProjectAnnotationKey] = p.Namespace + ":" + p.Name
	ns.Annotations[AssignedAppOwnerAnnotationKey] = owner
	ns.Labels[rancherv3.ProjectIDLabelKey] = p.Name
	return ns
}

func TestMain(m *testing.M) {
	// The manager registers the metrics; without registration their vectors are not instantiated.
	metrics.Register()
	os.Exit(m.Run())
}
