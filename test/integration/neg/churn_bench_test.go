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
	"bufio"
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/options"
	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

// BenchmarkChurn measures the endpoint-change rate the neg controller sustains across many tenants (issue 15). Its
// world: CHURN_TENANTS tenants (default 100) sharing CHURN_SERVICES annotated Services (default 10,000, as many per
// tenant), each with one EndpointSlice of a few endpoints over two or three zones, converged first (every
// Translation synced, every NEG in the fake GCE holding its endpoints). Then, for each target rate of CHURN_RATES
// (changes/s, default 100,200,400,800), a paced load generator writes endpoint changes for CHURN_WINDOW (default 10s),
// spread round-robin over the tenants: one change is one EndpointSlice update that adds an endpoint or replaces one.
//
// For each rate it measures, from the window's start until every change of the window has reached the fake GCE:
//
//   - the achieved rate: changes written / time from the window's start to the last write's answer;
//   - the latency of each change from the moment its write was sent until the fake GCE holds exactly the slice's
//     endpoints (that state or a later change's), seen by the fake's OnCall hook after each mutating call of the
//     Service's NEGs (and, as a backstop while draining, by polling the fake in-process);
//   - the p99 wait of keys in the tenants' translator and pusher workqueues (client-go's
//     workqueue_queue_duration_seconds of the queues <tenant>-neg-translator and <tenant>-neg-pusher, from the
//     in-process legacyregistry; its buckets are powers of ten, so the p99 is interpolated, but "≤ 1 s" is a bucket
//     bound and exact);
//   - the manager's client QPS (its requests, counted by a rest.Config wrapper, over the writing time), its
//     requests per change, and the time requests waited in the client's rate limiter;
//   - the GCE calls, in total and for the busiest tenant, per second;
//   - CPU: kube-apiserver's (its process_cpu_seconds_total), this process's (manager, fake GCE and load generator),
//     and the machine's busy cores (/proc/stat; other users of the machine count too).
//
// A rate is sustained when the achieved rate is at least 95 % of the target, every change reached the fake GCE
// within 2 s, and the p99 wait of both queues is ≤ 1 s. The benchmark reports the highest sustained achieved rate
// as max-sustained-changes/s, and the per-rate table on stderr.
//
// The manager's clients have a QPS/burst of CHURN_KUBE_QPS/CHURN_KUBE_BURST (default 1000/2000, the binary's
// --kube-api-qps/--kube-api-burst) and each tenant's GCE client CHURN_GCE_QPS (default 1000, --gce-qps and
// --gce-burst), so that neither limiter is the bound unless asked; the load generator writes as the cluster admin
// (exempt from API Priority and Fairness) with a client of its own at 5,000 QPS and CHURN_WRITERS goroutines
// (default 64). The controllers log at verbosity 2, as the binary would in production, not ktesting's 5.
// CHURN_PROFILE_DIR=DIR keeps a CPU profile of this process and one of kube-apiserver for each rate's writing.
//
//	CHURN_TENANTS=10 CHURN_SERVICES=1000 WHAT=./test/integration/neg hack/test-integration.sh -run '^$' -bench BenchmarkChurn -benchtime 1x
func BenchmarkChurn(b *testing.B) {
	b.StopTimer()
	s := churnSettingsFromEnv(b)
	c := &churn{s: s, latencies: make([][]time.Duration, len(s.rates)), outstanding: make([]atomic.Int64, len(s.rates))}
	c.e, c.limiter = newChurnEnv(b, s, c.onCall)
	cfg := controlPlane.AdminConfig()
	cfg.QPS, cfg.Burst = 5000, 5000
	var err error
	if c.writer, err = kubernetes.NewForConfig(cfg); err != nil {
		b.Fatal(err)
	}
	converge := c.setup(b)
	fmt.Fprintf(os.Stderr, "BenchmarkChurn: %d tenants, %d Services (%d per tenant), converged in %v (every Translation synced, every NEG in the fake GCE full)\n",
		s.tenants, len(c.services), s.perTenant(), converge.Round(time.Millisecond))

	var results []churnResult
	for i := 0; i < b.N; i++ {
		b.StartTimer()
		results = c.sweep(b)
		b.StopTimer()
	}
	best := 0.0
	for _, r := range results {
		if r.sustained() {
			best = max(best, r.achieved)
		}
	}
	c.print(results)
	b.ReportMetric(best, "max-sustained-changes/s")
	b.ReportMetric(converge.Seconds(), "converge-s")
}

// churnSettings is what the environment variables choose.
type churnSettings struct {
	tenants, services int
	rates             []int
	window            time.Duration
	writers           int
	kubeQPS, gceQPS   float32
	kubeBurst         int
}

