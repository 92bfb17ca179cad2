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
	"k8s.io/apimachinery/pkg/runtime/schema"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
)

func TestDeletionRunsTheCleanupUntilNothingIsLeft(t *testing.T) {
	f := newFixture(t, 1)
	f.create(providerConfig("a", "c-1"))
	f.waitFor("the probe", func() bool { return len(f.manager.Running("a")) == 1 })
	if applied := f.get("a").Status.AppliedSpec; applied == nil || applied.Rancher == nil || applied.Rancher.ClusterID != "c-1" {
		t.Fatalf("status.appliedSpec = %+v, want the section the controller started from", applied)
	}

	f.probes.setPending("a", "2 NEGs not deleted yet")
	f.markDeleted("a")
	f.waitFor("Ready=False Deleting", f.conditionIs("a", mpv1alpha1.ProviderConfigConditionReady, metav1.ConditionFalse, ReasonDeleting))
	if c := f.condition("a", mpv1alpha1.ProviderConfigConditionReady); c == nil || !strings.Contains(c.Message, "2 NEGs not deleted yet") {
		t.Fatalf("the Ready condition does not say what deletion waits for: %+v", c)
	}
	f.waitFor("the cleanup to replace the controller", func() bool {
		p := f.probes.latest("a")
		return p != nil && p.cleanup && len(f.manager.Running("a")) == 1
	})
	if got := f.probes.most("a"); got != 1 {
		t.Errorf("%d instances of the controller ran at once, want 1", got)
	}
	if !slices.Contains(f.get("a").Finalizers, mpv1alpha1.ProviderConfigCleanupFinalizer) {
		t.Fatal("the finalizer went while cleanup was pending")
	}

	f.probes.setPending("a", "")
	f.waitFor("the finalizer to go", func() bool {
		return !slices.Contains(f.get("a").Finalizers, mpv1alpha1.ProviderConfigCleanupFinalizer)
	})
	if len(f.manager.Running("a")) != 0 {
		t.Error("controllers still run after the finalizer was removed")
	}
	// The Event follows the finalizer's removal on the sync's goroutine: wait for it, then check it is the only one.
	f.waitFor("the CleanedUp Event", func() bool { return f.events.Count(corev1.EventTypeNormal, EventCleanedUp) > 0 })
	if f.events.Count(corev1.EventTypeNormal, EventCleanedUp) != 1 {
		t.Errorf("Events: %v, want one %s", f.events.With(""), EventCleanedUp)
	}
}

// A ProviderConfig deleted while no manager ran (down, failing over): the new manager never ran the controller,
// and still runs its cleanup from the recorded section before the finalizer goes.
func TestDeletionWhileTheManagerWasDownStillCleansUp(t *testing.T) {
	pc := providerConfig("a", "c-1")
	now := metav1.Now()
	pc.DeletionTimestamp = &now
	pc.Finalizers = []string{mpv1alpha1.ProviderConfigCleanupFinalizer}
	pc.Status.AppliedSpec = &mpv1alpha1.ProviderConfigSpec{Rancher: &mpv1alpha1.RancherConfig{ClusterID: "c-old"}}
	pc.Spec.Rancher = nil
	probes := newProbes()
	probes.setPending("a", "1 NEG not deleted yet")
	f := newFixtureWith(t, fixtureConfig{workers: 1, objects: []*mpv1alpha1.ProviderConfig{pc}, probes: probes})

	f.waitFor("the cleanup to run", func() bool {
		p := f.probes.latest("a")
		return p != nil && p.cleanup
	})
	if p := f.probes.latest("a"); p.section != "c-old" {
		t.Errorf("the cleanup was built from section %q, want the recorded c-old", p.section)
	}
	f.waitFor("Ready=False Deleting", f.conditionIs("a", mpv1alpha1.ProviderConfigConditionReady, metav1.ConditionFalse, ReasonDeleting))
	if n := f.probes.built("a"); n != 1 {
		t.Errorf("built %d probes, want only the cleanup", n)
	}
	f.probes.setPending("a", "")
	f.waitFor("the finalizer to go", func() bool {
		return !slices.Contains(f.get("a").Finalizers, mpv1alpha1.ProviderConfigCleanupFinalizer)
	})
}

// Removing a section runs the controller's cleanup with the recorded section; the condition says what is left, and
// both the condition and the record go once nothing is.
func TestRemovedSectionIsCleanedUpFromTheRecord(t *testing.T) {
	f := newFixture(t, 1)
	f.create(providerConfig("a", "c-1"))
	f.waitFor("the probe", func() bool { return len(f.manager.Running("a")) == 1 })

	f.probes.setPending("a", "3 NEGs not deleted yet")
	f.update("a", func(pc *mpv1alpha1.ProviderConfig) { pc.Spec.Rancher = nil })
	f.waitFor("the condition to say what is left", func() bool {
		c := f.condition("a", mpv1alpha1.ProviderConfigConditionNamespaceProjectReady)
		return c != nil && c.Reason == ReasonCleaningUp && strings.Contains(c.Message, "3 NEGs not deleted yet")
	})
	if p := f.probes.latest("a"); !p.cleanup || p.section != "c-1" {
		t.Fatalf("latest probe: cleanup=%v section=%q, want the cleanup of c-1", p.cleanup, p.section)
	}
	f.probes.setPending("a", "")
	f.waitFor("the condition to go", func() bool {
		return f.condition("a", mpv1alpha1.ProviderConfigConditionNamespaceProjectReady) == nil
	})
	f.waitFor("the record to go", func() bool { return f.get("a").Status.AppliedSpec == nil })
	f.waitFor("the cleanup to stop", func() bool { return len(f.manager.Running("a")) == 0 })
	if got := f.probes.most("a"); got != 1 {
		t.Errorf("%d instances ran at once, want 1", got)
	}
}

