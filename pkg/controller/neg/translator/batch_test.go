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
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/neg/pushed"
	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

// batching is a running translator with --neg-endpoint-batch-period set, on a fake clock that only the test moves,
// and what its handlers enqueued and its Translation writes (all but status writes, the pusher's) since the last
// reset.
type batching struct {
	h   *harness
	tr  *Translator
	clk *testingclock.FakeClock

	mu                sync.Mutex
	immediate, writes []string
	// slowPatch and slowCreate, if set, are how far a Translation spec patch or create moves the clock: how long
	// the API server took.
	slowPatch, slowCreate time.Duration
}

// startBatching runs the translator of webObjects with the ceiling, once Service web's Translation is written (and
// marked synced if synced) and the start's syncs are over.
func startBatching(t *testing.T, ceiling time.Duration, synced bool) *batching {
	return startBatchingWith(t, ceiling, synced, nil)
}

// startBatchingWith is startBatching with configure applied to the translator before it runs.
func startBatchingWith(t *testing.T, ceiling time.Duration, synced bool, configure func(*Translator)) *batching {
	h := newHarness(t, webObjects()...)
	b := &batching{h: h, clk: testingclock.NewFakeClock(time.Now())}
	h.tctx.Options.NEGEndpointBatchPeriod = ceiling
	tr, err := newWithClock(h.tctx, nil, b.clk)
	if err != nil {
		t.Fatal(err)
	}
	if configure != nil {
		configure(tr)
	}
	b.tr, h.translator = tr, tr
	add := tr.add
	tr.add = func(key string) {
		b.mu.Lock()
		b.immediate = append(b.immediate, key)
		b.mu.Unlock()
		add(key)
	}
	// Converged before it runs, so that nothing it does on start writes or echoes.
	h.sync("web")
	h.sync("web")
	if synced {
		h.markSynced("neg-v1-web-80")
	}
	h.settle()
	started := make(chan struct{})
	tr.onSynced = func() { close(started) }
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
	<-started
	h.waitFor("the start's syncs", tr.workers.Idle)
	h.mp.PrependReactor("*", "translations", func(a clienttesting.Action) (bool, runtime.Object, error) {
		switch a.GetVerb() {
		case "get", "list", "watch":
			return false, nil, nil
		}
		if a.GetSubresource() == "status" {
			// The test's own, as the pusher (markSynced).
			return false, nil, nil
		}
		b.mu.Lock()
		b.writes = append(b.writes, a.GetVerb()+" translations"+a.GetSubresource())
		slow := map[string]time.Duration{"patch": b.slowPatch, "create": b.slowCreate}[a.GetVerb()]
		b.mu.Unlock()
		if slow > 0 {
			b.clk.Step(slow)
		}
		return false, nil, nil
	})
	b.reset()
	return b
}

func (b *batching) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.immediate, b.writes = nil, nil
}

// seen returns what was enqueued at once, what later, and the Translation writes since the last reset.
func (b *batching) seen() (immediate, writes []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.immediate), slices.Clone(b.writes)
}

// change adds n endpoints to slice web-2 one update at a time, each handled before the next, and returns their
// addresses.
func (b *batching) change(n int) []string {
	b.h.t.Helper()
	var ips []string
	for i := range n {
		ips = append(ips, fmt.Sprintf("10.0.1.%d", 10+i))
		eps := []ep{{ip: "10.0.1.2", node: "n3"}, {ip: "10.0.0.1", node: "n1"}}
		for _, ip := range ips {
			eps = append(eps, ep{ip: ip, node: "n3"})
		}
		before := b.handled()
		if _, err := b.h.kube.DiscoveryV1().EndpointSlices(testNamespace).Update(b.h.ctx, slice("web", "web-2", "http", 9090, eps...), metav1.UpdateOptions{}); err != nil {
			b.h.t.Fatal(err)
		}
		b.h.waitFor(fmt.Sprintf("change %d to be handled", i+1), func() bool { return b.handled() > before })
	}
	return ips
}

// waitSyncs waits until the translator's workers are idle: every sync enqueued has run (a held one waits on the
// fake clock, or for the write in flight to end).
func (b *batching) waitSyncs() {
	b.h.t.Helper()
	b.h.waitFor("the syncs to end", b.tr.workers.Idle)
}

func (b *batching) handled() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.immediate)
}

// waitWritten waits until Translation neg-v1-web-80 holds every address.
func (b *batching) waitWritten(ips []string) {
	b.h.t.Helper()
	b.h.waitFor("the Translation to hold every change", func() bool {
		got := endpointsOf(b.h.translations()["neg-v1-web-80"])
		for _, ip := range ips {
			if !strings.Contains(got, ip) {
				return false
			}
		}
		return true
	})
	b.h.waitFor("the sync to end", b.tr.workers.Idle)
}

