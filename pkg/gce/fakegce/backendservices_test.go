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

package fakegce_test

import (
	"net/http"
	"testing"

	compute "google.golang.org/api/compute/v1"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
)

func negURL(z, name string) string {
	return fakegce.DefaultSelfLinkBase + "projects/" + project + "/zones/" + z + "/networkEndpointGroups/" + name
}

// TestBackendServiceFingerprintInUseAndHealth walks a global backend service through the real client: a NEG in a
// backend cannot be deleted, a write with a stale fingerprint is a 412, a patch keeps what it does not name and
// replaces the backends list, a capacityScaler left out becomes 1, and getHealth reports the NEG's endpoints
// UNHEALTHY until the test sets them HEALTHY.
func TestBackendServiceFingerprintInUseAndHealth(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	e.insert(t, project, zone, "neg-1")
	e.insert(t, project, zone, "neg-other")
	_, err := e.attach(project, zone, "neg-1", endpoints(2))
	noErr(t, err)

	op, err := e.svc.BackendServices.Insert(project, &compute.BackendService{
		Name:         "web",
		HealthChecks: []string{"global/healthChecks/hc"},
		Description:  "terraform",
		Backends: []*compute.Backend{{Group: negURL(zone, "neg-other"), BalancingMode: "RATE", MaxRatePerEndpoint: 10,
			CapacityScaler: 0.5}},
	}).Context(e.ctx).Do()
	noErr(t, err)
	if op.Status != "DONE" {
		t.Fatalf("insert operation %+v, want DONE", op)
	}
	if got, err := e.svc.GlobalOperations.Get(project, op.Name).Context(e.ctx).Do(); err != nil || got.Status != "DONE" {
		t.Fatalf("globalOperations.get = %+v, %v; want DONE", got, err)
	}

	bs, err := e.svc.BackendServices.Get(project, "web").Context(e.ctx).Do()
	noErr(t, err)
	if bs.Fingerprint == "" || bs.Protocol != "HTTP" || bs.SelfLink != fakegce.DefaultSelfLinkBase+"projects/"+project+"/global/backendServices/web" {
		t.Fatalf("stored backend service %+v: want a fingerprint, protocol HTTP and its selfLink", bs)
	}

	// Update with the fingerprint read: neg-1 joins with its scaler left out (the client omits 0).
	stale := bs.Fingerprint
	bs.Backends = append(bs.Backends, &compute.Backend{Group: negURL(zone, "neg-1"), BalancingMode: "RATE", MaxRatePerEndpoint: 5})
	_, err = e.svc.BackendServices.Update(project, "web", bs).Context(e.ctx).Do()
	noErr(t, err)
	got, _ := e.srv.BackendService(project, "", "web")
	if len(got.Backends) != 2 || got.Backends[1].CapacityScaler != 1 || got.Backends[0].CapacityScaler != 0.5 {
		t.Fatalf("backends after update = %+v, want neg-other at 0.5 and neg-1 at 1", got.Backends)
	}

	// The fingerprint read before the update is stale now.
	bs.Backends = bs.Backends[:1]
	bs.Fingerprint = stale
	_, err = e.svc.BackendServices.Update(project, "web", bs).Context(e.ctx).Do()
	wantAPIError(t, err, http.StatusPreconditionFailed, fakegce.ReasonConditionNotMet)
	_, err = e.svc.BackendServices.Patch(project, "web", bs).Context(e.ctx).Do()
	wantAPIError(t, err, http.StatusPreconditionFailed, fakegce.ReasonConditionNotMet)

	// A NEG in a backend cannot be deleted.
	_, err = e.svc.NetworkEndpointGroups.Delete(project, zone, "neg-1").Context(e.ctx).Do()
	wantAPIError(t, err, http.StatusBadRequest, fakegce.ReasonResourceInUse)

	// getHealth: UNHEALTHY until set.
	health, err := e.svc.BackendServices.GetHealth(project, "web", &compute.ResourceGroupReference{Group: negURL(zone, "neg-1")}).Context(e.ctx).Do()
	noErr(t, err)
	if len(health.HealthStatus) != 2 || health.HealthStatus[0].HealthState != "UNHEALTHY" {
		t.Fatalf("getHealth = %+v, want 2 UNHEALTHY endpoints", health.HealthStatus)
	}
	noErr(t, e.srv.SetEndpointHealth(project, zone, "neg-1", "10.0.0.1", 8080, fakegce.HealthHealthy))
	health, err = e.svc.BackendServices.GetHealth(project, "web", &compute.ResourceGroupReference{Group: negURL(zone, "neg-1")}).Context(e.ctx).Do()
	noErr(t, err)
	if health.HealthStatus[0].HealthState != "HEALTHY" || health.HealthStatus[1].HealthState != "UNHEALTHY" {
		t.Fatalf("getHealth = %+v, want 10.0.0.1 HEALTHY and 10.0.0.2 UNHEALTHY", health.HealthStatus)
	}
	// listNetworkEndpoints reports the same, per backend service.
	list, err := e.svc.NetworkEndpointGroups.ListNetworkEndpoints(project, zone, "neg-1",
		&compute.NetworkEndpointGroupsListEndpointsRequest{HealthStatus: "SHOW"}).Context(e.ctx).Do()
	noErr(t, err)
	if h := list.Items[1].Healths; len(h) != 1 || h[0].HealthState != "UNHEALTHY" {
		t.Fatalf("listNetworkEndpoints healths = %+v, want one UNHEALTHY", h)
	}

	// A patch with the current fingerprint replaces the backends and keeps the rest.
	cur, err := e.svc.BackendServices.Get(project, "web").Context(e.ctx).Do()
	noErr(t, err)
	_, err = e.svc.BackendServices.Patch(project, "web", &compute.BackendService{
		Fingerprint: cur.Fingerprint, Backends: cur.Backends[:1]}).Context(e.ctx).Do()
	noErr(t, err)
	got, _ = e.srv.BackendService(project, "", "web")
	if len(got.Backends) != 1 || got.Description != "terraform" || len(got.HealthChecks) != 1 {
		t.Fatalf("after patch %+v: want one backend, description and health check kept", got)
	}
	// Out of the backend, the NEG can go.
	_, err = e.svc.NetworkEndpointGroups.Delete(project, zone, "neg-1").Context(e.ctx).Do()
	noErr(t, err)
}

