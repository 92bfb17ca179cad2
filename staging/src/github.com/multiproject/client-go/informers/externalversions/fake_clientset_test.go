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

// Package externalversions_test exercises the generated clientset, fake
// clientset, informers and listers together, the way controllers and their
// unit tests use them.
package externalversions_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	multiprojectv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	tunnelv1alpha1 "github.com/multiproject/api/pangolin/tunnel/v1alpha1"
	managementv3 "github.com/multiproject/api/rancher/management/v3"
	applymultiprojectv1alpha1 "github.com/multiproject/client-go/applyconfiguration/multiproject/v1alpha1"
	"github.com/multiproject/client-go/clientset/versioned"
	"github.com/multiproject/client-go/clientset/versioned/fake"
	"github.com/multiproject/client-go/informers/externalversions"
)

// testTimeout bounds every wait: an informer that never syncs must fail the
// test, not hang it.
const testTimeout = 30 * time.Second

func seedObjects() []runtime.Object {
	return []runtime.Object{
		&multiprojectv1alpha1.ProviderConfig{
			ObjectMeta: metav1.ObjectMeta{Name: "tenant-a"},
			Spec: multiprojectv1alpha1.ProviderConfigSpec{
				GCP: &multiprojectv1alpha1.GCPConfig{ProjectID: "tenant-a-prod", Network: "vpc-a"},
			},
		},
		&multiprojectv1alpha1.Translation{
			ObjectMeta: metav1.ObjectMeta{
				Name:       "service.1.web-80",
				Namespace:  "shop",
				Labels:     map[string]string{multiprojectv1alpha1.DefaultProviderConfigLabelKey: "tenant-a"},
				Finalizers: []string{multiprojectv1alpha1.TranslationDeleterFinalizer},
			},
			Spec: multiprojectv1alpha1.TranslationSpec{Resources: []multiprojectv1alpha1.BackendResource{{
				Kind: multiprojectv1alpha1.BackendResourceKindNetworkEndpointGroup,
				Name: "k8s1-shop-web-80",
				Zone: "europe-west1-b",
				NetworkEndpointGroup: &multiprojectv1alpha1.NetworkEndpointGroupParameters{
					Network: "vpc-a",
				},
			}}},
		},
		&managementv3.Project{
			ObjectMeta: metav1.ObjectMeta{Name: "p-xyz12", Namespace: "c-abc12"},
			Spec:       managementv3.ProjectSpec{DisplayName: "Shop", ClusterName: "c-abc12"},
		},
		&tunnelv1alpha1.PangolinTunnel{
			ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "pangolin"},
			Spec:       tunnelv1alpha1.PangolinTunnelSpec{OrganizationRef: tunnelv1alpha1.OrganizationReference{Name: "org"}},
			Status:     tunnelv1alpha1.PangolinTunnelStatus{Status: tunnelv1alpha1.TunnelStatusReady},
		},
	}
}

// TestInformersSyncOnFakeClientset starts informers for every kind on both
// kinds of fake clientset. Fake clientsets of client-go >= 0.35 would make
// the reflector use watch-list, which their trackers do not implement; the
// generated fake opts out (IsWatchListSemanticsUnSupported), so the informers
// must sync without a bookmark reaction. Then it checks the listers and that
// writes through the clientset reach the informers.
func TestInformersSyncOnFakeClientset(t *testing.T) {
	for name, newClient := range map[string]func(...runtime.Object) *fake.Clientset{
		"NewSimpleClientset": fake.NewSimpleClientset,
		"NewClientset":       fake.NewClientset,
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			client := newClient(seedObjects()...)
			testInformers(ctx, t, client)
		})
	}
}

