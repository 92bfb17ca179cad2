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

package translator

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpfake "github.com/multiproject/client-go/clientset/versioned/fake"
	mpinformers "github.com/multiproject/client-go/informers/externalversions"

	"github.com/multiproject/multiproject-controller-manager/pkg/claims"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant/tenanttest"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

// negCluster is one fake API with several tenants' translators, as the manager runs them in one process: each
// tenant sees its own namespace, Nodes are everyone's, and all share the unfiltered Translation informer.
type negCluster struct {
	t      *testing.T
	ctx    context.Context
	kube   *kubefake.Clientset
	mp     *mpfake.Clientset
	shared map[schema.GroupVersionResource]cache.SharedIndexInformer
	// claims is the process's claims.Service, which every tenant's translator joins.
	claims *claims.Service
	// declaring counts, from a watch started before anything ran, the Translations that declare each NEG name in a
	// project at once; max is the most there ever were.
	mu        sync.Mutex
	declaring map[string]map[string]bool
	max       map[string]int
	watcher   watch.Interface
	watchDone chan struct{}
}

func newNEGCluster(t *testing.T, objects ...runtimeObject) *negCluster {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	versions := &apiVersions{}
	for _, o := range objects {
		versions.stamp(o)
	}
	c := &negCluster{t: t, ctx: ctx, kube: kubefake.NewClientset(objects...), mp: mpfake.NewClientset(),
		declaring: map[string]map[string]bool{}, max: map[string]int{}, watchDone: make(chan struct{})}
	versions.serve(&c.kube.Fake, c.kube.Tracker())
	versions.serve(&c.mp.Fake, c.mp.Tracker())
	w, err := c.mp.MultiprojectV1alpha1().Translations("").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.watcher = w
	go func() {
		defer close(c.watchDone)
		for ev := range w.ResultChan() {
			if tr, ok := ev.Object.(*mpv1alpha1.Translation); ok {
				c.count(ev.Type, tr)
			}
		}
	}()
	kubeFactory := kubeinformers.NewSharedInformerFactory(c.kube, 0)
	mpFactory := mpinformers.NewSharedInformerFactory(c.mp, 0)
	c.shared = map[schema.GroupVersionResource]cache.SharedIndexInformer{
		informerset.Nodes:        kubeFactory.Core().V1().Nodes().Informer(),
		informerset.Translations: indexed(t, mpFactory.Multiproject().V1alpha1().Translations().Informer(), informerset.TranslationIndexers()),
	}
	c.claims = tenanttest.Claims(t, tenanttest.Informers(c.shared))
	kubeFactory.Start(ctx.Done())
	mpFactory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		kubeFactory.Shutdown()
		mpFactory.Shutdown()
	})
	return c
}

func (c *negCluster) count(t watch.EventType, tr *mpv1alpha1.Translation) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := tr.Namespace + "/" + tr.Name
	// A name is counted per GCP project, where it is held (heldNEGNames: "<project>/<name>"); a Translation that
	// stops holding one (its tenant moved) no longer counts for it.
	for _, declarers := range c.declaring {
		delete(declarers, key)
	}
	if t == watch.Deleted {
		return
	}
	for _, name := range heldNEGNames(tr) {
		if c.declaring[name] == nil {
			c.declaring[name] = map[string]bool{}
		}
		c.declaring[name][key] = true
		c.max[name] = max(c.max[name], len(c.declaring[name]))
	}
}

// neverTwo stops the watch and fails the test if two Translations ever declared one NEG name in one project at once.
func (c *negCluster) neverTwo() {
	c.t.Helper()
	c.watcher.Stop()
	<-c.watchDone
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, n := range c.max {
		if n > 1 {
			c.t.Errorf("%d Translations declared NEG %s at once", n, name)
		}
	}
}

type negTenant struct {
	events *recorder
	stop   context.CancelFunc
	done   chan struct{}
}

// viewsAndShared gives a translator its tenant's namespace-scoped informers as views and the cluster's unfiltered
// ones as shared.
type viewsAndShared struct {
	views, shared map[schema.GroupVersionResource]cache.SharedIndexInformer
}

func (i viewsAndShared) Informer(gvr schema.GroupVersionResource) (cache.SharedIndexInformer, error) {
	return tenanttest.Informers(i.views).Informer(gvr)
}

func (i viewsAndShared) Shared(gvr schema.GroupVersionResource) (cache.SharedIndexInformer, error) {
	return tenanttest.Informers(i.shared).Informer(gvr)
}

// sharedProject is the GCP project of the tenants start runs: a custom NEG name is held once per project.
const sharedProject = "shared-project"

