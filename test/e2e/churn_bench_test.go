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
	"maps"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	mpclientset "github.com/multiproject/client-go/clientset/versioned"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
)

// BenchmarkEndToEndChurn measures, in one run on one API server, what an endpoint change costs when the built
// binary handles it, against what the same API writes cost without it. The world: one tenant (the workload of the
// other e2e tests), E2E_CHURN_SERVICES annotated Services (default 100), each with one EndpointSlice of one ready
// endpoint per zone. A pass as fast as the writers go is E2E_CHURN_FAST_CHANGES endpoint additions (default 5,000),
// a paced one E2E_CHURN_CHANGES (default 1,000), spread round-robin over the Services and written by
// E2E_CHURN_WORKERS goroutines (default 8; each owns a fixed share of the Services, so no write conflicts), as the
// cluster administrator. The passes, in order:
//
//  1. slices alone, just before each manager of 2 and 3 starts: the additions with no manager running, as fast as
//     the writers go and paced (below), so kube-apiserver's CPU for the user's own writes is known (utime + stime
//     of its /proc/<pid>/stat: the kernel's accounting of its process) next to each pass that subtracts it;
//  2. with E2E_CHURN_TODAY_BINARY set (hack/bench.sh churn builds it from the commit the throughput work started
//     from), that build, as today's behaviour, before each period of 3 and once more after the last; a period's
//     baseline is the mean of today's paced passes just before and after it (a pass's cost drifts with what ran
//     before it);
//  3. this build (with the flags of E2E_CHURN_MANAGER_ARGS too, if set), once per batch period of E2E_CHURN_BATCH_PERIODS (default "default,3s": the
//     default flags, then --neg-endpoint-batch-period=3s; "0" passes 0): the binary started as the Deployment starts it (client and GCE QPS 1,000),
//     converged, then three passes: the additions as fast as the writers go, then paced at E2E_CHURN_PACED_RATE
//     changes/s (default 100, one change per Service per second: a rate the manager keeps up with, where changes do
//     not coalesce in its queues by themselves), then E2E_CHURN_LIGHT_CHANGES (default 200) at a light load of
//     E2E_CHURN_LIGHT_RATE (default 10/s). The writers set the slices' trigger-time annotation as the EndpointSlice
//     controller does, and each addition's time from it to attached in the fake GCE is measured (latencyProbe). A pass ends when the fake GCE (in this process) holds every
//     Service's endpoints and every Translation is synced. Measured: the rate (rate: the changes over the time the
//     writers took, when the last change reached the fake GCE within the batch period and a second after the last
//     write; the rate to the pass's end too), kube-apiserver's CPU, the binary's own CPU (utime + stime of /proc/<pid>/stat), the API writes by
//     resource (kube-apiserver's apiserver_request_total) and how long the keys of the binary's neg queues waited
//     (its workqueue_queue_duration_seconds: the rate is held to a queue p99 of at most 1 s). Each pass ends with the exact audit the e2e
//     tests use (workload.waitConverged: every NEG holds exactly its slice's ready endpoints);
//  4. after each batch period's passes, the plain loop, as fast as the writers go: no informer, no GCE; per change
//     the slice update, then the Translation spec patch and status update (the manager's own kinds of request, its
//     ServiceAccount's identity, so the same API Priority and Fairness level) as many times per change as that
//     period's fast manager pass made them, on copies of its Translations; after the first period's, once per run,
//     the plain loop of issue 47's goal: one spec patch and one status update per change, and the plain loop of the
//     first period's writes with informers reading its EndpointSlices and Translations, the watch any controller of
//     them holds (the plain loop has none, and kube-apiserver and the test process pay for the manager's).
//
// Every pass starts from the Services' first endpoints (one per zone; reset): its additions grow each Translation,
// and passes that wrote larger objects would not compare. The rate row compares each period's fast pass with its
// plain loop. kube-apiserver's CPU per change caused by the manager is a pass's CPU beyond idle minus the
// slices-alone pass's at the same pace before the same manager, per change; the row compares each period's paced pass with today's build
// (or, without it, with this build's first period). CHURN_PROFILE_DIR=DIR keeps a CPU profile of the manager binary
// and of kube-apiserver for each manager pass (E2E_CHURN_PROFILE_SECONDS long, default 10). The machine is shared: CPU seconds and ratios within the run
// are what compare, not wall time across runs. E2E_CHURN_PASSES=light runs only the light-load pass after each
// manager's start (no slices-alone, fast, paced or plain pass, no row recorded): it prints the latencies with a
// breakdown by stage and reports the p50 and p99 as the benchmark's metrics, and on a line of their own for benchstat
// over -count runs (reportLightMetrics).
//
//	WHAT=./test/e2e hack/test-integration.sh -race=false -run '^$' -bench BenchmarkEndToEndChurn -benchtime 1x
func BenchmarkEndToEndChurn(b *testing.B) {
	c := newE2EChurn(b)
	periods := envDurations(b, "E2E_CHURN_BATCH_PERIODS", []time.Duration{defaultFlags, 3 * time.Second})
	b.ResetTimer()
	if c.lightOnly {
		for range b.N {
			for _, period := range periods {
				_, _, light := c.managerPasses(period, managerBinary(b), "")
				c.reportLight(light)
			}
		}
		return
	}
	for range b.N {
		var fast, paced, light, plain, today []churnPass
		// Today's build runs before each period and once more after the last: the same build's pass costs
		// kube-apiserver more or less depending on what ran before it in the same control plane (1.22 and 0.87
		// times as much run first and then last, in two runs), so each period's baseline is the mean of today's
		// passes just before and just after it (todayAround).
		todayBinary := os.Getenv("E2E_CHURN_TODAY_BINARY")
		runToday := func(label string) {
			if todayBinary != "" {
				_, p, _ := c.managerPasses(0, todayBinary, label)
				today = append(today, p)
			}
		}
		var oneEach, watched *churnPass
		for i, period := range periods {
			runToday(fmt.Sprintf("today %d", i+1))
			f, p, l := c.managerPasses(period, managerBinary(b), "")
			fast, paced, light = append(fast, f), append(paced, p), append(light, l)
			// The plain loop of this period's writes per change, from the same first endpoints.
			c.resetEndpoints()
			pl := c.plainPass(f.perChange(translationSpecWrites), f.perChange(translationStatusWrites), false)
			pl.base, pl.period = f.base, period
			plain = append(plain, pl)
			if i == 0 {
				// Once per run, next to the first period's: the plain loop as issue 47 states its goal, one spec
				// patch and one status update per change, what a controller that never batches writes.
				c.resetEndpoints()
				oe := c.plainPass(1, 1, false)
				oe.name, oe.base, oe.period = "plain loop, one of each", f.base, period
				oneEach = &oe
				// And the same writes as this period's, read by informers as the manager reads its own.
				c.resetEndpoints()
				wp := c.plainPass(f.perChange(translationSpecWrites), f.perChange(translationStatusWrites), true)
				wp.name, wp.base, wp.period = "plain loop, watched", f.base, period
				watched = &wp
			}
		}
		runToday(fmt.Sprintf("today %d", len(periods)+1))
		c.report(fast, paced, light, plain, today, oneEach, watched)
		for _, l := range light {
			reportLightMetrics(b, l)
		}
	}
}

