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
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/metrics/testutil"

	"github.com/multiproject/multiproject-controller-manager/pkg/sharding/sharder"
	"github.com/multiproject/multiproject-controller-manager/test/benchresult"
	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

// BenchmarkShardedReplicas runs one load three times on the built binary: on one unsharded replica (today's
// leader), on three sharded replicas that read every object and filter on the client, and on three sharded replicas
// with --sharded-watch, whose namespaced informers read only their tenants' namespaces (the control plane runs
// kube-apiserver with the ShardedListAndWatch gate). The load is SHARD_BENCH_TENANTS tenants (default 300), each
// with SHARD_BENCH_SERVICES neg Services (default 1) of two endpoints, and SHARD_BENCH_ROUNDS rounds (default 3) in
// which every Service gets new endpoints, each round waited for until the fake GCE and the API hold exactly what it
// asked for (the audit every end-to-end test ends with). It reports, from each replica's own /metrics, the CPU
// seconds and API writes it spent on the rounds; the busiest sharded replica against the single one (the issue's
// goal with the gate: CPU ≤ 0.40); the fixed part F per replica of each sharded run (3F + W = the three shards'
// sum, F + W = the single replica); the tenants each shard ran; and the time a third replica needs to take its
// share from two converged ones. All processes share the machine's cores, so CPU seconds, not wall time, compare
// the runs. It writes the rows sharding-replicas and sharding-replicas-gate (test/benchresult).
//
//	WHAT=./test/e2e hack/test-integration.sh -race=false -run '^$' -bench BenchmarkShardedReplicas -benchtime 1x
func BenchmarkShardedReplicas(b *testing.B) {
	l := shardBenchLoad{tenants: envInt(b, "SHARD_BENCH_TENANTS", 300), services: envInt(b, "SHARD_BENCH_SERVICES", 1),
		rounds: envInt(b, "SHARD_BENCH_ROUNDS", 3), profileDir: os.Getenv("SHARD_BENCH_PROFILE")}
	gce := startFakeGCE(b)
	l.ws = make([]*workload, l.tenants)
	for i := range l.ws {
		l.ws[i] = newWorkload(b, gce)
		for s := range l.services {
			l.ws[i].setService(fmt.Sprintf("svc-%d", s), l.ws[i].endpoints(s, 0, 2))
		}
	}
	kubeconfig := managerKubeconfig(b)
	// The binary's and the chart's defaults (component-base's): every replica renews its Leases and reads the others'
	// every retry period, a cost per second that the tests' quicker timings would multiply.
	le := leaderElection{leaseDuration: 15 * time.Second, renewDeadline: 10 * time.Second, retryPeriod: 2 * time.Second}
	b.ResetTimer()
	for range b.N {
		resetLease(b)
		single := startManager(b, "single", kubeconfig, gce.Endpoint(), le)
		for _, w := range l.ws {
			w.waitConverged("the single replica's start")
		}
		one := l.churn(b, single)[0]
		stopManagers(b, single)

		installShardedRBAC(b)
		client := l.runSharded(b, "client", kubeconfig, gce.Endpoint(), le, one)
		gate := l.runSharded(b, "gate", kubeconfig, gce.Endpoint(), le, one, "--sharded-watch=true")
		fmt.Fprintf(os.Stderr, "BenchmarkShardedReplicas: %d tenants, %d rounds of %d endpoint changes; single replica: %.2f CPU s, %.0f API writes\n",
			l.tenants, l.rounds, l.tenants*l.services, one.cpu, one.writes)
		fmt.Fprintf(os.Stderr, "BenchmarkShardedReplicas: single replica's syncs per change: %s\n", one.syncsPer(l.tenants*l.services*l.rounds))
		b.ReportMetric(client.busiest.cpu/one.cpu, "busiest-shard-cpu/single")
		b.ReportMetric(gate.busiest.cpu/one.cpu, "gate-busiest-shard-cpu/single")
		b.ReportMetric(client.fixed, "fixed-cpu-s")
		b.ReportMetric(gate.fixed, "gate-fixed-cpu-s")
		l.record(b, one, client, gate)
	}
}