// start runs the translator of tenant name, which owns namespace, in sharedProject.
func (c *negCluster) start(name, namespace string) *negTenant {
	c.t.Helper()
	return c.startIn(name, namespace, sharedProject)
}

// startIn runs the translator of tenant name, which owns namespace, in GCP project.
func (c *negCluster) startIn(name, namespace, project string) *negTenant {
	c.t.Helper()
	kubeFactory := kubeinformers.NewSharedInformerFactoryWithOptions(c.kube, 0, kubeinformers.WithNamespace(namespace))
	mpFactory := mpinformers.NewSharedInformerFactoryWithOptions(c.mp, 0, mpinformers.WithNamespace(namespace))
	nt := &negTenant{events: &recorder{}, done: make(chan struct{})}
	tr, err := New(&tenant.Context{
		Controller: "neg",
		ProviderConfig: &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: mpv1alpha1.ProviderConfigSpec{GCP: &mpv1alpha1.GCPConfig{ProjectID: project, Network: "vpc"}}},
		ProviderConfigLabelKey: testLabelKey,
		KubeClient:             c.kube,
		MultiprojectClient:     c.mp,
		Claims:                 c.claims,
		Informers: viewsAndShared{shared: c.shared, views: map[schema.GroupVersionResource]cache.SharedIndexInformer{
			informerset.Services:       kubeFactory.Core().V1().Services().Informer(),
			informerset.EndpointSlices: indexed(c.t, kubeFactory.Discovery().V1().EndpointSlices().Informer(), informerset.EndpointSliceIndexers()),
			informerset.Nodes:          c.shared[informerset.Nodes],
			informerset.Translations:   indexed(c.t, mpFactory.Multiproject().V1alpha1().Translations().Informer(), informerset.TranslationIndexers()),
			informerset.Pods:           kubeFactory.Core().V1().Pods().Informer(),
		}},
		EventRecorder: nt.events,
		Condition:     &tenanttest.Conditions{},
		Options:       tenant.Options{ClusterName: testCluster, ClusterUID: testClusterUID},
		Workers:       2,
	}, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	synced := make(chan struct{})
	tr.onSynced = func() { close(synced) }
	ctx, cancel := context.WithCancel(c.ctx)
	nt.stop = cancel
	kubeFactory.Start(ctx.Done())
	mpFactory.Start(ctx.Done())
	go func() {
		defer close(nt.done)
		tr.Run(ctx)
	}()
	c.t.Cleanup(func() {
		cancel()
		<-nt.done
		kubeFactory.Shutdown()
		mpFactory.Shutdown()
	})
	select {
	case <-synced:
	case <-time.After(10 * time.Second):
		c.t.Fatalf("the translator of %s never synced", name)
	}
	return nt
}

