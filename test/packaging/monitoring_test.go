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

package packaging

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	promconfig "github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-base/metrics/legacyregistry"
	"sigs.k8s.io/yaml"

	"github.com/multiproject/multiproject-controller-manager/pkg/apibudget"
	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
	"github.com/multiproject/multiproject-controller-manager/pkg/sharding"
	"github.com/multiproject/multiproject-controller-manager/pkg/sharding/sharder"

	// The manager's command: importing it registers what the binary registers at start (client-go's REST client,
	// leader-election and workqueue metrics providers, the version metric), through the same imports.
	_ "github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app"

	// Prometheus's configuration parser knows kubernetes_sd_configs only once this is registered.
	_ "github.com/prometheus/prometheus/discovery/kubernetes"
)

const (
	monitoringDir = "manifests/monitoring"
	// job is the scrape job of prometheus-scrape-config.yaml, which the rules and the dashboard select.
	job = "multiproject-controller-manager"
)

// notTheManagers are series a rule may use that Prometheus records itself for every target.
var notTheManagers = map[string]bool{"up": true}

var (
	exportedOnce sync.Once
	exported     map[string]dto.MetricType
	exportedErr  error
)

// exportedMetrics returns the name and type of every metric family the manager serves on /metrics. It registers
// them in process as the binary does (the command's imports, pkg/metrics.Register) and makes each lazily registered
// family appear the way the manager does at run time: a named workqueue, a leader elector, a REST request, and one
// series of each of the manager's own vectors (a vector without series is not gathered).
func exportedMetrics(t testing.TB) map[string]dto.MetricType {
	t.Helper()
	exportedOnce.Do(func() { exported, exportedErr = gatherExported() })
	if exportedErr != nil {
		t.Fatal(exportedErr)
	}
	return exported
}

