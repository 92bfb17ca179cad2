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

package pusher

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpfake "github.com/multiproject/client-go/clientset/versioned/fake"
	mpinformers "github.com/multiproject/client-go/informers/externalversions"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant/tenanttest"
	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
)

const (
	testProject    = "tenant-a-project"
	testNamespace  = "shop"
	testClusterUID = "5c0ffee0-1234-4abc-8def-0123456789ab"
	testMarker     = `{"cluster":"test","service":"shop/web","port":"80"}`
)

// recorder remembers events without ever blocking.
type recorder = tenanttest.Events

// harness runs one pusher against a fake clientset and a fake GCE over HTTP.
type harness struct {
	t          testing.TB
	gce        *fakegce.Server
	client     *mpfake.Clientset
	kube       *kubefake.Clientset
	events     *recorder
	conditions *tenanttest.Conditions
	pusher     *Pusher
	tctx       *tenant.Context
	stop       context.CancelFunc
	done       chan struct{}
	// gcGrace, if set, replaces the pusher's grace before a sweep deletes: set before start, which the sweep reads.
	gcGrace time.Duration
	// configure, if set, is applied to each pusher start builds, before it runs.
	configure func(*Pusher)
}

func newHarness(t testing.TB, gcp *mpv1alpha1.GCPConfig, objects ...runtime.Object) *harness {
	t.Helper()
	return newHarnessWithGCE(t, fakegce.Options{}, gcp, objects...)
}

// newHarnessWithGCE is newHarness with a fake GCE made with opts (its clock, say).
func newHarnessWithGCE(t testing.TB, opts fakegce.Options, gcp *mpv1alpha1.GCPConfig, objects ...runtime.Object) *harness {
	t.Helper()
	h := &harness{t: t, gce: fakegce.New(opts), events: &recorder{}, conditions: &tenanttest.Conditions{}}
	h.gce.Start()
	t.Cleanup(h.gce.Close)
	h.client = mpfake.NewClientset(objects...)
	h.kube = kubefake.NewClientset()
	if gcp == nil {
		gcp = &mpv1alpha1.GCPConfig{ProjectID: testProject, Network: "default"}
	}
	factory := mpinformers.NewSharedInformerFactory(h.client, 0)
	informer := factory.Multiproject().V1alpha1().Translations().Informer()
	h.tctx = &tenant.Context{
		Controller:             "neg",
		ProviderConfig:         &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a"}, Spec: mpv1alpha1.ProviderConfigSpec{GCP: gcp}},
		ProviderConfigLabelKey: mpv1alpha1.DefaultProviderConfigLabelKey,
		KubeClient:             h.kube,
		MultiprojectClient:     h.client,
		Informers:              tenanttest.Informers{informerset.Translations: informer},
		EventRecorder:          h.events,
		Condition:              h.conditions,
		Options:                tenant.Options{ClusterName: "default", ClusterUID: testClusterUID, GCEEndpoint: h.gce.Endpoint(), GCEQPS: 1000, GCEBurst: 1000},
		Workers:                2,
	}
	_, ctx := ktesting.NewTestContext(t)
	informersCtx, stopInformers := context.WithCancel(ctx)
	t.Cleanup(stopInformers)
	factory.Start(informersCtx.Done())
	h.start(false)
	t.Cleanup(h.shutdown)
	return h
}

// start runs a new pusher (a cleanup-only one with cleanupOnly) on the harness's Context.
func (h *harness) start(cleanupOnly bool) {
	h.t.Helper()
	var p *Pusher
	if cleanupOnly {
		c, err := NewCleanup(h.tctx)
		if err != nil {
			h.t.Fatal(err)
		}
		p = c.(*Pusher)
	} else {
		var err error
		if p, err = newPusher(h.tctx); err != nil {
			h.t.Fatal(err)
		}
	}
	if h.gcGrace > 0 {
		p.gcGrace = h.gcGrace
	}
	if h.configure != nil {
		h.configure(p)
	}
	h.pusher = p
	_, ctx := ktesting.NewTestContext(h.t)
	ctx, h.stop = context.WithCancel(ctx)
	h.done = make(chan struct{})
	go func() {
		defer close(h.done)
		p.Run(ctx)
	}()
}

// restart stops the pusher and starts one for gcp, as the manager does after a spec change.
func (h *harness) restart(gcp *mpv1alpha1.GCPConfig, cleanupOnly bool) {
	h.t.Helper()
	h.shutdown()
	pc := h.tctx.ProviderConfig.DeepCopy()
	pc.Spec.GCP = gcp
	h.tctx.ProviderConfig = pc
	h.start(cleanupOnly)
}

func (h *harness) shutdown() {
	h.stop()
	<-h.done
}

