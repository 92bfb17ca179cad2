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
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	compute "google.golang.org/api/compute/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

// TestNEGsJoinTheBackendServicesTheTenantAllows walks a Service's NEGs into a backend service and out again
// (docs/neg.md, "Backend services"), on the built binary and the fake GCE:
//
//  1. the tenant allows backend service web (spec.gcp.backendServices); a Service asks, in autoneg's format, for
//     web and for secret, which the tenant does not list: its NEGs join web in every zone, with the balancing
//     settings asked, and the status records it; secret gets nothing, and the Service a Warning
//     NEGBackendServiceNotAllowed;
//  2. someone else (Terraform) changes web between the manager's read and its write: the change stays;
//  3. the Service goes: its NEGs leave web first, then are deleted (no delete refused as in use), and web keeps
//     its own settings.
func TestNEGsJoinTheBackendServicesTheTenantAllows(t *testing.T) {
	resetLease(t)
	gce := startFakeGCE(t)
	w := newWorkload(t, gce)
	for _, name := range []string{"web", "secret"} {
		if _, err := gce.InsertBackendService(w.project, "", &compute.BackendService{Name: name, Description: "made by terraform",
			HealthChecks: []string{"global/healthChecks/hc"}}); err != nil {
			t.Fatal(err)
		}
	}
	// Allowed before the manager starts (a change of spec.gcp restarts the tenant's controllers).
	if _, err := w.mp.MultiprojectV1alpha1().ProviderConfigs().Patch(w.ctx, w.tenant, types.MergePatchType,
		[]byte(`{"spec":{"gcp":{"backendServices":[{"name":"web"}]}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// 2: the first read of web is followed by someone else's write, before the manager's.
	gce.ChangeAfterNextGet(w.project, "", "web", func(bs *compute.BackendService) {
		bs.Description = "changed by terraform"
		bs.TimeoutSec = 42
	})
	m := startManager(t, "a", managerKubeconfig(t), gce.Endpoint(), lifecycleElection)
	waitLeader(t, m.identity(), 2*time.Minute)

	w.setService("svc-0", w.endpoints(0, 0, 6))
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, negapi.AutonegAnnotationKey,
		`{"backend_services":{"80":[{"name":"web","max_rate_per_endpoint":100,"capacity_scaler":0.5},{"name":"secret","max_rate_per_endpoint":1}]}}`)
	if _, err := w.kube.CoreV1().Services(w.appNS).Patch(w.ctx, "svc-0", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	w.waitConverged("1: the Service's NEGs in every zone")
	var negs []string
	for _, res := range w.translation(translationName("svc-0")).Spec.Resources {
		negs = append(negs, res.Zone+"/"+res.Name)
	}
	slices.Sort(negs)
	waitUntil(t, "1: web to hold the Service's NEG of every zone, RATE 100 at 0.5", func() (bool, string) {
		bs, _ := gce.BackendService(w.project, "", "web")
		got := backendNEGs(bs)
		for _, b := range bs.Backends {
			if b.BalancingMode != "RATE" || b.MaxRatePerEndpoint != 100 || b.CapacityScaler != 0.5 {
				return false, fmt.Sprintf("backend %s: %s %v at %v", b.Group, b.BalancingMode, b.MaxRatePerEndpoint, b.CapacityScaler)
			}
		}
		return slices.Equal(got, negs), fmt.Sprintf("web's backends %v, want %v", got, negs)
	})
	waitUntil(t, "1: the status to record web for every NEG", func() (bool, string) {
		tr := w.translation(translationName("svc-0"))
		for _, r := range tr.Status.Resources {
			if len(r.BackendServices) != 1 || !strings.HasSuffix(r.BackendServices[0], "/global/backendServices/web") {
				return false, fmt.Sprintf("%s: %v", r.Zone, r.BackendServices)
			}
		}
		return len(tr.Status.Resources) == len(negs), fmt.Sprintf("%d entries", len(tr.Status.Resources))
	})
	waitUntil(t, "1: a Warning that secret is not allowed", func() (bool, string) {
		events, err := w.kube.CoreV1().Events(w.appNS).List(w.ctx, metav1.ListOptions{FieldSelector: fields.Set{
			"involvedObject.kind": "Service", "involvedObject.name": "svc-0", "reason": negapi.ReasonBackendServiceNotAllowed}.String()})
		if err != nil || len(events.Items) == 0 {
			return false, fmt.Sprintf("no %s Event (%v)", negapi.ReasonBackendServiceNotAllowed, err)
		}
		return strings.Contains(events.Items[0].Message, "secret"), events.Items[0].Message
	})
	if bs, _ := gce.BackendService(w.project, "", "secret"); len(bs.Backends) != 0 {
		t.Errorf("1: secret, not allowed, has backends %v", backendNEGs(bs))
	}
	if n := gce.Errors(w.project)[fakegce.MethodBackendServicePatch]; n < 1 {
		t.Errorf("2: no patch of web failed: the change between read and write did not happen as the test meant")
	}
	if bs, _ := gce.BackendService(w.project, "", "web"); bs.Description != "changed by terraform" || bs.TimeoutSec != 42 {
		t.Errorf("2: web's description %q and timeout %d: someone else's change was lost", bs.Description, bs.TimeoutSec)
	}

	// 3: the Service goes.
	w.deleteService("svc-0")
	w.waitConverged("3: the Service deleted, its NEGs too")
	if bs, _ := gce.BackendService(w.project, "", "web"); len(bs.Backends) != 0 || bs.Description != "changed by terraform" {
		t.Errorf("3: web has backends %v (description %q), want none and its own settings", backendNEGs(bs), bs.Description)
	}
	if n := gce.Errors(w.project)[fakegce.MethodDelete]; n != 0 {
		t.Errorf("3: %d NEG deletes failed: the NEGs must leave web before they are deleted", n)
	}
}

// backendNEGs are the backend service's backends as sorted "zone/name" of their NEGs.
func backendNEGs(bs *compute.BackendService) []string {
	var out []string
	for _, b := range bs.Backends {
		parts := strings.Split(b.Group, "/")
		out = append(out, parts[len(parts)-3]+"/"+parts[len(parts)-1])
	}
	slices.Sort(out)
	return out
}
