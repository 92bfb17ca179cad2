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
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/promqltest"
)

// alertCase is one scenario for one alert: series loaded at one-minute steps, and the label sets of the series the
// alert's expression returns 40 minutes in (none: it must not fire).
type alertCase struct {
	name   string
	series []string
	fires  []string
}

const jobLabel = `job="multiproject-controller-manager"`

// TestAlertExpressionsFireWhenTheyShould evaluates each alert's expression, as written in prometheusrule.yaml,
// with Prometheus's query engine over made-up series: it returns exactly the series that should alert (and with
// the labels the annotations use), and nothing in the healthy case. `for` durations are not evaluated here.
func TestAlertExpressionsFireWhenTheyShould(t *testing.T) {
	cases := map[string][]alertCase{
		"MultiprojectControllerManagerAbsent": {
			{name: "no target", series: []string{`up{job="other"} 1x40`}, fires: []string{`{` + jobLabel + `}`}},
			{name: "a target", series: []string{`up{` + jobLabel + `, instance="a"} 0x40`}},
		},
		"MultiprojectControllerManagerTargetDown": {
			{name: "one of two down", series: []string{
				`up{` + jobLabel + `, instance="a"} 0x40`,
				`up{` + jobLabel + `, instance="b"} 1x40`,
			}, fires: []string{`{` + jobLabel + `, instance="a"}`}},
		},
		"MultiprojectNoLeader": {
			{name: "two standbys", series: []string{
				`leader_election_master_status{` + jobLabel + `, name="multiproject-controller-manager", pod="a"} 0x40`,
				`leader_election_master_status{` + jobLabel + `, name="multiproject-controller-manager", pod="b"} 0x40`,
			}, fires: []string{`{}`}},
			{name: "a leader and a standby", series: []string{
				`leader_election_master_status{` + jobLabel + `, name="multiproject-controller-manager", pod="a"} 1x40`,
				`leader_election_master_status{` + jobLabel + `, name="multiproject-controller-manager", pod="b"} 0x40`,
				// Another component's elector is not ours.
				`leader_election_master_status{job="kube-controller-manager", name="kube-controller-manager"} 0x40`,
			}},
		},
		"MultiprojectMultipleLeaders": {
			{name: "two leaders", series: []string{
				`leader_election_master_status{` + jobLabel + `, name="multiproject-controller-manager", pod="a"} 1x40`,
				`leader_election_master_status{` + jobLabel + `, name="multiproject-controller-manager", pod="b"} 1x40`,
			}, fires: []string{`{}`}},
			{name: "one leader", series: []string{
				`leader_election_master_status{` + jobLabel + `, name="multiproject-controller-manager", pod="a"} 1x40`,
				`leader_election_master_status{job="kube-controller-manager", name="kube-controller-manager"} 1x40`,
			}},
		},
		"MultiprojectNoControllersEnabled": {
			{name: "a replica started with --controllers=", series: []string{
				`multiproject_controllers_enabled{` + jobLabel + `, instance="a"} 0x40`,
				`multiproject_controllers_enabled{` + jobLabel + `, instance="b"} 3x40`,
			}, fires: []string{`{` + jobLabel + `, instance="a"}`}},
			{name: "every replica runs some", series: []string{
				`multiproject_controllers_enabled{` + jobLabel + `, instance="a"} 1x40`,
			}},
		},
		"MultiprojectTenantSyncFailing": {
			{name: "only tenant a never succeeds", series: []string{
				`multiproject_provider_config_syncs_total{` + jobLabel + `, provider_config="a", result="error"} 0+1x40`,
				`multiproject_provider_config_syncs_total{` + jobLabel + `, provider_config="a", result="success"} 3x40`,
				`multiproject_provider_config_syncs_total{` + jobLabel + `, provider_config="b", result="error"} 0+1x40`,
				`multiproject_provider_config_syncs_total{` + jobLabel + `, provider_config="b", result="success"} 0+1x40`,
				`multiproject_provider_config_syncs_total{` + jobLabel + `, provider_config="c", result="success"} 0+1x40`,
			}, fires: []string{`{provider_config="a"}`}},
		},
		"MultiprojectTenantNotReady": {
			{name: "a False, e Unknown, c deleting", series: append(append(append(append(
				condition("a", "Ready", "False"),
				condition("b", "Ready", "True")...),
				condition("c", "Ready", "False")...),
				condition("e", "Ready", "Unknown")...),
				// c's deletion waits: MultiprojectTenantDeletionPending says so, not this alert.
				`multiproject_provider_config_deletion_timestamp_seconds{`+jobLabel+`, provider_config="c"} 600x40`,
			), fires: []string{`{provider_config="a"}`, `{provider_config="e"}`}},
			{name: "all Ready, another condition False", series: append(
				condition("a", "Ready", "True"),
				condition("a", "NEGReady", "False")...),
			},
		},
		"MultiprojectTenantDeletionPending": {
			// Evaluated at 40m = 2,400 s of Unix time: a, deleted at -3,000 s, has waited 5,400 s; b 600 s.
			{name: "a waits for 90 minutes, b for 10", series: []string{
				`multiproject_provider_config_deletion_timestamp_seconds{` + jobLabel + `, provider_config="a"} -3000x40`,
				`multiproject_provider_config_deletion_timestamp_seconds{` + jobLabel + `, provider_config="b"} 1800x40`,
			}, fires: []string{`{provider_config="a"}`}},
		},
		"MultiprojectControllerSyncErrors": {
			// Both halves of neg count their syncs as controller="neg": the pusher's failures fire this alert for neg
			// too.
			{name: "namespace-project and neg fail, ingress-tunnel recovered", series: []string{
				`multiproject_controller_syncs_total{` + jobLabel + `, provider_config="a", controller="namespace-project", result="error"} 0+1x40`,
				`multiproject_controller_syncs_total{` + jobLabel + `, provider_config="a", controller="neg", result="error"} 0+1x40`,
				`multiproject_controller_syncs_total{` + jobLabel + `, provider_config="a", controller="ingress-tunnel", result="error"} 2x40`,
				`multiproject_controller_syncs_total{` + jobLabel + `, provider_config="a", controller="ingress-tunnel", result="success"} 0+5x40`,
			}, fires: []string{`{provider_config="a", controller="namespace-project"}`, `{provider_config="a", controller="neg"}`}},
		},
		"MultiprojectNEGsGarbageCollected": {
			{name: "a sweep collected", series: []string{
				`multiproject_neg_garbage_collected_total{` + jobLabel + `, provider_config="a"} 0x30 2x10`,
				`multiproject_neg_garbage_collected_total{` + jobLabel + `, provider_config="b"} 0x40`,
			}, fires: []string{`{` + jobLabel + `, provider_config="a"}`}},
		},
		"MultiprojectNEGsAwaitingDeletion": {
			{name: "tenant a's NEGs are in use, b's are not", series: []string{
				`multiproject_neg_awaiting_deletion{` + jobLabel + `, provider_config="a", pod="x"} 2x40`,
				`multiproject_neg_awaiting_deletion{` + jobLabel + `, provider_config="b", pod="x"} 0x40`,
			}, fires: []string{`{provider_config="a"}`}},
		},
		"MultiprojectGCERequestErrors": {
			{name: "tenant a's calls fail 9% with 5xx", series: []string{
				gceCalls("a", "networkEndpointGroups.attachNetworkEndpoints", "success", 100),
				gceCalls("a", "networkEndpointGroups.attachNetworkEndpoints", "server_error", 10),
				// 404s and conflicts are answers the pusher expects, however many.
				gceCalls("b", "networkEndpointGroups.get", "success", 100),
				gceCalls("b", "networkEndpointGroups.get", "not_found", 100),
				gceCalls("b", "networkEndpointGroups.insert", "conflict", 20),
				// 2% rate limited: below the threshold.
				gceCalls("c", "networkEndpointGroups.get", "success", 98),
				gceCalls("c", "zoneOperations.wait", "rate_limited", 2),
			}, fires: []string{`{provider_config="a"}`}},
			{name: "credentials refused", series: []string{
				gceCalls("a", "networkEndpointGroups.aggregatedList", "forbidden", 1),
			}, fires: []string{`{provider_config="a"}`}},
			{name: "all well", series: []string{
				gceCalls("a", "networkEndpointGroups.get", "success", 100),
				gceCalls("a", "networkEndpointGroups.get", "canceled", 10),
			}},
		},
		"MultiprojectGCERequestsSlow": {
			{name: "tenant a's attaches take 50s", series: append(append(append(
				histogram("multiproject_gce_request_duration_seconds", `provider_config="a", method="networkEndpointGroups.attachNetworkEndpoints"`, 50),
				histogram("multiproject_gce_request_duration_seconds", `provider_config="b", method="networkEndpointGroups.get"`, 0.5)...),
				// An operation wait lasts as long as the change: slow waits are not a slow API.
				histogram("multiproject_gce_request_duration_seconds", `provider_config="c", method="zoneOperations.wait"`, 50)...),
				histogram("multiproject_gce_request_duration_seconds", `provider_config="c", method="networkEndpointGroups.insert"`, 0.5)...),
				fires: []string{`{provider_config="a"}`}},
		},
		"MultiprojectNEGProgrammingSlow": {
			{name: "tenant a's changes take 50s to reach GCE", series: append(
				histogram("multiproject_neg_network_programming_duration_seconds", `provider_config="a"`, 50),
				histogram("multiproject_neg_network_programming_duration_seconds", `provider_config="b"`, 2)...),
				fires: []string{`{provider_config="a"}`}},
		},
		"MultiprojectWorkqueueBacklog": {
			{name: "one queue grows without draining", series: []string{
				`workqueue_depth{` + jobLabel + `, name="a-neg-translator"} 1+1x40`,
				`workqueue_depth{` + jobLabel + `, name="b-neg-translator"} 5x40`,
				`workqueue_depth{` + jobLabel + `, name="c-neg-translator"} 0+1x38 0 1`,
				`workqueue_depth{job="kube-controller-manager", name="deployment"} 1+1x40`,
			}, fires: []string{`{` + jobLabel + `, name="a-neg-translator"}`}},
		},
		"MultiprojectWorkqueueWaitHigh": {
			{name: "items wait 50s in one queue", series: append(
				histogram("workqueue_queue_duration_seconds", `name="a-ingress-tunnel"`, 50),
				histogram("workqueue_queue_duration_seconds", `name="b-ingress-tunnel"`, 0.5)...),
				fires: []string{`{name="a-ingress-tunnel"}`}},
		},
		"MultiprojectWorkerStuck": {
			{name: "one sync runs for 700s", series: []string{
				`workqueue_longest_running_processor_seconds{` + jobLabel + `, name="a-namespace-project", pod="x"} 700x40`,
				`workqueue_longest_running_processor_seconds{` + jobLabel + `, name="b-namespace-project", pod="x"} 5x40`,
			}, fires: []string{`{name="a-namespace-project"}`}},
		},
		"MultiprojectAPIRequestsForbidden": {
			{name: "patches refused", series: []string{
				`rest_client_requests_total{` + jobLabel + `, code="403", method="PATCH", host="h"} 0+1x40`,
				`rest_client_requests_total{` + jobLabel + `, code="200", method="GET", host="h"} 0+100x40`,
				`rest_client_requests_total{` + jobLabel + `, code="403", method="GET", host="h"} 7x40`,
			}, fires: []string{`{method="PATCH"}`}},
		},
		"MultiprojectShardTenantsWithoutLease": {
			// Only the elected replica counts; the others export 0.
			{name: "three tenants on a dead shard", series: []string{
				`multiproject_shard_tenants_without_lease{` + jobLabel + `, pod="a"} 3x40`,
				`multiproject_shard_tenants_without_lease{` + jobLabel + `, pod="b"} 0x40`,
			}, fires: []string{`{}`}},
			{name: "every tenant on a live shard", series: []string{
				`multiproject_shard_tenants_without_lease{` + jobLabel + `, pod="a"} 0x40`,
				`multiproject_shard_tenants_without_lease{` + jobLabel + `, pod="b"} 0x40`,
			}},
		},
		"MultiprojectPodsWaitingOnReadinessGate": {
			{name: "tenant a's Pods wait, b's do not", series: []string{
				`multiproject_neg_readiness_pods_waiting{` + jobLabel + `, provider_config="a", pod="x"} 2x40`,
				`multiproject_neg_readiness_pods_waiting{` + jobLabel + `, provider_config="b", pod="x"} 0x40`,
			}, fires: []string{`{provider_config="a"}`}},
		},
		"MultiprojectTenantAPIBudgetStarved": {
			{name: "tenant a's requests wait 50s for its share, b's half a second", series: append(
				histogram("multiproject_api_budget_tenant_wait_seconds", `provider_config="a"`, 50),
				histogram("multiproject_api_budget_tenant_wait_seconds", `provider_config="b"`, 0.5)...),
				fires: []string{`{provider_config="a"}`}},
		},
		"MultiprojectAPIServerErrors": {
			{name: "9% fail", series: []string{
				`rest_client_requests_total{` + jobLabel + `, code="500", method="GET", host="h"} 0+10x40`,
				`rest_client_requests_total{` + jobLabel + `, code="200", method="GET", host="h"} 0+100x40`,
			}, fires: []string{`{}`}},
			{name: "1% fail", series: []string{
				`rest_client_requests_total{` + jobLabel + `, code="500", method="GET", host="h"} 0+1x40`,
				`rest_client_requests_total{` + jobLabel + `, code="200", method="GET", host="h"} 0+100x40`,
			}},
		},
	}

	exprs := map[string]string{}
	for _, g := range ruleGroups(t).Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				exprs[r.Alert] = r.Expr
			}
		}
	}
	for alert := range exprs {
		if len(cases[alert]) == 0 {
			t.Errorf("alert %s has no scenario here", alert)
		}
	}
	engine := promqltest.NewTestEngine(t, false, 5*time.Minute, promqltest.DefaultMaxSamplesPerQuery)
	for alert, scenarios := range cases {
		expr, ok := exprs[alert]
		if !ok {
			t.Errorf("prometheusrule.yaml has no alert %s", alert)
			continue
		}
		for _, c := range scenarios {
			t.Run(alert+"/"+c.name, func(t *testing.T) {
				var script strings.Builder
				script.WriteString("load 1m\n")
				for _, s := range c.series {
					fmt.Fprintf(&script, "  %s\n", s)
				}
				// "* 0 + 1" keeps each returned series' labels and makes its value 1, so the scenario states only
				// which series alert.
				fmt.Fprintf(&script, "\neval instant at 40m (%s) * 0 + 1\n", strings.Join(strings.Fields(expr), " "))
				for _, labels := range c.fires {
					fmt.Fprintf(&script, "  %s 1\n", labels)
				}
				promqltest.RunTest(t, script.String(), engine)
			})
		}
	}
}