func (s churnSettings) perTenant() int { return max(1, s.services/s.tenants) }

func churnSettingsFromEnv(b *testing.B) churnSettings {
	s := churnSettings{tenants: 100, services: 10_000, rates: []int{100, 200, 400, 800}, window: 10 * time.Second,
		writers: 64, kubeQPS: 1000, kubeBurst: 2000, gceQPS: 1000}
	number := func(name string, into *int) {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				b.Fatalf("%s=%q: want a positive integer", name, v)
			}
			*into = n
		}
	}
	number("CHURN_TENANTS", &s.tenants)
	number("CHURN_SERVICES", &s.services)
	number("CHURN_WRITERS", &s.writers)
	number("CHURN_KUBE_BURST", &s.kubeBurst)
	kubeQPS, gceQPS := int(s.kubeQPS), int(s.gceQPS)
	number("CHURN_KUBE_QPS", &kubeQPS)
	number("CHURN_GCE_QPS", &gceQPS)
	s.kubeQPS, s.gceQPS = float32(kubeQPS), float32(gceQPS)
	if v := os.Getenv("CHURN_RATES"); v != "" {
		s.rates = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				b.Fatalf("CHURN_RATES=%q: want positive integers separated by commas", v)
			}
			s.rates = append(s.rates, n)
		}
	}
	if v := os.Getenv("CHURN_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			secs, err2 := strconv.Atoi(v)
			if err2 != nil {
				b.Fatalf("CHURN_WINDOW=%q: want a duration such as 10s", v)
			}
			d = time.Duration(secs) * time.Second
		}
		s.window = d
	}
	if s.services < s.tenants {
		b.Fatalf("CHURN_SERVICES=%d is fewer than CHURN_TENANTS=%d", s.services, s.tenants)
	}
	return s
}

// newChurnEnv builds the env as newEnvWith(envOptions{countCalls: true}) does, with what envOptions does not offer:
// the manager's client QPS/burst and each tenant's GCE QPS from the settings, a client rate limiter that records
// how long requests waited in it, the fake GCE's OnCall hook, and a logger at verbosity 2.
func newChurnEnv(b *testing.B, s churnSettings, onCall func(fakegce.CallRecord)) (*env, *churnLimiter) {
	b.Helper()
	calls, limiter := &framework.APICalls{}, &churnLimiter{}
	fw := controlPlane.NewEnv(b, framework.EnvOptions{
		Logger: ktesting.NewLogger(b, ktesting.NewConfig(ktesting.Verbosity(2))),
		GCE:    &fakegce.Options{OnCall: onCall},
	})
	manager := framework.ManagerOptions{Wrap: calls.Wrap,
		// One token bucket per client, as the binary's --kube-api-qps gives each of its clients.
		RateLimiter: func() flowcontrol.RateLimiter { return limiter.bucket(s.kubeQPS, s.kubeBurst) }}
	return startNEG(b, fw, calls, manager, s.gceQPS, func(*options.Options) {}), limiter
}

// churnLimiter sums, over the token buckets it made, how long requests waited for a token.
type churnLimiter struct {
	waited    atomic.Int64 // nanoseconds, over all requests
	throttled atomic.Int64 // requests that waited 1 ms or more
	longest   atomic.Int64 // nanoseconds
}

type churnBucket struct {
	flowcontrol.RateLimiter
	stats *churnLimiter
}

func (l *churnLimiter) bucket(qps float32, burst int) flowcontrol.RateLimiter {
	return churnBucket{RateLimiter: flowcontrol.NewTokenBucketRateLimiter(qps, burst), stats: l}
}

func (b churnBucket) Wait(ctx context.Context) error {
	start := time.Now()
	err := b.RateLimiter.Wait(ctx)
	b.stats.observe(time.Since(start))
	return err
}

func (b churnBucket) Accept() {
	start := time.Now()
	b.RateLimiter.Accept()
	b.stats.observe(time.Since(start))
}

func (l *churnLimiter) observe(d time.Duration) {
	l.waited.Add(int64(d))
	if d >= time.Millisecond {
		l.throttled.Add(1)
	}
	for {
		old := l.longest.Load()
		if int64(d) <= old || l.longest.CompareAndSwap(old, int64(d)) {
			return
		}
	}
}

// churn is the benchmark's state: the Services, the changes in flight and the latencies of those that arrived.
type churn struct {
	s       churnSettings
	e       *env
	limiter *churnLimiter
	writer  kubernetes.Interface

	tenants  []*tenantRun
	services []*churnService
	// byNEG finds a Service by "<project>/<NEG name>"; set once the NEG names are known, read-only after.
	byNEG  atomic.Pointer[map[string]*churnService]
	cursor int

	latMu     sync.Mutex
	latencies [][]time.Duration // per window
	// outstanding counts, per window, the changes written (or being written) that have not reached GCE yet.
	outstanding []atomic.Int64
}

