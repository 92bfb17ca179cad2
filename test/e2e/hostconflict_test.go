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

package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	tunnelv1alpha1 "github.com/multiproject/api/pangolin/tunnel/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/ingresstunnel"
)

// TestHostHandedOverWhenItsTenantLeaves: the built manager runs two tenants whose Ingresses claim one host. The
// Ingress that publishes it keeps it, the other gets a HostConflict Warning naming it. Then the holder's tenant
// is deleted: the manager stops its controllers, its cleanup deletes its PangolinResources, and the other tenant's
// Ingress takes the host over without anyone's help. A watch of every PangolinResource, running through the whole
// test, fails it if two ever published the host at once.
func TestHostHandedOverWhenItsTenantLeaves(t *testing.T) {
	resetLease(t)
	gce := startFakeGCE(t)
	first, second := newWorkload(t, gce), newWorkload(t, gce)
	host := "shared-" + first.tenant + ".example.com"
	counter := countPublishers(t, first.mp, host)
	le := leaderElection{leaseDuration: 15 * time.Second, renewDeadline: 10 * time.Second, retryPeriod: time.Second}
	m := startManager(t, "a", managerKubeconfig(t), gce.Endpoint(), le)
	waitLeader(t, m.identity(), 2*time.Minute)

	first.setIngress("web", host)
	first.waitConverged("the first tenant's Ingress")
	second.setIngress("web", host)
	// The first Ingress publishes the host: it keeps it, whatever the second one's age.
	holder, other := first, second
	holder.waitConverged("the holder")
	waitEvent(other.ctx, t, "Ingress", other.appNS, "web", ingresstunnel.ReasonHostConflict, host, "Ingress "+holder.appNS+"/web")

	// The holder's tenant leaves. Its ProviderConfig goes once its cleanup has deleted its resources.
	if err := holder.mp.MultiprojectV1alpha1().ProviderConfigs().Delete(holder.ctx, holder.tenant, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	other.waitConverged("the other tenant, which took the host over")
	err := wait.PollUntilContextTimeout(holder.ctx, 250*time.Millisecond, convergeTimeout, true, func(context.Context) (bool, error) {
		o, err := holder.observe()
		return err == nil && o.pc == nil && len(o.resources) == 0, nil
	})
	if err != nil {
		t.Fatalf("the departed tenant %s or its PangolinResources are still there: %v", holder.tenant, err)
	}
	if n := counter.stop(); n != 1 {
		t.Errorf("%d PangolinResources published %s at once, want 1", n, host)
	}
	other.teardown()
}

// publishers counts, from one watch of every PangolinResource, the most that ever published one name at once (one
// being deleted still counts: the Pangolin operator unpublishes it only before its finalizer goes).
type publishers struct {
	t    *testing.T
	w    watch.Interface
	done chan struct{}

	mu       sync.Mutex
	live     map[string]bool
	max      int
	stopping bool
	broken   string
}

func countPublishers(t *testing.T, mp mpclientset.Interface, host string) *publishers {
	t.Helper()
	list, err := mp.TunnelV1alpha1().PangolinResources("").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := &publishers{t: t, done: make(chan struct{}), live: map[string]bool{}}
	observe := func(typ watch.EventType, r *tunnelv1alpha1.PangolinResource) {
		if r.Spec.HTTPConfig == nil || r.Spec.HTTPConfig.Subdomain+"."+r.Spec.HTTPConfig.DomainName != host {
			return
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if typ == watch.Deleted {
			delete(p.live, r.Namespace+"/"+r.Name)
			return
		}
		p.live[r.Namespace+"/"+r.Name] = true
		p.max = max(p.max, len(p.live))
	}
	for i := range list.Items {
		observe(watch.Added, &list.Items[i])
	}
	if p.w, err = mp.TunnelV1alpha1().PangolinResources("").Watch(t.Context(), metav1.ListOptions{ResourceVersion: list.ResourceVersion}); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		for ev := range p.w.ResultChan() {
			r, ok := ev.Object.(*tunnelv1alpha1.PangolinResource)
			if !ok {
				// Stopping the watch makes the client report the closed stream as an error.
				p.mu.Lock()
				if !p.stopping {
					p.broken = fmt.Sprintf("a %s event: %+v", ev.Type, ev.Object)
				}
				p.mu.Unlock()
				continue
			}
			observe(ev.Type, r)
		}
	}()
	return p
}

// stop ends the watch and returns the most PangolinResources that published the host at once; a broken watch fails
// the test, since it could have missed that.
func (p *publishers) stop() int {
	p.t.Helper()
	select {
	case <-p.done:
		p.t.Error("the watch of PangolinResources ended before the test did")
	default:
	}
	p.mu.Lock()
	p.stopping = true
	p.mu.Unlock()
	p.w.Stop()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.broken != "" {
		p.t.Errorf("the watch of PangolinResources broke: %s", p.broken)
	}
	return p.max
}
