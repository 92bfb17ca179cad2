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

package providerconfig

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
)

func annotateAbandon(pc *mpv1alpha1.ProviderConfig) {
	pc.Annotations = map[string]string{mpv1alpha1.AbandonCloudResourcesAnnotation: "true"}
}

// TestAbandonDoesNotStopAnInClusterCleanup: the abandon annotation covers cloud resources only. A controller whose
// cleanup removes objects in the cluster (ingress-tunnel's PangolinResources) keeps cleaning up a deleting tenant
// until nothing is left, and the tenant's Ready condition says the annotation does not cover it.
func TestAbandonDoesNotStopAnInClusterCleanup(t *testing.T) {
	f := newFixtureWith(t, fixtureConfig{workers: 1, inCluster: true})
	f.create(providerConfig("a", "c-1"))
	f.waitFor("the probe", func() bool { return len(f.manager.Running("a")) == 1 })

	f.probes.setPending("a", "1 PangolinResource still publishes its host")
	f.update("a", annotateAbandon)
	f.markDeleted("a")
	f.waitFor("Ready to say the annotation does not cover the in-cluster cleanup", func() bool {
		c := f.condition("a", mpv1alpha1.ProviderConfigConditionReady)
		return c != nil && c.Reason == ReasonDeleting && strings.Contains(c.Message, "1 PangolinResource still publishes its host") &&
			strings.Contains(c.Message, "the abandon annotation does not cover it")
	})
	if p := f.probes.latest("a"); p == nil || !p.cleanup || len(f.manager.Running("a")) != 1 {
		t.Fatal("the in-cluster cleanup does not run although the abandon annotation is set")
	}
	if !slices.Contains(f.get("a").Finalizers, mpv1alpha1.ProviderConfigCleanupFinalizer) {
		t.Fatal("the finalizer went while the in-cluster cleanup had something left")
	}
	if got := f.events.With(corev1.EventTypeWarning + " " + EventCloudResourcesAbandoned); len(got) != 0 {
		t.Errorf("in-cluster objects reported abandoned: %v", got)
	}

	f.probes.setPending("a", "")
	f.waitFor("the finalizer to go once the cleanup removed everything", func() bool {
		return !slices.Contains(f.get("a").Finalizers, mpv1alpha1.ProviderConfigCleanupFinalizer)
	})
}

// TestAbandonCoversOnlyTheGenerationItWasGivenFor: the manager records the generation at which it first saw the
// abandon annotation; a controller of that generation sees the cloud resources abandoned, one of a later
// generation (a new migration, a later deletion) does not, until the operator decides again.
func TestAbandonCoversOnlyTheGenerationItWasGivenFor(t *testing.T) {
	f := newFixture(t, 1)
	pc := providerConfig("a", "c-1")
	pc.Generation = 1 // the fake clientset does not count generations
	f.create(pc)
	f.waitFor("the probe", func() bool { return len(f.manager.Running("a")) == 1 })

	f.update("a", annotateAbandon)
	f.waitFor("the decision recorded for generation 1", func() bool {
		a := f.get("a").Status.Abandon
		return a != nil && a.Generation == 1
	})
	f.waitFor("the AbandonRecorded Event", func() bool { return f.events.Count(corev1.EventTypeNormal, EventAbandonRecorded) > 0 })
	f.waitFor("the running controller to see its cloud resources abandoned", func() bool {
		return f.probes.latest("a").tctx.CloudResourcesAbandoned()
	})

	// A later migration (generation 2) with the annotation still in place: not covered.
	f.update("a", func(pc *mpv1alpha1.ProviderConfig) { pc.Spec.Rancher.ClusterID = "c-2"; pc.Generation = 2 })
	f.waitFor("the controller of generation 2", func() bool {
		p := f.probes.latest("a")
		return p != nil && p.section == "c-2" && !p.cleanup
	})
	f.waitFor("the stale annotation Warning", func() bool { return f.events.Count(corev1.EventTypeWarning, EventAbandonAnnotationStale) > 0 })
	if f.probes.latest("a").tctx.CloudResourcesAbandoned() {
		t.Fatal("the annotation given at generation 1 abandons the cloud resources of generation 2's migration")
	}

	// A later deletion (generation 3) is not covered either: the cleanup runs and the finalizer stays.
	f.probes.setPending("a", "2 NEGs not deleted yet")
	f.update("a", func(pc *mpv1alpha1.ProviderConfig) {
		now := metav1.Now()
		pc.DeletionTimestamp, pc.Generation = &now, 3
	})
	f.waitFor("the cleanup", func() bool {
		p := f.probes.latest("a")
		return p != nil && p.cleanup
	})
	f.waitFor("Ready=False Deleting", f.conditionIs("a", mpv1alpha1.ProviderConfigConditionReady, metav1.ConditionFalse, ReasonDeleting))
	f.probes.mu.Lock()
	abandoned := f.probes.abandoned["a"]
	f.probes.mu.Unlock()
	if abandoned != 0 || !slices.Contains(f.get("a").Finalizers, mpv1alpha1.ProviderConfigCleanupFinalizer) {
		t.Fatalf("a deletion after the decision's generation was abandoned (Abandon called %d times)", abandoned)
	}

	// A new decision: the annotation removed (the record goes) and set again (recorded for generation 3).
	f.update("a", func(pc *mpv1alpha1.ProviderConfig) { pc.Annotations = nil })
	f.waitFor("the record to go", func() bool { return f.get("a").Status.Abandon == nil })
	f.update("a", annotateAbandon)
	f.waitFor("the finalizer to go", func() bool {
		pc, err := f.mp.MultiprojectV1alpha1().ProviderConfigs().Get(f.ctx, "a", metav1.GetOptions{})
		return err == nil && !slices.Contains(pc.Finalizers, mpv1alpha1.ProviderConfigCleanupFinalizer)
	})
	if a := f.get("a").Status.Abandon; a == nil || a.Generation != 3 {
		t.Errorf("status.abandon = %+v, want generation 3", a)
	}
	f.waitFor("the abandon Event", func() bool { return f.events.Count(corev1.EventTypeWarning, EventCloudResourcesAbandoned) > 0 })
}