// slicesAlone makes the additions with no manager running, as fast as the writers go and paced, so that
// kube-apiserver's CPU for the user's own writes is known just before a manager's passes. It is measured before each
// manager, not once: in one run the same paced slice writes cost kube-apiserver 1.72, 1.75, 3.31, 2.08, 1.84 and 2.41
// ms per change before six managers, and one figure from the run's start would charge the difference to the managers.
func (c *e2eChurn) slicesAlone() (fast, paced *churnPass) {
	apiIdle, _ := c.idle(nil)
	c.reset(nil)
	f := c.pass("slices alone", nil, c.writeSlice(c.w.appNS), 0, nil)
	c.reset(nil)
	p := c.pass("slices alone, paced", nil, c.writeSlice(c.w.appNS), c.pacedRate(), nil)
	f.apiIdle, p.apiIdle = apiIdle, apiIdle
	return &f, &p
}

// churnPass is what one pass measured.
type churnPass struct {
	name    string
	period  time.Duration
	changes int
	// elapsed is from the first write to the pass's end, writing until the last write's answer, inGCE until the
	// fake GCE held every change (manager passes only).
	elapsed, writing, inGCE time.Duration
	// apiCPU and managerCPU are CPU seconds of kube-apiserver and of the manager binary during the pass; apiIdle
	// and managerIdle their CPU (cores) while nothing changed, just before.
	apiCPU, managerCPU, apiIdle, managerIdle float64
	// etcdCPU and selfCPU are etcd's and this process's CPU seconds during the pass.
	etcdCPU, selfCPU float64
	// base is the pass of the slice writes alone at the same pace, nil for those passes themselves.
	base *churnPass
	// writes counts kube-apiserver's requests but watches during the pass by "VERB resource[/subresource]".
	writes map[string]float64
	// queues is what the manager's neg queues did during the pass, by queue.
	queues map[string]queueWork
	// latency is, per added endpoint, the time from its slice change to attached in the fake GCE (manager passes).
	latency latencies
}

// defaultFlags, as a batch period of E2E_CHURN_BATCH_PERIODS ("default"), starts the manager without
// --neg-endpoint-batch-period; every other period is passed explicitly, 0 too.
const defaultFlags time.Duration = -1

