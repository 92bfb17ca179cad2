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
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
)

// With --neg-endpoint-batch-period, the endpoint changes of one Service inside the period make one Translation
// spec write, made when the period of the first change ends; nothing is written before.
func TestBatchPeriodCoalescesEndpointChanges(t *testing.T) {
	const period = time.Second
	h := newHarness(t, webObjects()...)
	clk := testingclock.NewFakeClock(time.Now())
	h.tctx.Options.NEGEndpointBatchPeriod = period
	tr, err := newWithClock(h.tctx, nil, clk)
	if err != nil {
		t.Fatal(err)
	}
	h.translator = tr
	var mu sync.Mutex
	var immediate, delayed []string
	add, addAfter := tr.add, tr.addAfter
	tr.add = func(key string) {
		mu.Lock()
		immediate = append(immediate, key)
		mu.Unlock()
		add(key)
	}
	tr.addAfter = func(key string, d time.Duration) {
		mu.Lock()
		delayed = append(delayed, fmt.Sprintf("%s after %v", key, d))
		mu.Unlock()
		addAfter(key, d)
	}
	// Converged before it runs, so that nothing it does on start writes or echoes: its handlers have had the initial
	// lists once it reports synced, and the syncs these ask for write nothing.
	h.sync("web")
	h.sync("web")
	h.settle()
	synced := make(chan struct{})
	tr.onSynced = func() { close(synced) }
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tr.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	<-synced
	// The start syncs every Service once (its initial Add): those syncs must be over before the changes, or one that
	// runs after the first change reaches the cache writes it at once, out of the batch.
	h.waitFor("the start's syncs", tr.workers.Idle)
	// Counted apart from the harness's actions, which its reads clear.
	var translationWrites []string
	h.mp.PrependReactor("*", "translations", func(a clienttesting.Action) (bool, runtime.Object, error) {
		switch a.GetVerb() {
		case "get", "list", "watch":
		default:
			mu.Lock()
			translationWrites = append(translationWrites, a.GetVerb()+" translations"+a.GetSubresource())
			mu.Unlock()
		}
		return false, nil, nil
	})
	mu.Lock()
	immediate, delayed = nil, nil
	mu.Unlock()

	const changes = 5
	var ips []string
	for i := range changes {
		ips = append(ips, fmt.Sprintf("10.0.1.%d", 10+i))
		eps := []ep{{ip: "10.0.1.2", node: "n3"}, {ip: "10.0.0.1", node: "n1"}}
		for _, ip := range ips {
			eps = append(eps, ep{ip: ip, node: "n3"})
		}
		if _, err := h.kube.DiscoveryV1().EndpointSlices(testNamespace).Update(h.ctx, slice("web", "web-2", "http", 9090, eps...), metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		h.waitFor(fmt.Sprintf("change %d to be handled", i+1), func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(delayed) == i+1
		})
	}
	h.settle()
	mu.Lock()
	if len(immediate) != 0 || delayed[0] != "shop/web after 1s" {
		t.Errorf("the slice changes enqueued %v at once and %v later, want only %q later", immediate, delayed, "shop/web after 1s")
	}
	if len(translationWrites) != 0 {
		t.Errorf("writes inside the batch period = %v, want none", translationWrites)
	}
	mu.Unlock()

	clk.Step(period)
	h.waitFor("the Translation to hold every change", func() bool {
		got := endpointsOf(h.translations()["neg-v1-web-80"])
		for _, ip := range ips {
			if !strings.Contains(got, ip) {
				return false
			}
		}
		return true
	})
	// The patch's own event comes back as a Translation update. With no sync waiting for it, it enqueues nothing
	// (the write is forgotten); if it came before the sync had recorded the write, it waits for the period like a
	// change. Either way nothing is enqueued at once: changes that came after the patch wait for the period on their
	// own events, and nothing is written out of a batch.
	h.waitFor("the patch's own event", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return tr.writes.len() == 0 || len(delayed) == changes+1 || len(immediate) > 0
	})
	h.settle()
	mu.Lock()
	defer mu.Unlock()
	if len(immediate) != 0 || len(delayed) > changes+1 {
		t.Errorf("enqueued at once %v and later %v, want only the %d changes later (and the patch's event if it came early)", immediate, delayed, changes)
	}
	if !reflect.DeepEqual(translationWrites, []string{"patch translations"}) {
		t.Errorf("writes for %d changes inside the period = %v, want one Translation spec patch", changes, translationWrites)
	}
}

// endpointsOf lists the Translation's endpoint addresses ("" for none).
func endpointsOf(tr *mpv1alpha1.Translation) string {
	if tr == nil {
		return ""
	}
	var out []string
	for _, r := range tr.Spec.Resources {
		for _, e := range r.NetworkEndpointGroup.Endpoints {
			out = append(out, e.IPAddress)
		}
	}
	return strings.Join(out, " ")
}