// declaredBy returns the Translations of the cluster that declare NEG name, as namespace/name.
func (c *negCluster) declaredBy(name string) []string {
	c.t.Helper()
	list, err := c.mp.MultiprojectV1alpha1().Translations("").List(c.ctx, metav1.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	var out []string
	for i := range list.Items {
		if declares(&list.Items[i], name) {
			out = append(out, list.Items[i].Namespace+"/"+list.Items[i].Name)
		}
	}
	return out
}

func (c *negCluster) waitDeclaredBy(negName, translation string) {
	c.t.Helper()
	(&harness{t: c.t, ctx: c.ctx}).waitFor(negName+" declared by "+translation, func() bool {
		got := c.declaredBy(negName)
		return len(got) == 1 && got[0] == translation
	})
}

// namedNEGService is a Service of namespace with port 80 exposed under the custom NEG name, created at t0 plus
// seconds.
func namedNEGService(namespace, uid string, seconds int, negName string) *corev1.Service {
	svc := service("web", `{"exposed_ports":{"80":{"name":"`+negName+`"}}}`, servicePort("http", 80, "8080"))
	svc.Namespace, svc.UID = namespace, types.UID(uid)
	svc.CreationTimestamp = metav1.NewTime(time.Date(2026, 11, 23, 10, 0, seconds, 0, time.UTC))
	return svc
}

func nameConflictsNaming(events *recorder, holder string) int {
	n := 0
	for _, e := range events.With(corev1.EventTypeWarning + " " + ReasonNameConflict + " ") {
		if strings.Contains(e, "used by "+holder+";") {
			n++
		}
	}
	return n
}

// TestACustomNEGNameIsUsedOnceAcrossTenants: two tenants' Services in one GCP project ask for one custom NEG name;
// the earlier keeps it, the later gets one NEGNameConflict naming it and no Translation for the port, and takes the name over once the
// earlier is deleted and its Translation is gone.
func TestACustomNEGNameIsUsedOnceAcrossTenants(t *testing.T) {
	c := newNEGCluster(t, node("n1", zoneB),
		namedNEGService("ns-a", "uid-a", 0, "shop-web"), namedNEGService("ns-b", "uid-b", 1, "shop-web"))
	a := c.start("tenant-a", "ns-a")
	b := c.start("tenant-b", "ns-b")
	c.waitDeclaredBy("shop-web", "ns-a/neg-v1-web-80")
	h := &harness{t: t, ctx: c.ctx}
	h.waitFor("a NEGNameConflict on the later Service", func() bool { return nameConflictsNaming(b.events, "Service ns-a/web") == 1 })
	if n := a.events.Count(corev1.EventTypeWarning, ReasonNameConflict); n != 0 {
		t.Errorf("the holder got %d NEGNameConflict Warnings", n)
	}
	svcB, err := c.kube.CoreV1().Services("ns-b").Get(c.ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if status := svcB.Annotations[negapi.StatusAnnotationKey]; strings.Contains(status, "shop-web") {
		t.Errorf("the later Service's neg-status names the NEG it does not have: %s", status)
	}

	// The holder is deleted (the fake has no garbage collector: its translator deletes its Translation).
	if err := c.kube.CoreV1().Services("ns-a").Delete(c.ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitDeclaredBy("shop-web", "ns-b/neg-v1-web-80")
	if n := b.events.Count(corev1.EventTypeWarning, ReasonNameConflict); n != 1 {
		t.Errorf("%d NEGNameConflict Warnings, want 1 (one conflict, however many syncs)", n)
	}
	c.neverTwo()
}

// TestAnOlderServiceDoesNotTakeADeclaredName: the Service whose Translation declares a custom name keeps it: an
// older Service that starts to ask for the name gets a NEGNameConflict naming the holder, whose Translation stays
// (the same object, still declaring the name). Once the holder drops the name, the older Service takes it.
func TestAnOlderServiceDoesNotTakeADeclaredName(t *testing.T) {
	older := namedNEGService("ns-a", "uid-a", 0, "shop-web")
	older.Annotations[negapi.AnnotationKey] = `{"exposed_ports":{"80":{}}}`
	c := newNEGCluster(t, node("n1", zoneB), older, namedNEGService("ns-b", "uid-b", 1, "shop-web"))
	a := c.start("tenant-a", "ns-a")
	b := c.start("tenant-b", "ns-b")
	c.waitDeclaredBy("shop-web", "ns-b/neg-v1-web-80")
	holding, err := c.mp.MultiprojectV1alpha1().Translations("ns-b").Get(c.ctx, "neg-v1-web-80", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	setNEGAnnotation := func(namespace, value string) {
		t.Helper()
		svc, err := c.kube.CoreV1().Services(namespace).Get(c.ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		svc.Annotations[negapi.AnnotationKey] = value
		if _, err := c.kube.CoreV1().Services(namespace).Update(c.ctx, svc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setNEGAnnotation("ns-a", `{"exposed_ports":{"80":{"name":"shop-web"}}}`)
	h := &harness{t: t, ctx: c.ctx}
	h.waitFor("a NEGNameConflict naming the holder", func() bool { return nameConflictsNaming(a.events, "Service ns-b/web") == 1 })
	kept, err := c.mp.MultiprojectV1alpha1().Translations("ns-b").Get(c.ctx, "neg-v1-web-80", metav1.GetOptions{})
	if err != nil || kept.UID != holding.UID {
		t.Fatalf("the holder's Translation was replaced or deleted (%v)", err)
	}
	if !holdsNEGName(kept, sharedProject, "shop-web") {
		t.Fatalf("the holder's Translation no longer declares shop-web: %+v", kept.Spec.Resources)
	}
	if n := b.events.Count(corev1.EventTypeWarning, ReasonNameConflict); n != 0 {
		t.Errorf("the holder got %d NEGNameConflict Warnings", n)
	}
	if n := b.events.Count(corev1.EventTypeNormal, ReasonTranslationDeleted); n != 0 {
		t.Errorf("%d TranslationDeleted Events on the holder", n)
	}

	// The holder drops the name: the older Service declares it.
	setNEGAnnotation("ns-b", `{"exposed_ports":{"80":{}}}`)
	c.waitDeclaredBy("shop-web", "ns-a/neg-v1-web-80")
	c.neverTwo()
}
