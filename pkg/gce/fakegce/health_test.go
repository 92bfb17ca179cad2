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
	"fmt"
	"slices"
	"strings"
	"testing"

	compute "google.golang.org/api/compute/v1"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
)

// listHealths lists the NEG's endpoints with healthStatus SHOW through the real client and returns, per endpoint
// "ip:port", its health entries as "<backend service name>=<state>".
func (e *env) listHealths(t *testing.T, neg string) map[string][]string {
	t.Helper()
	res, err := e.svc.NetworkEndpointGroups.ListNetworkEndpoints(project, zone, neg,
		&compute.NetworkEndpointGroupsListEndpointsRequest{HealthStatus: "SHOW"}).Do()
	noErr(t, err)
	out := map[string][]string{}
	for _, it := range res.Items {
		var hs []string
		for _, h := range it.Healths {
			if h.BackendService == nil {
				t.Fatalf("health entry without a backend service: %+v", h)
			}
			bs := h.BackendService.BackendService
			if !strings.HasPrefix(bs, "https://www.googleapis.com/compute/v1/projects/"+project+"/global/backendServices/") {
				t.Errorf("backend service reference %q is not the backend service's URL", bs)
			}
			hs = append(hs, bs[strings.LastIndex(bs, "/")+1:]+"="+h.HealthState)
		}
		out[fmt.Sprintf("%s:%d", it.NetworkEndpoint.IpAddress, it.NetworkEndpoint.Port)] = hs
	}
	return out
}