func testInformers(ctx context.Context, t *testing.T, client versioned.Interface) {
	// Shutdown waits for the informers' goroutines, which only end once
	// their stop channel is closed: cancel first (defers run last-in,
	// first-out).
	ctx, cancel := context.WithCancel(ctx)
	factory := externalversions.NewSharedInformerFactory(client, 0)
	defer factory.Shutdown()
	defer cancel()

	providerConfigs := factory.Multiproject().V1alpha1().ProviderConfigs()
	translations := factory.Multiproject().V1alpha1().Translations()
	projects := factory.Management().V3().Projects()
	tunnels := factory.Tunnel().V1alpha1().PangolinTunnels()
	resources := factory.Tunnel().V1alpha1().PangolinResources()

	// Informers are created on first use; touch each before Start.
	addedResources := make(chan *tunnelv1alpha1.PangolinResource, 1)
	if _, err := resources.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { addedResources <- obj.(*tunnelv1alpha1.PangolinResource) },
	}); err != nil {
		t.Fatal(err)
	}
	providerConfigs.Informer()
	translations.Informer()
	projects.Informer()
	tunnels.Informer()

	factory.Start(ctx.Done())
	if result := factory.WaitForCacheSyncWithContext(ctx); result.Err != nil {
		t.Fatalf("informers did not sync: %v (%v)", result.Err, result.Synced)
	}

	if pc, err := providerConfigs.Lister().Get("tenant-a"); err != nil {
		t.Errorf("ProviderConfig lister: %v", err)
	} else if pc.Spec.GCP.ProjectID != "tenant-a-prod" {
		t.Errorf("ProviderConfig from lister has spec %+v", pc.Spec)
	}
	trs, err := translations.Lister().Translations("shop").List(labels.Everything())
	if err != nil || len(trs) != 1 || trs[0].Spec.Resources[0].Zone != "europe-west1-b" {
		t.Errorf("Translation lister in shop: %v, %v", trs, err)
	}
	if prs, err := projects.Lister().Projects("c-abc12").List(labels.Everything()); err != nil || len(prs) != 1 {
		t.Errorf("Project lister in c-abc12: %v, %v", prs, err)
	}
	if tunnel, err := tunnels.Lister().PangolinTunnels("pangolin").Get("default"); err != nil {
		t.Errorf("PangolinTunnel lister: %v", err)
	} else if tunnel.Status.Status != tunnelv1alpha1.TunnelStatusReady {
		t.Errorf("PangolinTunnel status %q", tunnel.Status.Status)
	}

	// A write through the typed client reaches the informer.
	enabled := true
	created, err := client.TunnelV1alpha1().PangolinResources("shop").Create(ctx, &tunnelv1alpha1.PangolinResource{
		ObjectMeta: metav1.ObjectMeta{Name: "pic-shop-web-1a2b3c4d", Namespace: "shop"},
		Spec: tunnelv1alpha1.PangolinResourceSpec{
			TunnelRef:  &tunnelv1alpha1.TunnelReference{Name: "default", Namespace: "pangolin"},
			Protocol:   tunnelv1alpha1.ProtocolHTTP,
			HTTPConfig: &tunnelv1alpha1.HTTPConfig{Subdomain: "www", DomainName: "example.com"},
			Targets:    []tunnelv1alpha1.Target{{IP: "web.shop.svc.cluster.local", Port: 80}},
			Enabled:    &enabled,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create PangolinResource: %v", err)
	}
	select {
	case got := <-addedResources:
		if got.Name != created.Name || got.Spec.HTTPConfig.Subdomain != "www" {
			t.Errorf("informer delivered %s with spec %+v", got.Name, got.Spec)
		}
	case <-ctx.Done():
		t.Fatalf("the PangolinResource informer never saw the created object")
	}

	// The status subresource client writes conditions, and the informer
	// follows.
	pc, err := client.MultiprojectV1alpha1().ProviderConfigs().Get(ctx, "tenant-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	meta.SetStatusCondition(&pc.Status.Conditions, metav1.Condition{
		Type:   multiprojectv1alpha1.ProviderConfigConditionNEGReady,
		Status: metav1.ConditionTrue,
		Reason: "Running",
	})
	if _, err := client.MultiprojectV1alpha1().ProviderConfigs().UpdateStatus(ctx, pc, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("UpdateStatus: %v", err)
	}
	err = wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		cached, err := providerConfigs.Lister().Get("tenant-a")
		if err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(cached.Status.Conditions, multiprojectv1alpha1.ProviderConfigConditionNEGReady), nil
	})
	if err != nil {
		t.Fatalf("the ProviderConfig informer never saw the NEGReady condition: %v", err)
	}
}

// TestApplyOnFakeClientset checks that the generated apply configurations
// work with the field-managed fake clientset, so controllers that use
// server-side apply can be unit tested.
func TestApplyOnFakeClientset(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	client := fake.NewClientset()

	apply := applymultiprojectv1alpha1.ProviderConfig("tenant-b").
		WithSpec(applymultiprojectv1alpha1.ProviderConfigSpec().
			WithRancher(applymultiprojectv1alpha1.RancherConfig().WithClusterID("c-abc12")))
	got, err := client.MultiprojectV1alpha1().ProviderConfigs().Apply(ctx, apply, metav1.ApplyOptions{FieldManager: "test"})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if got.Spec.Rancher == nil || got.Spec.Rancher.ClusterID != "c-abc12" {
		t.Fatalf("applied ProviderConfig has spec %+v", got.Spec)
	}
	stored, err := client.MultiprojectV1alpha1().ProviderConfigs().Get(ctx, "tenant-b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if stored.Spec.Rancher == nil || stored.Spec.Rancher.ClusterID != "c-abc12" {
		t.Errorf("stored ProviderConfig has spec %+v", stored.Spec)
	}
}
