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
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpinformers "github.com/multiproject/client-go/informers/externalversions"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
)

// latencyProbe measures, for every endpoint a manager pass adds, the time from its EndpointSlice change (the trigger
// time the writer puts in the slice's annotation, as the EndpointSlice controller does) to the endpoint attached in
// the fake GCE of this process. It learns that from the fake's calls, not by polling: after each attach call the
// fake answered (its OnCall; operations are done at once), it reads that one NEG and marks the pending endpoints it
// holds as attached. Polling every NEG every 10 ms cost this process about 0.2 cores at saturation, CPU the
// manager's side of the benchmark paid for and the plain loop did not. On the way it stamps the stages of each
// change, for the breakdown (stageReport): the slice write answered, the Service's Translation seen listing the
// endpoint (a watch of this process, in the light-load pass only), the attach call reaching the fake GCE.
type latencyProbe struct {
	c *e2eChurn

	mu sync.Mutex
	// pending are the added endpoints not yet seen in the fake GCE, by Service; byNEG finds a NEG's Service.
	pending map[*churnService][]addedEndpoint
	byNEG   map[string]*churnService
	seen    []addedEndpoint
	seenOf  []*churnService // the Service of each of seen
	// inSpec is when each address first appeared in a Translation, attachCalls when the attach calls of each NEG
	// reached the fake GCE, in order.
	inSpec      map[string]time.Time
	attachCalls map[negInZone][]time.Time
}

type negInZone struct{ neg, zone string }

// addedEndpoint is one change and the times of its stages (zero: not seen).
type addedEndpoint struct {
	ep endpoint
	// trigger is the slice's trigger time, written when the writer's update returned, inSpec when this process's
	// watch saw the Service's Translation list the endpoint, attachCall when an attach to its NEG reached the fake
	// GCE, attached when the probe saw it there.
	trigger, written, inSpec, attachCall, attached time.Time
}

func newLatencyProbe(c *e2eChurn) *latencyProbe {
	byNEG := map[string]*churnService{}
	for _, svc := range c.services {
		byNEG[svc.neg] = svc
	}
	return &latencyProbe{c: c, pending: map[*churnService][]addedEndpoint{}, byNEG: byNEG, inSpec: map[string]time.Time{},
		attachCalls: map[negInZone][]time.Time{}}
}

// added records an endpoint whose slice change was triggered at trigger and written at written. An attach to its
// NEG recorded since the trigger may have carried it before it was pending, and its check then found nothing to
// mark: the NEG is read once more. An attach recorded later reads the NEG after this, and finds it pending.
func (p *latencyProbe) added(svc *churnService, ep endpoint, trigger, written time.Time) {
	p.mu.Lock()
	p.pending[svc] = append(p.pending[svc], addedEndpoint{ep: ep, trigger: trigger, written: written})
	calls := p.attachCalls[negInZone{neg: svc.neg, zone: zones[ep.zone]}]
	raced := slices.ContainsFunc(calls, func(at time.Time) bool { return at.After(trigger) })
	p.mu.Unlock()
	if raced {
		p.check(svc, ep.zone, time.Now())
	}
}

// translationSeen records when an address first appeared in a Translation, as a watch event brought it at at.
func (p *latencyProbe) translationSeen(tr *mpv1alpha1.Translation, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range tr.Spec.Resources {
		if r.NetworkEndpointGroup == nil {
			continue
		}
		for _, ep := range r.NetworkEndpointGroup.Endpoints {
			if _, ok := p.inSpec[ep.IPAddress]; !ok {
				p.inSpec[ep.IPAddress] = at
			}
		}
	}
}

// gceCall records when an attach call that succeeded reached the fake GCE, by NEG and zone, and marks what it
// attached: the fake calls it once it has answered, when the operation is done.
func (p *latencyProbe) gceCall(rec fakegce.CallRecord) {
	if rec.Method != fakegce.MethodAttachEndpoints || rec.Status != http.StatusOK {
		return
	}
	p.mu.Lock()
	at := negInZone{neg: rec.Resource, zone: rec.Zone}
	p.attachCalls[at] = append(p.attachCalls[at], rec.Time)
	svc := p.byNEG[rec.Resource]
	p.mu.Unlock()
	if zone := slices.Index(zones, rec.Zone); svc != nil && zone >= 0 {
		p.check(svc, zone, time.Now())
	}
}