// churnService is one Service: its tenant, its slice's last resourceVersion, and its changes not yet in GCE.
type churnService struct {
	tenant *tenantRun
	ns     string
	k      int
	neg    string

	// writeMu serializes the writes of the Service's slice (each is based on the previous one's resourceVersion).
	writeMu sync.Mutex
	rv      string

	mu      sync.Mutex
	round   int            // the latest change written or being written
	pending []churnPending // ordered by round
}

type churnPending struct {
	round, window int
	sent          time.Time
}

func (svc *churnService) name() string { return fmt.Sprintf("noisy%d", svc.k) } // as createServices names them

// churnEndpoints is Service k's endpoints after its change r: one endpoint in each of two zones (every third
// Service) or three, then per change one more: an odd change adds an endpoint, an even one replaces the one the
// change before added. So change r leaves the base endpoints, those of the even changes up to r, and r's own.
func churnEndpoints(nodePrefix string, k, r int) []endpoint {
	at := func(ip string, zi int) endpoint {
		return endpoint{ip: ip, node: fmt.Sprintf("%s-%c-0", nodePrefix, 'b'+zi), zone: zones[zi], zoneIndex: zi}
	}
	var eps []endpoint
	for zi := range 2 + min(1, k%3) {
		eps = append(eps, at(fmt.Sprintf("10.%d.%d.%d", zi, k/250, k%250+1), zi))
	}
	added := func(j int) endpoint {
		zi := j % len(zones)
		return at(fmt.Sprintf("10.%d.%d.%d", 100+zi, j/250, j%250+1), zi)
	}
	for j := 2; j <= r; j += 2 {
		eps = append(eps, added(j))
	}
	if r%2 == 1 {
		eps = append(eps, added(r))
	}
	return eps
}

// churnBenchSlice is the Service's EndpointSlice holding eps, port http → churnPort.
func churnBenchSlice(ns, service string, eps []endpoint) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: service + "-http",
			Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](churnPort), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for _, ep := range eps {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ep.ip}, NodeName: ptr.To(ep.node),
			Zone: ptr.To(ep.zone), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return s
}

const churnPort = 8080

// setup creates the tenants, their Nodes, slices and Services, starts the tenants and waits until everything has
// converged and both queues of every tenant are idle. It returns the time from the tenants' start to convergence.
func (c *churn) setup(b *testing.B) time.Duration {
	e, s := c.e, c.s
	for t := range s.tenants {
		tr := e.newTenant(fmt.Sprintf("churn%d", t), fmt.Sprintf("churn-%d-%06d", t, time.Now().UnixNano()%1_000_000))
		ns := tr.namespace()
		e.nodes(tr.name, tr.name, 1)
		c.tenants = append(c.tenants, tr)
		for k := range s.perTenant() {
			c.services = append(c.services, &churnService{tenant: tr, ns: ns, k: k})
		}
	}
	c.parallel(b, len(c.services), func(i int) error {
		svc := c.services[i]
		out, err := c.writer.DiscoveryV1().EndpointSlices(svc.ns).Create(e.ctx,
			churnBenchSlice(svc.ns, svc.name(), churnEndpoints(svc.tenant.name, svc.k, 0)), metav1.CreateOptions{})
		if err == nil {
			svc.rv = out.ResourceVersion
		}
		return err
	})
	for t := range c.tenants {
		createServices(b, e.ctx, c.services[t*s.perTenant()].ns, s.perTenant())
	}

	start := time.Now()
	for _, tr := range c.tenants {
		tr.start()
	}
	byNamespace := map[string]map[int]*churnService{}
	for _, svc := range c.services {
		if byNamespace[svc.ns] == nil {
			byNamespace[svc.ns] = map[int]*churnService{}
		}
		byNamespace[svc.ns][svc.k] = svc
	}
	// A list of every Translation is heavy at this size: read from the watch cache, every 2 s.
	err := wait.PollUntilContextTimeout(e.ctx, 2*time.Second, 30*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := e.admin.MultiprojectV1alpha1().Translations("").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, err
		}
		done := 0
		for i := range list.Items {
			tr := &list.Items[i]
			var k int
			svc := (*churnService)(nil)
			if _, err := fmt.Sscanf(tr.Name, "neg-v1-noisy%d-80", &k); err == nil {
				svc = byNamespace[tr.Namespace][k]
			}
			if svc == nil || !synced(tr) || len(tr.Spec.Resources) != len(zones) {
				continue
			}
			svc.neg = tr.Spec.Resources[0].Name
			done++
		}
		return done == len(c.services), nil
	})
	if err != nil {
		b.Fatalf("the %d Services' Translations did not all sync: %v", len(c.services), err)
	}
	e.waitFor("every NEG in the fake GCE to hold its endpoints", 10*time.Minute, func() (bool, error) {
		for _, svc := range c.services {
			if ok, _ := e.gceMatches(svc.tenant.project, svc.neg, churnPort, churnEndpoints(svc.tenant.name, svc.k, 0)); !ok {
				return false, nil
			}
		}
		return true, nil
	})
	converged := time.Since(start)
	m := map[string]*churnService{}
	for _, svc := range c.services {
		m[svc.tenant.project+"/"+svc.neg] = svc
	}
	c.byNEG.Store(&m)
	for _, tr := range c.tenants {
		tr.waitIdle()
	}
	// The Events of the convergence (a TranslationCreated per Service, a NEGCreated per NEG) leave the Event
	// broadcaster after the queues are idle; wait until the manager has sent no request for 2 s, so they are not
	// counted as the first window's.
	var last map[string]int
	err = wait.PollUntilContextTimeout(e.ctx, 2*time.Second, 10*time.Minute, true, func(context.Context) (bool, error) {
		now := e.calls.Snapshot()
		moved, _ := churnRequests(last, now)
		quiet := last != nil && len(moved) == 0
		last = now
		return quiet, nil
	})
	if err != nil {
		b.Fatalf("the manager did not go quiet after convergence: %v", err)
	}
	return converged
}