// defaultBatchPeriod is the flag's default (the group commit's ceiling), for keptUp.
const defaultBatchPeriod = time.Second

// periodLabel names a batch period in the report.
func periodLabel(period time.Duration) string {
	if period == defaultFlags {
		return "default flags"
	}
	return "batch period " + period.String()
}

// queued is the keys the manager's neg queues handed to a worker during the pass.
func (p churnPass) queued() float64 {
	var n float64
	for _, q := range p.queues {
		n += q.keys
	}
	return n
}

// queueP99Within1s says whether at least 99 % of the keys the pass queued waited at most 1 s (the queue p99 the
// end-to-end rate is held to), and that fraction.
func (p churnPass) queueP99Within1s() (bool, float64) {
	var all, within float64
	for _, q := range p.queues {
		all, within = all+q.keys, within+q.within1s
	}
	if all == 0 {
		return true, 1
	}
	f := within / all
	return f >= 0.99, f
}

// queueDetail says, per queue, what share of its keys waited at most 1 s and how long a worker spent on one.
func (p churnPass) queueDetail() string {
	var each []string
	for _, k := range slices.Sorted(maps.Keys(p.queues)) {
		each = append(each, k+" "+p.queues[k].String())
	}
	return strings.Join(each, ", ")
}

const (
	translationSpecWrites   = "PATCH translations"
	translationStatusWrites = "PUT translations/status"
)

// rate is the pass's throughput. For a manager pass that kept up (its last change reached the fake GCE within the
// batch period and a second after the last write: what was left at the end was the period's wait, not a backlog),
// the changes over the time the writers took, as for the passes without a manager; otherwise the changes over the
// time to the pass's end (endRate). The last change's wait for its period is latency, not throughput: with a 3 s
// period, a pass of 5,000 changes written in 5 s ends about 3 s after its last write, and its rate to the end would
// lose more than a third.
func (p churnPass) rate() float64 {
	if p.inGCE > 0 && !p.keptUp() {
		return p.endRate()
	}
	return float64(p.changes) / p.writing.Seconds()
}

// keptUp says whether the pass's last change reached the fake GCE within the batch period and a second after the
// last write.
func (p churnPass) keptUp() bool {
	ceiling := p.period
	if ceiling == defaultFlags {
		ceiling = defaultBatchPeriod
	}
	return p.inGCE-p.writing <= ceiling+time.Second
}

// endRate is the changes over the time from the first write to the pass's end.
func (p churnPass) endRate() float64 { return float64(p.changes) / p.elapsed.Seconds() }

func (p churnPass) perChange(kind string) float64 { return p.writes[kind] / float64(p.changes) }

// cpuPerChange is the pass's CPU per change of each process on the machine, and the cores they used together: where a
// pass as fast as the writers go, which saturates the two cores, spent them.
func (p churnPass) cpuPerChange() string {
	per := func(seconds float64) float64 { return seconds / float64(p.changes) * 1000 }
	return fmt.Sprintf("%.2f + %.2f + %.2f + %.2f ms (%.2f cores)", per(p.apiCPU), per(p.managerCPU), per(p.etcdCPU), per(p.selfCPU),
		(p.apiCPU+p.managerCPU+p.etcdCPU+p.selfCPU)/p.elapsed.Seconds())
}

// apiMsPerChange is kube-apiserver's CPU per change in the pass beyond its idle CPU over the pass's time and beyond
// what the slice writes alone at the same pace (base) spent per change beyond idle, in ms. The idle CPU (its
// controllers, leases, the watches of an idle manager) is spent per second, not per change: a pass that takes longer
// would otherwise be charged more.
func (p churnPass) apiMsPerChange() float64 {
	if p.base == nil {
		return 0
	}
	own := (p.apiCPU - p.apiIdle*p.elapsed.Seconds()) / float64(p.changes)
	users := (p.base.apiCPU - p.base.apiIdle*p.base.elapsed.Seconds()) / float64(p.base.changes)
	return (own - users) * 1000
}

// managerMsPerChange is the manager's CPU per change in ms, all of it (net false) or beyond its idle CPU.
func (p churnPass) managerMsPerChange(net bool) float64 {
	cpu := p.managerCPU
	if net {
		cpu -= p.managerIdle * p.elapsed.Seconds()
	}
	return cpu / float64(p.changes) * 1000
}