// check reads the Service's NEG in one zone and marks the pending endpoints it holds as attached at now; it returns
// how many it marked.
func (p *latencyProbe) check(svc *churnService, zone int, now time.Time) int {
	got, _ := p.c.gce.Endpoints(p.c.w.project, zones[zone], svc.neg)
	attached := make(map[string]bool, len(got))
	for _, ep := range got {
		attached[ep.IpAddress] = true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	before := len(p.seen)
	p.markLocked(svc, attached, now)
	return len(p.seen) - before
}

// markLocked moves the Service's pending endpoints whose address is attached to seen, attached at now.
func (p *latencyProbe) markLocked(svc *churnService, attached map[string]bool, now time.Time) {
	left := p.pending[svc][:0]
	for _, a := range p.pending[svc] {
		if attached[a.ep.ip] {
			a.attached = now
			p.seen = append(p.seen, a)
			p.seenOf = append(p.seenOf, svc)
			continue
		}
		left = append(left, a)
	}
	if len(left) == 0 {
		delete(p.pending, svc)
	} else {
		p.pending[svc] = left
	}
}

// stamp fills a change's inSpec and attachCall from what the watch and the fake GCE recorded: the first attach to
// its NEG in its zone after its trigger (a Service has one change in flight at a light load).
func (p *latencyProbe) stamp(svc *churnService, a *addedEndpoint) {
	a.inSpec = p.inSpec[a.ep.ip]
	for _, t := range p.attachCalls[negInZone{neg: svc.neg, zone: zones[a.ep.zone]}] {
		if t.After(a.trigger) {
			a.attachCall = t
			return
		}
	}
}

// watchTranslations stamps inSpec from a watch of the workload's Translations until ctx ends.
func (p *latencyProbe) watchTranslations(ctx context.Context) {
	byName := map[string]bool{}
	for _, svc := range p.c.services {
		byName[translationName(svc.name)] = true
	}
	factory := mpinformers.NewSharedInformerFactoryWithOptions(p.c.w.mp, 0, mpinformers.WithNamespace(p.c.w.appNS))
	informer := factory.Multiproject().V1alpha1().Translations().Informer()
	seen := func(obj any) {
		if tr, ok := obj.(*mpv1alpha1.Translation); ok && byName[tr.Name] {
			p.translationSeen(tr, time.Now())
		}
	}
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, obj any) { seen(obj) }})
	if err != nil {
		p.c.b.Error(err)
		return
	}
	factory.Start(ctx.Done())
	<-ctx.Done()
	factory.Shutdown()
}

// poll reads every Service's NEGs with a pending endpoint once, at the pass's end: what the attach calls did not
// account for is attached now or never seen. It returns how many it found attached: each is an attach the probe's
// checks missed, whose latency is then too long.
func (p *latencyProbe) poll(now time.Time) int {
	type negOf struct {
		svc  *churnService
		zone int
	}
	var negs []negOf
	p.mu.Lock()
	for svc, eps := range p.pending {
		for zi := range zones {
			if slices.ContainsFunc(eps, func(a addedEndpoint) bool { return a.ep.zone == zi }) {
				negs = append(negs, negOf{svc, zi})
			}
		}
	}
	p.mu.Unlock()
	found := 0
	for _, n := range negs {
		found += p.check(n.svc, n.zone, now)
	}
	return found
}

// latencies are the pass's times from slice change to attached, sorted, how many endpoints were never seen, and
// the changes seen with their stages.
type latencies struct {
	sorted  []time.Duration
	missed  int
	changes []addedEndpoint
}

func (p *latencyProbe) result() latencies {
	p.mu.Lock()
	defer p.mu.Unlock()
	missed := 0
	for _, eps := range p.pending {
		missed += len(eps)
	}
	l := latencies{missed: missed, changes: slices.Clone(p.seen)}
	for i := range l.changes {
		p.stamp(p.seenOf[i], &l.changes[i])
	}
	for _, a := range p.seen {
		l.sorted = append(l.sorted, a.attached.Sub(a.trigger))
	}
	slices.Sort(l.sorted)
	return l
}

// quantile is the q-quantile (nearest rank) of the latencies; 0 without any.
func (l latencies) quantile(q float64) time.Duration {
	if len(l.sorted) == 0 {
		return 0
	}
	i := int(float64(len(l.sorted))*q+0.999999) - 1
	return l.sorted[min(max(i, 0), len(l.sorted)-1)]
}

// stage is one step of a change's way, between two of its stamps.
type stage struct {
	name     string
	from, to func(addedEndpoint) time.Time
}

