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

	"github.com/multiproject/multiproject-controller-manager/pkg/sharding"
	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

// BenchmarkShardedReplicas runs one load twice on the built binary: on one unsharded replica (today's leader), and
// on three sharded replicas. The load is SHARD_BENCH_TENANTS tenants (default 30), each with two neg Services of six
// endpoints, and SHARD_BENCH_ROUNDS rounds (default 5) in which every Service gets new endpoints, each round waited
// for until the fake GCE and the API hold exactly what it asked for. It reports, from each replica's own /metrics,
// the CPU seconds and API writes (POST, PUT, PATCH, DELETE) it spent on the rounds: the busiest of the three
// sharded replicas against the single one (the goal: CPU ≤ 0.45), and the time a third replica needs to
// take its share from two converged ones (from its start until every tenant that rendezvous hashing gives it runs
// on it, Ready). All processes share the machine's cores, so CPU seconds, not wall time, compare the two runs.
//
//	WHAT=./test/e2e hack/test-integration.sh -race=false -run '^$' -bench BenchmarkShardedReplicas -benchtime 1x
func BenchmarkShardedReplicas(b *testing.B) {
	tenants := envInt(b, "SHARD_BENCH_TENANTS", 30)
	rounds := envInt(b, "SHARD_BENCH_ROUNDS", 5)
	const servicesPerTenant = 2
	gce := startFakeGCE(b)
	ws := make([]*workload, tenants)
	for i := range ws {
		ws[i] = newWorkload(b, gce)
		for s := range servicesPerTenant {
			ws[i].setService(fmt.Sprintf("svc-%d", s), ws[i].endpoints(s, 0, 2))
		}
	}
	kubeconfig := managerKubeconfig(b)
	le := leaderElection{leaseDuration: 6 * time.Second, renewDeadline: 4 * time.Second, retryPeriod: time.Second}
	generation := 0
	// SHARD_BENCH_PROFILE=DIR writes a CPU profile of each replica over its churn to DIR/<replica>.pprof.
	profileDir := os.Getenv("SHARD_BENCH_PROFILE")
	churn := func(managers ...*manager) []usage {
		before := scrapeUsage(b, managers)
		if profileDir != "" {
			stop := profileCPU(b, managers, profileDir)
			defer stop()
		}
		for range rounds {
			generation++
			for _, w := range ws {
				for s := range servicesPerTenant {
					w.setService(fmt.Sprintf("svc-%d", s), w.endpoints(s, generation, 2))
				}
			}
			for _, w := range ws {
				w.waitConverged(fmt.Sprintf("round %d of %s", generation, w.tenant))
			}
		}
		after := scrapeUsage(b, managers)
		for i := range after {
			after[i] = after[i].minus(before[i])
		}
		return after
	}

	b.ResetTimer()
	for range b.N {
		resetLease(b)
		single := startManager(b, "single", kubeconfig, gce.Endpoint(), le)
		for _, w := range ws {
			w.waitConverged("the single replica's start")
		}
		one := churn(single)[0]
		single.signal(syscall.SIGTERM)
		if err := single.waitExit(time.Minute); err != nil {
			b.Fatalf("the single replica's shutdown: %v", err)
		}

		resetLease(b)
		installShardedRBAC(b)
		pair := []*manager{
			startManager(b, "shard-a", kubeconfig, gce.Endpoint(), le, "--sharding=true"),
			startManager(b, "shard-b", kubeconfig, gce.Endpoint(), le, "--sharding=true"),
		}
		waitShardsRun(b, ws, shardNames(b, pair))
		for _, w := range ws {
			w.waitConverged("two shards' start")
		}
		joined := time.Now()
		three := append(pair, startManager(b, "shard-c", kubeconfig, gce.Endpoint(), le, "--sharding=true"))
		waitShardsRun(b, ws, shardNames(b, three))
		joinTime := time.Since(joined)
		for _, w := range ws {
			w.waitConverged("three shards")
		}
		sharded := churn(three...)

		busiest := slices.MaxFunc(sharded, func(x, y usage) int { return int((x.cpu - y.cpu) * 1000) })
		names := shardNames(b, three)
		var sumCPU, sumWrites float64
		// Printed, not logged: the workloads' convergence logs would push it out of the benchmark's output.
		for i, u := range sharded {
			sumCPU += u.cpu
			sumWrites += u.writes
			owned := 0
			for _, w := range ws {
				if sharding.Rendezvous(w.tenant, names) == names[i] {
					owned++
				}
			}
			fmt.Fprintf(os.Stderr, "BenchmarkShardedReplicas: shard %s (%s): %d tenants, %.2f CPU s, %.0f API writes\n", three[i].name, names[i], owned, u.cpu, u.writes)
		}
		fmt.Fprintf(os.Stderr, "BenchmarkShardedReplicas: %d tenants, %d rounds of %d endpoint changes; single replica: %.2f CPU s, %.0f API writes; "+
			"three shards: %.2f CPU s and %.0f writes in all; the third shard took its share in %s\n",
			tenants, rounds, tenants*servicesPerTenant, one.cpu, one.writes, sumCPU, sumWrites, joinTime.Round(100*time.Millisecond))
		b.ReportMetric(busiest.cpu/one.cpu, "busiest-shard-cpu/single")
		b.ReportMetric(sumCPU/one.cpu, "all-shards-cpu/single")
		b.ReportMetric(busiest.writes/one.writes, "busiest-shard-writes/single")
		b.ReportMetric(joinTime.Seconds(), "join-s")
		for _, m := range three {
			m.signal(syscall.SIGTERM)
		}
		for _, m := range three {
			if err := m.waitExit(time.Minute); err != nil {
				b.Errorf("shard %s's shutdown: %v", m.name, err)
			}
		}
	}
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

// usage is what a replica spent: CPU seconds and API writes.
type usage struct{ cpu, writes float64 }

func (u usage) minus(v usage) usage { return usage{cpu: u.cpu - v.cpu, writes: u.writes - v.writes} }

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
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/debug/pprof/profile?seconds=20", m.port), nil)
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

// waitShardsRun waits until every tenant runs, Ready, on the shard that rendezvous hashing over shards gives it:
// labeled with it, not draining, and with status.shard naming it.
func waitShardsRun(tb testing.TB, ws []*workload, shards []string) {
	tb.Helper()
	waitTenantsRun(tb, ws, shards, convergeTimeout)
}

// installShardedRBAC applies what overlays/sharded adds to the base's RBAC (its Role and binding, and the Lease
// policy), and removes it when the test ends.
func installShardedRBAC(tb testing.TB) {
	tb.Helper()
	var objects []*unstructured.Unstructured
	for _, file := range []string{"rbac.yaml", "lease-policy.yaml"} {
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
