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
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestKustomizeBaseInstallsWhatTheREADMEApplies: `kubectl apply -k manifests/` installs exactly the objects that
// README.md's file-by-file `kubectl apply -f` installs, so a file added to crds/, rbac/ or admission/ and not listed
// in manifests/kustomization.yaml fails here.
func TestKustomizeBaseInstallsWhatTheREADMEApplies(t *testing.T) {
	readme := readPaths(t, readmeInstall...)
	base := kustomizeBuild(t, "manifests")
	diffObjects(t, "kubectl apply -f (README)", readme, "kustomize build manifests", base)

	// Guard against two empty sets comparing equal.
	kinds := map[string]int{}
	for _, obj := range base {
		kinds[obj.GetKind()]++
	}
	for _, kind := range []string{"CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
		"RoleBinding", "Namespace", "ConfigMap", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "Deployment"} {
		if kinds[kind] == 0 {
			t.Errorf("kustomize build manifests has no %s (kinds: %v)", kind, kinds)
		}
	}
}

// TestChartDefaultsRenderTheKustomizeBase: with its default values, installed in kube-system, the chart renders the
// very objects of the kustomize base, CRDs included.
func TestChartDefaultsRenderTheKustomizeBase(t *testing.T) {
	base := kustomizeBuild(t, "manifests")
	chart := mustHelmTemplate(t, defaultNamespace, nil)
	diffObjects(t, "kustomize build manifests", base, "helm template", chart)

	// The admission policies above all (docs/security.md): each in both, so that two renderings without one do not
	// compare equal.
	for _, o := range []struct{ kind, name string }{
		{"ValidatingAdmissionPolicy", "multiproject-tenant-labels"},
		{"ValidatingAdmissionPolicyBinding", "multiproject-tenant-labels.tenant"},
		{"ValidatingAdmissionPolicyBinding", "multiproject-tenant-labels.app-owner"},
		{"ValidatingAdmissionPolicy", "multiproject-cluster-id"},
		{"ValidatingAdmissionPolicyBinding", "multiproject-cluster-id"},
		{"ValidatingAdmissionPolicy", "multiproject-lease-labels"},
		{"ValidatingAdmissionPolicyBinding", "multiproject-lease-labels.group"},
		{"ValidatingAdmissionPolicyBinding", "multiproject-lease-labels.claim-kind"},
	} {
		find(t, base, o.kind, o.name)
		find(t, chart, o.kind, o.name)
	}
}