// parallel runs f(0..n-1) on 16 goroutines and fails the benchmark with the first error.
func (c *churn) parallel(b *testing.B, n int, f func(i int) error) {
	var wg sync.WaitGroup
	var next atomic.Int64
	errs := make([]error, 16)
	for g := range errs {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n && errs[g] == nil; i = int(next.Add(1)) - 1 {
				errs[g] = f(i)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
}

// onCall is the fake GCE's hook: after a mutating call of a Service's NEG, see whether the Service's changes
// in flight have arrived.
func (c *churn) onCall(rec fakegce.CallRecord) {
	if rec.Status != http.StatusOK || !rec.Method.Mutating() {
		return
	}
	m := c.byNEG.Load()
	if m == nil {
		return
	}
	if svc := (*m)[rec.Project+"/"+rec.Resource]; svc != nil {
		c.check(svc)
	}
}

// check resolves the Service's pending changes up to the latest whose endpoints GCE holds exactly.
func (c *churn) check(svc *churnService) {
	now := time.Now()
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if len(svc.pending) == 0 {
		return
	}
	for r := svc.round; r >= svc.pending[0].round; r-- {
		if ok, _ := c.e.gceMatches(svc.tenant.project, svc.neg, churnPort, churnEndpoints(svc.tenant.name, svc.k, r)); !ok {
			continue
		}
		n := 0
		c.latMu.Lock()
		for _, p := range svc.pending {
			if p.round > r {
				break
			}
			c.latencies[p.window] = append(c.latencies[p.window], now.Sub(p.sent))
			c.outstanding[p.window].Add(-1)
			n++
		}
		c.latMu.Unlock()
		svc.pending = svc.pending[n:]
		return
	}
}

// write sends the Service's next change, recording it as pending from the moment before the request.
func (c *churn) write(svc *churnService, window int) (time.Duration, error) {
	svc.writeMu.Lock()
	defer svc.writeMu.Unlock()
	svc.mu.Lock()
	svc.round++
	r := svc.round
	sent := time.Now()
	svc.pending = append(svc.pending, churnPending{round: r, window: window, sent: sent})
	svc.mu.Unlock()
	c.outstanding[window].Add(1)

	slice := churnBenchSlice(svc.ns, svc.name(), churnEndpoints(svc.tenant.name, svc.k, r))
	slice.ResourceVersion = svc.rv
	out, err := c.writer.DiscoveryV1().EndpointSlices(svc.ns).Update(c.e.ctx, slice, metav1.UpdateOptions{})
	took := time.Since(sent)
	if err != nil {
		// Not written: forget the change (it is the newest, and no other write of the Service runs).
		svc.mu.Lock()
		svc.pending = slices.DeleteFunc(svc.pending, func(p churnPending) bool { return p.round == r })
		svc.round--
		svc.mu.Unlock()
		c.outstanding[window].Add(-1)
		return took, err
	}
	svc.rv = out.ResourceVersion
	return took, nil
}

// next is the Service of the next change: round-robin over the tenants, and over each tenant's Services.
func (c *churn) next() *churnService {
	i := c.cursor
	c.cursor++
	t, per := len(c.tenants), c.s.perTenant()
	return c.services[(i%t)*per+(i/t)%per]
}

// churnResult is one window's figures.
type churnResult struct {
	target, changes, writeErrors int
	achieved                     float64
	writing                      time.Duration // from the window's start to the last write's answer
	latP50, latP99, latMax       time.Duration
	over2s, unresolved           int
	writeP99                     time.Duration
	queue                        map[string]churnHist // "translator", "pusher": the window's queue waits
	clientQPS, requestsPerChange float64
	requests                     map[string]int // the manager's requests, from the window's start to idle
	conflicts                    int
	limiterWait                  time.Duration // summed over requests, while writing
	limiterThrottled             int64
	limiterLongest               time.Duration
	gceQPS, gceTenantMaxQPS      float64
	gceCalls                     map[fakegce.Method]int // from the window's start to idle
	apiServerCPU, ownCPU, busy   float64                // cores, while writing
	apfWait                      time.Duration          // mean APF queue wait of the manager's priority level
	apfRejected                  float64
}

func (r churnResult) queueOK() bool {
	for _, h := range r.queue {
		if h.count > 0 && !(h.within(1) >= 0.99) {
			return false
		}
	}
	return true
}

func (r churnResult) sustained() bool {
	return r.writeErrors == 0 && r.achieved >= 0.95*float64(r.target) && r.unresolved == 0 && r.latMax <= 2*time.Second && r.queueOK()
}

// churnSnapshot is what is read before, while and after a window.
type churnSnapshot struct {
	at                    time.Time
	calls                 map[string]int
	queue                 map[string]churnHist
	waited, throttled     int64
	gce                   map[string]map[fakegce.Method]int // by project
	apiCPU, ownCPU        float64
	busy, total           float64 // /proc/stat jiffies
	apfSum, apfCount, rej float64
}

func (c *churn) snapshot(b *testing.B, queues bool) churnSnapshot {
	s := churnSnapshot{at: time.Now(), calls: c.e.calls.Snapshot(), waited: c.limiter.waited.Load(),
		throttled: c.limiter.throttled.Load(), gce: map[string]map[fakegce.Method]int{}}
	if queues {
		s.queue = c.queueWaits(b)
	}
	for _, tr := range c.tenants {
		s.gce[tr.project] = c.e.gce.Calls(tr.project)
	}
	s.apiCPU, s.apfSum, s.apfCount, s.rej = c.apiServerMetrics(b)
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		s.ownCPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
	s.busy, s.total = machineCPU()
	return s
}

// sweep runs one window per rate and returns their figures; it stops early when a window's changes do not all
// reach GCE in time, since the next window would start on its backlog.
func (c *churn) sweep(b *testing.B) []churnResult {
	var out []churnResult
	for w, rate := range c.s.rates {
		r := c.window(b, w, rate)
		out = append(out, r)
		fmt.Fprintf(os.Stderr, "BenchmarkChurn: target %d/s: achieved %.0f/s, latency p99 %v max %v, queue p99 translator %s pusher %s, client %.0f QPS, sustained %v\n",
			rate, r.achieved, r.latP99, r.latMax, fmtSeconds(r.queue["translator"].quantile(0.99)),
			fmtSeconds(r.queue["pusher"].quantile(0.99)), r.clientQPS, r.sustained())
		if r.unresolved > 0 {
			break
		}
	}
	return out
}

func (c *churn) window(b *testing.B, w, rate int) churnResult {
	e, s := c.e, c.s
	total := int(float64(rate) * s.window.Seconds())
	c.latMu.Lock()
	c.latencies[w] = nil // a former iteration's
	c.latMu.Unlock()
	before := c.snapshot(b, true)

	stopProfiles := c.profile(b, rate)
	jobs := make(chan *churnService, 4*s.writers)
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var writeErrs []error
	var writeTimes []time.Duration
	for range s.writers {
		wg.Go(func() {
			for svc := range jobs {
				took, err := c.write(svc, w)
				errMu.Lock()
				writeTimes = append(writeTimes, took)
				if err != nil {
					writeErrs = append(writeErrs, err)
				}
				errMu.Unlock()
			}
		})
	}
	// The pacer: every 5 ms, hand out the changes due by now at the target rate. If the writers fall behind, the
	// channel fills, the pacer blocks, and the achieved rate shows it.
	start := time.Now()
	ticker := time.NewTicker(5 * time.Millisecond)
	for sent := 0; sent < total; {
		select {
		case <-ticker.C:
		case <-e.ctx.Done():
			b.Fatal(e.ctx.Err())
		}
		for due := min(total, int(float64(rate)*time.Since(start).Seconds())); sent < due; sent++ {
			jobs <- c.next()
		}
	}
	ticker.Stop()
	close(jobs)
	wg.Wait()
	stopProfiles()
	mid := c.snapshot(b, false)
	writing := mid.at.Sub(start)

	// Drain: wait for every change of the window to reach GCE. The hook sees each at once; polling the fake here
	// as well is a backstop that can only resolve a change later than the hook would.
	drain := max(2*time.Minute, 12*s.window)
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, drain, true, func(context.Context) (bool, error) {
		if c.outstanding[w].Load() == 0 {
			return true, nil
		}
		for _, svc := range c.services {
			svc.mu.Lock()
			waiting := len(svc.pending) > 0
			svc.mu.Unlock()
			if waiting {
				c.check(svc)
			}
		}
		return c.outstanding[w].Load() == 0, nil
	})
	r := churnResult{target: rate, changes: total - len(writeErrs), writeErrors: len(writeErrs), writing: writing}
	if err != nil {
		r.unresolved = int(c.outstanding[w].Load())
		fmt.Fprintf(os.Stderr, "BenchmarkChurn: target %d/s: %d changes had not reached GCE %v after the writes ended\n", rate, r.unresolved, drain)
	} else {
		for _, tr := range c.tenants {
			tr.waitIdle()
		}
	}
	after := c.snapshot(b, true)
	if len(writeErrs) > 0 {
		fmt.Fprintf(os.Stderr, "BenchmarkChurn: target %d/s: %d writes failed, first: %v\n", rate, len(writeErrs), writeErrs[0])
	}

	r.achieved = float64(r.changes) / writing.Seconds()
	c.latMu.Lock()
	lat := slices.Clone(c.latencies[w])
	c.latMu.Unlock()
	slices.Sort(lat)
	r.latP50, r.latP99 = percentile(lat, 0.5), percentile(lat, 0.99)
	if len(lat) > 0 {
		r.latMax = lat[len(lat)-1]
	}
	for _, d := range lat {
		if d > 2*time.Second {
			r.over2s++
		}
	}
	slices.Sort(writeTimes)
	r.writeP99 = percentile(writeTimes, 0.99)
	r.queue = map[string]churnHist{}
	for q, h := range after.queue {
		r.queue[q] = h.minus(before.queue[q])
	}

	secs := writing.Seconds()
	whileWriting, _ := churnRequests(before.calls, mid.calls)
	n := 0
	for _, d := range whileWriting {
		n += d
	}
	r.clientQPS = float64(n) / secs
	r.requests, r.conflicts = churnRequests(before.calls, after.calls)
	total2 := 0
	for _, d := range r.requests {
		total2 += d
	}
	r.requestsPerChange = float64(total2) / float64(max(1, r.changes))
	r.limiterWait = time.Duration(mid.waited - before.waited)
	r.limiterThrottled = mid.throttled - before.throttled
	r.limiterLongest = time.Duration(c.limiter.longest.Load())

	r.gceCalls = map[fakegce.Method]int{}
	gceTotal := 0
	for project, calls := range mid.gce {
		n := 0
		for m, d := range calls {
			n += d - before.gce[project][m]
		}
		gceTotal += n
		r.gceTenantMaxQPS = max(r.gceTenantMaxQPS, float64(n)/secs)
	}
	r.gceQPS = float64(gceTotal) / secs
	for project, calls := range after.gce {
		for m, d := range calls {
			if d2 := d - before.gce[project][m]; d2 > 0 {
				r.gceCalls[m] += d2
			}
		}
	}
	r.apiServerCPU = (mid.apiCPU - before.apiCPU) / secs
	r.ownCPU = (mid.ownCPU - before.ownCPU) / secs
	if dt := mid.total - before.total; dt > 0 {
		r.busy = (mid.busy - before.busy) / dt * float64(runtime.NumCPU())
	}
	if dc := mid.apfCount - before.apfCount; dc > 0 {
		r.apfWait = time.Duration((mid.apfSum - before.apfSum) / dc * float64(time.Second))
	}
	r.apfRejected = mid.rej - before.rej
	return r
}

// churnRequests is the manager's requests between two counts, by kind, leaving out watches and discovery as
// framework.APICalls.Since does, and the requests answered 409 Conflict.
func churnRequests(before, after map[string]int) (map[string]int, int) {
	out, conflicts := map[string]int{}, 0
	for kind, n := range after {
		d := n - before[kind]
		switch {
		case d <= 0:
		case strings.HasPrefix(kind, framework.ConflictPrefix):
			conflicts += d
		case !strings.HasPrefix(kind, "watch ") && kind != "get discovery":
			out[kind] = d
		}
	}
	return out, conflicts
}

func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(math.Ceil(q*float64(len(sorted))))-1)]
}

