//go:build integration

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
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/neg/translator"
)

// declarations follows, from one watch of every Translation of the cluster, how many declare one NEG name at once.
type declarations struct {
	t    *testing.T
	name string
	w    watch.Interface
	done chan struct{}

	mu       sync.Mutex
	live     map[string]bool
	max      int
	broken   string
	stopping bool
}

func (e *env) watchDeclarations(t *testing.T, name string) *declarations {
	t.Helper()
	list, err := e.admin.MultiprojectV1alpha1().Translations("").List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d := &declarations{t: t, name: name, done: make(chan struct{}), live: map[string]bool{}}
	for i := range list.Items {
		d.observe(watch.Added, &list.Items[i])
	}
	if d.w, err = e.admin.MultiprojectV1alpha1().Translations("").Watch(e.ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion}); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(d.done)
		for ev := range d.w.ResultChan() {
			tr, ok := ev.Object.(*mpv1alpha1.Translation)
			if !ok {
				// Stopping the watch makes the client report the closed stream as an error.
				d.mu.Lock()
				if !d.stopping {
					d.broken = fmt.Sprintf("a %s event: %+v", ev.Type, ev.Object)
				}
				d.mu.Unlock()
				continue
			}
			d.observe(ev.Type, tr)
		}
	}()
	return d
}

func (d *declarations) observe(t watch.EventType, tr *mpv1alpha1.Translation) {
	d.mu.Lock()
	defer d.mu.Unlock()
	key := tr.Namespace + "/" + tr.Name
	declares := false
	for _, r := range tr.Spec.Resources {
		declares = declares || r.Name == d.name
	}
	if t == watch.Deleted || !declares {
		delete(d.live, key)
		return
	}
	d.live[key] = true
	d.max = max(d.max, len(d.live))
}

// check stops the watch and fails the test if two Translations ever declared the name at once.
func (d *declarations) check() {
	d.t.Helper()
	select {
	case <-d.done:
		d.t.Error("the watch of Translations ended before the test did")
	default:
	}
	d.mu.Lock()
	d.stopping = true
	d.mu.Unlock()
	d.w.Stop()
	<-d.done
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.broken != "" {
		d.t.Errorf("the watch of Translations broke: %s", d.broken)
	}
	if d.max != 1 {
		d.t.Errorf("at most %d Translations declared NEG %s at once, want exactly 1", d.max, d.name)
	}
}

// TestCustomNEGNameClaimedByTwoTenants: Services of two tenants sharing one GCP project ask for one custom NEG name,
// which is held once per project. The one whose Translation declares it keeps it; the other gets one NEGNameConflict
// Warning naming it and no Translation. Deleting the holder hands the name over once the holder's Translation (and
// so its NEGs) is gone; the NEGs of that name are then the other's, with its marker. No two Translations ever
// declare the name at once.
func TestCustomNEGNameClaimedByTwoTenants(t *testing.T) {
	e := newEnv(t)
	a, b := e.newTenant("a", projectA), e.newTenant("b", projectA)
	nsA, nsB := a.namespace(), b.namespace()
	e.waitGCKnowsTranslations(nsA)
	nodes := "nc-" + a.name
	e.nodes(nodes, "", 1)
	eps := podsIn(nodes, 0, 1, 2, 1, 1)
	e.setSlices(nsA, "web", "http", 8080, eps)
	e.setSlices(nsB, "web", "http", 8080, eps)
	name := "shop-" + a.name
	d := e.watchDeclarations(t, name)
	a.start()
	b.start()
	annotation := `{"exposed_ports":{"80":{"name":"` + name + `"}}}`

	first := e.service(nsA, "web", annotation)
	e.waitConverged(projectA, nsA, "web", 80, 8080, eps)
	second := e.service(nsB, "web", annotation)
	// The first Service declares the name: it keeps it, even when the second comes first by UID (created in the
	// same second).
	holder, other := first, second
	holderName := fmt.Sprintf("Service %s/%s", holder.Namespace, holder.Name)
	e.waitFor("a NEGNameConflict Warning on the other Service", 30*time.Second, func() (bool, error) {
		return len(e.events(other.Namespace, other.Name, translator.ReasonNameConflict)) > 0, nil
	})
	e.waitConverged(projectA, holder.Namespace, "web", 80, 8080, eps)
	if tr := e.translation(other.Namespace, "neg-v1-web-80"); tr != nil {
		t.Errorf("the other Service has a Translation: %+v", tr.Spec.Resources)
	}

	if err := e.adminKube.CoreV1().Services(holder.Namespace).Delete(e.ctx, holder.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	taken, _ := e.waitConverged(projectA, other.Namespace, "web", 80, 8080, eps)
	e.waitFor("the NEGs of the name to carry the new holder's marker", 30*time.Second, func() (bool, error) {
		for _, z := range zones {
			if neg, ok := e.gce.NEG(projectA, z, name); !ok || neg.Description != taken.Spec.Resources[0].Description {
				return false, nil
			}
		}
		return true, nil
	})
	var conflicts []string
	for _, ev := range e.events(other.Namespace, other.Name, translator.ReasonNameConflict) {
		for range max(ev.Count, 1) {
			conflicts = append(conflicts, ev.Type+" "+ev.Message)
		}
	}
	if len(conflicts) != 1 || !strings.HasPrefix(conflicts[0], corev1.EventTypeWarning) || !strings.Contains(conflicts[0], holderName) {
		t.Errorf("NEGNameConflict Events on the other Service: %q; want one Warning naming %s", conflicts, holderName)
	}
	if got := e.events(holder.Namespace, holder.Name, translator.ReasonNameConflict); len(got) != 0 {
		t.Errorf("NEGNameConflict Events on the holder: %d", len(got))
	}
	d.check()
}