// TestChartValuesRenderAsDocumented renders non-default values and compares the result with the kustomize base
// changed by hand in exactly the places each value should change, so a value that changes too little, too much or
// something else fails.
func TestChartValuesRenderAsDocumented(t *testing.T) {
	const ns = "multiproject-system"
	values := map[string]any{
		"image":            map[string]any{"repository": "registry.example.com/mpcm", "tag": "v1.2.3", "pullPolicy": "IfNotPresent"},
		"imagePullSecrets": []any{map[string]any{"name": "registry-creds"}},
		"replicas":         3,
		"controllers":      []any{"*", "-namespace-project"},
		"logVerbosity":     4,
		"tenantLabelKey":   "example.com/tenant",
		"appOwnerLabelKey": "example.com/app-owner",
		"neg": map[string]any{"annotationKey": "example.com/neg", "statusAnnotationKey": "example.com/neg-status",
			"readinessGate": "example.com/neg-ready", "previousAnnotationKey": "cloud.google.com/neg"},
		"tenantLabelAdmins":    map[string]any{"groups": "system:masters, tenant-admins", "users": "alice"},
		"extraArgs":            []any{"--cluster-name=prod-eu", "--gce-qps=50"},
		"credentialsNamespace": map[string]any{"name": "tenant-keys", "create": true},
		"resources":            map[string]any{"requests": map[string]any{"cpu": "250m", "memory": "256Mi"}},
		"nodeSelector":         map[string]any{"node-role.kubernetes.io/control-plane": ""},
		"tolerations":          []any{map[string]any{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}},
		"podAnnotations":       map[string]any{"example.com/scrape": "true"},
		"podLabels":            map[string]any{"team": "platform"},
		"commonLabels":         map[string]any{"app.kubernetes.io/part-of": "tenancy"},
	}
	got := mustHelmTemplate(t, ns, values)

	want := kustomizeBuild(t, "manifests")
	for _, obj := range want {
		labels := obj.GetLabels()
		if labels != nil && obj.GetKind() != "CustomResourceDefinition" {
			labels["app.kubernetes.io/part-of"] = "tenancy"
			obj.SetLabels(labels)
		}
		// The manager's namespaced objects follow the release; the authentication reader's binding must stay
		// next to its Role in kube-system.
		if obj.GetNamespace() == defaultNamespace && obj.GetName() != "multiproject-controller-manager:extension-apiserver-authentication-reader" {
			obj.SetNamespace(ns)
		}
		if subjects, ok, _ := unstructured.NestedSlice(obj.Object, "subjects"); ok {
			for _, s := range subjects {
				s.(map[string]any)["namespace"] = ns
			}
			set(t, obj, subjects, "subjects")
		}
		switch key(obj) {
		case "Namespace multiproject-gcp-credentials":
			obj.SetName("tenant-keys")
		case "RoleBinding.rbac.authorization.k8s.io multiproject-gcp-credentials/multiproject-controller-manager:gcp-credentials-reader":
			obj.SetNamespace("tenant-keys")
		case "ConfigMap " + ns + "/multiproject-tenant-label-admins":
			set(t, obj, "system:masters, tenant-admins", "data", "groups")
			set(t, obj, "alice", "data", "users")
		case "ValidatingAdmissionPolicy.admissionregistration.k8s.io multiproject-tenant-labels":
			variables, _, _ := unstructured.NestedSlice(obj.Object, "spec", "variables")
			for _, v := range variables {
				v := v.(map[string]any)
				switch v["name"] {
				case "tenantKey":
					v["expression"] = "'example.com/tenant'"
				case "appOwnerKey":
					v["expression"] = "'example.com/app-owner'"
				case "whoMay":
					v["expression"] = strings.Replace(v["expression"].(string), "kube-system/", ns+"/", 1)
				}
			}
			set(t, obj, variables, "spec", "variables")
		case "ValidatingAdmissionPolicy.admissionregistration.k8s.io multiproject-cluster-id":
			// The manager's ServiceAccount is the release's; the parameter stays the kube-system Namespace.
			conditions, _, _ := unstructured.NestedSlice(obj.Object, "spec", "matchConditions")
			for _, c := range conditions {
				c := c.(map[string]any)
				c["expression"] = strings.Replace(c["expression"].(string), ":kube-system:", ":"+ns+":", 1)
			}
			set(t, obj, conditions, "spec", "matchConditions")
		case "ValidatingAdmissionPolicy.admissionregistration.k8s.io multiproject-lease-labels",
			"ValidatingAdmissionPolicy.admissionregistration.k8s.io multiproject-lease-names":
			variables, _, _ := unstructured.NestedSlice(obj.Object, "spec", "variables")
			for _, v := range variables {
				if v := v.(map[string]any); v["name"] == "manager" {
					v["expression"] = "'system:serviceaccount:" + ns + ":multiproject-controller-manager'"
				}
			}
			set(t, obj, variables, "spec", "variables")
		case "ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io multiproject-lease-names":
			// The Leases live in the release namespace (leaderElection.resourceNamespace is empty).
			set(t, obj, ns, "spec", "matchResources", "namespaceSelector", "matchLabels", "kubernetes.io/metadata.name")
		case "ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io multiproject-tenant-labels.tenant":
			set(t, obj, ns, "spec", "paramRef", "namespace")
			setSelectorKey(t, obj, "example.com/tenant")
		case "ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io multiproject-tenant-labels.app-owner":
			set(t, obj, ns, "spec", "paramRef", "namespace")
			setSelectorKey(t, obj, "example.com/app-owner")
		case "Deployment.apps " + ns + "/multiproject-controller-manager":
			set(t, obj, int64(3), "spec", "replicas")
			set(t, obj, map[string]any{
				"app.kubernetes.io/name": "multiproject-controller-manager", "app.kubernetes.io/part-of": "tenancy", "team": "platform",
			}, "spec", "template", "metadata", "labels")
			set(t, obj, map[string]any{"example.com/scrape": "true"}, "spec", "template", "metadata", "annotations")
			set(t, obj, []any{map[string]any{"name": "registry-creds"}}, "spec", "template", "spec", "imagePullSecrets")
			set(t, obj, values["nodeSelector"], "spec", "template", "spec", "nodeSelector")
			set(t, obj, values["tolerations"], "spec", "template", "spec", "tolerations")
			containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
			c := containers[0].(map[string]any)
			c["image"] = "registry.example.com/mpcm:v1.2.3"
			c["imagePullPolicy"] = "IfNotPresent"
			c["args"] = []any{
				"--leader-elect=true",
				"--leader-elect-resource-namespace=" + ns,
				"--controllers=*,-namespace-project",
				"--secure-port=10270",
				"--v=4",
				"--leader-elect-identity=$(POD_NAME)_$(POD_UID)",
				"--provider-config-name-label-key=example.com/tenant",
				"--app-owner-label-key=example.com/app-owner",
				"--neg-annotation-key=example.com/neg",
				"--neg-status-annotation-key=example.com/neg-status",
				"--neg-readiness-gate=example.com/neg-ready",
				"--neg-previous-annotation-key=cloud.google.com/neg",
				"--cluster-name=prod-eu",
				"--gce-qps=50",
			}
			// Helm merges maps of user values into the defaults: the default memory limit stays unless set to null
			// (docs/install.md says so).
			c["resources"] = map[string]any{
				"requests": map[string]any{"cpu": "250m", "memory": "256Mi"},
				"limits":   map[string]any{"memory": "1Gi"},
			}
			set(t, obj, containers, "spec", "template", "spec", "containers")
		}
	}
	diffObjects(t, "the kustomize base, edited by hand", want, "helm template (non-default values)", got)
}