// TestBackendServiceChangedBetweenReadAndWrite: a change injected after a get makes the caller's write stale; a
// fresh read and write then keeps both changes.
func TestBackendServiceChangedBetweenReadAndWrite(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	e.insert(t, project, zone, "neg-1")
	_, err := e.srv.InsertBackendService(project, "", &compute.BackendService{Name: "web", HealthChecks: []string{"hc"}})
	noErr(t, err)
	e.srv.ChangeAfterNextGet(project, "", "web", func(bs *compute.BackendService) { bs.Description = "changed by terraform" })

	bs, err := e.svc.BackendServices.Get(project, "web").Context(e.ctx).Do()
	noErr(t, err)
	bs.Backends = []*compute.Backend{{Group: negURL(zone, "neg-1"), BalancingMode: "RATE", MaxRatePerEndpoint: 5}}
	_, err = e.svc.BackendServices.Update(project, "web", bs).Context(e.ctx).Do()
	wantAPIError(t, err, http.StatusPreconditionFailed, fakegce.ReasonConditionNotMet)

	bs, err = e.svc.BackendServices.Get(project, "web").Context(e.ctx).Do()
	noErr(t, err)
	bs.Backends = []*compute.Backend{{Group: negURL(zone, "neg-1"), BalancingMode: "RATE", MaxRatePerEndpoint: 5}}
	_, err = e.svc.BackendServices.Update(project, "web", bs).Context(e.ctx).Do()
	noErr(t, err)
	got, _ := e.srv.BackendService(project, "", "web")
	if got.Description != "changed by terraform" || len(got.Backends) != 1 {
		t.Fatalf("got %+v, want the other writer's description and our backend", got)
	}
}

// TestRegionBackendServiceValidation: regional services list per region, take NEGs of their region only, refuse
// CONNECTION on HTTP and a mode without its capacity, keep an explicit 0 scaler, and refuse a missing NEG.
func TestRegionBackendServiceValidation(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	e.insert(t, project, zone, "neg-1")
	e.insert(t, project, "europe-west1-b", "neg-eu")
	region := "us-central1"
	insert := func(bs *compute.BackendService) error {
		_, err := e.svc.RegionBackendServices.Insert(project, region, bs).Context(e.ctx).Do()
		return err
	}
	wantAPIError(t, insert(&compute.BackendService{Name: "a", Backends: []*compute.Backend{
		{Group: negURL(zone, "neg-1"), BalancingMode: "CONNECTION", MaxConnectionsPerEndpoint: 5}}}), http.StatusBadRequest, fakegce.ReasonInvalid)
	wantAPIError(t, insert(&compute.BackendService{Name: "a", Protocol: "TCP", Backends: []*compute.Backend{
		{Group: negURL(zone, "neg-1"), BalancingMode: "CONNECTION"}}}), http.StatusBadRequest, fakegce.ReasonInvalid)
	wantAPIError(t, insert(&compute.BackendService{Name: "a", Backends: []*compute.Backend{
		{Group: negURL("europe-west1-b", "neg-eu"), BalancingMode: "RATE", MaxRatePerEndpoint: 1}}}), http.StatusBadRequest, fakegce.ReasonInvalid)
	wantAPIError(t, insert(&compute.BackendService{Name: "a", Backends: []*compute.Backend{
		{Group: negURL(zone, "missing"), BalancingMode: "RATE", MaxRatePerEndpoint: 1}}}), http.StatusNotFound, fakegce.ReasonNotFound)
	noErr(t, insert(&compute.BackendService{Name: "tcp", Protocol: "TCP", Backends: []*compute.Backend{
		{Group: negURL(zone, "neg-1"), BalancingMode: "CONNECTION", MaxConnectionsPerEndpoint: 5, CapacityScaler: 0,
			ForceSendFields: []string{"CapacityScaler"}}}}))
	got, ok := e.srv.BackendService(project, region, "tcp")
	if !ok || got.Backends[0].CapacityScaler != 0 {
		t.Fatalf("regional service %+v: want the explicit 0 scaler kept", got)
	}
	list, err := e.svc.RegionBackendServices.List(project, region).Context(e.ctx).Do()
	noErr(t, err)
	globals, err := e.svc.BackendServices.List(project).Context(e.ctx).Do()
	noErr(t, err)
	if len(list.Items) != 1 || len(globals.Items) != 0 {
		t.Fatalf("regional list %d, global list %d: want 1 and 0", len(list.Items), len(globals.Items))
	}
	_, err = e.svc.NetworkEndpointGroups.Delete(project, zone, "neg-1").Context(e.ctx).Do()
	wantAPIError(t, err, http.StatusBadRequest, fakegce.ReasonResourceInUse)
	_, err = e.svc.RegionBackendServices.Delete(project, region, "tcp").Context(e.ctx).Do()
	noErr(t, err)
	_, err = e.svc.NetworkEndpointGroups.Delete(project, zone, "neg-1").Context(e.ctx).Do()
	noErr(t, err)
}
