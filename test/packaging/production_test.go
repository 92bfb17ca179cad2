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
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/action"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// cacheSyncTimeout is the manager's default --cache-sync-timeout, which the startup probe must outlast.
const cacheSyncTimeout = 2 * time.Minute

// optionalMonitoring is what the chart's podMonitor and networkPolicy values render: the objects of
// manifests/monitoring/podmonitor.yaml and networkpolicy.yaml.
var optionalMonitoring = []string{filepath.Join(monitoringDir, "podmonitor.yaml"), filepath.Join(monitoringDir, "networkpolicy.yaml")}

// TestDeploymentSurvivesDrainsAndColdStarts, for the kustomize base, the sharded overlay and the chart: a
// PodDisruptionBudget lets a drain evict one replica at a time, the replicas spread over zones and nodes without
// being stranded where Nodes carry no zone label (ScheduleAnyway), and the liveness probe waits for the startup
// probe, which outlasts --cache-sync-timeout.
func TestDeploymentSurvivesDrainsAndColdStarts(t *testing.T) {
	renderings := map[string][]*unstructured.Unstructured{
		"kustomize build manifests":        kustomizeBuild(t, "manifests"),
		"kustomize build overlays/sharded": kustomizeBuild(t, "overlays/sharded"),
		"helm template":                    mustHelmTemplate(t, "multiproject-system", nil),
		"helm template (sharded)":          mustHelmTemplate(t, "multiproject-system", map[string]any{"replicas": 3, "sharding": map[string]any{"enabled": true}}),
	}
	for name, objects := range renderings {
		t.Run(name, func(t *testing.T) {
			var deployment appsv1.Deployment
			fromUnstructured(t, find(t, objects, "Deployment", chartName), &deployment)
			selector := deployment.Spec.Selector.MatchLabels

			pdb := find(t, objects, "PodDisruptionBudget", chartName)
			if pdb.GetNamespace() != deployment.Namespace {
				t.Errorf("the PodDisruptionBudget is in %q, the Deployment in %q", pdb.GetNamespace(), deployment.Namespace)
			}
			spec, _, _ := unstructured.NestedMap(pdb.Object, "spec")
			if d := diffValue(map[string]any{"maxUnavailable": 1, "selector": map[string]any{"matchLabels": selector}}, spec); d != "" {
				t.Errorf("PodDisruptionBudget spec (-want +got):\n%s", d)
			}

			spread := map[string]corev1.UnsatisfiableConstraintAction{}
			for _, c := range deployment.Spec.Template.Spec.TopologySpreadConstraints {
				spread[c.TopologyKey] = c.WhenUnsatisfiable
				if d := diffValue(selector, c.LabelSelector.MatchLabels); d != "" || c.MaxSkew != 1 {
					t.Errorf("spread by %s: maxSkew %d, selector (-Deployment +constraint):\n%s", c.TopologyKey, c.MaxSkew, d)
				}
			}
			want := map[string]corev1.UnsatisfiableConstraintAction{
				corev1.LabelTopologyZone: corev1.ScheduleAnyway, corev1.LabelHostname: corev1.ScheduleAnyway,
			}
			if d := diffValue(want, spread); d != "" {
				t.Errorf("topologySpreadConstraints (-want +got):\n%s", d)
			}

			c := deployment.Spec.Template.Spec.Containers[0]
			startup := c.StartupProbe
			if startup == nil || startup.HTTPGet == nil || startup.HTTPGet.Path != "/readyz" {
				t.Fatalf("startupProbe = %+v, want /readyz", startup)
			}
			if budget := time.Duration(startup.FailureThreshold*startup.PeriodSeconds) * time.Second; budget <= cacheSyncTimeout {
				t.Errorf("the startup probe gives a start %s, not more than --cache-sync-timeout %s", budget, cacheSyncTimeout)
			}
			if c.LivenessProbe.InitialDelaySeconds != 0 {
				t.Errorf("livenessProbe.initialDelaySeconds = %d: the startup probe holds it back already", c.LivenessProbe.InitialDelaySeconds)
			}
		})
	}
}