// TestChartOptionalValues covers the values that switch something off or replace a default wholesale.
func TestChartOptionalValues(t *testing.T) {
	t.Run("credentials namespace not created", func(t *testing.T) {
		objects := mustHelmTemplate(t, defaultNamespace, map[string]any{
			"credentialsNamespace": map[string]any{"name": "existing-keys", "create": false},
		})
		for _, obj := range objects {
			if obj.GetKind() == "Namespace" {
				t.Errorf("the chart renders Namespace %s although credentialsNamespace.create is false", obj.GetName())
			}
		}
		if rb := find(t, objects, "RoleBinding", "multiproject-controller-manager:gcp-credentials-reader"); rb.GetNamespace() != "existing-keys" {
			t.Errorf("the credentials reader is bound in %q, want existing-keys", rb.GetNamespace())
		}
	})
	t.Run("image digest", func(t *testing.T) {
		const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
		objects := mustHelmTemplate(t, defaultNamespace, map[string]any{
			"image": map[string]any{"repository": "registry.example.com/mpcm", "tag": "v1.2.3", "digest": digest},
		})
		image, _, _ := unstructured.NestedSlice(find(t, objects, "Deployment", chartName).Object, "spec", "template", "spec", "containers")
		if got := image[0].(map[string]any)["image"]; got != "registry.example.com/mpcm@"+digest {
			t.Errorf("image = %v, want the digest to pin it", got)
		}
	})
	t.Run("gateway class", func(t *testing.T) {
		for _, obj := range mustHelmTemplate(t, defaultNamespace, nil) {
			if obj.GetKind() == "GatewayClass" {
				t.Errorf("the chart renders GatewayClass %s by default", obj.GetName())
			}
		}
		objects := mustHelmTemplate(t, defaultNamespace, map[string]any{"gatewayClass": map[string]any{"create": true, "name": "tunnels"}})
		class := find(t, objects, "GatewayClass", "tunnels")
		if got, _, _ := unstructured.NestedString(class.Object, "spec", "controllerName"); got != "multiproject.io/ingress-tunnel" {
			t.Errorf("GatewayClass controllerName = %q, want the ingress-tunnel controller's", got)
		}
	})
	t.Run("affinity replaces the default", func(t *testing.T) {
		affinity := map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
			"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{
				map[string]any{"key": "pool", "operator": "In", "values": []any{"system"}},
			}}},
		}}}
		objects := mustHelmTemplate(t, defaultNamespace, map[string]any{"affinity": affinity})
		got, _, _ := unstructured.NestedMap(find(t, objects, "Deployment", chartName).Object, "spec", "template", "spec", "affinity")
		if d := diffValue(affinity, got); d != "" {
			t.Errorf("affinity (-values +rendered):\n%s", d)
		}
	})
}