// churnHist is a workqueue_queue_duration_seconds histogram summed over the tenants' queues of one kind:
// cumulative counts by upper bound (seconds).
type churnHist struct {
	count   float64
	buckets map[float64]float64
}

func (h churnHist) minus(o churnHist) churnHist {
	out := churnHist{count: h.count - o.count, buckets: map[float64]float64{}}
	for ub, n := range h.buckets {
		out.buckets[ub] = n - o.buckets[ub]
	}
	return out
}

// within is the share of waits of at most bound seconds; bound must be a bucket bound.
func (h churnHist) within(bound float64) float64 {
	if h.count == 0 {
		return 1
	}
	// The bounds are computed by repeated multiplication, so 1 may be stored as 0.9999999999999999.
	for ub, n := range h.buckets {
		if math.Abs(ub-bound) <= 1e-9*bound {
			return n / h.count
		}
	}
	return math.NaN()
}

// quantile interpolates within the bucket holding the q-quantile, as Prometheus' histogram_quantile does; +Inf
// when it lies beyond the last bound.
func (h churnHist) quantile(q float64) float64 {
	if h.count == 0 {
		return 0
	}
	bounds := make([]float64, 0, len(h.buckets))
	for ub := range h.buckets {
		bounds = append(bounds, ub)
	}
	sort.Float64s(bounds)
	rank := q * h.count
	prevBound, prevCount := 0.0, 0.0
	for _, ub := range bounds {
		if n := h.buckets[ub]; n >= rank {
			if n == prevCount {
				return ub
			}
			return prevBound + (ub-prevBound)*(rank-prevCount)/(n-prevCount)
		}
		prevBound, prevCount = ub, h.buckets[ub]
	}
	return math.Inf(1)
}