// shardBenchLoad is BenchmarkShardedReplicas's load and its workloads.
type shardBenchLoad struct {
	tenants, services, rounds int
	profileDir                string
	ws                        []*workload
	generation                int
}

// shardedRun is what one run of three sharded replicas measured.
type shardedRun struct {
	busiest usage
	all     usage
	// fixed is F, the CPU seconds each replica spends whatever its share: (all - single) / 2.
	fixed float64
	// tenants is how many tenants each shard ran, largest first.
	tenants []int
	join    time.Duration
}

// churn runs the rounds and returns what each manager spent on them. SHARD_BENCH_PROFILE=DIR writes a CPU profile
// of each replica over the first SHARD_BENCH_PROFILE_SECONDS (default 20) of its churn to DIR/<replica>.pprof.
func (l *shardBenchLoad) churn(b *testing.B, managers ...*manager) []usage {
	before := scrapeUsage(b, managers)
	if l.profileDir != "" {
		stop := profileCPU(b, managers, l.profileDir)
		defer stop()
	}
	start := time.Now()
	for range l.rounds {
		l.generation++
		for _, w := range l.ws {
			for s := range l.services {
				w.setService(fmt.Sprintf("svc-%d", s), w.endpoints(s, l.generation, 2))
			}
		}
		for _, w := range l.ws {
			w.waitConverged(fmt.Sprintf("round %d of %s", l.generation, w.tenant))
		}
	}
	after := scrapeUsage(b, managers)
	for i := range after {
		after[i] = after[i].minus(before[i])
	}
	fmt.Fprintf(os.Stderr, "BenchmarkShardedReplicas: %d rounds on %d replicas in %s\n", l.rounds, len(managers), time.Since(start).Round(100*time.Millisecond))
	return after
}

// runSharded starts two shards, then a third, churns on the three, and stops them; name tells the runs apart.
func (l *shardBenchLoad) runSharded(b *testing.B, name, kubeconfig, gceEndpoint string, le leaderElection, single usage,
	flags ...string) shardedRun {
	resetLease(b)
	args := append([]string{"--sharding=true"}, flags...)
	pair := []*manager{
		startManager(b, name+"-shard-a", kubeconfig, gceEndpoint, le, args...),
		startManager(b, name+"-shard-b", kubeconfig, gceEndpoint, le, args...),
	}
	waitShardsRun(b, l.ws, shardNames(b, pair))
	for _, w := range l.ws {
		w.waitConverged(name + ": two shards' start")
	}
	joined := time.Now()
	three := append(pair, startManager(b, name+"-shard-c", kubeconfig, gceEndpoint, le, args...))
	names := shardNames(b, three)
	waitShardsRun(b, l.ws, names)
	r := shardedRun{join: time.Since(joined)}
	for _, w := range l.ws {
		w.waitConverged(name + ": three shards")
	}
	sharded := l.churn(b, three...)
	r.busiest = slices.MaxFunc(sharded, func(x, y usage) int { return int((x.cpu - y.cpu) * 1000) })
	metricsClient := adminHTTPClient(b)
	defer metricsClient.CloseIdleConnections()
	for i, u := range sharded {
		r.all.cpu += u.cpu
		r.all.writes += u.writes
		owned := len(tenantsOn(b, l.ws, names[i]))
		r.tenants = append(r.tenants, owned)
		// Printed, not logged: the workloads' convergence logs would push it out of the benchmark's output.
		fmt.Fprintf(os.Stderr, "BenchmarkShardedReplicas (%s): shard %s (%s): %d tenants, %.2f CPU s, %.0f API writes; %s; syncs per change: %s\n",
			name, three[i].name, names[i], owned, u.cpu, u.writes, selectorState(b, metricsClient, three[i]), u.syncsPer(owned*l.services*l.rounds))
	}
	slices.Sort(r.tenants)
	slices.Reverse(r.tenants)
	r.fixed = (r.all.cpu - single.cpu) / 2
	fmt.Fprintf(os.Stderr, "BenchmarkShardedReplicas (%s): three shards: %.2f CPU s and %.0f writes in all, busiest %.2f CPU s (%.2f of the single replica), "+
		"fixed part per replica %.2f CPU s; tenants per shard %v; the third shard took its share in %s\n",
		name, r.all.cpu, r.all.writes, r.busiest.cpu, r.busiest.cpu/single.cpu, r.fixed, r.tenants, r.join.Round(100*time.Millisecond))
	stopManagers(b, three...)
	return r
}