var stages = []stage{
	{"slice write answered", func(a addedEndpoint) time.Time { return a.trigger }, func(a addedEndpoint) time.Time { return a.written }},
	{"→ Translation lists it (this process's watch)", func(a addedEndpoint) time.Time { return a.written }, func(a addedEndpoint) time.Time { return a.inSpec }},
	{"→ attach call reaches the fake GCE", func(a addedEndpoint) time.Time { return a.inSpec }, func(a addedEndpoint) time.Time { return a.attachCall }},
	{"→ attached (the attach call answered)", func(a addedEndpoint) time.Time { return a.attachCall }, func(a addedEndpoint) time.Time { return a.attached }},
}

// stageReport is the per-stage breakdown of the changes: each stage's p50, p90, p99 and max, and the stages of the
// slowest changes, so that a tail can be told apart from the machine's noise (a stage that waits for a timer shows
// its length; a starved process spreads over all of them).
func (l latencies) stageReport(slowest int) string {
	var b strings.Builder
	for _, st := range stages {
		var ds []time.Duration
		unstamped := 0
		for _, a := range l.changes {
			if st.from(a).IsZero() || st.to(a).IsZero() {
				unstamped++
				continue
			}
			ds = append(ds, st.to(a).Sub(st.from(a)))
		}
		slices.Sort(ds)
		q := latencies{sorted: ds}
		fmt.Fprintf(&b, "  %-48s p50 %8v p90 %8v p99 %8v max %8v (%d changes, %d unstamped)\n", st.name,
			q.quantile(0.5).Round(time.Millisecond), q.quantile(0.9).Round(time.Millisecond), q.quantile(0.99).Round(time.Millisecond),
			q.quantile(1).Round(time.Millisecond), len(ds), unstamped)
	}
	worst := slices.SortedFunc(slices.Values(l.changes), func(a, b addedEndpoint) int {
		return cmp.Compare(b.attached.Sub(b.trigger), a.attached.Sub(a.trigger))
	})
	for _, a := range worst[:min(slowest, len(worst))] {
		fmt.Fprintf(&b, "  slow: %s total %v:", a.ep.ip, a.attached.Sub(a.trigger).Round(time.Millisecond))
		for _, st := range stages {
			if st.from(a).IsZero() || st.to(a).IsZero() {
				fmt.Fprintf(&b, " [%s: unstamped]", st.name)
				continue
			}
			fmt.Fprintf(&b, " [%s: %v]", st.name, st.to(a).Sub(st.from(a)).Round(time.Millisecond))
		}
		fmt.Fprintf(&b, " (triggered %s)\n", a.trigger.Format("15:04:05.000"))
	}
	return b.String()
}

// reportLight prints a light-load pass's latencies with their stages, and reports them as the benchmark's metrics.
func (c *e2eChurn) reportLight(p churnPass) {
	l := p.latency
	fmt.Fprintf(os.Stderr, "%s: slice change to attached in the fake GCE: p50 %v p90 %v p99 %v max %v of %d (never seen %d); by stage:\n%s",
		p.name, l.quantile(0.5).Round(time.Millisecond), l.quantile(0.9).Round(time.Millisecond), l.quantile(0.99).Round(time.Millisecond),
		l.quantile(1).Round(time.Millisecond), len(l.sorted), l.missed, l.stageReport(5))
	reportLightMetrics(c.b, p)
}

// reportLightMetrics reports a light-load pass's p50 and p99 as the benchmark's metrics (seconds), a batch period
// other than the default flags naming itself in the unit. It also prints them on a line of their own in the Go
// benchmark format, BenchmarkEndToEndChurnLight/batch=<default|period>, for benchstat over -count runs: go test
// prints a benchmark's name before it runs and its figures after, so with -count above 1 the lines the benchmark
// prints meanwhile split its own result line.
func reportLightMetrics(b *testing.B, p churnPass) {
	suffix, batch := "", "default"
	if p.period != defaultFlags {
		suffix, batch = "-period-"+p.period.String(), p.period.String()
	}
	p99, p50 := p.latency.quantile(0.99).Seconds(), p.latency.quantile(0.5).Seconds()
	b.ReportMetric(p99, "light-p99-s"+suffix)
	b.ReportMetric(p50, "light-p50-s"+suffix)
	fmt.Fprintf(os.Stderr, "\nBenchmarkEndToEndChurnLight/batch=%s 1 %.4f p50-s %.4f p99-s\n", batch, p50, p99)
}