// queueWaits reads the tenants' translator and pusher queue waits from the in-process registry.
func (c *churn) queueWaits(b *testing.B) map[string]churnHist {
	kinds := map[string]string{}
	for _, tr := range c.tenants {
		kinds[tr.name+"-neg-translator"], kinds[tr.name+"-neg-pusher"] = "translator", "pusher"
	}
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]churnHist{"translator": {buckets: map[float64]float64{}}, "pusher": {buckets: map[float64]float64{}}}
	for _, f := range families {
		if f.GetName() != "workqueue_queue_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			var kind string
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" {
					kind = kinds[l.GetValue()]
				}
			}
			if kind == "" {
				continue
			}
			h := out[kind]
			h.count += float64(m.GetHistogram().GetSampleCount())
			for _, bk := range m.GetHistogram().GetBucket() {
				h.buckets[bk.GetUpperBound()] += float64(bk.GetCumulativeCount())
			}
			out[kind] = h
		}
	}
	return out
}

// apiServerMetrics reads kube-apiserver's CPU seconds, the APF queue wait (sum and count) of the manager's priority
// level (its ServiceAccount falls under the service-accounts flow schema: workload-low) and APF's rejections.
// profile, when CHURN_PROFILE_DIR is set, records CPU profiles of this process (manager, fake GCE and load
// generator) and of kube-apiserver over a window's writing time, as DIR/{process,kube-apiserver}-<rate>.pprof, to
// show where a rate's CPU goes. The returned func ends both and waits for kube-apiserver's.
func (c *churn) profile(b *testing.B, rate int) func() {
	dir := os.Getenv("CHURN_PROFILE_DIR")
	if dir == "" {
		return func() {}
	}
	own, err := os.Create(filepath.Join(dir, fmt.Sprintf("process-%d.pprof", rate)))
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(own); err != nil {
		b.Fatal(err)
	}
	// kube-apiserver profiles for a fixed time: the window's, which the writing takes at a sustained rate.
	seconds := strconv.Itoa(max(1, int(c.s.window.Seconds())))
	done := make(chan struct{})
	go func() {
		defer close(done)
		body, err := c.writer.Discovery().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", seconds).DoRaw(c.e.ctx)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, fmt.Sprintf("kube-apiserver-%d.pprof", rate)), body, 0o644)
		}
		if err != nil {
			b.Errorf("profiling kube-apiserver: %v", err)
		}
	}()
	return func() {
		pprof.StopCPUProfile()
		if err := own.Close(); err != nil {
			b.Error(err)
		}
		<-done
	}
}