// TestChartRendersNewManifestFiles: the chart renders manifests/rbac and manifests/admission through links, so an
// object added there is in the chart without a change to it, placed like the others. Shown on a copy of the chart
// whose rbac directory has one more file.
func TestChartRendersNewManifestFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), chartName)
	copyResolvingLinks(t, filepath.Join(root(t), "charts", chartName), dir)
	extra := `# A controller's new permissions.
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: multiproject-controller-manager:extra
  namespace: kube-system
  labels:
    app.kubernetes.io/name: multiproject-controller-manager
rules:
  - apiGroups: [""]
    resources: ["configmaps"]
    verbs: ["get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: multiproject-controller-manager:extra
  namespace: kube-system
  labels:
    app.kubernetes.io/name: multiproject-controller-manager
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: multiproject-controller-manager:extra
subjects:
  - kind: ServiceAccount
    name: multiproject-controller-manager
    namespace: kube-system
`
	if err := os.WriteFile(filepath.Join(dir, "files", "rbac", "zz-extra.yaml"), []byte(extra), 0o644); err != nil {
		t.Fatal(err)
	}
	objects, err := helmTemplateChart(t, loadChartDir(t, dir), "multiproject-system", map[string]any{"commonLabels": map[string]any{"team": "platform"}})
	if err != nil {
		t.Fatal(err)
	}
	role := find(t, objects, "Role", "multiproject-controller-manager:extra")
	binding := find(t, objects, "RoleBinding", "multiproject-controller-manager:extra")
	if role.GetNamespace() != "multiproject-system" || binding.GetNamespace() != "multiproject-system" {
		t.Errorf("the new Role and RoleBinding are in %q and %q, want the release namespace", role.GetNamespace(), binding.GetNamespace())
	}
	subjects, _, _ := unstructured.NestedSlice(binding.Object, "subjects")
	if d := diffValue([]any{map[string]any{"kind": "ServiceAccount", "name": chartName, "namespace": "multiproject-system"}}, subjects); d != "" {
		t.Errorf("subjects (-want +got):\n%s", d)
	}
	if role.GetLabels()["team"] != "platform" {
		t.Errorf("the new Role's labels %v lack commonLabels", role.GetLabels())
	}
}

// copyResolvingLinks copies a directory tree, with the content that symbolic links point at, as `helm package` does.
func copyResolvingLinks(t testing.TB, src, dst string) {
	t.Helper()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		from, to := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		info, err := os.Stat(from) // follows links
		if err != nil {
			t.Fatal(err)
		}
		if info.IsDir() {
			copyResolvingLinks(t, from, to)
			continue
		}
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestChartRefusesBadValues: values.schema.json catches typos and wrong types before anything reaches a cluster.
func TestChartRefusesBadValues(t *testing.T) {
	for name, values := range map[string]map[string]any{
		"misspelled key":           {"replica": 3},
		"replicas not a number":    {"replicas": "two"},
		"controller name":          {"controllers": []any{"*", "-Neg"}},
		"no controllers":           {"controllers": []any{}},
		"label key":                {"tenantLabelKey": "not a/valid/key"},
		"extra arg without flag":   {"extraArgs": []any{"neg"}},
		"credentials namespace":    {"credentialsNamespace": map[string]any{"name": "Keys"}},
		"unknown image field":      {"image": map[string]any{"repository": "x", "version": "1"}},
		"pull policy":              {"image": map[string]any{"repository": "x", "pullPolicy": "Sometimes"}},
		"secure port out of range": {"securePort": 70000},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := helmTemplate(t, defaultNamespace, values); err == nil {
				t.Errorf("values %v rendered; want the schema to refuse them", values)
			}
		})
	}
}