type e2eChurn struct {
	b          *testing.B
	w          *workload
	gce        *fakegce.Server
	kubeconfig string
	// writer writes as the administrator, fast; manager is the manager's ServiceAccount (the plain loop's identity).
	writer   kubernetes.Interface
	manager  mpclientset.Interface
	services []*churnService
	// changes is the additions of a paced pass, fastChanges of a pass as fast as the writers go, lightChanges of the
	// pass at a light load (E2E_CHURN_LIGHT_RATE).
	changes, fastChanges, lightChanges int
	workers                            int
	// probe, while a manager pass runs, measures each addition's way to the fake GCE; the fake GCE's OnCall reads
	// it from its handlers.
	probe atomic.Pointer[latencyProbe]
	// lightOnly (E2E_CHURN_PASSES=light) runs the light-load pass alone after each manager's start: no slices-alone,
	// fast, paced or plain passes and no rows recorded, only its latencies, their stages and the benchmark's metrics.
	lightOnly bool
}

// passChanges is the number of additions of a pass at rate (0: as fast as the writers go). A fast pass makes more
// (E2E_CHURN_FAST_CHANGES): its rate is a throughput, and the last change's way to GCE, which the plain loop does
// not have, must not weigh as much as a pass of a second or two would make it.
func (c *e2eChurn) passChanges(rate int) int {
	switch rate {
	case 0:
		return c.fastChanges
	case c.lightRate():
		return c.lightChanges
	}
	return c.changes
}

// lightRate is the light-load pass's rate, changes/s: where a change should find no write of its Service in flight.
func (c *e2eChurn) lightRate() int { return envInt(c.b, "E2E_CHURN_LIGHT_RATE", 10) }

// churnService is one Service: its endpoints now, the additions it had, and its slice's resourceVersion in the
// namespace a pass writes. A Service is written by one worker only.
type churnService struct {
	index, added int
	name         string
	eps          []endpoint
	rv           map[string]string // namespace → resourceVersion of the slice
	neg          string            // NEG name, once the manager has declared it
}

