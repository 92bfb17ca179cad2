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

package packaging

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestOptionalPiecesPassServerSideDryRun applies, as a server-side dry run, what the production pieces add: the
// base and the chart with the PodDisruptionBudget, the spread constraints, the startup probe and the debug-reader
// ClusterRole (defaults), and the optional PodMonitor's ServiceAccount, token Secret and binding and the
// NetworkPolicy, from manifests/monitoring and from the chart's values. The PodMonitor itself needs the Prometheus
// Operator's CRD, which this API server does not have: TestPodMonitorIsValid decodes it strictly instead.
func TestOptionalPiecesPassServerSideDryRun(t *testing.T) {
	renderings := map[string][]*unstructured.Unstructured{
		"kustomize build manifests":    kustomizeBuild(t, "manifests"),
		"manifests/monitoring (files)": readPaths(t, optionalMonitoring...),
		"kustomize build monitoring":   kustomizeBuild(t, monitoringDir),
		"helm template (defaults)":     mustHelmTemplate(t, defaultNamespace, nil),
		"helm template (monitoring values)": mustHelmTemplate(t, "multiproject-monitoring", map[string]any{
			"podMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"}},
			"networkPolicy": map[string]any{"enabled": true, "from": []any{
				map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "prometheus"}}},
			}},
			"topologySpreadConstraints": []any{map[string]any{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
				"whenUnsatisfiable": "DoNotSchedule", "labelSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": chartName}}}},
			"podDisruptionBudget": map[string]any{"enabled": true, "maxUnavailable": "50%"},
		}),
	}
	client, mapper := dynamicClient(t)
	for name, objects := range renderings {
		t.Run(name, func(t *testing.T) {
			kinds := map[string]bool{}
			for _, ns := range namespacesOf(objects) {
				createNamespace(t, ns)
			}
			for _, obj := range objects {
				kinds[obj.GetKind()] = true
				if obj.GroupVersionKind().Group == "monitoring.coreos.com" {
					continue
				}
				if err := serverSideApply(t.Context(), client, mapper, obj, true); err != nil {
					t.Errorf("server-side dry run of %s: %v", key(obj), err)
				}
			}
			if !kinds["PodDisruptionBudget"] && !kinds["NetworkPolicy"] && !kinds["PodMonitor"] {
				t.Errorf("nothing of the production pieces rendered (kinds %v)", kinds)
			}
		})
	}
}