// A Service whose Translation is synced (no write in flight) is synced at once on an endpoint change: the batch
// period is a ceiling, not a wait.
func TestEndpointChangeWithNoWriteInFlightIsWrittenAtOnce(t *testing.T) {
	b := startBatching(t, time.Second, true)
	ips := b.change(1)
	b.waitWritten(ips)
	immediate, writes := b.seen()
	// The patch's own event may enqueue it once more (when it comes before the patch is recorded): a sync that
	// writes nothing. The clock never moved: the change was written at once.
	if len(immediate) == 0 || immediate[0] != "shop/web" {
		t.Errorf("enqueued %v, want shop/web", immediate)
	}
	if !reflect.DeepEqual(writes, []string{"patch translations"}) {
		t.Errorf("writes = %v, want one Translation spec patch", writes)
	}
}

// Endpoint changes that come while the Service's last write is in flight (its Translation not synced at its
// generation) are held by their sync, with the ceiling as their latest time, and make one write once the pusher
// reports the write done: the clock never moves, so the ceiling did not end the wait. The handler only enqueues.
func TestEndpointChangesDuringAWriteInFlightMakeOneWriteWhenItIsDone(t *testing.T) {
	const changes = 5
	b := startBatching(t, time.Second, false)
	metrics.Register()
	syncsBefore, _ := metrics.Syncs.Value(testTenant, "neg", "success")
	ips := b.change(changes)
	b.waitSyncs()
	// A held sync only said when to come back: it is not a sync in the metrics.
	if syncs, _ := metrics.Syncs.Value(testTenant, "neg", "success"); syncs != syncsBefore {
		t.Errorf("%v syncs counted while every change was held, want none", syncs-syncsBefore)
	}
	immediate, writes := b.seen()
	if len(immediate) != changes || immediate[0] != "shop/web" {
		t.Errorf("the handler enqueued %v, want each change at once", immediate)
	}
	if !b.tr.batch.isHeld("shop/web") {
		t.Errorf("with a write in flight, the sync did not hold the changes")
	}
	if len(writes) != 0 {
		t.Errorf("writes while the write was in flight = %v, want none", writes)
	}
	b.reset()
	b.h.markSynced("neg-v1-web-80")
	b.waitWritten(ips)
	immediate, writes = b.seen()
	if len(immediate) == 0 || immediate[0] != "shop/web" {
		t.Errorf("the write's end enqueued %v, want shop/web", immediate)
	}
	if !reflect.DeepEqual(writes, []string{"patch translations"}) {
		t.Errorf("writes for %d changes held = %v, want one Translation spec patch", changes, writes)
	}
}

// The write in flight ends when the pusher says it pushed the generation (pushed.Generations), before any status
// write says so: the changes held make one write then, and the Translation's status is still the old one.
func TestAWriteInFlightEndsWhenThePusherPushedItBeforeItsStatusSaysSo(t *testing.T) {
	pushes := pushed.New()
	b := startBatchingWith(t, time.Second, false, func(tr *Translator) { tr.FollowPushes(pushes) })
	ips := b.change(3)
	b.waitSyncs()
	if !b.tr.batch.isHeld("shop/web") {
		t.Fatal("with a write in flight, the sync did not hold the changes")
	}
	b.reset()
	inFlight := b.h.translations()["neg-v1-web-80"]
	// A generation the cache has left ends nothing: the write in flight is the newer one.
	older := inFlight.DeepCopy()
	older.Generation--
	pushes.Pushed(older)
	b.waitSyncs()
	if !b.tr.batch.isHeld("shop/web") {
		t.Fatal("the push of an older generation released the changes held for the write in flight")
	}
	pushes.Pushed(inFlight)
	b.waitWritten(ips)
	_, writes := b.seen()
	if !reflect.DeepEqual(writes, []string{"patch translations"}) {
		t.Errorf("writes for the changes held = %v, want one Translation spec patch", writes)
	}
	if negapi.TranslationSynced(b.h.translations()["neg-v1-web-80"]) {
		t.Error("the Translation's status says synced: the test must end the write in flight through the pusher alone")
	}
}

// A write in flight that never ends (a pusher that cannot sync) holds the changes for the ceiling at most.
func TestHeldEndpointChangesAreWrittenAtTheCeiling(t *testing.T) {
	const ceiling = 2 * time.Second
	b := startBatching(t, ceiling, false)
	ips := b.change(3)
	b.waitSyncs()
	b.clk.Step(ceiling - time.Millisecond)
	b.waitSyncs()
	if _, writes := b.seen(); len(writes) != 0 {
		t.Fatalf("writes before the ceiling = %v, want none", writes)
	}
	b.clk.Step(time.Millisecond)
	b.waitWritten(ips)
	if _, writes := b.seen(); !reflect.DeepEqual(writes, []string{"patch translations"}) {
		t.Errorf("writes at the ceiling = %v, want one Translation spec patch", writes)
	}
}