func TestEndpointHealthIsReportedPerBackendService(t *testing.T) {
	// endpoints(2) are 10.0.0.1:8080 and 10.0.0.2:8080.
	cases := []struct {
		name  string
		setup func(t *testing.T, e *env)
		want  map[string][]string
	}{{
		name: "no backend service: no health entries, whatever the state",
		setup: func(t *testing.T, e *env) {
			noErr(t, e.srv.SetEndpointHealth(project, zone, "neg-1", "10.0.0.1", 8080, fakegce.HealthUnhealthy))
		},
		want: map[string][]string{"10.0.0.1:8080": nil, "10.0.0.2:8080": nil},
	}, {
		name: "in use, no state set: HEALTHY for each backend service",
		setup: func(t *testing.T, e *env) {
			noErr(t, e.srv.SetInUseBy(project, zone, "neg-1", "bs-a", "bs-b"))
		},
		want: map[string][]string{
			"10.0.0.1:8080": {"bs-a=HEALTHY", "bs-b=HEALTHY"},
			"10.0.0.2:8080": {"bs-a=HEALTHY", "bs-b=HEALTHY"},
		},
	}, {
		name: "one endpoint UNHEALTHY, the other untouched",
		setup: func(t *testing.T, e *env) {
			noErr(t, e.srv.SetInUseBy(project, zone, "neg-1", "bs-a", "bs-b"))
			noErr(t, e.srv.SetEndpointHealth(project, zone, "neg-1", "10.0.0.1", 8080, fakegce.HealthUnhealthy))
		},
		want: map[string][]string{
			"10.0.0.1:8080": {"bs-a=UNHEALTHY", "bs-b=UNHEALTHY"},
			"10.0.0.2:8080": {"bs-a=HEALTHY", "bs-b=HEALTHY"},
		},
	}, {
		name: "DRAINING and UNKNOWN, set before the NEG is in use",
		setup: func(t *testing.T, e *env) {
			noErr(t, e.srv.SetEndpointHealth(project, zone, "neg-1", "10.0.0.1", 8080, fakegce.HealthDraining))
			noErr(t, e.srv.SetEndpointHealth(project, zone, "neg-1", "10.0.0.2", 8080, fakegce.HealthUnknown))
			noErr(t, e.srv.SetInUseBy(project, zone, "neg-1", "bs-a"))
		},
		want: map[string][]string{"10.0.0.1:8080": {"bs-a=DRAINING"}, "10.0.0.2:8080": {"bs-a=UNKNOWN"}},
	}, {
		name: "back to HEALTHY",
		setup: func(t *testing.T, e *env) {
			noErr(t, e.srv.SetInUseBy(project, zone, "neg-1", "bs-a"))
			noErr(t, e.srv.SetEndpointHealth(project, zone, "neg-1", "10.0.0.1", 8080, fakegce.HealthUnhealthy))
			noErr(t, e.srv.SetEndpointHealth(project, zone, "neg-1", "10.0.0.1", 8080, fakegce.HealthHealthy))
		},
		want: map[string][]string{"10.0.0.1:8080": {"bs-a=HEALTHY"}, "10.0.0.2:8080": {"bs-a=HEALTHY"}},
	}, {
		name: "detach forgets the state: attached again, it is HEALTHY",
		setup: func(t *testing.T, e *env) {
			noErr(t, e.srv.SetInUseBy(project, zone, "neg-1", "bs-a"))
			noErr(t, e.srv.SetEndpointHealth(project, zone, "neg-1", "10.0.0.1", 8080, fakegce.HealthUnhealthy))
			_, err := e.detach(project, zone, "neg-1", endpoints(1))
			noErr(t, err)
			_, err = e.attach(project, zone, "neg-1", endpoints(1))
			noErr(t, err)
		},
		want: map[string][]string{"10.0.0.1:8080": {"bs-a=HEALTHY"}, "10.0.0.2:8080": {"bs-a=HEALTHY"}},
	}, {
		name: "the NEG's default applies to endpoints attached later; an endpoint's own state wins",
		setup: func(t *testing.T, e *env) {
			noErr(t, e.srv.SetInUseBy(project, zone, "neg-1", "bs-a"))
			noErr(t, e.srv.SetDefaultEndpointHealth(project, zone, "neg-1", fakegce.HealthUnhealthy))
			noErr(t, e.srv.SetEndpointHealth(project, zone, "neg-1", "10.0.0.2", 8080, fakegce.HealthHealthy))
			_, err := e.attach(project, zone, "neg-1", endpointsFrom(2, 1))
			noErr(t, err)
		},
		want: map[string][]string{
			"10.0.0.1:8080": {"bs-a=UNHEALTHY"},
			"10.0.0.2:8080": {"bs-a=HEALTHY"},
			"10.0.0.3:8080": {"bs-a=UNHEALTHY"},
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, fakegce.Options{})
			e.insert(t, project, zone, "neg-1")
			_, err := e.attach(project, zone, "neg-1", endpoints(2))
			noErr(t, err)
			tc.setup(t, e)
			got := e.listHealths(t, "neg-1")
			if len(got) != len(tc.want) {
				t.Errorf("listed %v, want %v", got, tc.want)
			}
			for ep, want := range tc.want {
				if g, ok := got[ep]; !ok || !slices.Equal(g, want) {
					t.Errorf("endpoint %s: healths %v, want %v", ep, g, want)
				}
			}
			// Without SHOW, no list reports health, whatever the states.
			for _, health := range []string{"SKIP", ""} {
				res, err := e.svc.NetworkEndpointGroups.ListNetworkEndpoints(project, zone, "neg-1",
					&compute.NetworkEndpointGroupsListEndpointsRequest{HealthStatus: health}).Do()
				noErr(t, err)
				for _, it := range res.Items {
					if len(it.Healths) != 0 {
						t.Errorf("healthStatus %q: %s reported healths %v", health, it.NetworkEndpoint.IpAddress, it.Healths)
					}
				}
			}
		})
	}
}

// A GCE_VM_IP endpoint is a whole VM and has no port: its health is set with port 0.
func TestEndpointHealthOfAGCEVMIPEndpoint(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	_, err := e.svc.NetworkEndpointGroups.Insert(project, zone, &compute.NetworkEndpointGroup{Name: "l4", NetworkEndpointType: "GCE_VM_IP"}).Do()
	noErr(t, err)
	_, err = e.attach(project, zone, "l4", []*compute.NetworkEndpoint{{IpAddress: "10.0.0.1", Instance: "node-1"}})
	noErr(t, err)
	noErr(t, e.srv.SetInUseBy(project, zone, "l4", "bs-a"))
	noErr(t, e.srv.SetEndpointHealth(project, zone, "l4", "10.0.0.1", 0, fakegce.HealthDraining))
	if got := e.listHealths(t, "l4"); !slices.Equal(got["10.0.0.1:0"], []string{"bs-a=DRAINING"}) {
		t.Errorf("healths %v, want 10.0.0.1 DRAINING", got)
	}
}

