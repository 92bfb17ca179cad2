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

package ingresstunnel

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	tunnelv1alpha1 "github.com/multiproject/api/pangolin/tunnel/v1alpha1"
	mpfake "github.com/multiproject/client-go/clientset/versioned/fake"
	mpinformers "github.com/multiproject/client-go/informers/externalversions"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant/tenanttest"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
)

// TestCleanupDeletesEveryResourceOfTheTenant: the cleanup of a departing tenant deletes every PangolinResource of
// its view, the ones the controller made for an Ingress and one given the tenant's label otherwise, and records an
// Event for each, naming it: on its Ingress, or on the ProviderConfig. Pending lists both until they are gone.
func TestCleanupDeletesEveryResourceOfTheTenant(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ing := seedIngress()
	pl := &planner{tenant: testTenant, labelKey: testLabelKey, config: testConfig()}
	madeOne := pl.resource(ing, ResourceName(testNamespace, "web", "app.example.com"), "app.example.com", "main", "app", "example.com",
		hostSettings{}, nil)
	other := &tunnelv1alpha1.PangolinResource{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "labeled-by-hand", Labels: map[string]string{testLabelKey: testTenant}},
		Spec: tunnelv1alpha1.PangolinResourceSpec{Name: "labeled-by-hand", Protocol: tunnelv1alpha1.ProtocolHTTP,
			HTTPConfig: &tunnelv1alpha1.HTTPConfig{Subdomain: "other", DomainName: "example.com"}},
	}
	mp := mpfake.NewClientset(madeOne, other)
	// The fake cannot resume a watch from a resourceVersion: a delete made between the informer's list and its watch
	// would never reach the cache, and Pending would list it forever. The cleanup starts once the watch has.
	watching := make(chan struct{})
	var watchOnce sync.Once
	mp.PrependWatchReactor("pangolinresources", func(a clienttesting.Action) (bool, watch.Interface, error) {
		w, err := mp.Tracker().Watch(a.GetResource(), a.GetNamespace())
		watchOnce.Do(func() { close(watching) })
		return true, w, err
	})
	factory := mpinformers.NewSharedInformerFactory(mp, 0)
	events := &tenanttest.Events{}
	c := &tenant.Context{
		Controller:             "ingress-tunnel",
		ProviderConfig:         &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: testTenant}, Spec: mpv1alpha1.ProviderConfigSpec{Pangolin: testConfig()}},
		ProviderConfigLabelKey: testLabelKey,
		KubeClient:             kubefake.NewClientset(ing),
		MultiprojectClient:     mp,
		Informers:              tenanttest.Informers{informerset.PangolinResources: factory.Tunnel().V1alpha1().PangolinResources().Informer()},
		EventRecorder:          events,
	}
	cl, err := NewCleanup(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	defer func() {
		cancel()
		factory.Shutdown()
	}()
	factory.WaitForCacheSync(ctx.Done())
	select {
	case <-watching:
	case <-time.After(30 * time.Second):
		t.Fatal("the PangolinResource informer never started its watch")
	}
	pending, err := Pending(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(pending, "2 PangolinResources") || !strings.Contains(pending, "demo/labeled-by-hand") {
		t.Errorf("Pending before the cleanup: %q", pending)
	}

	done := make(chan struct{})
	go func() {
		defer close(done)
		cl.Run(ctx)
	}()
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := mp.TunnelV1alpha1().PangolinResources("").List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0 && events.Count(corev1.EventTypeNormal, ReasonDeleted) == 2, err
	})
	if err != nil {
		list, _ := mp.TunnelV1alpha1().PangolinResources("").List(ctx, metav1.ListOptions{})
		t.Fatalf("waiting for the cleanup: %v; left: %d resources; Events: %q", err, len(list.Items), events.With(""))
	}
	got := events.With(corev1.EventTypeNormal + " " + ReasonDeleted + " ")
	want := []string{
		"Deleted PangolinResource " + madeOne.Name + " for host app.example.com: tenant " + testTenant + " no longer publishes through Pangolin",
		`Deleted PangolinResource demo/labeled-by-hand (name "other.example.com"), which carried the tenant's label`,
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || strings.Contains(g, w)
		}
		if !found {
			t.Errorf("no Event %q in %q", w, got)
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		pending, err := Pending(ctx, c)
		return pending == "", err
	})
	if err != nil {
		t.Errorf("Pending after the cleanup: %v", err)
	}
	cancel()
	<-done
}