func gatherExported() (map[string]dto.MetricType, error) {
	metrics.Register()
	metrics.ObserveSync("probe", "probe", "probe-probe", nil, 0)
	metrics.ProviderConfigSyncs.Inc("probe", "success")
	metrics.NEGsCollected.Add(0, "probe")
	metrics.NEGsAwaitingDeletion.Set(0, "probe")
	metrics.NEGBackendServiceMemberships.Set(0, "probe")
	metrics.ObserveGCERequest("probe", "probe", "success", 0)
	metrics.NEGReadinessPodsWaiting.Set(0, "probe")
	metrics.ObserveNEGReadiness("probe", 0)
	metrics.ObserveNEGNetworkProgramming("probe", time.Time{}, time.Time{})
	metrics.ObserveNEGReadinessProgramming("probe", time.Time{}, time.Time{})
	metrics.ControllersEnabled.Set(0)
	// Registered by Run (the API budget) and by a sharded replica (the shard series).
	apibudget.Register()
	apibudget.TenantWait.WithLabelValues("probe").Observe(0)
	sharding.Register()
	sharder.Register()
	sharder.ShardTenants.WithLabelValues("probe").Set(0)
	sharder.ShardMoves.WithLabelValues(sharder.ReasonAssigned).Add(0)
	sharding.ShardSelectorChanges.WithLabelValues("grow").Add(0)
	deleting := metav1.Now()
	defer metrics.AddTenantSource(metrics.TenantSource{
		Statuses: func() []metrics.ProviderConfigStatus {
			return []metrics.ProviderConfigStatus{{Name: "probe", Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}}, DeletionTimestamp: &deleting}}
		},
		Running: func() map[string][]string { return map[string][]string{"probe": {"probe"}} },
	})()

	// A queue as worker.New makes one: every workqueue_* series of its name exists from construction on.
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "probe-queue"})
	queue.AddRateLimited("item")
	queue.ShutDown()

	// A leader elector sets leader_election_master_status (to 0) for its name when it is built.
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, "kube-system", "probe", nil,
		fake.NewClientset().CoordinationV1(), resourcelock.ResourceLockConfig{Identity: "probe"})
	if err != nil {
		return nil, err
	}
	if _, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, Name: "probe", LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: func(context.Context) {}, OnStoppedLeading: func() {}},
	}); err != nil {
		return nil, err
	}

	// One request through client-go records the rest_client_* series.
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"major":"1","minor":"37","gitVersion":"v1.37.0"}`)
	}))
	defer server.Close()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: server.URL})
	if err != nil {
		return nil, err
	}
	if _, err := client.Discovery().ServerVersion(); err != nil {
		return nil, err
	}

	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return nil, err
	}
	out := make(map[string]dto.MetricType, len(families))
	for _, f := range families {
		out[f.GetName()] = f.GetType()
	}
	return out, nil
}

// resolve says whether a series name the rules or the dashboard select is one the manager exports: a family's own
// name, or a histogram's _bucket, _sum and _count series (a summary's _sum and _count).
func resolve(exported map[string]dto.MetricType, name string) bool {
	if notTheManagers[name] {
		return true
	}
	if typ, ok := exported[name]; ok {
		return typ != dto.MetricType_HISTOGRAM && typ != dto.MetricType_SUMMARY
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		switch exported[base] {
		case dto.MetricType_HISTOGRAM:
			return true
		case dto.MetricType_SUMMARY:
			return suffix != "_bucket"
		}
	}
	return false
}

// TestExportedMetricsCoverPkgMetrics keeps exportedMetrics honest: every series pkg/metrics declares must be among
// the gathered families, so a series added there without a sample above fails here rather than making a rule that
// uses it look invented.
func TestExportedMetricsCoverPkgMetrics(t *testing.T) {
	dir := filepath.Join(root(t), "pkg", "metrics")
	src, err := os.ReadFile(filepath.Join(dir, "metrics.go"))
	if err != nil {
		t.Fatal(err)
	}
	subsystem := regexp.MustCompile(`const subsystem = "([a-z_]+)"`).FindSubmatch(src)
	if subsystem == nil {
		t.Fatal("pkg/metrics/metrics.go declares no subsystem constant")
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	// A name is declared in a vector's options, to a CompactVec or in a collector's descriptor.
	declared := regexp.MustCompile(`(?m)(?:^\s*Name:\s*|NewCompact(?:Counter|Gauge)Vec\(|BuildFQName\("", subsystem, )"([a-z_]+)"`)
	var names [][][]byte
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, declared.FindAllSubmatch(src, -1)...)
	}
	if len(names) < 9 {
		t.Fatalf("found %d metric names in pkg/metrics, want the nine it declares or more", len(names))
	}
	exported := exportedMetrics(t)
	for _, n := range names {
		name := string(subsystem[1]) + "_" + string(n[1])
		if _, ok := exported[name]; !ok {
			t.Errorf("pkg/metrics declares %s, but it was not gathered; give it a series in gatherExported", name)
		}
	}
	// The client-go families the rules rely on, as a guard against a gather that silently found nothing.
	for _, name := range []string{"workqueue_depth", "workqueue_queue_duration_seconds", "leader_election_master_status", "rest_client_requests_total"} {
		if _, ok := exported[name]; !ok {
			t.Errorf("%s was not gathered", name)
		}
	}
}

// ruleGroups reads the PrometheusRule and parses its spec with Prometheus's own rule-file parser (what promtool
// check rules runs).
func ruleGroups(t testing.TB) *rulefmt.RuleGroups {
	t.Helper()
	objects := readPaths(t, filepath.Join(monitoringDir, "prometheusrule.yaml"))
	if len(objects) != 1 {
		t.Fatalf("prometheusrule.yaml holds %d objects, want 1", len(objects))
	}
	obj := objects[0]
	if obj.GetAPIVersion() != "monitoring.coreos.com/v1" || obj.GetKind() != "PrometheusRule" {
		t.Fatalf("prometheusrule.yaml is a %s %s, want a monitoring.coreos.com/v1 PrometheusRule", obj.GetAPIVersion(), obj.GetKind())
	}
	spec, err := yaml.Marshal(obj.Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	groups, errs := rulefmt.Parse(spec, false, model.UTF8Validation, parser.NewParser(parser.Options{}))
	for _, err := range errs {
		t.Errorf("rulefmt: %v", err)
	}
	if groups == nil || len(groups.Groups) == 0 {
		t.Fatal("no rule groups")
	}
	return groups
}

// selectors returns the vector selectors of a PromQL expression.
func selectors(t testing.TB, what, expr string) []*parser.VectorSelector {
	t.Helper()
	node, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: %v\n%s", what, err, expr)
		return nil
	}
	var out []*parser.VectorSelector
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			out = append(out, vs)
		}
		return nil
	})
	if len(out) == 0 {
		t.Errorf("%s selects no series: %s", what, expr)
	}
	return out
}

// checkSelectors fails for a selector of a series the manager does not export, or one without the job matcher
// (client-go's series have the same names in every component a Prometheus scrapes).
func checkSelectors(t testing.TB, what string, vss []*parser.VectorSelector, jobValue string) {
	t.Helper()
	exported := exportedMetrics(t)
	for _, vs := range vss {
		if !resolve(exported, vs.Name) {
			t.Errorf("%s selects %s, which the manager does not export", what, vs.Name)
		}
		hasJob := false
		for _, m := range vs.LabelMatchers {
			hasJob = hasJob || (m.Name == "job" && m.Value == jobValue)
		}
		if !hasJob {
			t.Errorf("%s: selector %s lacks job=%q", what, vs, jobValue)
		}
	}
}

// TestPrometheusRulesParseAndUseOnlyExportedMetrics: the rules pass Prometheus's parser and validation, each
// alert has a severity, a summary and a description pointing at its section of docs/monitoring.md, which exists,
// docs/operations.md's alerts table lists it, and every series they select is one the manager exports, scoped to
// its job.
func TestPrometheusRulesParseAndUseOnlyExportedMetrics(t *testing.T) {
	groups := ruleGroups(t)
	doc, err := os.ReadFile(filepath.Join(root(t), "docs", "monitoring.md"))
	if err != nil {
		t.Fatal(err)
	}
	operations, err := os.ReadFile(filepath.Join(root(t), "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	alerts := 0
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			what := fmt.Sprintf("group %s, rule %s%s", g.Name, r.Alert, r.Record)
			checkSelectors(t, what, selectors(t, what, r.Expr), job)
			if r.Alert == "" {
				continue
			}
			alerts++
			if s := r.Labels["severity"]; s != "critical" && s != "warning" && s != "info" {
				t.Errorf("%s: severity %q, want critical, warning or info", what, s)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: wants a summary and a description", what)
			}
			anchor := "docs/monitoring.md#" + strings.ToLower(r.Alert)
			if !strings.Contains(r.Annotations["description"], anchor) {
				t.Errorf("%s: the description does not point at %s", what, anchor)
			}
			if !regexp.MustCompile(`(?m)^### ` + regexp.QuoteMeta(r.Alert) + `$`).Match(doc) {
				t.Errorf("%s: docs/monitoring.md has no section \"### %s\"", what, r.Alert)
			}
			if !strings.Contains(string(operations), "`"+r.Alert+"`") {
				t.Errorf("%s: the alerts table of docs/operations.md does not list it", what)
			}
		}
	}
	if alerts == 0 {
		t.Fatal("no alerts")
	}
}