func TestDeletingTheNEGForgetsEndpointHealth(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	e.insert(t, project, zone, "neg-1")
	_, err := e.attach(project, zone, "neg-1", endpoints(2))
	noErr(t, err)
	noErr(t, e.srv.SetDefaultEndpointHealth(project, zone, "neg-1", fakegce.HealthUnknown))
	noErr(t, e.srv.SetEndpointHealth(project, zone, "neg-1", "10.0.0.1", 8080, fakegce.HealthUnhealthy))
	_, err = e.svc.NetworkEndpointGroups.Delete(project, zone, "neg-1").Do()
	noErr(t, err)

	e.insert(t, project, zone, "neg-1")
	_, err = e.attach(project, zone, "neg-1", endpoints(2))
	noErr(t, err)
	noErr(t, e.srv.SetInUseBy(project, zone, "neg-1", "bs-a"))
	got := e.listHealths(t, "neg-1")
	for _, ep := range []string{"10.0.0.1:8080", "10.0.0.2:8080"} {
		if !slices.Equal(got[ep], []string{"bs-a=HEALTHY"}) {
			t.Errorf("endpoint %s of the NEG created again: healths %v, want HEALTHY", ep, got[ep])
		}
	}
}

func TestSetEndpointHealthRefusesWhatItCannotSet(t *testing.T) {
	e := newEnv(t, fakegce.Options{OperationPolls: 1})
	op := e.insert(t, project, zone, "neg-1")
	_, err := e.svc.ZoneOperations.Wait(project, zone, op.Name).Do()
	noErr(t, err)
	// The attach's operation is still RUNNING: the endpoint is not in the NEG yet.
	pending, err := e.attach(project, zone, "neg-1", endpoints(1))
	noErr(t, err)

	cases := []struct {
		name        string
		neg, ip     string
		port        int64
		state       string
		wantInError string
	}{
		{name: "a state GCE does not report", neg: "neg-1", ip: "10.0.0.1", port: 8080, state: "SICK", wantInError: "SICK"},
		{name: "lower case", neg: "neg-1", ip: "10.0.0.1", port: 8080, state: "healthy", wantInError: "healthy"},
		{name: "no NEG", neg: "neg-2", ip: "10.0.0.1", port: 8080, state: fakegce.HealthUnhealthy, wantInError: "was not found"},
		{name: "not an IPv4 address", neg: "neg-1", ip: "fe80::1", port: 8080, state: fakegce.HealthUnhealthy, wantInError: "IPv4"},
		{name: "port out of range", neg: "neg-1", ip: "10.0.0.1", port: 65536, state: fakegce.HealthUnhealthy, wantInError: "65536"},
		{name: "another port of the IP", neg: "neg-1", ip: "10.0.0.1", port: 80, state: fakegce.HealthUnhealthy, wantInError: "no endpoint 10.0.0.1:80"},
		{name: "attach not completed", neg: "neg-1", ip: "10.0.0.1", port: 8080, state: fakegce.HealthUnhealthy, wantInError: "no endpoint 10.0.0.1:8080"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := e.srv.SetEndpointHealth(project, zone, tc.neg, tc.ip, tc.port, tc.state)
			if err == nil || !strings.Contains(err.Error(), tc.wantInError) {
				t.Errorf("SetEndpointHealth(%s, %s:%d, %s) = %v, want an error containing %q", tc.neg, tc.ip, tc.port, tc.state, err, tc.wantInError)
			}
		})
	}
	if err := e.srv.SetDefaultEndpointHealth(project, zone, "neg-1", "SICK"); err == nil {
		t.Errorf("SetDefaultEndpointHealth accepted the state SICK")
	}
	if err := e.srv.SetDefaultEndpointHealth(project, zone, "neg-2", fakegce.HealthHealthy); err == nil {
		t.Errorf("SetDefaultEndpointHealth accepted a NEG that does not exist")
	}

	// Once the attach's operation has completed, the same call succeeds.
	_, err = e.svc.ZoneOperations.Wait(project, zone, pending.Name).Do()
	noErr(t, err)
	noErr(t, e.srv.SetEndpointHealth(project, zone, "neg-1", "10.0.0.1", 8080, fakegce.HealthUnhealthy))
}
