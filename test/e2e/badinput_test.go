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
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	rancherv3 "github.com/multiproject/api/rancher/management/v3"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/ingresstunnel"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/namespaceproject"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/neg/translator"
	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

// TestBadInputIsReportedAndContained: one manager, one tenant with all three controllers, and in the same run, next
// to good objects, every kind of bad input a user can write. Each is refused by the API server where the API can
// say so (ProviderConfig and Ingress validation), or reported by a Warning Event on the object, and nothing else is
// held back: the good objects converge exactly (no NEG, Translation, PangolinResource or assignment missing or
// extra), the tenant stays Ready (none of these problems is one the controllers report in a condition), and a
// namespace labeled for a tenant that does not exist gets nothing written, no Event and no error loop in the log.
func TestBadInputIsReportedAndContained(t *testing.T) {
	resetLease(t)
	gce := startFakeGCE(t)
	w := newWorkload(t, gce)
	ctx := w.ctx

	// Two Projects of the tenant's cluster share a display name. Created before the manager starts, so its first
	// decision already sees both (a namespace decided between the two creations would rightly be assigned to the
	// first one).
	for _, name := range []string{"p-dup-1", "p-dup-2"} {
		p := &rancherv3.Project{ObjectMeta: metav1.ObjectMeta{Namespace: w.clusterID, Name: name},
			Spec: rancherv3.ProjectSpec{DisplayName: "delta", ClusterName: w.clusterID}}
		if _, err := w.mp.ManagementV3().Projects(w.clusterID).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	le := leaderElection{leaseDuration: 15 * time.Second, renewDeadline: 10 * time.Second, retryPeriod: time.Second}
	m := startManager(t, "a", managerKubeconfig(t), gce.Endpoint(), le)
	waitLeader(t, m.identity(), 2*time.Minute)

	// --- ProviderConfigs the API server refuses (CRD schema and CEL rules, docs/api.md). -----------------------
	t.Run("invalid ProviderConfigs are refused", func(t *testing.T) { invalidProviderConfigs(t, w) })

	// --- Good objects. ---------------------------------------------------------------------------------------
	for i := range 3 {
		w.setService(fmt.Sprintf("good-%d", i), w.endpoints(i, 0, 2))
	}
	w.addNamespace("alpha")
	w.addNamespace("beta")
	w.setIngress("good", hosts(0, "a", "b")...)

	// --- Malformed cloud.google.com/neg annotations: one Warning each, nothing written. -------------------------
	badNEG := map[string]string{
		"neg-not-json":   `{"exposed_ports":{"80":`,
		"neg-port-zero":  `{"exposed_ports":{"0":{}}}`,
		"neg-port-words": `{"exposed_ports":{"http":{}}}`,
		"neg-bad-name":   `{"exposed_ports":{"80":{"name":"Not_A_GCE_Name"}}}`,
		"neg-wrong-type": `{"exposed_ports":["80"]}`,
	}
	for name, annotation := range badNEG {
		createBadNEGService(t, w, name, annotation)
	}

	// --- Hosts. ------------------------------------------------------------------------------------------------
	// What Ingress validation already refuses never reaches the controller: the API server rejects the Ingress.
	t.Run("Ingress hosts the API server refuses", func(t *testing.T) {
		for _, tc := range []struct{ name, host string }{
			{"IPv4", "192.0.2.10"},
			{"IPv6", "2001:db8::1"},
			{"non-ASCII", "bücher.example.com"},
			{"IDN in Unicode", "例え.jp"},
			{"uppercase", "API.example.com"},
			{"over 253 characters", strings.Repeat("a.", 126) + "com"},
			{"wildcard not leftmost", "api.*.example.com"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				ing := pangolinIngress(w.appNS, "refused-"+utilrand.String(5), tc.host, "ok.refused.example.com")
				_, err := w.kube.NetworkingV1().Ingresses(w.appNS).Create(ctx, ing, metav1.CreateOptions{})
				if !apierrors.IsInvalid(err) {
					_ = w.kube.NetworkingV1().Ingresses(w.appNS).Delete(ctx, ing.Name, metav1.DeleteOptions{})
					t.Fatalf("Ingress with host %q: got %v, want Invalid", tc.host, err)
				}
			})
		}
	})
	// What the API accepts and Pangolin cannot serve: one InvalidHost per host, the good hosts of the same Ingress
	// still get their resources.
	badHosts := []string{
		"*.wild.example.com",                     // wildcard
		"example.org",                            // apex domain: no subdomain
		strings.Repeat("x", 64) + ".example.com", // a label over 63 characters (Ingress validation does not check labels)
		"co.uk",                                  // a public suffix
		"localhost",                              // a single label
		"www.example.123",                        // all-numeric top-level label
	}
	// A non-ASCII name written in its ASCII (punycode) form is an ordinary DNS name and is served.
	goodMixed := []string{"ok1.mixed.example.com", "ok2.mixed.example.com", "xn--bcher-kva.example.com"}
	w.setIngress("mixed", append(append([]string{}, badHosts...), goodMixed...)...)
	w.mu.Lock()
	w.ingresses["mixed"] = sets.New(goodMixed...)
	w.mu.Unlock()

	// --- An Ingress with 1,000 hosts: every one gets its resource. --------------------------------------------
	var many []string
	for i := range 1000 {
		many = append(many, fmt.Sprintf("h%04d.many.example.com", i))
	}
	w.setIngress("many", many...)

	// --- Duplicate Project display names: AmbiguousProject, not assigned. -------------------------------------
	ambiguous := controlPlane.CreateNamespace(t)
	owner := "delta"
	w.patchNamespaceLabels(ambiguous, map[string]*string{labelKey: &w.tenant, appOwnerKey: &owner})

	// --- A namespace (with a neg Service and a Pangolin Ingress) labeled for a ProviderConfig that does not exist.
	ghost := "ghost-" + utilrand.String(6)
	ghostNS := controlPlane.CreateNamespace(t)
	alpha := "alpha"
	w.patchNamespaceLabels(ghostNS, map[string]*string{labelKey: &ghost, appOwnerKey: &alpha})
	createGhostObjects(t, w, ghostNS)

	// --- Everything good converges exactly, and the tenant is Ready. -------------------------------------------
	start := time.Now()
	o := w.waitConverged("good objects next to bad input (1,000-host Ingress included)")
	t.Logf("the 1,000-host Ingress and the rest converged %s after the last object was created", time.Since(start).Round(100*time.Millisecond))
	for _, typ := range []string{mpv1alpha1.ProviderConfigConditionReady, mpv1alpha1.ProviderConfigConditionNEGReady,
		mpv1alpha1.ProviderConfigConditionNamespaceProjectReady, mpv1alpha1.ProviderConfigConditionIngressTunnelReady} {
		if c := condition(o.pc, typ); c == nil || c.Status != metav1.ConditionTrue {
			t.Errorf("condition %s is %s, want True: bad input is reported on the objects, not on the tenant", typ, conditionString(c))
		}
	}

	// --- Each bad input was reported where the user looks. ------------------------------------------------------
	t.Run("malformed neg annotations", func(t *testing.T) {
		for name := range badNEG {
			waitEvent(ctx, t, "Service", w.appNS, name, translator.ReasonInvalidAnnotation)
			svc, err := w.kube.CoreV1().Services(w.appNS).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if v, ok := svc.Annotations[negapi.StatusAnnotationKey]; ok {
				t.Errorf("Service %s with a malformed annotation got a neg-status %q", name, v)
			}
		}
		// Translations of these Services would be extra in waitConverged's exact comparison; check by owner too.
		trs, err := w.mp.MultiprojectV1alpha1().Translations(w.appNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range trs.Items {
			if ref := metav1.GetControllerOf(&tr); ref != nil && badNEG[ref.Name] != "" {
				t.Errorf("Translation %s made for Service %s with a malformed annotation", tr.Name, ref.Name)
			}
		}
	})
	t.Run("invalid hosts", func(t *testing.T) {
		for _, h := range badHosts {
			waitEvent(ctx, t, "Ingress", w.appNS, "mixed", ingresstunnel.ReasonInvalidHost, fmt.Sprintf("%q", h))
		}
		for _, h := range goodMixed {
			if _, ok := o.resources[ingresstunnel.ResourceName(w.appNS, "mixed", h)]; !ok {
				t.Errorf("good host %s of the mixed Ingress has no PangolinResource", h)
			}
		}
	})
	t.Run("ambiguous project", func(t *testing.T) {
		waitEvent(ctx, t, "Namespace", "", ambiguous, namespaceproject.ReasonAmbiguousProject, "p-dup-1", "p-dup-2")
		ns, err := w.kube.CoreV1().Namespaces().Get(ctx, ambiguous, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := ns.Annotations[rancherv3.ProjectIDAnnotationKey]; ok {
			t.Errorf("namespace %s with an ambiguous app owner was assigned to %s", ambiguous, v)
		}
	})

	// --- After the rest converged and was reported, the ghost tenant's objects still have nothing, and the
	// reports did not turn into loops: counts taken now do not grow over a few seconds of polling. ---------------
	t.Run("namespace of a ProviderConfig that does not exist", func(t *testing.T) {
		checkGhostUntouched(t, w, m, ghost, ghostNS)
	})
	t.Run("no report loops", func(t *testing.T) {
		count := func() map[string]int {
			c := map[string]int{}
			for name := range badNEG {
				c["Service "+name] = eventCount(events(ctx, t, "Service", w.appNS, name, translator.ReasonInvalidAnnotation))
			}
			c["Namespace "+ambiguous] = eventCount(events(ctx, t, "Namespace", "", ambiguous, namespaceproject.ReasonAmbiguousProject))
			return c
		}
		before := count()
		for what, n := range before {
			// The translator and namespace-project report a problem once, not on every sync (docs/neg.md,
			// docs/namespace-project.md).
			if n != 1 {
				t.Errorf("%s: %d Warning Events, want exactly 1", what, n)
			}
		}
		// Over 10 s, as long as the initial backoff of a failing sync takes to go past a minute of retries.
		_ = wait.PollUntilContextTimeout(ctx, time.Second, 10*time.Second, true, func(context.Context) (bool, error) {
			if now := count(); !maps.Equal(now, before) {
				t.Errorf("Warning Events still being recorded: %v, was %v", now, before)
				return true, nil
			}
			return false, nil
		})
	})
}

// invalidProviderConfigs creates ProviderConfigs with one invalid or missing field each, as raw JSON so that a
// missing field is really missing, and expects Invalid naming the field. The base object is accepted (server-side
// dry run), so each refusal is the one field's doing.
func invalidProviderConfigs(t *testing.T, w *workload) {
	base := func(name string) map[string]any {
		return map[string]any{
			"apiVersion": "multiproject.io/v1alpha1", "kind": "ProviderConfig",
			"metadata": map[string]any{"name": name},
			"spec": map[string]any{
				"gcp": map[string]any{"projectID": "valid-project-1", "network": "default",
					"zones":                []any{"europe-west1-b", "northamerica-northeast2-c"},
					"credentialsSecretRef": map[string]any{"namespace": "multiproject-gcp-credentials", "name": "key", "key": "key.json"}},
				"rancher":  map[string]any{"clusterID": "c-abcde"},
				"pangolin": map[string]any{"tunnelNamespace": "pangolin-system", "defaultTunnel": "main", "tunnelsByClassSuffix": map[string]any{"eu": "eu-tunnel"}, "allowedHostnames": []any{"*.team-a.example.com", "shop.example.com"}},
			},
		}
	}
	section := func(o map[string]any, s string) map[string]any { return o["spec"].(map[string]any)[s].(map[string]any) }
	create := func(o map[string]any, dryRun bool) error {
		body, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		req := w.mp.MultiprojectV1alpha1().RESTClient().Post().Resource("providerconfigs").Body(body)
		if dryRun {
			req = req.Param("dryRun", metav1.DryRunAll)
		}
		return req.Do(w.ctx).Error()
	}
	if err := create(base("valid-"+utilrand.String(5)), true); err != nil {
		t.Fatalf("the valid base ProviderConfig is refused: %v", err)
	}

	// What the error says besides the field, by case: the CEL rule of an allowed hostname names the entry.
	messages := map[string]string{
		"allowedHostnames wildcard inside a name": "allowed hostname web.*.example.com is neither",
		"allowedHostnames uppercase":              "allowed hostname Shop.example.com is neither",
		"allowedHostnames a single label":         "allowed hostname *.com is neither",
		"allowedHostnames duplicate":              "Duplicate value",
		"zones duplicate":                         "Duplicate value",
	}
	for _, tc := range []struct {
		name   string
		field  string // the error names it
		mutate func(o map[string]any)
	}{
		{"projectID too short", "spec.gcp.projectID", func(o map[string]any) { section(o, "gcp")["projectID"] = "abc" }},
		{"projectID uppercase", "spec.gcp.projectID", func(o map[string]any) { section(o, "gcp")["projectID"] = "My-Project-1" }},
		{"projectID domain-scoped", "spec.gcp.projectID", func(o map[string]any) { section(o, "gcp")["projectID"] = "example.com:my-project" }},
		{"projectID ends with a hyphen", "spec.gcp.projectID", func(o map[string]any) { section(o, "gcp")["projectID"] = "my-project-" }},
		{"projectID missing", "spec.gcp.projectID", func(o map[string]any) { delete(section(o, "gcp"), "projectID") }},
		{"network missing", "spec.gcp.network", func(o map[string]any) { delete(section(o, "gcp"), "network") }},
		{"projectNumber negative", "spec.gcp.projectNumber", func(o map[string]any) { section(o, "gcp")["projectNumber"] = -1 }},
		{"credentialsSecretRef without key", "spec.gcp.credentialsSecretRef.key", func(o map[string]any) {
			delete(section(o, "gcp")["credentialsSecretRef"].(map[string]any), "key")
		}},
		{"clusterID not a DNS label", "spec.rancher.clusterID", func(o map[string]any) { section(o, "rancher")["clusterID"] = "C_Bad" }},
		{"clusterID with a dot", "spec.rancher.clusterID", func(o map[string]any) { section(o, "rancher")["clusterID"] = "c.abcde" }},
		{"clusterID over 63 characters", "spec.rancher.clusterID", func(o map[string]any) { section(o, "rancher")["clusterID"] = strings.Repeat("c", 64) }},
		{"clusterID missing", "spec.rancher.clusterID", func(o map[string]any) { delete(section(o, "rancher"), "clusterID") }},
		{"tunnelNamespace missing", "spec.pangolin.tunnelNamespace", func(o map[string]any) { delete(section(o, "pangolin"), "tunnelNamespace") }},
		{"tunnelNamespace not a DNS label", "spec.pangolin.tunnelNamespace", func(o map[string]any) { section(o, "pangolin")["tunnelNamespace"] = "Pangolin_System" }},
		{"defaultTunnel not a DNS subdomain", "spec.pangolin.defaultTunnel", func(o map[string]any) { section(o, "pangolin")["defaultTunnel"] = "Main Tunnel" }},
		{"tunnelsByClassSuffix bad key", "spec.pangolin.tunnelsByClassSuffix", func(o map[string]any) {
			section(o, "pangolin")["tunnelsByClassSuffix"] = map[string]any{"EU_West": "eu-tunnel"}
		}},
		{"tunnelsByClassSuffix key over 244 characters", "spec.pangolin.tunnelsByClassSuffix", func(o map[string]any) {
			section(o, "pangolin")["tunnelsByClassSuffix"] = map[string]any{strings.Repeat("s", 245): "eu-tunnel"}
		}},
		{"tunnelsByClassSuffix bad value", "spec.pangolin.tunnelsByClassSuffix", func(o map[string]any) {
			section(o, "pangolin")["tunnelsByClassSuffix"] = map[string]any{"eu": "EU_Tunnel"}
		}},
		{"name over 63 characters", "metadata.name", func(o map[string]any) {
			o["metadata"].(map[string]any)["name"] = "bad-" + strings.Repeat("n", 60)
		}},
		{"zones a region", "spec.gcp.zones[1]", func(o map[string]any) {
			section(o, "gcp")["zones"] = []any{"europe-west1-b", "europe-west1"}
		}},
		{"zones uppercase", "spec.gcp.zones[0]", func(o map[string]any) { section(o, "gcp")["zones"] = []any{"Europe-West1-B"} }},
		{"zones *", "spec.gcp.zones[0]", func(o map[string]any) { section(o, "gcp")["zones"] = []any{"*"} }},
		{"zones duplicate", "spec.gcp.zones[1]", func(o map[string]any) {
			section(o, "gcp")["zones"] = []any{"europe-west1-b", "europe-west1-b"}
		}},
		{"allowedHostnames wildcard inside a name", "spec.pangolin.allowedHostnames[1]", func(o map[string]any) {
			section(o, "pangolin")["allowedHostnames"] = []any{"shop.example.com", "web.*.example.com"}
		}},
		{"allowedHostnames uppercase", "spec.pangolin.allowedHostnames[0]", func(o map[string]any) {
			section(o, "pangolin")["allowedHostnames"] = []any{"Shop.example.com"}
		}},
		{"allowedHostnames a single label", "spec.pangolin.allowedHostnames[0]", func(o map[string]any) {
			section(o, "pangolin")["allowedHostnames"] = []any{"*.com"}
		}},
		{"allowedHostnames duplicate", "spec.pangolin.allowedHostnames[1]", func(o map[string]any) {
			section(o, "pangolin")["allowedHostnames"] = []any{"shop.example.com", "shop.example.com"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base("bad-" + utilrand.String(6))
			tc.mutate(o)
			name := o["metadata"].(map[string]any)["name"].(string)
			err := create(o, false)
			if err == nil {
				_ = w.mp.MultiprojectV1alpha1().ProviderConfigs().Delete(w.ctx, name, metav1.DeleteOptions{})
				_, _ = w.mp.MultiprojectV1alpha1().ProviderConfigs().Patch(w.ctx, name, "application/merge-patch+json",
					[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
				t.Fatalf("accepted, want Invalid on %s", tc.field)
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("got %v, want Invalid on %s", err, tc.field)
			}
			if !strings.Contains(err.Error(), tc.field) && !(tc.field == "metadata.name" && strings.Contains(err.Error(), "63 characters")) {
				t.Errorf("the error does not name %s: %v", tc.field, err)
			}
			if !strings.Contains(err.Error(), messages[tc.name]) {
				t.Errorf("the error does not say %q: %v", messages[tc.name], err)
			}
		})
	}
}

// createBadNEGService creates a selector-less Service with a malformed neg annotation and a ready endpoint, so that
// a translator that ignored the annotation's errors would have something to translate.
func createBadNEGService(t *testing.T, w *workload, name, annotation string) {
	t.Helper()
	_, err := w.kube.CoreV1().Services(w.appNS).Create(w.ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.appNS, Name: name, Annotations: map[string]string{negapi.AnnotationKey: annotation}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Service %s: %v", name, err)
	}
	createSlice(t, w, w.appNS, name, "10.250.0.1", w.nodeName(0, 0), zones[0])
}

func createSlice(t *testing.T, w *workload, namespace, service, ip, node, zone string) {
	t.Helper()
	_, err := w.kube.DiscoveryV1().EndpointSlices(namespace).Create(w.ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: namespace, Name: service + "-http", Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{ip}, NodeName: ptr.To(node), Zone: ptr.To(zone),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the EndpointSlice of %s/%s: %v", namespace, service, err)
	}
}

// pangolinIngress is an Ingress of class pangolin with one rule per host to Service backend port http.
func pangolinIngress(namespace, name string, hosts ...string) *networkingv1.Ingress {
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       networkingv1.IngressSpec{IngressClassName: ptr.To("pangolin")},
	}
	for _, h := range hosts {
		ing.Spec.Rules = append(ing.Spec.Rules, networkingv1.IngressRule{Host: h, IngressRuleValue: networkingv1.IngressRuleValue{
			HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix),
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
					Name: "backend", Port: networkingv1.ServiceBackendPort{Name: "http"}}},
			}}},
		}})
	}
	return ing
}