// An explicit 0 holds nothing: every change is synced at once, also with a write in flight.
func TestZeroBatchPeriodSyncsEveryChangeAtOnce(t *testing.T) {
	b := startBatching(t, 0, false)
	b.change(3)
	immediate, _ := b.seen()
	// Each change is written at once, and a patch's own event may enqueue it once more.
	if len(immediate) < 3 {
		t.Errorf("enqueued %v, want the 3 changes at once", immediate)
	}
}

// A spec patch the API server answers slowly holds the next change of the Service although no write is in flight,
// for the pushback's backoff; a patch answered in time ends it.
func TestSlowAnswerHoldsTheNextChange(t *testing.T) {
	b := startBatching(t, time.Second, true)
	b.mu.Lock()
	b.slowPatch = slowWrite + time.Millisecond
	b.mu.Unlock()
	ips := b.change(1)
	b.waitWritten(ips)
	b.h.markSynced("neg-v1-web-80")
	b.h.settle()
	b.reset()
	b.mu.Lock()
	b.slowPatch = 0
	b.mu.Unlock()
	// Two addresses: the first is the one already written.
	ips = b.change(2)
	b.waitSyncs()
	if _, writes := b.seen(); len(writes) != 0 || !b.tr.batch.isHeld("shop/web") {
		t.Fatalf("after a slow answer, the next change wrote %v at once, want it held", writes)
	}
	b.clk.Step(pushbackBase - time.Millisecond)
	b.waitSyncs()
	if _, writes := b.seen(); len(writes) != 0 {
		t.Fatalf("writes before the pushback's %v = %v, want none", pushbackBase, writes)
	}
	b.clk.Step(time.Millisecond)
	b.waitWritten(ips)
	if _, writes := b.seen(); !reflect.DeepEqual(writes, []string{"patch translations"}) {
		t.Errorf("writes at the pushback's end = %v, want one Translation spec patch", writes)
	}
}

