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
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
)

// translation reads a Translation from the fake API; nil when it does not exist.
func (c *negCluster) translation(namespace, name string) *mpv1alpha1.Translation {
	c.t.Helper()
	tr, err := c.mp.MultiprojectV1alpha1().Translations(namespace).Get(c.ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return tr
}

// heldIn returns the Translations of the cluster that hold NEG name in project, as namespace/name.
func (c *negCluster) heldIn(project, name string) []string {
	c.t.Helper()
	list, err := c.mp.MultiprojectV1alpha1().Translations("").List(c.ctx, metav1.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	var out []string
	for i := range list.Items {
		if holdsNEGName(&list.Items[i], project, name) {
			out = append(out, list.Items[i].Namespace+"/"+list.Items[i].Name)
		}
	}
	return out
}

func (c *negCluster) waitHeldIn(project, name, translation string) {
	c.t.Helper()
	(&harness{t: c.t, ctx: c.ctx}).waitFor(name+" held in "+project+" by "+translation, func() bool {
		return slices.Equal(c.heldIn(project, name), []string{translation})
	})
}

// pushedIn writes the status the pusher writes once it has declared the Translation's NEGs in project (and deleted
// those of any other project).
func (c *negCluster) pushedIn(namespace, name, project string) {
	c.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		tr, err := c.mp.MultiprojectV1alpha1().Translations(namespace).Get(c.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		tr.Status.Resources = nil
		for _, r := range tr.Spec.Resources {
			tr.Status.Resources = append(tr.Status.Resources, mpv1alpha1.BackendResourceStatus{Kind: r.Kind, Name: r.Name,
				Zone: r.Zone, Project: project, Description: r.Description, State: mpv1alpha1.BackendResourceStateReady})
		}
		_, err = c.mp.MultiprojectV1alpha1().Translations(namespace).UpdateStatus(c.ctx, tr, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		c.t.Fatal(err)
	}
}

// restartIn stops a tenant's translator and runs it again in project, as the manager restarts the neg controller
// of a tenant whose spec.gcp changed.
func (c *negCluster) restartIn(nt *negTenant, name, namespace, project string) *negTenant {
	c.t.Helper()
	nt.stop()
	<-nt.done
	return c.startIn(name, namespace, project)
}

func (c *negCluster) createService(svc *corev1.Service) {
	c.t.Helper()
	if _, err := c.kube.CoreV1().Services(svc.Namespace).Create(c.ctx, svc, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// TestACustomNEGNameIsHeldPerProject: three tenants' Services ask for one custom NEG name, two tenants in project
// p1 and one in p2. The name is held once in each project: the Services of p1's first tenant and of p2's tenant
// both get their Translation; the other Service of p1 gets one NEGNameConflict naming p1's holder and the project,
// and takes the name over once that one is deleted, while p2's Translation is left as it is.
func TestACustomNEGNameIsHeldPerProject(t *testing.T) {
	c := newNEGCluster(t, node("n1", zoneB), namedNEGService("ns-a", "uid-a", 0, "shop-web"),
		namedNEGService("ns-b", "uid-b", 1, "shop-web"), namedNEGService("ns-c", "uid-c", 2, "shop-web"))
	a := c.startIn("tenant-a", "ns-a", "p1")
	b := c.startIn("tenant-b", "ns-b", "p2")
	later := c.startIn("tenant-c", "ns-c", "p1")
	c.waitHeldIn("p1", "shop-web", "ns-a/neg-v1-web-80")
	c.waitHeldIn("p2", "shop-web", "ns-b/neg-v1-web-80")
	h := &harness{t: t, ctx: c.ctx}
	h.waitFor("a NEGNameConflict naming p1's holder", func() bool { return nameConflictsNaming(later.events, "Service ns-a/web") == 1 })
	if got := later.events.With(corev1.EventTypeWarning + " " + ReasonNameConflict + " "); !strings.Contains(got[0], "GCP project p1") {
		t.Errorf("the NEGNameConflict %q does not name the project", got[0])
	}
	for _, holder := range []*negTenant{a, b} {
		if n := holder.events.Count(corev1.EventTypeWarning, ReasonNameConflict); n != 0 {
			t.Errorf("a holder got %d NEGNameConflict Warnings", n)
		}
	}
	if tr := c.translation("ns-c", "neg-v1-web-80"); tr != nil {
		t.Errorf("the later Service of p1 has a Translation declaring %s", negNameOf(tr))
	}
	p2 := c.translation("ns-b", "neg-v1-web-80")

	if err := c.kube.CoreV1().Services("ns-a").Delete(c.ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitHeldIn("p1", "shop-web", "ns-c/neg-v1-web-80")
	if got := c.translation("ns-b", "neg-v1-web-80"); got == nil || got.UID != p2.UID || got.Generation != p2.Generation {
		t.Errorf("p2's Translation changed when p1's name was handed over: %+v", got)
	}
	c.neverTwo()
}

// TestAProjectChangeClaimsTheNameAnew: a tenant's projectID changes, and the manager restarts its translator with
// the new spec. Its Service's custom name is claimed anew in the new project: free there, the same Translation
// records the new project. While its status still lists NEGs in the old project, the name stays held there, and a
// Service of that project waits until the pusher has deleted them. Moved into a project where another tenant's
// Service holds the name, the tenant's Service gets NEGNameConflict and its Translation is deleted (and with it,
// by its pusher, its NEGs).
func TestAProjectChangeClaimsTheNameAnew(t *testing.T) {
	// b's Service is the older one, so that it holds the name in p2 by every rule: the earlier claim, the incumbent.
	c := newNEGCluster(t, node("n1", zoneB), namedNEGService("ns-b", "uid-b", 0, "shop-web"),
		namedNEGService("ns-a", "uid-a", 1, "shop-web"))
	a := c.startIn("tenant-a", "ns-a", "p1")
	c.startIn("tenant-b", "ns-b", "p2")
	c.waitHeldIn("p1", "shop-web", "ns-a/neg-v1-web-80")
	c.waitHeldIn("p2", "shop-web", "ns-b/neg-v1-web-80")
	c.pushedIn("ns-a", "neg-v1-web-80", "p1")
	first := c.translation("ns-a", "neg-v1-web-80")
	p2 := c.translation("ns-b", "neg-v1-web-80")

	a = c.restartIn(a, "tenant-a", "ns-a", "p3")
	c.waitHeldIn("p3", "shop-web", "ns-a/neg-v1-web-80")
	if got := c.translation("ns-a", "neg-v1-web-80"); got.UID != first.UID {
		t.Errorf("the Translation was replaced (UID %s, was %s); want it to record the new project", got.UID, first.UID)
	}
	if got := c.heldIn("p1", "shop-web"); !slices.Equal(got, []string{"ns-a/neg-v1-web-80"}) {
		t.Errorf("shop-web held in p1 by %v; want the moved Translation, whose status lists NEGs there", got)
	}

	// A Service of p1 asks for the name: it waits for the NEGs of p1 to go.
	d := c.startIn("tenant-d", "ns-d", "p1")
	c.createService(namedNEGService("ns-d", "uid-d", 2, "shop-web"))
	h := &harness{t: t, ctx: c.ctx}
	h.waitFor("a NEGNameConflict naming the moved Service", func() bool { return nameConflictsNaming(d.events, "Service ns-a/web") == 1 })
	if tr := c.translation("ns-d", "neg-v1-web-80"); tr != nil {
		t.Fatalf("a Service of p1 declared %s while NEGs of the moved Translation were there", negNameOf(tr))
	}
	c.pushedIn("ns-a", "neg-v1-web-80", "p3")
	c.waitHeldIn("p1", "shop-web", "ns-d/neg-v1-web-80")

	// Into p2, where b's Service holds the name.
	a = c.restartIn(a, "tenant-a", "ns-a", "p2")
	h.waitFor("a NEGNameConflict naming p2's holder", func() bool { return nameConflictsNaming(a.events, "Service ns-b/web") == 1 })
	h.waitFor("the moved Service's Translation to be deleted", func() bool { return c.translation("ns-a", "neg-v1-web-80") == nil })
	if n := a.events.Count(corev1.EventTypeNormal, ReasonTranslationDeleted); n != 1 {
		t.Errorf("%d TranslationDeleted Events on the moved Service, want 1", n)
	}
	if got := c.translation("ns-b", "neg-v1-web-80"); got == nil || got.UID != p2.UID || got.Generation != p2.Generation {
		t.Errorf("p2's holder's Translation changed: %+v", got)
	}
	c.neverTwo()
}

// TestTheLiveReadOfAHolderClaimsInItsTenantsProject: with claim records, a recorded holder of another replica is
// read live, and its Service claims its names in its own tenant's project as the ProviderConfig says now.
func TestTheLiveReadOfAHolderClaimsInItsTenantsProject(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-b", Labels: map[string]string{testLabelKey: "tenant-b"}}}
	h := newHarness(t, ns, namedNEGService("ns-b", "uid-b", 0, "shop-web"))
	pc := &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "tenant-b"},
		Spec: mpv1alpha1.ProviderConfigSpec{GCP: &mpv1alpha1.GCPConfig{ProjectID: "p-b", Network: "vpc"}}}
	pc, err := h.mp.MultiprojectV1alpha1().ProviderConfigs().Create(h.ctx, pc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	live := h.translator.negNameKind().Live
	if got, err := live(h.ctx, "tenant-b", "ns-b/web", "uid-b"); err != nil || !slices.Equal(got, []string{"p-b/shop-web"}) {
		t.Errorf("Live() = %q, %v; want p-b/shop-web", got, err)
	}
	pc.Spec.GCP.ProjectID = "p-c"
	if _, err := h.mp.MultiprojectV1alpha1().ProviderConfigs().Update(h.ctx, pc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := live(h.ctx, "tenant-b", "ns-b/web", "uid-b"); err != nil || !slices.Equal(got, []string{"p-c/shop-web"}) {
		t.Errorf("Live() after the projectID changed = %q, %v; want p-c/shop-web", got, err)
	}
}

// TestATranslationHoldsItsNamesWhereItsNEGsMayBe pins which names, in which projects, a Translation holds.
func TestATranslationHoldsItsNamesWhereItsNEGsMayBe(t *testing.T) {
	declared := func(project string, status ...string) *mpv1alpha1.Translation {
		tr := translationOf("neg-v1-web-80", "web", "uid-web", testTenant, true, "shop-web")
		if project != "" {
			tr.Annotations = map[string]string{mpv1alpha1.TranslationNEGProjectAnnotationKey: project}
		}
		for _, p := range status {
			tr.Status.Resources = append(tr.Status.Resources, mpv1alpha1.BackendResourceStatus{Name: "shop-web", Zone: zoneB, Project: p})
		}
		return tr
	}
	for _, tc := range []struct {
		name string
		tr   *mpv1alpha1.Translation
		want []string
	}{
		{name: "declared, not pushed yet: its project", tr: declared("p1"), want: []string{"p1/shop-web"}},
		{name: "pushed: its project", tr: declared("p1", "p1"), want: []string{"p1/shop-web"}},
		{name: "its tenant moved: the old project until the NEGs there are gone, and the new one",
			tr: declared("p2", "p1", "p2"), want: []string{"p1/shop-web", "p2/shop-web"}},
		{name: "an older build's, pushed: where its status says", tr: declared("", "p1"), want: []string{"p1/shop-web"}},
		{name: "an older build's, never pushed: nothing known", tr: declared("")},
		{name: "a status entry from before projects were recorded: nothing known", tr: declared("", "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, ok := translationHolding(tc.tr)
			if ok != (len(tc.want) > 0) || !slices.Equal(h.Names, tc.want) {
				t.Errorf("translationHolding() = %q, %t; want %q", h.Names, ok, tc.want)
			}
			if ok && h.Holder != "Service "+testNamespace+"/web" {
				t.Errorf("holder %q, want the Service", h.Holder)
			}
		})
	}
}

// TestAnOlderBuildsCustomNamedTranslationGetsItsProjectRecorded: a Translation of a custom name made by a build
// before projects were recorded gains the tenant's project in one update of the same Translation, and a second sync
// writes nothing.
func TestAnOlderBuildsCustomNamedTranslationGetsItsProjectRecorded(t *testing.T) {
	svc := service("web", `{"exposed_ports":{"80":{"name":"shop-web"}}}`, servicePort("http", 80, "8080"))
	older := translationOf(translationName("web", 80), "web", "uid-web", testTenant, true, "shop-web")
	h := newHarness(t, node("n1", zoneB), node("n3", zoneC), svc, older)
	h.sync("web")
	if w := h.writes(); !slices.Contains(w, "update translations") || slices.Contains(w, "create translations") {
		t.Errorf("the sync wrote %v; want an update of the Translation", w)
	}
	got := h.translations()[translationName("web", 80)]
	if got == nil || got.UID != older.UID || got.Annotations[mpv1alpha1.TranslationNEGProjectAnnotationKey] != testProject {
		t.Fatalf("the Translation after the sync = %+v; want the same one, recording project %s", got, testProject)
	}
	h.sync("web")
	if w := h.writes(); len(w) != 0 {
		t.Errorf("a second sync wrote %v, want nothing", w)
	}
}
