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
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpfake "github.com/multiproject/client-go/clientset/versioned/fake"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant/tenanttest"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

// servesAll is a discovery that serves every resource of informerset.Resources.
type servesAll struct{}

func (servesAll) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	list := &metav1.APIResourceList{GroupVersion: gv}
	for _, r := range informerset.Resources {
		if r.GVR.GroupVersion().String() == gv {
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: r.GVR.Resource})
		}
	}
	if len(list.APIResources) == 0 {
		return nil, apierrors.NewNotFound(schema.GroupResource{}, gv)
	}
	return list, nil
}

// TestTenantsTouchOnlyTheirPods runs two tenants' reflectors on the manager's tenant views (informerset.NewRouting):
// each sets the condition only on the Pods of its own namespaces; when a namespace moves from tenant a to tenant b,
// a forgets the Pod that waited there and b takes it up.
func TestTenantsTouchOnlyTheirPods(t *testing.T) {
	namespace := func(name, owner string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1",
			Labels: map[string]string{mpv1alpha1.DefaultProviderConfigLabelKey: owner}}}
	}
	in := func(ns string, obj interface{ SetNamespace(string) }) runtime.Object {
		obj.SetNamespace(ns)
		return obj.(runtime.Object)
	}
	kube := kubefake.NewClientset(namespace("ns-a", "tenant-a"), namespace("ns-b", "tenant-b"),
		in("ns-a", negService("web")),
		in("ns-a", gatedPod("lonely-a", "10.0.0.1", nil)), in("ns-a", gatedPod("web-a", "10.0.0.2", map[string]string{"app": "web"})),
		in("ns-b", gatedPod("lonely-b", "10.0.1.1", nil)))
	_, ctx := ktesting.NewTestContext(t)
	h := &harness{t: t, kube: kube}
	reflectors, events := startTenants(t, ctx, kube, "tenant-a", "tenant-b")

	get := func(ns, name string) *corev1.PodCondition {
		pod, err := kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return negapi.DefaultKeys().Condition(pod)
	}
	h.waitFor("both lonely Pods ready", func() bool {
		a, b := get("ns-a", "lonely-a"), get("ns-b", "lonely-b")
		return a != nil && a.Status == corev1.ConditionTrue && b != nil && b.Status == corev1.ConditionTrue
	})
	h.waitFor("tenant a's Pod behind a NEG Service waiting", func() bool { return reflectors["tenant-a"].isWaiting("ns-a", "web-a") })
	// The Event is recorded after the patch the Get above already shows: wait for it, then look at it.
	h.waitFor("an Event from each tenant", func() bool {
		return len(events["tenant-a"].With("Normal")) > 0 && len(events["tenant-b"].With("Normal")) > 0
	})
	for name, want := range map[string]string{"tenant-a": "Normal LoadBalancerNegReady The Pod is not in any NEG", "tenant-b": "Normal LoadBalancerNegReady The Pod is not in any NEG"} {
		if got := events[name].With("Normal"); len(got) != 1 || !strings.HasPrefix(got[0], want) {
			t.Errorf("%s's Events = %v, want one for its own Pod", name, got)
		}
	}
	if reflectors["tenant-b"].isWaiting("ns-a", "web-a") {
		t.Error("tenant b looks at a Pod of tenant a's namespace")
	}

	moved := namespace("ns-a", "tenant-b")
	moved.ResourceVersion = "2"
	if _, err := kube.CoreV1().Namespaces().Update(ctx, moved, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitFor("tenant b to take the waiting Pod up and tenant a to forget it", func() bool {
		return reflectors["tenant-b"].isWaiting("ns-a", "web-a") && !reflectors["tenant-a"].isWaiting("ns-a", "web-a")
	})
}

// startTenants runs a reflector for each tenant on the manager's tenant views of kube's objects, until the test ends.
func startTenants(t *testing.T, ctx context.Context, kube *kubefake.Clientset, tenants ...string) (map[string]*Reflector, map[string]*tenanttest.Events) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	tn, err := informerset.NewRouting(informerset.RoutingConfig{Config: informerset.Config{
		Client: kube, MultiprojectClient: mpfake.NewClientset(), Discovery: servesAll{}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := tn.Set.Start(ctx); err != nil {
		t.Fatal(err)
	}
	routing := make(chan struct{})
	go func() {
		defer close(routing)
		tn.RouteOptionals(ctx, nil)
	}()
	h := &harness{t: t, kube: kube}
	h.waitFor("Translations served", func() bool { return tn.Served(informerset.Translations) })
	reflectors, events := map[string]*Reflector{}, map[string]*tenanttest.Events{}
	var stopped []chan struct{}
	for _, name := range tenants {
		views, err := tn.Router.Tenant(name)
		if err != nil {
			t.Fatal(err)
		}
		events[name] = &tenanttest.Events{}
		r, err := New(&tenant.Context{Controller: "neg",
			ProviderConfig: &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: mpv1alpha1.ProviderConfigSpec{GCP: &mpv1alpha1.GCPConfig{ProjectID: name + "-project"}}},
			KubeClient: kube, Informers: tenanttest.TenantInformers{Views: views}, EventRecorder: events[name], Workers: 1,
		}, func(context.Context, string) (HealthLister, error) { return newFakeHealth(), nil })
		if err != nil {
			t.Fatal(err)
		}
		reflectors[name] = r
		done := make(chan struct{})
		stopped = append(stopped, done)
		r.Start(ctx, func() { close(done) })
	}
	t.Cleanup(func() {
		cancel()
		for _, done := range stopped {
			<-done
		}
		<-routing
		_ = tn.Close()
	})
	return reflectors, events

}