// TestChartMonitoringValuesRenderTheManifests: podMonitor.enabled and networkPolicy.enabled render
// manifests/monitoring's PodMonitor (with its ServiceAccount, token Secret and binding) and NetworkPolicy as they
// are, placed in the release namespace and changed only where the values say; off by default.
func TestChartMonitoringValuesRenderTheManifests(t *testing.T) {
	for _, obj := range mustHelmTemplate(t, defaultNamespace, nil) {
		if obj.GetKind() == "PodMonitor" || obj.GetKind() == "NetworkPolicy" {
			t.Errorf("the defaults render %s", key(obj))
		}
	}
	manifests := readPaths(t, optionalMonitoring...)
	got := mustHelmTemplate(t, defaultNamespace, map[string]any{
		"podMonitor": map[string]any{"enabled": true}, "networkPolicy": map[string]any{"enabled": true},
	})
	diffObjects(t, "manifests/monitoring", manifests, "helm template (podMonitor, networkPolicy)", only(got, manifests))

	const ns = "monitoring-values"
	from := []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "prometheus"}}}}
	got = mustHelmTemplate(t, ns, map[string]any{
		"podMonitor":    map[string]any{"enabled": true, "labels": map[string]any{"release": "kube-prometheus-stack"}, "interval": "15s"},
		"networkPolicy": map[string]any{"enabled": true, "from": from},
	})
	want := readPaths(t, optionalMonitoring...)
	for _, obj := range want {
		if obj.GetNamespace() == defaultNamespace {
			obj.SetNamespace(ns)
		}
		switch obj.GetKind() {
		case "ClusterRoleBinding":
			subjects, _, _ := unstructured.NestedSlice(obj.Object, "subjects")
			subjects[0].(map[string]any)["namespace"] = ns
			set(t, obj, subjects, "subjects")
		case "PodMonitor":
			obj.SetLabels(map[string]string{"app.kubernetes.io/name": chartName, "release": "kube-prometheus-stack"})
			endpoints, _, _ := unstructured.NestedSlice(obj.Object, "spec", "podMetricsEndpoints")
			endpoints[0].(map[string]any)["interval"] = "15s"
			set(t, obj, endpoints, "spec", "podMetricsEndpoints")
		case "NetworkPolicy":
			ingress, _, _ := unstructured.NestedSlice(obj.Object, "spec", "ingress")
			ingress[0].(map[string]any)["from"] = from
			set(t, obj, ingress, "spec", "ingress")
		}
	}
	diffObjects(t, "manifests/monitoring, edited by hand", want, "helm template (monitoring values)", only(got, want))
}

// only keeps the objects of got that have a key in want.
func only(got, want []*unstructured.Unstructured) []*unstructured.Unstructured {
	keys := map[string]bool{}
	for _, obj := range want {
		keys[key(obj)] = true
	}
	var out []*unstructured.Unstructured
	for _, obj := range got {
		if keys[key(obj)] {
			out = append(out, obj)
		}
	}
	return out
}