// A controller disabled by --controllers cannot clean up: the finalizer stays and the condition says what is left
// and why, until the operator abandons it; an Event lists what was abandoned.
func TestDisabledControllerBlocksDeletionUntilAbandoned(t *testing.T) {
	pc := providerConfig("a", "c-1")
	pc.Finalizers = []string{mpv1alpha1.ProviderConfigCleanupFinalizer}
	pc.Status.AppliedSpec = &mpv1alpha1.ProviderConfigSpec{Rancher: &mpv1alpha1.RancherConfig{ClusterID: "c-1"}}
	probes := newProbes()
	probes.setPending("a", "2 NEGs not deleted yet")
	f := newFixtureWith(t, fixtureConfig{workers: 1, disabled: true, objects: []*mpv1alpha1.ProviderConfig{pc}, probes: probes})
	f.waitFor("ControllerDisabled", f.conditionIs("a", mpv1alpha1.ProviderConfigConditionNamespaceProjectReady, metav1.ConditionUnknown, ReasonControllerDisable))

	f.markDeleted("a")
	f.waitFor("CleanupBlocked", f.conditionIs("a", mpv1alpha1.ProviderConfigConditionNamespaceProjectReady, metav1.ConditionFalse, ReasonCleanupBlocked))
	c := f.condition("a", mpv1alpha1.ProviderConfigConditionNamespaceProjectReady)
	for _, want := range []string{"--controllers", "2 NEGs not deleted yet", mpv1alpha1.AbandonCloudResourcesAnnotation} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("condition message %q does not mention %q", c.Message, want)
		}
	}
	if !slices.Contains(f.get("a").Finalizers, mpv1alpha1.ProviderConfigCleanupFinalizer) {
		t.Fatal("the finalizer went although cleanup could not run")
	}
	if n := f.probes.built("a"); n != 0 {
		t.Fatalf("a disabled controller was built %d times", n)
	}

	f.update("a", func(pc *mpv1alpha1.ProviderConfig) {
		pc.Annotations = map[string]string{mpv1alpha1.AbandonCloudResourcesAnnotation: "true"}
	})
	f.waitFor("the finalizer to go", func() bool {
		return !slices.Contains(f.get("a").Finalizers, mpv1alpha1.ProviderConfigCleanupFinalizer)
	})
	f.waitFor("the abandon Event", func() bool { return f.events.Count(corev1.EventTypeWarning, EventCloudResourcesAbandoned) > 0 })
	abandoned := f.events.With(corev1.EventTypeWarning + " " + EventCloudResourcesAbandoned + " ")
	if len(abandoned) != 1 || !strings.Contains(abandoned[0], "2 widgets in c-1") {
		t.Errorf("abandon Events = %v, want one listing what Abandon returned", abandoned)
	}
}

// A cleanup that cannot start (its API is not served) blocks the deletion with a condition that says so; one that
// fails to build is retried with backoff; neither lets the finalizer go while something is left.
func TestCleanupThatCannotStartKeepsTheFinalizer(t *testing.T) {
	pc := providerConfig("a", "c-1")
	now := metav1.Now()
	pc.DeletionTimestamp = &now
	pc.Finalizers = []string{mpv1alpha1.ProviderConfigCleanupFinalizer}
	pc.Status.AppliedSpec = &mpv1alpha1.ProviderConfigSpec{Rancher: &mpv1alpha1.RancherConfig{ClusterID: "c-1"}}
	probes := newProbes()
	probes.setPending("a", "1 NEG not deleted yet")
	probes.failFor["a"] = errBoom
	f := newFixtureWith(t, fixtureConfig{workers: 1, required: []schema.GroupVersionResource{extraAPI}, objects: []*mpv1alpha1.ProviderConfig{pc}, probes: probes})

	f.waitFor("CleanupBlocked naming the missing API", func() bool {
		c := f.condition("a", mpv1alpha1.ProviderConfigConditionNamespaceProjectReady)
		return c != nil && c.Reason == ReasonCleanupBlocked && strings.Contains(c.Message, extraAPI.Resource)
	})
	f.serveAPI(extraAPI)
	f.waitFor("FailedToStart", f.conditionIs("a", mpv1alpha1.ProviderConfigConditionNamespaceProjectReady, metav1.ConditionFalse, ReasonFailedToStart))
	if !slices.Contains(f.get("a").Finalizers, mpv1alpha1.ProviderConfigCleanupFinalizer) {
		t.Fatal("the finalizer went although the cleanup never ran")
	}
	f.probes.mu.Lock()
	delete(f.probes.failFor, "a")
	f.probes.mu.Unlock()
	f.waitFor("the cleanup to run", func() bool {
		p := f.probes.latest("a")
		return p != nil && p.cleanup
	})
	f.probes.setPending("a", "")
	f.waitFor("the finalizer to go", func() bool {
		return !slices.Contains(f.get("a").Finalizers, mpv1alpha1.ProviderConfigCleanupFinalizer)
	})
}
