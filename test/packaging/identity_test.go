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
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// identityExamples is where docs/gcp-identity.md's example values and credential configuration are.
const identityExamples = "docs/examples/gcp-identity"

// exampleValues reads one of docs/gcp-identity.md's values files.
func exampleValues(t *testing.T, name string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root(t), identityExamples, name))
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]any{}
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return values
}

// managerContainer returns the Deployment's container and Pod spec, as rendered.
func managerPod(t *testing.T, objects []*unstructured.Unstructured) (pod, container map[string]any) {
	t.Helper()
	pod, _, _ = unstructured.NestedMap(find(t, objects, "Deployment", chartName).Object, "spec", "template", "spec")
	containers, _ := pod["containers"].([]any)
	if len(containers) != 1 {
		t.Fatalf("the Deployment has %d containers, want 1", len(containers))
	}
	return pod, containers[0].(map[string]any)
}

// TestChartGivesTheManagerItsGCPIdentity renders the chart with docs/gcp-identity.md's values: Workload Identity on
// GKE puts the annotation on the manager's ServiceAccount and changes nothing else; workload identity federation
// adds the projected token volume, the credential configuration's ConfigMap, their mounts and
// GOOGLE_APPLICATION_CREDENTIALS to the Deployment and changes nothing else; and the example credential
// configuration reads the token where the values mount it, for the audience they request it for.
func TestChartGivesTheManagerItsGCPIdentity(t *testing.T) {
	defaults := mustHelmTemplate(t, defaultNamespace, nil)

	t.Run("Workload Identity on GKE", func(t *testing.T) {
		values := exampleValues(t, "workload-identity-gke.values.yaml")
		got := mustHelmTemplate(t, defaultNamespace, values)
		want := mustHelmTemplate(t, defaultNamespace, nil)
		sa := find(t, want, "ServiceAccount", chartName)
		sa.SetAnnotations(map[string]string{
			"iam.gke.io/gcp-service-account": "multiproject-controller-manager@admin-project.iam.gserviceaccount.com",
		})
		diffObjects(t, "the defaults with the annotation added by hand", want, "helm template (Workload Identity)", got)
		if find(t, defaults, "ServiceAccount", chartName).GetAnnotations() != nil {
			t.Error("the default ServiceAccount has annotations")
		}
	})

	t.Run("workload identity federation", func(t *testing.T) {
		values := exampleValues(t, "workload-identity-federation.values.yaml")
		got := mustHelmTemplate(t, defaultNamespace, values)
		want := mustHelmTemplate(t, defaultNamespace, nil)
		deployment := find(t, want, "Deployment", chartName)
		containers, _, _ := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "containers")
		c := containers[0].(map[string]any)
		c["env"] = append(c["env"].([]any), values["extraEnv"].([]any)...)
		c["volumeMounts"] = values["extraVolumeMounts"]
		set(t, deployment, containers, "spec", "template", "spec", "containers")
		set(t, deployment, values["extraVolumes"], "spec", "template", "spec", "volumes")
		diffObjects(t, "the defaults with the volumes, mounts and env added by hand", want, "helm template (federation)", got)

		// The example hangs together: the token file, its audience and the configuration file.
		pod, container := managerPod(t, got)
		data, err := os.ReadFile(filepath.Join(root(t), identityExamples, "credential-configuration.json"))
		if err != nil {
			t.Fatal(err)
		}
		var config struct {
			Type             string `json:"type"`
			Audience         string `json:"audience"`
			CredentialSource struct {
				File string `json:"file"`
			} `json:"credential_source"`
		}
		if err := json.Unmarshal(data, &config); err != nil {
			t.Fatal(err)
		}
		mounts := map[string]string{}
		for _, m := range container["volumeMounts"].([]any) {
			m := m.(map[string]any)
			mounts[m["name"].(string)] = m["mountPath"].(string)
		}
		var tokenFile, audience, configDir string
		for _, v := range pod["volumes"].([]any) {
			v := v.(map[string]any)
			name := v["name"].(string)
			if projected, ok := v["projected"].(map[string]any); ok {
				for _, s := range projected["sources"].([]any) {
					if sat, ok := s.(map[string]any)["serviceAccountToken"].(map[string]any); ok {
						tokenFile, audience = path.Join(mounts[name], sat["path"].(string)), sat["audience"].(string)
					}
				}
			}
			if _, ok := v["configMap"]; ok {
				configDir = mounts[name]
			}
		}
		var adc string
		for _, e := range container["env"].([]any) {
			if e := e.(map[string]any); e["name"] == "GOOGLE_APPLICATION_CREDENTIALS" {
				adc, _ = e["value"].(string)
			}
		}
		switch {
		case config.Type != "external_account":
			t.Errorf("credential-configuration.json is of type %q, want external_account", config.Type)
		case config.CredentialSource.File != tokenFile:
			t.Errorf("the configuration reads the token from %q, the values mount it at %q", config.CredentialSource.File, tokenFile)
		case config.Audience != audience:
			t.Errorf("the configuration's audience %q, the projected token's %q", config.Audience, audience)
		case configDir == "" || adc != path.Join(configDir, "credential-configuration.json"):
			t.Errorf("GOOGLE_APPLICATION_CREDENTIALS=%q, want credential-configuration.json in the ConfigMap's mount %q", adc, configDir)
		}
	})
}

// TestChartRefusesBadIdentityValues: the schema refuses an env var, volume or mount without a name (or a path), and
// an annotation whose value is not a string.
func TestChartRefusesBadIdentityValues(t *testing.T) {
	for name, values := range map[string]map[string]any{
		"env without a name":   {"extraEnv": []any{map[string]any{"value": "x"}}},
		"volume without name":  {"extraVolumes": []any{map[string]any{"emptyDir": map[string]any{}}}},
		"mount without a path": {"extraVolumeMounts": []any{map[string]any{"name": "x"}}},
		"annotation not text":  {"serviceAccount": map[string]any{"annotations": map[string]any{"a": 1}}},
		"unknown key":          {"serviceAccount": map[string]any{"name": "other"}},
	} {
		if _, err := helmTemplate(t, defaultNamespace, values); err == nil {
			t.Errorf("%s: the chart rendered %v", name, values)
		}
	}
}