// gceCalls returns a counter of a tenant's GCE calls of one method and result that grows by perMinute.
func gceCalls(tenant, method, result string, perMinute int) string {
	return fmt.Sprintf(`multiproject_gce_requests_total{%s, provider_config=%q, method=%q, result=%q} 0+%dx40`,
		jobLabel, tenant, method, result, perMinute)
}

// condition returns the three series of one condition of a tenant, kube-state-metrics style: 1 for its status,
// 0 for the others.
func condition(tenant, conditionType, status string) []string {
	var out []string
	for _, s := range []string{"True", "False", "Unknown"} {
		value := 0
		if s == status {
			value = 1
		}
		out = append(out, fmt.Sprintf(`multiproject_provider_config_condition{%s, provider_config=%q, type=%q, status=%q} %dx40`,
			jobLabel, tenant, conditionType, s, value))
	}
	return out
}

// histogram returns the series of a classic histogram (buckets 1s, 10s, 100s) of the manager's job into which one
// observation of the given seconds falls every minute.
func histogram(name, labels string, seconds float64) []string {
	var out []string
	for _, le := range []string{"1", "10", "100", "+Inf"} {
		points := "0x40"
		if bound := parseLe(le); seconds <= bound {
			points = "0+1x40"
		}
		out = append(out, fmt.Sprintf(`%s_bucket{%s, %s, le="%s"} %s`, name, jobLabel, labels, le, points))
	}
	return append(out,
		fmt.Sprintf(`%s_count{%s, %s} 0+1x40`, name, jobLabel, labels),
		fmt.Sprintf(`%s_sum{%s, %s} 0+%gx40`, name, jobLabel, labels, seconds))
}

func parseLe(le string) float64 {
	var f float64
	if le == "+Inf" {
		return 1e308
	}
	_, _ = fmt.Sscan(le, &f)
	return f
}