// translation returns a Translation with one NEG per zone; endpoints[zone] is how many endpoints the zone's NEG gets.
func translation(name string, endpoints map[string]int, finalizer bool) *mpv1alpha1.Translation {
	tr := &mpv1alpha1.Translation{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: name, Generation: 1,
		Labels: map[string]string{mpv1alpha1.DefaultProviderConfigLabelKey: "tenant-a"}}}
	if finalizer {
		tr.Finalizers = []string{mpv1alpha1.TranslationDeleterFinalizer}
	}
	for _, zone := range sortedZones(endpoints) {
		tr.Spec.Resources = append(tr.Spec.Resources, negResource(name, zone, endpoints[zone]))
	}
	return tr
}

func sortedZones(m map[string]int) []string {
	var zones []string
	for _, z := range []string{"us-central1-a", "us-central1-b", "us-central1-c"} {
		if _, ok := m[z]; ok {
			zones = append(zones, z)
		}
	}
	return zones
}

func negResource(name, zone string, n int) mpv1alpha1.BackendResource {
	params := &mpv1alpha1.NetworkEndpointGroupParameters{Network: "default", Port: 8080}
	zoneIndex := int(zone[len(zone)-1] - 'a')
	for i := range n {
		params.Endpoints = append(params.Endpoints, mpv1alpha1.NetworkEndpoint{
			Instance:  fmt.Sprintf("node-%s-%d", zone[len(zone)-1:], i/100),
			IPAddress: fmt.Sprintf("10.%d.%d.%d", zoneIndex, i/250, i%250+1),
		})
	}
	return mpv1alpha1.BackendResource{Kind: mpv1alpha1.BackendResourceKindNetworkEndpointGroup, Name: "k8s1-" + name,
		Zone: zone, Description: testMarker, NetworkEndpointGroup: params}
}

func (h *harness) get(name string) *mpv1alpha1.Translation {
	tr, err := h.client.MultiprojectV1alpha1().Translations(testNamespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatalf("getting Translation %s: %v", name, err)
	}
	return tr
}

// statusUpdates counts the status writes the pusher sent.
func (h *harness) statusUpdates() int {
	n := 0
	for _, a := range h.client.Actions() {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" {
			n++
		}
	}
	return n
}

// waitFor polls cond until it holds.
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		h.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// waitSynced waits until the Translation's Synced condition has the status for its current generation.
func (h *harness) waitSynced(name string, status metav1.ConditionStatus) *mpv1alpha1.Translation {
	h.t.Helper()
	reason := ReasonSynced
	if status != metav1.ConditionTrue {
		reason = ""
	}
	return h.waitReason(name, status, reason)
}

// waitReason waits for the Synced condition with status and, unless empty, reason; a False condition with reason
// Pending (NEGs being created) never counts.
func (h *harness) waitReason(name string, status metav1.ConditionStatus, reason string) *mpv1alpha1.Translation {
	h.t.Helper()
	var tr *mpv1alpha1.Translation
	h.waitFor("Translation "+name+" Synced="+string(status)+" "+reason, func() bool {
		tr = h.get(name)
		c := findCondition(tr)
		return c != nil && c.Status == status && c.ObservedGeneration == tr.Generation &&
			c.Reason != ReasonPending && (reason == "" || c.Reason == reason)
	})
	return tr
}

// waitQuiet waits until the pusher's Translation cache holds the Translation as the API does and its queue is
// empty: the pusher's last status write has come back to it, so nothing it has done is still to be seen.
func (h *harness) waitQuiet(name string) {
	h.t.Helper()
	informer, err := h.tctx.Informers.Informer(informerset.Translations)
	if err != nil {
		h.t.Fatal(err)
	}
	h.waitFor("the pusher's cache and queue to settle on Translation "+name, func() bool {
		obj, exists, err := informer.GetStore().GetByKey(testNamespace + "/" + name)
		if err != nil || !exists {
			return false
		}
		return obj.(*mpv1alpha1.Translation).ResourceVersion == h.get(name).ResourceVersion && h.pusher.workers.Idle()
	})
}

func findCondition(tr *mpv1alpha1.Translation) *metav1.Condition {
	for i := range tr.Status.Conditions {
		if tr.Status.Conditions[i].Type == mpv1alpha1.TranslationConditionSynced {
			return &tr.Status.Conditions[i]
		}
	}
	return nil
}

func (h *harness) endpointCount(zone, name string) int {
	eps, ok := h.gce.Endpoints(testProject, zone, name)
	if !ok {
		return -1
	}
	return len(eps)
}

func TestMain(m *testing.M) {
	// The manager registers the metrics; without registration their vectors are not instantiated.
	metrics.Register()
	os.Exit(m.Run())
}