// A create is a Translation write like the others: answered slowly, it holds the Service's next change for the
// pushback's backoff.
func TestASlowCreateHoldsTheNextChangeLikeAnyWrite(t *testing.T) {
	b := startBatching(t, time.Second, true)
	b.mu.Lock()
	b.slowCreate = slowWrite + time.Millisecond
	b.mu.Unlock()
	apiSlice := func(ips ...string) *discoveryv1.EndpointSlice {
		var eps []ep
		for _, ip := range ips {
			eps = append(eps, ep{ip: ip, node: "n1"})
		}
		return slice("api", "api-1", "http", 8080, eps...)
	}
	if _, err := b.h.kube.DiscoveryV1().EndpointSlices(testNamespace).Create(b.h.ctx, apiSlice("10.0.2.1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The slice in the translator's cache first: a create that saw no endpoint would be followed by a spec patch
	// answered in time, which ends the create's pushback before the change the test holds.
	b.h.waitFor("the slice of api in the translator's cache", func() bool {
		_, err := b.tr.sliceLister.EndpointSlices(testNamespace).Get("api-1")
		return err == nil
	})
	if _, err := b.h.kube.CoreV1().Services(testNamespace).Create(b.h.ctx, service("api", `{"exposed_ports":{"80":{}}}`, servicePort("http", 80, "8080")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b.h.waitFor("the Translation of api to be created", func() bool { return b.h.translations()["neg-v1-api-80"] != nil })
	b.waitSyncs()
	b.h.markSynced("neg-v1-api-80")
	b.h.settle()
	b.waitSyncs()
	b.reset()
	if _, err := b.h.kube.DiscoveryV1().EndpointSlices(testNamespace).Update(b.h.ctx, apiSlice("10.0.2.1", "10.0.2.2"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	b.h.waitFor("the change to be handled", func() bool { return b.handled() > 0 })
	b.waitSyncs()
	if _, writes := b.seen(); len(writes) != 0 {
		t.Fatalf("after a slow create, the next change wrote %v at once, want it held for the pushback", writes)
	}
	b.clk.Step(pushbackBase)
	b.h.waitFor("the held change to be written", func() bool {
		return strings.Contains(endpointsOf(b.h.translations()["neg-v1-api-80"]), "10.0.2.2")
	})
}

// The pushback's holds double for 429s and slow answers in a row, up to the ceiling, and end with a write answered in
// time; the end of a write in flight does not release a Service while its pushback lasts.
func TestPushbackBacksOffUpToTheCeiling(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	g := newGroupCommit(300*time.Millisecond, clk)
	idle := func() bool { return false }
	// An endpoint change and its sync's decision.
	change := func(key string, inFlight func() bool) time.Duration {
		g.endpointsChanged(key, time.Time{})
		return g.begin(key, inFlight)
	}
	tooMany := apierrors.NewTooManyRequests("slow down", 1)
	const key = "shop/web"
	var got []time.Duration
	for _, answer := range []struct {
		took time.Duration
		err  error
	}{{0, tooMany}, {time.Second, nil}, {0, tooMany}, {10 * time.Millisecond, nil}} {
		g.wrote(key, answer.took, answer.err)
		got = append(got, change(key, idle))
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond, 0}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("holds after 429, slow, 429, in time = %v, want %v", got, want)
	}
	g.wrote(key, 0, tooMany)
	if change(key, idle) == 0 || g.writeDone(key) {
		t.Errorf("during a pushback a change was not held, or the end of a write released it")
	}
	clk.Step(time.Second)
	if !g.writeDone(key) {
		t.Errorf("after the pushback, the end of a write did not release the held change")
	}
	if change("shop/other", func() bool { return true }) != 300*time.Millisecond {
		t.Errorf("a change during a write in flight is not held for the ceiling")
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

// A Translation write carries the earliest trigger time (the slices' endpoints.kubernetes.io/last-change-trigger-time)
// of the changes it writes, for the network programming latency; a write of changes without one carries "".
func TestTranslationWriteCarriesTheEarliestTriggerTime(t *testing.T) {
	b := startBatching(t, time.Second, false)
	earliest := time.Date(2026, 11, 28, 10, 0, 0, 123456789, time.UTC)
	// The later change first: the earlier one, written after, is still the write's.
	for i, at := range []time.Time{earliest.Add(time.Second), earliest} {
		s := slice("web", "web-2", "http", 9090, ep{ip: "10.0.1.2", node: "n3"}, ep{ip: fmt.Sprintf("10.0.1.%d", 20+i), node: "n3"})
		s.Annotations = map[string]string{negapi.SliceTriggerTime: at.Format(time.RFC3339Nano)}
		before := b.handled()
		if _, err := b.h.kube.DiscoveryV1().EndpointSlices(testNamespace).Update(b.h.ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		b.h.waitFor("the change to be handled", func() bool { return b.handled() > before })
	}
	b.h.markSynced("neg-v1-web-80")
	b.waitWritten([]string{"10.0.1.21"})
	if got := b.h.translations()["neg-v1-web-80"].Annotations[negapi.TriggerTimeAnnotation]; got != negapi.FormatTriggerTime(earliest) {
		t.Errorf("trigger time written = %q, want the earliest change's %q", got, negapi.FormatTriggerTime(earliest))
	}
	// Written: a change without a trigger time writes "", so the generation does not show the earlier write's.
	b.h.markSynced("neg-v1-web-80")
	b.h.settle()
	ips := b.change(1)
	b.waitWritten(ips)
	if got, ok := b.h.translations()["neg-v1-web-80"].Annotations[negapi.TriggerTimeAnnotation]; !ok || got != "" {
		t.Errorf("trigger time of a write without one = %q (present: %t), want \"\"", got, ok)
	}
}

// TestASliceChangeThatWritesNothingLeavesNoTriggerTime: a slice change with a trigger time that changes no
// Translation (a not-ready endpoint without a Pod added) is synced and written nowhere; its trigger time must not
// wait for the next write, which may come hours later and would read as hours of network programming latency. The
// next change, without a trigger time, writes "".
func TestASliceChangeThatWritesNothingLeavesNoTriggerTime(t *testing.T) {
	b := startBatching(t, time.Second, true)
	noop := slice("web", "web-2", "http", 9090, ep{ip: "10.0.1.2", node: "n3"}, ep{ip: "10.0.0.1", node: "n1"},
		ep{ip: "10.0.1.99", node: "n3", notReady: true})
	noop.Annotations = map[string]string{negapi.SliceTriggerTime: time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC).Format(time.RFC3339Nano)}
	before := b.handled()
	if _, err := b.h.kube.DiscoveryV1().EndpointSlices(testNamespace).Update(b.h.ctx, noop, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	b.h.waitFor("the change to be handled", func() bool { return b.handled() > before })
	b.h.waitFor("its sync to end", b.tr.workers.Idle)
	if _, writes := b.seen(); len(writes) != 0 {
		t.Fatalf("a change of nothing the Translation holds wrote %v", writes)
	}

	ips := b.change(1)
	b.waitWritten(ips)
	if got, ok := b.h.translations()["neg-v1-web-80"].Annotations[negapi.TriggerTimeAnnotation]; !ok || got != "" {
		t.Errorf("trigger time of the next write = %q (present: %t), want \"\": the change that wrote nothing left its own", got, ok)
	}
}
