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

package translator

import (
	"slices"
	"strings"
	"testing"

	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

// myKeys are keys other than ingress-gce's, as beside GKE's own NEG controller.
var myKeys = negapi.Keys{Annotation: "multiproject.io/neg", StatusAnnotation: "multiproject.io/neg-status",
	ReadinessGate: "multiproject.io/neg-ready"}

// TestTheTranslatorReadsTheKeysItIsGiven: with other keys in the tenant options, a Service annotated with them gets
// its NEG and the status in the other status annotation; a Service annotated with ingress-gce's key only (another
// controller's) gets nothing, and the status that controller wrote stays; the endpoint of a Pod that waits only for
// the other gate is attached, one that waits for ingress-gce's gate is not.
func TestTheTranslatorReadsTheKeysItIsGiven(t *testing.T) {
	mine := service("mine", "", servicePort("http", 80, "web"))
	mine.Annotations = map[string]string{myKeys.Annotation: `{"exposed_ports":{"80":{}}}`}
	theirs := service("theirs", `{"exposed_ports":{"80":{}}}`, servicePort("http", 80, "web"))
	theirs.Annotations[negapi.StatusAnnotationKey] = `{"network_endpoint_groups":{"80":"k8s1-theirs"},"zones":["b"]}`
	h := newHarness(t, node("n1", zoneB), mine, theirs,
		slice("mine", "mine-1", "http", 8080,
			ep{ip: "10.0.0.1", node: "n1", pod: "my-gate", notReady: true},
			ep{ip: "10.0.0.2", node: "n1", pod: "their-gate", notReady: true}),
		slice("theirs", "theirs-1", "http", 8080, ep{ip: "10.0.0.3", node: "n1"}),
		gatedPod("my-gate", withoutGates, withGate(myKeys.ReadinessGate)),
		gatedPod("their-gate"))
	c := *h.tctx
	c.Options.NEGKeys = myKeys
	tr, err := New(&c, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.translator = tr
	h.sync("mine")
	h.sync("theirs")

	trs := h.translations()
	if len(trs) != 1 || trs["neg-v1-mine-80"] == nil {
		t.Fatalf("Translations %v, want only mine's", keys(trs))
	}
	var ips []string
	for _, r := range trs["neg-v1-mine-80"].Spec.Resources {
		for _, e := range r.NetworkEndpointGroup.Endpoints {
			ips = append(ips, e.IPAddress)
		}
	}
	if !slices.Equal(ips, []string{"10.0.0.1"}) {
		t.Errorf("endpoints %v, want only the Pod gated on %s", ips, myKeys.ReadinessGate)
	}
	got := h.service("mine").Annotations
	if _, ok := got[myKeys.StatusAnnotation]; !ok {
		t.Errorf("mine has no %s: %v", myKeys.StatusAnnotation, got)
	}
	if _, ok := got[negapi.StatusAnnotationKey]; ok {
		t.Errorf("mine got ingress-gce's %s: %v", negapi.StatusAnnotationKey, got)
	}
	if got := h.service("theirs").Annotations; got[negapi.StatusAnnotationKey] != theirs.Annotations[negapi.StatusAnnotationKey] ||
		got[myKeys.StatusAnnotation] != "" {
		t.Errorf("theirs' annotations changed: %v", got)
	}
}

// TestAServiceAnnotatedForBothControllersIsWarnedAndServed: with its own keys, the manager gives a Service that also
// carries ingress-gce's annotation one Warning, and serves it under its own key only (GKE's controller answers the
// other); a Service with only the manager's key gets no Warning, and with ingress-gce's keys nothing is both.
func TestAServiceAnnotatedForBothControllersIsWarnedAndServed(t *testing.T) {
	both := service("both", `{"exposed_ports":{"80":{}}}`, servicePort("http", 80, "web"))
	both.Annotations[myKeys.Annotation] = `{"exposed_ports":{"80":{}}}`
	mine := service("mine", "", servicePort("http", 80, "web"))
	mine.Annotations = map[string]string{myKeys.Annotation: `{"exposed_ports":{"80":{}}}`}
	h := newHarness(t, node("n1", zoneB), both, mine,
		slice("both", "both-1", "http", 8080, ep{ip: "10.0.0.1", node: "n1"}),
		slice("mine", "mine-1", "http", 8080, ep{ip: "10.0.0.2", node: "n1"}))
	c := *h.tctx
	c.Options.NEGKeys = myKeys
	tr, err := New(&c, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.translator = tr
	h.sync("both")
	h.sync("mine")
	h.sync("both") // a later sync does not repeat it

	if got := h.events.With("Warning " + negapi.ReasonAnnotatedForBoth); len(got) != 1 ||
		!strings.Contains(got[0], myKeys.StatusAnnotation) {
		t.Errorf("Warnings %s: %q, want one, naming %s", negapi.ReasonAnnotatedForBoth, got, myKeys.StatusAnnotation)
	}
	if trs := h.translations(); trs["neg-v1-both-80"] == nil || trs["neg-v1-mine-80"] == nil {
		t.Errorf("Translations %v, want both Services'", keys(trs))
	}
	got := h.service("both").Annotations
	if _, ok := got[myKeys.StatusAnnotation]; !ok {
		t.Errorf("both has no %s: %v", myKeys.StatusAnnotation, got)
	}
	if _, ok := got[negapi.StatusAnnotationKey]; ok {
		t.Errorf("both got ingress-gce's %s, which GKE's controller writes: %v", negapi.StatusAnnotationKey, got)
	}

	if _, both := negapi.DefaultKeys().AnnotatedForBoth(both); both {
		t.Error("with ingress-gce's keys, a Service is said to be annotated for two controllers")
	}
}