func newE2EChurn(b *testing.B) *e2eChurn {
	c := &e2eChurn{b: b}
	gce := fakegce.New(fakegce.Options{OnCall: func(rec fakegce.CallRecord) {
		if p := c.probe.Load(); p != nil {
			p.gceCall(rec)
		}
	}})
	gce.Start()
	b.Cleanup(gce.Close)
	switch passes := os.Getenv("E2E_CHURN_PASSES"); passes {
	case "", "all":
	case "light":
		c.lightOnly = true
	default:
		b.Fatalf("E2E_CHURN_PASSES=%q: want all (the default) or light", passes)
	}
	*c = e2eChurn{b: b, gce: gce, w: newWorkload(b, gce), kubeconfig: managerKubeconfig(b), lightOnly: c.lightOnly,
		changes: envInt(b, "E2E_CHURN_CHANGES", 1000), fastChanges: envInt(b, "E2E_CHURN_FAST_CHANGES", 5000),
		lightChanges: envInt(b, "E2E_CHURN_LIGHT_CHANGES", 200),
		workers:      envInt(b, "E2E_CHURN_WORKERS", 8)}
	cfg := controlPlane.AdminConfig()
	cfg.QPS, cfg.Burst = 5000, 5000
	c.writer = kubernetes.NewForConfigOrDie(cfg)
	managerCfg, err := controlPlane.ManagerConfig(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	managerCfg.QPS, managerCfg.Burst = 1000, 2000 // the binary's --kube-api-qps/--kube-api-burst in this benchmark
	c.manager = mpclientset.NewForConfigOrDie(managerCfg)
	for i := range envInt(b, "E2E_CHURN_SERVICES", 100) {
		svc := &churnService{index: i, name: fmt.Sprintf("svc-%d", i), eps: c.w.endpoints(i, 0, 1), rv: map[string]string{}}
		c.w.setService(svc.name, svc.eps)
		c.services = append(c.services, svc)
	}
	return c
}

// addEndpoint gives the Service one more ready endpoint, in the next zone, on another address than any before.
func (c *e2eChurn) addEndpoint(svc *churnService) {
	n := svc.added
	svc.added++
	zone := n % len(zones)
	svc.eps = append(svc.eps, endpoint{ip: fmt.Sprintf("10.%d.%d.%d", svc.index, 50+n/200, n%200+1),
		node: c.w.nodeName(zone, n%2), zone: zone})
}

// run makes c.passChanges(rate) additions, change j to Service j mod len(services), each worker owning the Services whose
// index is its own modulo the worker count; write is called after each addition. With a rate, change j is not
// written before j/rate seconds from the start.
func (c *e2eChurn) run(write func(*churnService) error, rate int) {
	type change struct {
		svc *churnService
		due time.Duration
	}
	queues := make([][]change, c.workers)
	for j := range c.passChanges(rate) {
		svc := c.services[j%len(c.services)]
		var due time.Duration
		if rate > 0 {
			due = time.Duration(j) * time.Second / time.Duration(rate)
		}
		queues[svc.index%c.workers] = append(queues[svc.index%c.workers], change{svc: svc, due: due})
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, c.workers)
	for _, q := range queues {
		wg.Go(func() {
			for _, ch := range q {
				svc := ch.svc
				if wait := ch.due - time.Since(start); wait > 0 {
					// The load's pace, not a wait for a condition.
					select {
					case <-time.After(wait):
					case <-c.b.Context().Done():
						return
					}
				}
				c.addEndpoint(svc)
				if err := write(svc); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		c.b.Fatal(err)
	}
}

// writeSlice updates the Service's EndpointSlice in ns with its endpoints, and tells the workload (the audit) what
// it now wants. The slice carries the change's trigger time as the EndpointSlice controller writes it (annotation
// endpoints.kubernetes.io/last-change-trigger-time, RFC 3339 with nanoseconds, UTC): the moment the change was made.
func (c *e2eChurn) writeSlice(ns string) func(*churnService) error {
	return func(svc *churnService) error {
		trigger := time.Now()
		slice := endpointSlice(ns, svc.name, svc.eps)
		slice.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: trigger.UTC().Format(time.RFC3339Nano)}
		slices := c.writer.DiscoveryV1().EndpointSlices(ns)
		var out *discoveryv1.EndpointSlice
		var err error
		if rv, ok := svc.rv[ns]; ok {
			slice.ResourceVersion = rv
			out, err = slices.Update(c.b.Context(), slice, updateOptions)
		} else {
			// The workload created it: read its version once.
			if out, err = slices.Get(c.b.Context(), slice.Name, getOptions); err == nil {
				slice.ResourceVersion = out.ResourceVersion
				out, err = slices.Update(c.b.Context(), slice, updateOptions)
			}
		}
		if err != nil {
			return fmt.Errorf("EndpointSlice of %s/%s: %w", ns, svc.name, err)
		}
		svc.rv[ns] = out.ResourceVersion
		if p := c.probe.Load(); p != nil && ns == c.w.appNS && len(svc.eps) > 0 {
			p.added(svc, svc.eps[len(svc.eps)-1], trigger, time.Now())
		}
		if ns == c.w.appNS {
			c.w.mu.Lock()
			c.w.services[svc.name] = append([]endpoint(nil), svc.eps...)
			c.w.mu.Unlock()
		}
		return nil
	}
}

// pass runs the additions with write at rate (0: as fast as the writers go) while m (nil: no manager) runs, then
// settle (if any), and measures both.
func (c *e2eChurn) pass(name string, m *manager, write func(*churnService) error, rate int, settle func() time.Time) churnPass {
	before := c.usage(m)
	var stopProbe func()
	var probe *latencyProbe
	if m != nil {
		probe = newLatencyProbe(c)
		c.probe.Store(probe)
		ctx, cancel := context.WithCancel(c.b.Context())
		var probed sync.WaitGroup
		if rate == c.lightRate() {
			// The stage "Translation lists it" is reported for the light-load pass only; at saturation the watch
			// would charge the manager's side with this process decoding every Translation write.
			probed.Go(func() { probe.watchTranslations(ctx) })
		}
		stopProbe = func() {
			cancel()
			probed.Wait()
		}
	}
	start := time.Now()
	c.run(write, rate)
	p := churnPass{name: name, changes: c.passChanges(rate), writing: time.Since(start)}
	if settle != nil {
		p.inGCE = settle().Sub(start)
	}
	if stopProbe != nil {
		stopProbe()
		if late := probe.poll(time.Now()); late > 0 {
			c.b.Errorf("%s: the latency probe's checks after the attach calls missed %d attached endpoints", name, late)
		}
		p.latency = probe.result()
		c.probe.Store(nil)
	}
	p.elapsed = time.Since(start)
	after := c.usage(m)
	p.apiCPU, p.managerCPU = after.apiCPU-before.apiCPU, after.managerCPU-before.managerCPU
	p.etcdCPU, p.selfCPU = after.etcdCPU-before.etcdCPU, after.selfCPU-before.selfCPU
	if m != nil {
		p.queues = map[string]queueWork{}
		for k, q := range after.queues {
			p.queues[k] = q.minus(before.queues[k])
		}
	}
	p.writes = map[string]float64{}
	for k, v := range after.writes {
		if d := v - before.writes[k]; d > 0 {
			p.writes[k] = d
		}
	}
	return p
}

// managerPasses starts the binary with the batch period, waits until it has converged and its Events are written,
// makes the additions as fast as the writers go and then paced, each pass until the fake GCE and every Translation
// show them and audited, and stops the binary.
func (c *e2eChurn) managerPasses(period time.Duration, binary, label string) (fast, paced, light churnPass) {
	b := c.b
	resetLease(b)
	args := []string{"--gce-qps=1000", "--gce-burst=2000", "--kube-api-qps=1000", "--kube-api-burst=2000"}
	if period != defaultFlags && (period > 0 || binary == managerBinary(b)) {
		args = append(args, "--neg-endpoint-batch-period="+period.String())
	}
	if binary == managerBinary(b) {
		args = append(args, strings.Fields(os.Getenv("E2E_CHURN_MANAGER_ARGS"))...)
	}
	if label == "" {
		label = "manager, " + periodLabel(period)
	}
	name := "churn-" + strings.NewReplacer(".", "_", " ", "-", "'", "").Replace(label)
	le := leaderElection{leaseDuration: 60 * time.Second, renewDeadline: 40 * time.Second, retryPeriod: 2 * time.Second}
	var fastBase, pacedBase *churnPass
	if !c.lightOnly {
		fastBase, pacedBase = c.slicesAlone()
	}
	c.reset(nil)
	m := startManagerBinary(b, binary, name, c.kubeconfig, c.gce.Endpoint(), le, args...)
	c.learnNEGs(c.w.waitConverged(name + ": start"))
	c.waitEventsWritten()
	apiIdle, managerIdle := c.idle(m)
	rate := c.pacedRate()
	for i, pass := range []*churnPass{&fast, &paced, &light} {
		if c.lightOnly && i < 2 {
			continue
		}
		pace, what := 0, "fast"
		if i > 0 {
			pace, what = rate, fmt.Sprintf("paced %d/s", rate)
			if i == 2 {
				pace, what = c.lightRate(), fmt.Sprintf("light %d/s", c.lightRate())
			}
			c.reset(m)
			c.w.waitConverged(name + ": reset before the " + what + " pass")
		}
		stopProfiles := c.profile(m, what)
		// The pass ends once the changes are in GCE and the Translations say so.
		*pass = c.pass(fmt.Sprintf("%s, %s", label, what), m, c.writeSlice(c.w.appNS), pace, c.waitSettled)
		pass.period, pass.apiIdle, pass.managerIdle = period, apiIdle, managerIdle
		pass.base = []*churnPass{fastBase, pacedBase, pacedBase}[i]
		stopProfiles()
		c.w.waitConverged(name + ": audit after the churn, " + what)
	}
	c.printEvents(name)
	m.signal(syscall.SIGTERM)
	if err := m.waitExit(time.Minute); err != nil {
		b.Fatalf("manager %s's shutdown: %v", name, err)
	}
	return fast, paced, light
}

// resetEndpoints gives every Service its first endpoints back (one per zone) in this process only. Every pass starts
// from them: a pass's additions grow each Translation by ten endpoints, and a pass that started from the previous
// passes' would write larger objects and cost the API server more per write, so passes would not compare.
func (c *e2eChurn) resetEndpoints() {
	for _, svc := range c.services {
		svc.eps = c.w.endpoints(svc.index, 0, 1)
	}
}

// reset gives every Service its first endpoints back and writes its slice in the workload's namespace. With a
// manager running (m not nil), it then waits until the fake GCE and every Translation show them.
func (c *e2eChurn) reset(m *manager) {
	c.resetEndpoints()
	write := c.writeSlice(c.w.appNS)
	for _, svc := range c.services {
		if err := write(svc); err != nil {
			c.b.Fatal(err)
		}
	}
	if m != nil {
		c.waitSettled()
	}
}

// pacedRate is the paced passes' rate, changes/s.
func (c *e2eChurn) pacedRate() int { return envInt(c.b, "E2E_CHURN_PACED_RATE", 100) }

// idle measures kube-apiserver's and the manager's CPU (cores; the manager's 0 without one) while nothing changes:
// the median of the E2E_CHURN_IDLE_SECONDS (default 5) one-second windows, read from /proc. One window that caught
// a burst of the API server's own work made a 5 s mean 0.15 cores against the usual
// 0.02, and the idle CPU is subtracted over a whole pass: 30 s at 0.13 cores too many is 1.3 ms per change of 3,000.
func (c *e2eChurn) idle(m *manager) (api, manager float64) {
	windows := envInt(c.b, "E2E_CHURN_IDLE_SECONDS", 5)
	read := func() (api, manager float64) {
		api = processCPU(c.b, controlPlane.APIServerPID())
		if m != nil {
			manager = processCPU(c.b, m.cmd.Process.Pid)
		}
		return api, manager
	}
	var apiRates, managerRates []float64
	lastAPI, lastManager := read()
	last := time.Now()
	for range windows {
		// Measuring windows, not a wait for a condition.
		select {
		case <-time.After(time.Second):
		case <-c.b.Context().Done():
			c.b.Fatal(c.b.Context().Err())
		}
		nowAPI, nowManager := read()
		secs := time.Since(last).Seconds()
		apiRates, managerRates = append(apiRates, (nowAPI-lastAPI)/secs), append(managerRates, (nowManager-lastManager)/secs)
		lastAPI, lastManager, last = nowAPI, nowManager, time.Now()
	}
	return median(apiRates), median(managerRates)
}

// median is the middle of values (the mean of the two middle ones for an even count); 0 for none.
func median(values []float64) float64 {
	if len(values) == 0 {
		return 0
	}
	sorted := slices.Sorted(slices.Values(values))
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// waitEventsWritten waits until the Events of the manager's start (recorded asynchronously, one write each) are all
// written: until the number of Event writes has not moved for a second, so that they do not count in a pass.
func (c *e2eChurn) waitEventsWritten() {
	last, still := -1.0, 0
	err := wait.PollUntilContextTimeout(c.b.Context(), 250*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		u := c.usage(nil)
		n := u.writes["POST events"] + u.writes["PATCH events"]
		if n == last {
			still++
		} else {
			last, still = n, 0
		}
		return still >= 4, nil
	})
	if err != nil {
		c.b.Fatalf("the manager's Events were still being written after a minute")
	}
}

// printEvents prints how many Events of each reason the tenant's namespace and the default namespace hold.
func (c *e2eChurn) printEvents(name string) {
	for _, ns := range []string{c.w.appNS, metav1.NamespaceDefault} {
		list, err := c.writer.CoreV1().Events(ns).List(c.b.Context(), metav1.ListOptions{})
		if err != nil {
			c.b.Fatal(err)
		}
		counts := map[string]int32{}
		for _, ev := range list.Items {
			counts[ev.InvolvedObject.Kind+"/"+ev.Reason] += max(ev.Count, 1)
		}
		fmt.Fprintf(os.Stderr, "BenchmarkEndToEndChurn: %s: Events in %s so far: %v\n", name, ns, counts)
	}
}

// learnNEGs records each Service's NEG name from its converged Translation.
func (c *e2eChurn) learnNEGs(o *observed) {
	for _, svc := range c.services {
		tr := o.translations[translationName(svc.name)]
		if tr == nil || len(tr.Spec.Resources) == 0 {
			c.b.Fatalf("Service %s has no Translation with NEGs", svc.name)
		}
		svc.neg = tr.Spec.Resources[0].Name
	}
}

// waitSettled waits until the fake GCE holds every Service's endpoints (checked in this process, every 20 ms, no
// API request), and then until every Translation is synced at its generation; it returns when the first came true.
func (c *e2eChurn) waitSettled() time.Time {
	b := c.b
	err := wait.PollUntilContextTimeout(b.Context(), 20*time.Millisecond, convergeTimeout, true, func(context.Context) (bool, error) {
		for _, svc := range c.services {
			if !c.inGCE(svc) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		b.Fatalf("the churn did not reach the fake GCE within %v", convergeTimeout)
	}
	inGCE := time.Now()
	err = wait.PollUntilContextTimeout(b.Context(), 100*time.Millisecond, convergeTimeout, true, func(ctx context.Context) (bool, error) {
		list, err := c.w.mp.MultiprojectV1alpha1().Translations(c.w.appNS).List(ctx, listFromCache)
		if err != nil {
			return false, nil
		}
		for i := range list.Items {
			if !synced(&list.Items[i]) {
				return false, nil
			}
		}
		return len(list.Items) == len(c.services), nil
	})
	if err != nil {
		b.Fatalf("the Translations were not all synced within %v", convergeTimeout)
	}
	return inGCE
}

// inGCE says whether the Service's NEGs in the fake GCE hold exactly its endpoints.
func (c *e2eChurn) inGCE(svc *churnService) bool {
	for zi, zone := range zones {
		want := sets.New[string]()
		for _, ep := range svc.eps {
			if ep.zone == zi {
				want.Insert(fmt.Sprintf("%s/%s:8080", ep.node, ep.ip))
			}
		}
		got, _ := c.gce.Endpoints(c.w.project, zone, svc.neg)
		have := sets.New[string]()
		for _, ep := range got {
			have.Insert(fmt.Sprintf("%s/%s:%d", path.Base(ep.Instance), ep.IpAddress, ep.Port))
		}
		if !have.Equal(want) {
			return false
		}
	}
	return true
}

// report prints the passes and records the rows.
func (c *e2eChurn) report(fast, paced, light, plain, today []churnPass, oneEach, watched *churnPass) {
	w := os.Stderr
	fmt.Fprintf(w, "\nBenchmarkEndToEndChurn: %d Services, %d endpoint additions per fast pass, %d per paced pass, %d writers\n", len(c.services), c.fastChanges, c.changes, c.workers)
	var all []churnPass
	for _, p := range inRunOrder(fast, paced, today) {
		all = append(all, *p.base)
	}
	all = append(append(append(append(append(all, fast...), paced...), light...), plain...), today...)
	for _, p := range []*churnPass{oneEach, watched} {
		if p != nil {
			all = append(all, *p)
		}
	}
	for _, p := range all {
		var kinds []string
		for k, v := range p.writes {
			kinds = append(kinds, fmt.Sprintf("%s=%.2f", k, v/float64(p.changes)))
		}
		sort.Strings(kinds)
		fmt.Fprintf(w, "%-28s %6.1f changes/s, %6.1f to the end (writes done %v, in GCE %v, end %v)  kube-apiserver %5.2f ms/change (idle %.2f cores; %5.2f ms beyond idle and the slices')  manager %5.3f ms/change (%5.3f beyond its idle %.3f cores)  CPU of kube-apiserver + manager + etcd + this process %s  requests per change: %s\n",
			p.name, p.rate(), p.endRate(), p.writing.Round(time.Millisecond), p.inGCE.Round(time.Millisecond), p.elapsed.Round(time.Millisecond),
			p.apiCPU/float64(p.changes)*1000, p.apiIdle, p.apiMsPerChange(), p.managerMsPerChange(false), p.managerMsPerChange(true),
			p.managerIdle, p.cpuPerChange(), strings.Join(kinds, " "))
	}
	for i, f := range fast {
		_, within := f.queueP99Within1s()
		fmt.Fprintf(w, "%s: keys queued at most 1 s as fast as the writers go: %.4f of %.0f (%s)\n", periodLabel(f.period), within, f.queued(), f.queueDetail())
		fmt.Fprintf(w, "%s: end to end ÷ plain loop of the same writes: %.2f (kept up: %t), %.2f to the end; paced, kube-apiserver ms per change caused by the manager: %.2f, %.2f of %s's %.2f\n",
			periodLabel(f.period), f.rate()/plain[i].rate(), f.keptUp(), f.endRate()/plain[i].endRate(), paced[i].apiMsPerChange(), paced[i].apiMsPerChange()/paced[0].apiMsPerChange(),
			periodLabel(paced[0].period), paced[0].apiMsPerChange())
		if i == 0 && oneEach != nil {
			fmt.Fprintf(w, "%s: end to end ÷ plain loop of one spec patch and one status update per change: %.2f\n", periodLabel(f.period), f.rate()/oneEach.rate())
		}
		if i == 0 && watched != nil {
			fmt.Fprintf(w, "%s: end to end ÷ plain loop of the same writes, watched by informers: %.2f\n", periodLabel(f.period), f.rate()/watched.rate())
		}
		for _, p := range []churnPass{light[i], paced[i], f} {
			l := p.latency
			fmt.Fprintf(w, "%s: slice change to attached in the fake GCE, %s: p50 %v p90 %v p99 %v max %v of %d (never seen %d)\n",
				periodLabel(f.period), p.name, l.quantile(0.5).Round(time.Millisecond), l.quantile(0.9).Round(time.Millisecond),
				l.quantile(0.99).Round(time.Millisecond), l.quantile(1).Round(time.Millisecond), len(l.sorted), l.missed)
		}
	}
	for _, l := range light {
		fmt.Fprintf(w, "%s, by stage:\n%s", l.name, l.latency.stageReport(5))
	}
	if len(today) > 0 {
		for i, p := range paced {
			fmt.Fprintf(w, "%s, paced: kube-apiserver ms per change caused by the manager %.2f, %.2f of today's build's %.2f (the mean of its passes just before and after)\n",
				periodLabel(p.period), p.apiMsPerChange(), p.apiMsPerChange()/todayAround(today, i), todayAround(today, i))
		}
	}
	c.record(fast, paced, light, plain, today, oneEach, watched)
}

// inRunOrder is the passes in the order they ran: before each period today's (paced only), then the period's fast
// and paced; today's last.
func inRunOrder(fast, paced, today []churnPass) []churnPass {
	var order []churnPass
	for i := range fast {
		if i < len(today) {
			order = append(order, today[i])
		}
		order = append(order, fast[i], paced[i])
	}
	if len(today) > len(fast) {
		order = append(order, today[len(fast)])
	}
	return order
}

// todayAround is the baseline of the i-th period: the mean of today's build's kube-apiserver ms per change caused by
// the manager in its passes just before and just after that period's.
func todayAround(today []churnPass, i int) float64 {
	return (today[i].apiMsPerChange() + today[i+1].apiMsPerChange()) / 2
}

func envDurations(tb testing.TB, name string, def []time.Duration) []time.Duration {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []time.Duration
	for _, f := range strings.Split(v, ",") {
		if strings.TrimSpace(f) == "default" {
			out = append(out, defaultFlags)
			continue
		}
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d < 0 {
			tb.Fatalf("%s=%q: want durations such as 0,1s, or default", name, v)
		}
		out = append(out, d)
	}
	return out
}