// selectorState says how many buckets a replica's shard selector holds and how often it changed, by reason; "client-side
// filtering" for a replica without one.
func selectorState(tb testing.TB, client *http.Client, m *manager) string {
	metrics := scrape(tb, client, m)
	buckets := metrics["multiproject_shard_selector_buckets"]
	if len(buckets) != 1 {
		return "client-side filtering"
	}
	out := fmt.Sprintf("selector of %.0f buckets", float64(buckets[0].Value))
	for _, s := range metrics["multiproject_shard_selector_changes_total"] {
		out += fmt.Sprintf(", %s %.0f", s.Metric["reason"], float64(s.Value))
	}
	return out
}

// stopManagers stops managers with SIGTERM and waits for each to exit 0.
func stopManagers(tb testing.TB, managers ...*manager) {
	for _, m := range managers {
		m.signal(syscall.SIGTERM)
	}
	for _, m := range managers {
		if err := m.waitExit(time.Minute); err != nil {
			tb.Errorf("replica %s's shutdown: %v", m.name, err)
		}
	}
}

// record writes the rows sharding-replicas (client-side filtering) and sharding-replicas-gate (--sharded-watch).
func (l *shardBenchLoad) record(b *testing.B, single usage, client, gate shardedRun) {
	const command = "WHAT=./test/e2e hack/test-integration.sh -race=false -run '^$' -bench BenchmarkShardedReplicas -benchtime 1x"
	settings := map[string]string{"SHARD_BENCH_TENANTS": strconv.Itoa(l.tenants), "SHARD_BENCH_SERVICES": strconv.Itoa(l.services),
		"SHARD_BENCH_ROUNDS": strconv.Itoa(l.rounds), "replicas": "3", "kube-apiserver": "--feature-gates=ShardedListAndWatch=true"}
	notes := func(r shardedRun) string {
		return fmt.Sprintf("Tenants per shard %v (bounded loads: at most %d per shard, sharder.Capacity); fixed part per replica %.2f CPU s "+
			"(3F + W = the shards' sum, F + W = the single replica); the third replica took its share in %s. Measured on a 2-core machine "+
			"that every process shares: CPU seconds from each process's own accounting, and ratios within the run, are what stay meaningful.",
			r.tenants, sharder.Capacity(l.tenants, 3), r.fixed, r.join.Round(100*time.Millisecond))
	}
	what := func(r shardedRun) []benchresult.Measure {
		return []benchresult.Measure{
			{Label: "busiest replica", Ours: r.busiest.cpu, Baseline: benchresult.Float(single.cpu), Unit: "CPU s"},
			{Label: "three replicas in all", Ours: r.all.cpu, Baseline: benchresult.Float(single.cpu), Unit: "CPU s"},
			{Label: "fixed part per replica", Ours: r.fixed, Unit: "CPU s"},
			{Label: "API writes, busiest replica", Ours: r.busiest.writes, Baseline: benchresult.Float(single.writes)},
		}
	}
	clientRow := benchresult.Row{ID: "sharding-replicas", Benchmark: "BenchmarkShardedReplicas", Package: "test/e2e",
		What:     "Three sharded replicas that read every object and filter on the client: CPU of the busiest replica over endpoint churn.",
		Baseline: "One unsharded replica on the same load, in the same run.", Measures: what(client), Notes: notes(client),
		Command: command, Settings: settings, Doc: "docs/sharding.md#what-grows-per-replica-and-what-is-divided"}
	gateRow := clientRow
	gateRow.ID = "sharding-replicas-gate"
	gateRow.What = "Three sharded replicas with --sharded-watch (the API server filters by namespace): CPU of the busiest replica over endpoint churn."
	gateRow.Measures, gateRow.Notes = what(gate), notes(gate)
	gateRow.Measures[0].Goal = benchresult.Float(0.40)
	gateRow.Doc = "docs/sharding.md#server-side-sharded-list-and-watch---sharded-watch"
	benchresult.Record(b, clientRow)
	benchresult.Record(b, gateRow)
}

