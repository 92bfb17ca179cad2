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
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
)

// seriesOnlyAfter are documented families whose series exist only once something happened that this test does not
// make happen; a vector without series is not on /metrics.
var seriesOnlyAfter = map[string]string{
	"multiproject_provider_config_deletion_timestamp_seconds": "a ProviderConfig waits for its cleanup",
	"multiproject_neg_garbage_collected_total":                "a garbage sweep deleted a leaked NEG",
	"multiproject_neg_awaiting_deletion":                      "a tenant's first garbage sweep listed its project",
	"multiproject_neg_readiness_attach_to_ready_seconds":      "a gated Pod became ready through a NEG",
	"multiproject_neg_readiness_pods_waiting":                 "a Pod declares the NEG readiness gate",
	"multiproject_neg_network_programming_duration_seconds":   "an EndpointSlice change with a trigger time reached GCE",
	"multiproject_neg_readiness_programming_duration_seconds": "a gated Pod's condition followed a change with a trigger time",
}

// documentedMetrics reads the names of the first column of docs/monitoring.md's table "What the manager exports",
// the one list of the manager's series; patterns (`go_*`) are left out.
func documentedMetrics(t *testing.T) sets.Set[string] {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(controlPlane.RepoRoot(), "docs", "monitoring.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## What the manager exports\n")
	if !ok {
		t.Fatal(`docs/monitoring.md has no section "What the manager exports"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	names := sets.New[string]()
	name := regexp.MustCompile("`([a-z_:]+)`")
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		for _, m := range name.FindAllStringSubmatch(cells[1], -1) {
			names.Insert(m[1])
		}
	}
	if names.Len() < 20 {
		t.Fatalf("found %d metric names in docs/monitoring.md's table, want its rows", names.Len())
	}
	return names
}

// TestExportedMetricsAreTheDocumentedOnes: docs/monitoring.md's table is the one list of what the manager exports.
// A sharded replica with --sharded-watch (which registers every series an unsharded one does, and the shard
// series) runs a tenant with NEGs and an Ingress; every multiproject_* family on its /metrics is in the table, and
// every name of the table is on /metrics, except the few whose series need an event this test does not cause.
func TestExportedMetricsAreTheDocumentedOnes(t *testing.T) {
	resetLease(t)
	cleanupShardLeases(t)
	installShardedRBAC(t)
	gce := startFakeGCE(t)
	w := newWorkload(t, gce)
	w.setService("web", w.endpoints(0, 0, 2))
	w.setIngress("web", "metrics.example.com")
	le := leaderElection{leaseDuration: 15 * time.Second, renewDeadline: 10 * time.Second, retryPeriod: time.Second}
	m := startManager(t, "metrics", managerKubeconfig(t), gce.Endpoint(), le, "--sharding=true", "--sharded-watch=true")
	w.waitConverged("one sharded replica")

	client := adminHTTPClient(t)
	defer client.CloseIdleConnections()
	exported := sets.New[string]()
	for name := range scrape(t, client, m) {
		exported.Insert(name)
	}
	// A histogram's or summary's family (its _sum and _count, and _bucket) is listed under its own name.
	scraped := exported.Clone()
	for name := range scraped {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && scraped.Has(base+"_sum") && scraped.Has(base+"_count") {
				exported.Delete(name)
				exported.Insert(base)
			}
		}
	}
	documented := documentedMetrics(t)
	for _, name := range sets.List(exported) {
		if strings.HasPrefix(name, "multiproject_") && !documented.Has(name) {
			t.Errorf("/metrics exports %s, which docs/monitoring.md's table does not list", name)
		}
	}
	for _, name := range sets.List(documented) {
		if exported.Has(name) {
			if _, lazy := seriesOnlyAfter[name]; lazy {
				t.Logf("%s is exported although its series need %q", name, seriesOnlyAfter[name])
			}
			continue
		}
		if after, lazy := seriesOnlyAfter[name]; lazy {
			t.Logf("%s not on /metrics: its series exist once %s", name, after)
			continue
		}
		t.Errorf("docs/monitoring.md lists %s, which /metrics of the built binary does not export", name)
	}
}