// TestPodMonitorIsValid: no CRD of the Prometheus Operator is installed on the test's API server, so the PodMonitor
// is decoded strictly into the operator's own Go type instead (an unknown or misspelt field fails), and it scrapes
// what the scrape config scrapes: the https port's /metrics, as job multiproject-controller-manager, with the
// token of its ServiceAccount, which the metrics-reader ClusterRole is bound to.
func TestPodMonitorIsValid(t *testing.T) {
	objects := kustomizeBuild(t, monitoringDir)
	data, err := json.Marshal(find(t, objects, "PodMonitor", chartName).Object)
	if err != nil {
		t.Fatal(err)
	}
	var pm monitoringv1.PodMonitor
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&pm); err != nil {
		t.Fatalf("the PodMonitor is not a monitoring.coreos.com/v1 PodMonitor: %v", err)
	}
	if pm.Spec.JobLabel != "app.kubernetes.io/name" || pm.Spec.Selector.MatchLabels["app.kubernetes.io/name"] != job {
		t.Errorf("jobLabel %q, selector %v: want the job %q from the Pods' app.kubernetes.io/name", pm.Spec.JobLabel, pm.Spec.Selector.MatchLabels, job)
	}
	if len(pm.Spec.PodMetricsEndpoints) != 1 {
		t.Fatalf("%d endpoints, want 1", len(pm.Spec.PodMetricsEndpoints))
	}
	e := pm.Spec.PodMetricsEndpoints[0]
	if e.Port == nil || *e.Port != "https" || e.Path != "/metrics" || e.Scheme == nil || strings.ToUpper(string(*e.Scheme)) != "HTTPS" {
		t.Errorf("endpoint port %v path %q scheme %v, want https /metrics HTTPS", e.Port, e.Path, e.Scheme)
	}
	if e.Authorization == nil || e.Authorization.Credentials == nil {
		t.Fatal("the endpoint sends no token")
	}
	secret := find(t, objects, "Secret", e.Authorization.Credentials.Name)
	if secret.GetNamespace() != pm.Namespace || e.Authorization.Credentials.Key != corev1.ServiceAccountTokenKey ||
		secret.GetAnnotations()[corev1.ServiceAccountNameKey] != "multiproject-controller-manager-scraper" {
		t.Errorf("the token comes from %s key %q, want the scraper ServiceAccount's token Secret beside the PodMonitor", key(secret), e.Authorization.Credentials.Key)
	}
	binding := find(t, objects, "ClusterRoleBinding", "multiproject-controller-manager:scraper")
	roleRef, _, _ := unstructured.NestedString(binding.Object, "roleRef", "name")
	if roleRef != "multiproject-controller-manager:metrics-reader" {
		t.Errorf("the scraper is bound to %q, want the metrics-reader ClusterRole", roleRef)
	}
}

// TestNotesFollowTheValues: NOTES.txt names the Lease the manager really uses (leaderElection.*), the shard Leases
// when sharded, and what monitoring and debugging need.
func TestNotesFollowTheValues(t *testing.T) {
	notes := helmNotes(t, "multiproject-system", map[string]any{
		"leaderElection": map[string]any{"resourceName": "mpcm-prod", "resourceNamespace": "mpcm-leases"},
		"sharding":       map[string]any{"enabled": true}, "replicas": 3,
		"podMonitor": map[string]any{"enabled": true},
	})
	for _, want := range []string{
		"kubectl -n mpcm-leases get lease mpcm-prod",
		"kubectl -n mpcm-leases get leases -l multiproject.io/shard-group",
		"The PodMonitor multiproject-system/multiproject-controller-manager",
		"multiproject-controller-manager:debug-reader",
		"port-forward deploy/multiproject-controller-manager 10270",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("NOTES.txt lacks %q:\n%s", want, notes)
		}
	}
	defaults := helmNotes(t, defaultNamespace, nil)
	if !strings.Contains(defaults, "kubectl -n kube-system get lease multiproject-controller-manager") || strings.Contains(defaults, "shard-group") {
		t.Errorf("NOTES.txt at the defaults:\n%s", defaults)
	}
}

// helmNotes is what `helm install` prints after an install: the rendered NOTES.txt.
func helmNotes(t *testing.T, namespace string, values map[string]any) string {
	t.Helper()
	install := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	install.DryRun, install.DryRunOption, install.ClientOnly, install.Replace = true, "client", true, true
	install.ReleaseName, install.Namespace = chartName, namespace
	rel, err := install.Run(loadChart(t), values)
	if err != nil {
		t.Fatal(err)
	}
	return rel.Info.Notes
}

func fromUnstructured(t *testing.T, obj *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, into, true); err != nil {
		t.Fatalf("%s: %v", key(obj), err)
	}
}