// createGhostObjects puts into a namespace of a tenant that does not exist what every controller would act on: a
// backend and a neg-annotated Service with a ready endpoint on one of the workload's Nodes, and a Pangolin Ingress.
func createGhostObjects(t *testing.T, w *workload, ns string) {
	t.Helper()
	for _, svc := range []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "backend"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Annotations: map[string]string{negapi.AnnotationKey: `{"exposed_ports":{"80":{}}}`}}},
	} {
		svc.Spec.Ports = []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}
		if _, err := w.kube.CoreV1().Services(ns).Create(w.ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	createSlice(t, w, ns, "web", "10.251.0.1", w.nodeName(0, 0), zones[0])
	if _, err := w.kube.NetworkingV1().Ingresses(ns).Create(w.ctx, pangolinIngress(ns, "web", "web.ghost.example.com"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// checkGhostUntouched: nothing written for the objects of a ProviderConfig that does not exist (no Translation, no
// PangolinResource, no neg-status, no Project assignment), no Event about them, and no error about them in the log.
func checkGhostUntouched(t *testing.T, w *workload, m *manager, ghost, ns string) {
	ctx := w.ctx
	trs, err := w.mp.MultiprojectV1alpha1().Translations(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := w.mp.TunnelV1alpha1().PangolinResources(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(trs.Items) != 0 || len(res.Items) != 0 {
		t.Errorf("namespace %s of the missing ProviderConfig %s got %d Translations and %d PangolinResources", ns, ghost, len(trs.Items), len(res.Items))
	}
	svc, err := w.kube.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := svc.Annotations[negapi.StatusAnnotationKey]; ok {
		t.Errorf("Service %s/web of the missing ProviderConfig got neg-status %q", ns, v)
	}
	nsObj, err := w.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := nsObj.Annotations[rancherv3.ProjectIDAnnotationKey]; ok {
		t.Errorf("namespace %s of the missing ProviderConfig was assigned to %s", ns, v)
	}
	evs, err := w.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, ev := range evs.Items {
		if strings.HasPrefix(ev.Source.Component, "multiproject") || strings.HasPrefix(ev.ReportingController, "multiproject") {
			msgs = append(msgs, eventMessages([]corev1.Event{ev})...)
		}
	}
	msgs = append(msgs, eventMessages(events(ctx, t, "Namespace", "", ns, ""))...)
	if len(msgs) > 0 {
		t.Errorf("Events about objects of the missing ProviderConfig %s: %q", ghost, msgs)
	}
	// The manager may say once that a tenant is unknown; it must not log errors about it, let alone repeatedly.
	lines := m.logLines(ghost)
	lines = append(lines, m.logLines(ns)...)
	if errs := errorLines(lines); len(errs) > 0 {
		t.Errorf("the manager logged %d errors about the missing ProviderConfig %s or its namespace:\n%s", len(errs), ghost,
			strings.Join(errs[:min(len(errs), 10)], "\n"))
	}
	if len(lines) > 5 {
		t.Errorf("the manager logged %d lines about the missing ProviderConfig %s or its namespace (a loop?):\n%s", len(lines), ghost,
			strings.Join(lines[:min(len(lines), 10)], "\n"))
	}
}

func eventMessages(evs []corev1.Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, fmt.Sprintf("%s %s/%s %s: %s", ev.Type, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Reason, ev.Message))
	}
	return out
}