// grafanaMacros are the interval variables Grafana substitutes before a query reaches Prometheus.
var grafanaMacros = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

var labelValues = regexp.MustCompile(`^label_values\((.+),\s*[a-zA-Z_][a-zA-Z0-9_]*\)$`)

// TestGrafanaDashboardUsesOnlyExportedMetrics: every query of the dashboard (panels, rows' panels and the
// variables' label_values) parses as PromQL once Grafana's macros are substituted, selects only series the manager
// exports and scopes them to $job; every variable a query uses is defined, and panel ids are unique.
func TestGrafanaDashboardUsesOnlyExportedMetrics(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root(t), monitoringDir, "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dashboard struct {
		UID        string           `json:"uid"`
		Panels     []map[string]any `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &dashboard); err != nil {
		t.Fatal(err)
	}
	if dashboard.UID == "" {
		t.Error("the dashboard has no uid, so every import makes a new copy")
	}

	defined := map[string]bool{"__all": true}
	queries := map[string]string{} // what -> PromQL
	for _, v := range dashboard.Templating.List {
		defined[v.Name] = true
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(map[string]any)
		s, _ := q["query"].(string)
		m := labelValues.FindStringSubmatch(s)
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(selector, label)", v.Name, s)
			continue
		}
		queries["variable "+v.Name] = m[1]
	}

	ids := map[float64]string{}
	var walk func([]map[string]any)
	walk = func(panels []map[string]any) {
		for _, p := range panels {
			title, _ := p["title"].(string)
			id, _ := p["id"].(float64)
			if other, dup := ids[id]; dup {
				t.Errorf("panels %q and %q share id %v", other, title, id)
			}
			ids[id] = title
			targets, _ := p["targets"].([]any)
			for i, target := range targets {
				expr, _ := target.(map[string]any)["expr"].(string)
				queries[fmt.Sprintf("panel %q target %d", title, i)] = expr
			}
			if p["type"] != "row" && len(targets) == 0 {
				t.Errorf("panel %q has no query", title)
			}
			var children []map[string]any
			if raw, ok := p["panels"].([]any); ok {
				for _, c := range raw {
					children = append(children, c.(map[string]any))
				}
			}
			walk(children)
		}
	}
	walk(dashboard.Panels)
	if len(queries) < 10 {
		t.Fatalf("found only %d queries in the dashboard", len(queries))
	}

	variable := regexp.MustCompile(`\$\{?([a-zA-Z_][a-zA-Z0-9_]*)`)
	whats := make([]string, 0, len(queries))
	for what := range queries {
		whats = append(whats, what)
	}
	sort.Strings(whats)
	for _, what := range whats {
		expr := grafanaMacros.Replace(queries[what])
		for _, m := range variable.FindAllStringSubmatch(expr, -1) {
			if !defined[m[1]] {
				t.Errorf("%s uses $%s, which the dashboard does not define", what, m[1])
			}
		}
		checkSelectors(t, what, selectors(t, what, expr), "$job")
	}
	// Panels select through $job: its default must be the job the rules use.
	for _, v := range dashboard.Templating.List {
		if v.Name == "job" && v.Query != job {
			t.Errorf("the dashboard's $job is %v, want %s", v.Query, job)
		}
	}
}

// TestMonitoringKustomization: `kubectl apply -k manifests/monitoring/` installs the PrometheusRule and the PodMonitor
// as written and the dashboard, byte for byte, in a ConfigMap that Grafana's sidecar picks up.
func TestMonitoringKustomization(t *testing.T) {
	objects := kustomizeBuild(t, monitoringDir)
	rule := readPaths(t, filepath.Join(monitoringDir, "prometheusrule.yaml"))
	got := find(t, objects, "PrometheusRule", "multiproject-controller-manager")
	if d := diffValue(rule[0].Object, got.Object); d != "" {
		t.Errorf("the PrometheusRule differs from prometheusrule.yaml (-file +kustomize):\n%s", d)
	}
	cm := find(t, objects, "ConfigMap", "multiproject-controller-manager-dashboard")
	if cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("the dashboard ConfigMap's labels %v lack grafana_dashboard=1", cm.GetLabels())
	}
	dashboard, err := os.ReadFile(filepath.Join(root(t), monitoringDir, "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	data, _, _ := unstructured.NestedString(cm.Object, "data", "multiproject-controller-manager.json")
	if data != string(dashboard) {
		t.Error("the dashboard ConfigMap does not hold grafana-dashboard.json as it is")
	}
	// And podmonitor.yaml as it is: the PodMonitor, its ServiceAccount, token Secret and ClusterRoleBinding.
	podMonitor := readPaths(t, filepath.Join(monitoringDir, "podmonitor.yaml"))
	diffObjects(t, "podmonitor.yaml", podMonitor, "kustomize build manifests/monitoring", only(objects, podMonitor))
	if len(objects) != 2+len(podMonitor) {
		t.Errorf("kustomize build manifests/monitoring has %d objects, want the PrometheusRule, the ConfigMap and podmonitor.yaml's %d", len(objects), len(podMonitor))
	}
}

// TestScrapeConfigLoads: the scrape job is valid Prometheus configuration (Prometheus's own loader) and is the job
// the rules select, over HTTPS with a bearer token.
func TestScrapeConfigLoads(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root(t), monitoringDir, "prometheus-scrape-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := promconfig.Load(string(data), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("Prometheus refuses the scrape config: %v", err)
	}
	scrapes, err := cfg.GetScrapeConfigs()
	if err != nil {
		t.Fatal(err)
	}
	if len(scrapes) != 1 {
		t.Fatalf("%d scrape configs, want 1", len(scrapes))
	}
	sc := scrapes[0]
	if sc.JobName != job || sc.Scheme != "https" || sc.MetricsPath != "/metrics" {
		t.Errorf("job %q, scheme %q, path %q; want %q over https on /metrics", sc.JobName, sc.Scheme, sc.MetricsPath, job)
	}
	if a := sc.HTTPClientConfig.Authorization; a == nil || a.Type != "Bearer" || a.CredentialsFile == "" {
		t.Errorf("authorization %+v; /metrics needs the ServiceAccount's bearer token", a)
	}
	if len(sc.ServiceDiscoveryConfigs) != 1 || sc.ServiceDiscoveryConfigs[0].Name() != "kubernetes" {
		t.Errorf("service discovery %v, want one kubernetes_sd_config", sc.ServiceDiscoveryConfigs)
	}
}