// TestChartLints runs `helm lint --strict`'s checks: Chart.yaml, values, templates and the rendered YAML.
func TestChartLints(t *testing.T) {
	linter := lint.All(root(t)+"/charts/"+chartName, nil, defaultNamespace, false)
	for _, msg := range linter.Messages {
		// INFO messages are suggestions (an icon); --strict fails on warnings and errors.
		if msg.Severity >= support.WarningSev {
			t.Errorf("helm lint: %v", msg)
		}
	}
}

// TestInstallDocOverlayBuilds builds the overlay example of docs/install.md against manifests/ and checks that each of
// its changes lands where the doc says, so the example neither breaks nor silently patches the wrong argument.
func TestInstallDocOverlayBuilds(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(root(t), "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- overlay-example[^>]*-->\n```yaml\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/install.md has no overlay-example block")
	}
	const base = "../multiproject-controller-manager/manifests"
	overlay := string(m[1])
	if !strings.Contains(overlay, base) {
		t.Fatalf("the overlay example does not use %s as its base", base)
	}
	dir := t.TempDir()
	// kustomize takes a base only by a relative path.
	rel, err := filepath.Rel(dir, filepath.Join(root(t), "manifests"))
	if err != nil {
		t.Fatal(err)
	}
	overlay = strings.Replace(overlay, base, rel, 1)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o644); err != nil {
		t.Fatal(err)
	}
	objects := kustomizeBuild(t, dir)
	if want := len(kustomizeBuild(t, "manifests")); len(objects) != want {
		t.Errorf("the overlay has %d objects, the base %d", len(objects), want)
	}
	deployment := find(t, objects, "Deployment", chartName)
	if replicas, _, _ := unstructured.NestedFieldNoCopy(deployment.Object, "spec", "replicas"); diffValue(3, replicas) != "" {
		t.Errorf("replicas = %v, want 3", replicas)
	}
	containers, _, _ := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "containers")
	c := containers[0].(map[string]any)
	if c["image"] != "registry.example.com/multiproject-controller-manager:v0.1.0" {
		t.Errorf("image = %v", c["image"])
	}
	if d := diffValue([]any{"--leader-elect=true", "--controllers=*,-namespace-project", "--secure-port=10270", "--v=2", "--leader-elect-identity=$(POD_NAME)_$(POD_UID)", "--cluster-name=prod-eu"}, c["args"]); d != "" {
		t.Errorf("args (-want +overlay):\n%s", d)
	}
	if groups, _, _ := unstructured.NestedString(find(t, objects, "ConfigMap", "multiproject-tenant-label-admins").Object, "data", "groups"); groups != "system:masters, tenant-admins" {
		t.Errorf("tenant admins' groups = %q", groups)
	}
}

// set is unstructured.SetNestedField that fails the test instead of returning an error.
func set(t testing.TB, obj *unstructured.Unstructured, value any, fields ...string) {
	t.Helper()
	if err := unstructured.SetNestedField(obj.Object, deepCopyValue(value), fields...); err != nil {
		t.Fatalf("%s: setting %v: %v", key(obj), fields, err)
	}
}

// setSelectorKey changes the key of a binding's only objectSelector expression.
func setSelectorKey(t testing.TB, obj *unstructured.Unstructured, labelKey string) {
	t.Helper()
	exprs, _, _ := unstructured.NestedSlice(obj.Object, "spec", "matchResources", "objectSelector", "matchExpressions")
	if len(exprs) != 1 {
		t.Fatalf("%s: want one objectSelector expression, have %v", key(obj), exprs)
	}
	exprs[0].(map[string]any)["key"] = labelKey
	set(t, obj, exprs, "spec", "matchResources", "objectSelector", "matchExpressions")
}