func (c *churn) apiServerMetrics(b *testing.B) (cpu, apfSum, apfCount, rejected float64) {
	body, err := c.writer.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(c.e.ctx)
	if err != nil {
		b.Fatalf("reading kube-apiserver's metrics: %v", err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		i := strings.LastIndexByte(line, ' ')
		if i < 0 || strings.HasPrefix(line, "#") {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		name := line[:i]
		switch {
		case name == "process_cpu_seconds_total":
			cpu = v
		case strings.HasPrefix(name, "apiserver_flowcontrol_request_wait_duration_seconds_sum{") && strings.Contains(name, `priority_level="workload-low"`):
			apfSum += v
		case strings.HasPrefix(name, "apiserver_flowcontrol_request_wait_duration_seconds_count{") && strings.Contains(name, `priority_level="workload-low"`):
			apfCount += v
		case strings.HasPrefix(name, "apiserver_flowcontrol_rejected_requests_total{"):
			rejected += v
		}
	}
	return cpu, apfSum, apfCount, rejected
}

// machineCPU reads the machine's busy and total jiffies from /proc/stat (zero where it does not exist).
func machineCPU() (busy, total float64) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	first, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(first)
	for i, f := range fields[1:] {
		v, _ := strconv.ParseFloat(f, 64)
		if i >= 8 { // guest time is already in user time
			break
		}
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total
}

func fmtSeconds(s float64) string {
	if math.IsInf(s, 1) {
		return ">10s"
	}
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}

// print writes the settings and the per-rate table to stderr (bench output keeps only a few lines of b.Log).
func (c *churn) print(results []churnResult) {
	s := c.s
	w := os.Stderr
	fmt.Fprintf(w, "\nBenchmarkChurn settings: %d tenants, %d Services, window %v, rates %v; load generator: %d goroutines, admin client 5000 QPS (APF-exempt); "+
		"manager clients (kube, multiproject): QPS/burst %.0f/%d each (--kube-api-qps/--kube-api-burst); per-tenant GCE QPS/burst %.0f/%.0f (--gce-qps/--gce-burst); "+
		"5 workers per queue (--concurrent-neg-syncs); %d CPUs\n",
		s.tenants, len(c.services), s.window, s.rates, s.writers, s.kubeQPS, s.kubeBurst, s.gceQPS, s.gceQPS, runtime.NumCPU())
	fmt.Fprintf(w, "%8s %9s %8s %8s %8s %5s %6s %9s %9s %8s %8s %9s %9s %8s %8s %8s %8s %8s %9s %s\n",
		"target/s", "achieved", "lat-p50", "lat-p99", "lat-max", ">2s", "unres", "xlate-p99", "push-p99", "cli-QPS", "req/chg",
		"lim-wait", "gce-QPS", "gce-max", "apisrvCPU", "procCPU", "busy", "apf-wait", "write-p99", "sustained")
	for _, r := range results {
		fmt.Fprintf(w, "%8d %9.1f %8v %8v %8v %5d %6d %9s %9s %8.0f %8.2f %9v %9.0f %8.1f %8.2f %8.2f %8.2f %8v %9v %v\n",
			r.target, r.achieved, r.latP50.Round(time.Millisecond), r.latP99.Round(time.Millisecond), r.latMax.Round(time.Millisecond),
			r.over2s, r.unresolved, fmtSeconds(r.queue["translator"].quantile(0.99)), fmtSeconds(r.queue["pusher"].quantile(0.99)),
			r.clientQPS, r.requestsPerChange, r.limiterWait.Round(time.Millisecond), r.gceQPS, r.gceTenantMaxQPS,
			r.apiServerCPU, r.ownCPU, r.busy, r.apfWait.Round(time.Microsecond), r.writeP99.Round(time.Millisecond), r.sustained())
	}
	for _, r := range results {
		perChange := func(n int) string { return strconv.FormatFloat(float64(n)/float64(max(1, r.changes)), 'f', 3, 64) }
		var reqs, gce []string
		for kind, n := range r.requests {
			reqs = append(reqs, kind+"="+perChange(n))
		}
		for m, n := range r.gceCalls {
			gce = append(gce, string(m)+"="+perChange(n))
		}
		sort.Strings(reqs)
		sort.Strings(gce)
		fmt.Fprintf(w, "target %d/s, per change (window start to idle): API %s, 409 Conflict=%s; GCE %s; limiter: %d requests waited ≥ 1 ms, longest wait so far %v; queue waits ≤ 1 s: translator %.4f, pusher %.4f; APF rejections %.0f\n",
			r.target, strings.Join(reqs, " "), perChange(r.conflicts), strings.Join(gce, " "), r.limiterThrottled,
			r.limiterLongest.Round(time.Millisecond), r.queue["translator"].within(1), r.queue["pusher"].within(1), r.apfRejected)
	}
	fmt.Fprintln(w, "columns: latency from the slice write's send to GCE holding the change; xlate/push-p99: workqueue wait p99 (interpolated in power-of-ten buckets); "+
		"cli-QPS: the manager's API requests per second while writing; req/chg: its requests per change, window start to idle; lim-wait: summed client rate-limiter wait; "+
		"gce-QPS / gce-max: GCE calls per second, all tenants / busiest tenant; apisrvCPU, procCPU (manager + fake GCE + load generator), busy (whole machine): cores while writing; "+
		"apf-wait: mean APF queue wait of priority level workload-low")
}