func envInt(tb testing.TB, name string, def int) int {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		tb.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// usage is what a replica spent: CPU seconds, API writes, and its tenants' controller syncs by controller.
type usage struct {
	cpu, writes float64
	syncs       map[string]float64
}

func (u usage) minus(v usage) usage {
	out := usage{cpu: u.cpu - v.cpu, writes: u.writes - v.writes, syncs: map[string]float64{}}
	for c, n := range u.syncs {
		out.syncs[c] = n - v.syncs[c]
	}
	return out
}

// syncsPer says how many syncs each controller made per change, sorted by controller.
func (u usage) syncsPer(changes int) string {
	var out []string
	for c, n := range u.syncs {
		out = append(out, fmt.Sprintf("%s %.2f", c, n/float64(changes)))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// adminHTTPClient calls the managers' secure port as the administrator (the managers delegate authentication and
// the authorization of /metrics and pprof to the API server).
func adminHTTPClient(tb testing.TB) *http.Client {
	tb.Helper()
	cfg := rest.CopyConfig(controlPlane.AdminConfig())
	// The managers serve a self-signed certificate; the administrator's credentials are what matter.
	cfg.TLSClientConfig = rest.TLSClientConfig{Insecure: true, CertData: cfg.CertData, KeyData: cfg.KeyData,
		CertFile: cfg.CertFile, KeyFile: cfg.KeyFile}
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return client
}

// scrapeUsage reads each manager's process_cpu_seconds_total and its client-go write requests from its /metrics, as
// the administrator (the managers delegate the authorization of /metrics to the API server).
func scrapeUsage(tb testing.TB, managers []*manager) []usage {
	tb.Helper()
	client := adminHTTPClient(tb)
	defer client.CloseIdleConnections()
	out := make([]usage, len(managers))
	for i, m := range managers {
		metrics := scrape(tb, client, m)
		cpu := metrics["process_cpu_seconds_total"]
		if len(cpu) != 1 {
			tb.Fatalf("manager %s exports %d process_cpu_seconds_total series", m.name, len(cpu))
		}
		out[i].cpu = float64(cpu[0].Value)
		out[i].syncs = map[string]float64{}
		for _, s := range metrics["multiproject_controller_syncs_total"] {
			out[i].syncs[string(s.Metric["controller"])] += float64(s.Value)
		}
		for _, s := range metrics["rest_client_requests_total"] {
			if slices.Contains([]string{"POST", "PUT", "PATCH", "DELETE"}, string(s.Metric["method"])) {
				out[i].writes += float64(s.Value)
			}
		}
	}
	return out
}

// scrape reads a manager's /metrics with client (adminHTTPClient).
func scrape(tb testing.TB, client *http.Client, m *manager) testutil.Metrics {
	tb.Helper()
	req, err := http.NewRequestWithContext(tb.Context(), http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", m.port), nil)
	if err != nil {
		tb.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		tb.Fatalf("scraping manager %s: %v", m.name, err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("scraping manager %s: %s %v", m.name, resp.Status, err)
	}
	metrics := testutil.NewMetrics()
	if err := testutil.ParseMetrics(string(body), &metrics); err != nil {
		tb.Fatal(err)
	}
	return metrics
}

// tenantSeries lists the series of a manager's /metrics that describe tenant: labeled with it as provider_config,
// or a workqueue named after it (<tenant>-<controller>[-<queue>]).
func tenantSeries(tb testing.TB, client *http.Client, m *manager, tenant string) []string {
	tb.Helper()
	var out []string
	for name, samples := range scrape(tb, client, m) {
		for _, s := range samples {
			if string(s.Metric["provider_config"]) == tenant ||
				(strings.HasPrefix(name, "workqueue_") && strings.HasPrefix(string(s.Metric["name"]), tenant+"-")) {
				out = append(out, s.Metric.String())
			}
		}
	}
	return out
}

// profileCPU starts a 20 s CPU profile of each manager (its /debug/pprof/profile) and returns the function that
// waits for them and writes DIR/<name>.pprof. A churn shorter than 20 s leaves idle time in the profile.
func profileCPU(tb testing.TB, managers []*manager, dir string) func() {
	tb.Helper()
	client := adminHTTPClient(tb)
	ctx := tb.Context()
	done := make(chan struct{}, len(managers))
	for _, m := range managers {
		go func() {
			defer func() { done <- struct{}{} }()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/debug/pprof/profile?seconds=%d", m.port, envInt(tb, "SHARD_BENCH_PROFILE_SECONDS", 20)), nil)
			if err != nil {
				return
			}
			resp, err := client.Do(req)
			if err != nil {
				tb.Logf("profiling %s: %v", m.name, err)
				return
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			_ = os.WriteFile(filepath.Join(dir, m.name+".pprof"), data, 0o644)
		}()
	}
	return func() {
		for range managers {
			<-done
		}
	}
}

var shardLine = regexp.MustCompile(`"Acquiring the shard Lease" shard="([^"]+)"`)

// shardNames reads each sharded manager's shard name from its log.
func shardNames(tb testing.TB, managers []*manager) []string {
	tb.Helper()
	names := make([]string, len(managers))
	for i, m := range managers {
		err := wait.PollUntilContextTimeout(tb.Context(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			data, err := os.ReadFile(m.logPath)
			if err != nil {
				return false, err
			}
			if match := shardLine.FindSubmatch(data); match != nil {
				names[i] = string(match[1])
				return true, nil
			}
			return !m.running(), nil
		})
		if err != nil || names[i] == "" {
			tb.Fatalf("manager %s logged no shard name (%v); log:\n%s", m.name, err, m.logTail(20))
		}
	}
	return names
}

// waitShardsRun waits until every tenant runs, Ready, on the shard the sharder's Plan over shards gives it (rendezvous
// hashing with bounded loads): labeled with it, not draining, and with status.shard naming it.
func waitShardsRun(tb testing.TB, ws []*workload, shards []string) {
	tb.Helper()
	waitTenantsRun(tb, ws, shards, convergeTimeout)
}

// installShardedRBAC applies what overlays/sharded adds to the base's RBAC (its Role and binding; the policy that
// narrows their grant, multiproject-lease-names, is the base's), and removes it when the test ends.
func installShardedRBAC(tb testing.TB) {
	tb.Helper()
	var objects []*unstructured.Unstructured
	for _, file := range []string{"rbac.yaml"} {
		data, err := os.ReadFile(filepath.Join(controlPlane.RepoRoot(), "overlays", "sharded", file))
		if err != nil {
			tb.Fatal(err)
		}
		objs, err := framework.DecodeManifests(bytes.NewReader(data))
		if err != nil {
			tb.Fatalf("%s: %v", file, err)
		}
		objects = append(objects, objs...)
	}
	if err := framework.ApplyObjects(tb.Context(), controlPlane.AdminConfig(), objects); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, admin := context.Background(), controlPlane.AdminClient()
		for _, obj := range objects {
			var err error
			switch obj.GetKind() {
			case "Role":
				err = admin.RbacV1().Roles(obj.GetNamespace()).Delete(ctx, obj.GetName(), metav1.DeleteOptions{})
			case "RoleBinding":
				err = admin.RbacV1().RoleBindings(obj.GetNamespace()).Delete(ctx, obj.GetName(), metav1.DeleteOptions{})
			case "ValidatingAdmissionPolicy":
				err = admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, obj.GetName(), metav1.DeleteOptions{})
			case "ValidatingAdmissionPolicyBinding":
				err = admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, obj.GetName(), metav1.DeleteOptions{})
			default:
				err = fmt.Errorf("no cleanup for kind %s", obj.GetKind())
			}
			if err != nil && !apierrors.IsNotFound(err) {
				tb.Errorf("deleting %s %s: %v", obj.GetKind(), obj.GetName(), err)
			}
		}
	})
}
