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

package neg

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
)

func TestNewBuildsBothHalves(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	tctx := tenantContext(t)
	c, err := New(ctx, tctx)
	if err != nil {
		t.Fatal(err)
	}
	if ctl := c.(*Controller); ctl.translator == nil || ctl.pusher == nil {
		t.Errorf("controller = %+v", ctl)
	}
	noGCP := *tctx
	noGCP.ProviderConfig = &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
	if _, err := New(ctx, &noGCP); err == nil {
		t.Error("New without spec.gcp succeeded")
	}
	missing := *tctx
	missing.Informers = tenanttest.Informers{}
	if _, err := New(ctx, &missing); err == nil {
		t.Error("New without informers succeeded")
	}
}

// tenantContext is a tenant's Context on fake clientsets whose informers carry the indexes the translator needs.
// New makes no API call, so the informers are never started.
func tenantContext(t *testing.T) *tenant.Context {
	kube, mp := kubefake.NewClientset(), mpfake.NewClientset()
	kubeFactory := kubeinformers.NewSharedInformerFactory(kube, 0)
	endpointSlices := kubeFactory.Discovery().V1().EndpointSlices().Informer()
	translations := mpinformers.NewSharedInformerFactory(mp, 0).Multiproject().V1alpha1().Translations().Informer()
	for informer, indexers := range map[cache.SharedIndexInformer]cache.Indexers{
		endpointSlices: informerset.EndpointSliceIndexers(), translations: informerset.TranslationIndexers(),
	} {
		// The factory's informers index by namespace already.
		delete(indexers, cache.NamespaceIndex)
		if err := informer.AddIndexers(indexers); err != nil {
			t.Fatal(err)
		}
	}
	return &tenant.Context{
		Controller: "neg",
		ProviderConfig: &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a"},
			Spec: mpv1alpha1.ProviderConfigSpec{GCP: &mpv1alpha1.GCPConfig{ProjectID: "tenant-a-project", Network: "vpc-a"}}},
		ProviderConfigLabelKey: mpv1alpha1.DefaultProviderConfigLabelKey,
		KubeClient:             kube,
		MultiprojectClient:     mp,
		Informers: tenanttest.Informers{
			informerset.Services:       kubeFactory.Core().V1().Services().Informer(),
			informerset.EndpointSlices: endpointSlices,
			informerset.Nodes:          kubeFactory.Core().V1().Nodes().Informer(),
			informerset.Translations:   translations,
			informerset.Pods:           kubeFactory.Core().V1().Pods().Informer(),
		},
		EventRecorder: &tenanttest.Events{},
		Condition:     &tenanttest.Conditions{},
		Options:       tenant.Options{ClusterName: "prod-eu", ClusterUID: "6a1f4c1e-2d3b-4c5d-8e9f-0a1b2c3d4e5f"},
		Workers:       2,
	}
}

// TestConditionGate: True/Running once the translator has synced; a problem the pusher reports wins, including
// over a later translator report; the pusher's "no problems" restores Running.
func TestConditionGate(t *testing.T) {
	conditions := &tenanttest.Conditions{}
	g := &conditionGate{target: conditions, message: "running"}
	p := pusherReporter{g}

	p.Report(metav1.ConditionTrue, "NEGsPushed", "fine")
	if _, ok := conditions.Last(); ok {
		t.Error("reported True before the translator synced")
	}
	g.translatorSynced()
	expect(t, conditions, tenanttest.Condition{Status: metav1.ConditionTrue, Reason: ReasonRunning, Message: "running"})
	p.Report(metav1.ConditionFalse, "NEGNameCollision", "NEG x is foreign")
	expect(t, conditions, tenanttest.Condition{Status: metav1.ConditionFalse, Reason: "NEGNameCollision", Message: "NEG x is foreign"})
	g.translatorSynced()
	expect(t, conditions, tenanttest.Condition{Status: metav1.ConditionFalse, Reason: "NEGNameCollision", Message: "NEG x is foreign"})
	p.Report(metav1.ConditionTrue, "NEGsPushed", "fine")
	expect(t, conditions, tenanttest.Condition{Status: metav1.ConditionTrue, Reason: ReasonRunning, Message: "running"})

	var _ tenant.ConditionReporter = p
}

func expect(t *testing.T, c *tenanttest.Conditions, want tenanttest.Condition) {
	t.Helper()
	if got, ok := c.Last(); !ok || got != want {
		t.Errorf("condition = %+v, want %+v", got, want)
	}
}
