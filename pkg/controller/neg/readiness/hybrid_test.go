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

package readiness

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
)

// TestAPodInAHybridNEGPassesTheGate: a hybrid tenant's Translation (neg-h1-…, NON_GCP_PRIVATE_IP_PORT endpoints
// without an instance) lets its gated Pod pass the readiness gate as a GCE_VM_IP_PORT one does, matched by its name
// and IPv4 address and healthy in GCE.
func TestAPodInAHybridNEGPassesTheGate(t *testing.T) {
	tr := forPods(translation("neg-h1-web-80", "neg-web", true, "10.0.0.1"), "web-1")
	params := tr.Spec.Resources[0].NetworkEndpointGroup
	params.NetworkEndpointType = mpv1alpha1.NetworkEndpointTypeNonGCPPrivateIPPort
	params.Endpoints[0].Instance = ""
	h := newHarness(t, 10*time.Minute, func(h *harness) { h.health.set("neg-web", "10.0.0.1", "HEALTHY") },
		negService("web"), tr, gatedPod("web-1", "10.0.0.1", map[string]string{"app": "web"}))
	h.waitCondition("web-1", corev1.ConditionTrue, ReasonReady)
}
