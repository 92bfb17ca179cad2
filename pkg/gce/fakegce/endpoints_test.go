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
	"net/http"
	"strings"
	"testing"

	compute "google.golang.org/api/compute/v1"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
)

func TestAttachAndDetachKeepSizeAndEndpoints(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	e.insert(t, project, zone, "neg-1")
	eps := endpoints(3)
	eps[2].Port = 0 // takes the NEG's defaultPort, 8080
	eps[1].Instance = "https://www.googleapis.com/compute/v1/projects/" + project + "/zones/" + zone + "/instances/node-2"
	eps[1].Annotations = map[string]string{"pod": "ns/p-2"}
	op, err := e.attach(project, zone, "neg-1", eps)
	noErr(t, err)
	if op.Status != "DONE" || op.OperationType != "attachNetworkEndpoints" || op.Error != nil {
		t.Errorf("attach operation = %+v", op)
	}
	neg, err := e.svc.NetworkEndpointGroups.Get(project, zone, "neg-1").Do()
	noErr(t, err)
	if neg.Size != 3 {
		t.Errorf("size after attach = %d, want 3", neg.Size)
	}

	items, pages := e.listAllEndpoints(t, project, zone, "neg-1", 0)
	if pages != 1 || len(items) != 3 {
		t.Fatalf("listed %d endpoints in %d pages, want 3 in 1", len(items), pages)
	}
	// Stored as GCE returns them: instance URL reduced to its name, port defaulted, annotations kept.
	want := []string{"10.0.0.1:8080@node-1", "10.0.0.2:8080@node-2{pod=ns/p-2}", "10.0.0.3:8080@node-1"}
	for i, it := range items {
		ep := it.NetworkEndpoint
		got := fmt.Sprintf("%s:%d@%s", ep.IpAddress, ep.Port, ep.Instance)
		if v, ok := ep.Annotations["pod"]; ok {
			got += "{pod=" + v + "}"
		}
		if got != want[i] {
			t.Errorf("endpoint %d = %s, want %s", i, got, want[i])
		}
		if len(it.Healths) != 0 {
			t.Errorf("healthStatus SKIP returned healths %v", it.Healths)
		}
	}

	// Detach names the endpoint as attached; the instance may be given as a name or URL, the port defaulted.
	detach := []*compute.NetworkEndpoint{{IpAddress: "10.0.0.2", Port: 8080, Instance: "node-2"}}
	_, err = e.detach(project, zone, "neg-1", detach)
	noErr(t, err)
	got, ok := e.srv.Endpoints(project, zone, "neg-1")
	if !ok || len(got) != 2 || got[0].IpAddress != "10.0.0.1" || got[1].IpAddress != "10.0.0.3" {
		t.Errorf("endpoints after detach = %v", got)
	}
	neg, _ = e.srv.NEG(project, zone, "neg-1")
	if neg.Size != 2 {
		t.Errorf("size after detach = %d, want 2", neg.Size)
	}
}

func TestAttachAndDetachAcceptAtMost500Endpoints(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	e.insert(t, project, zone, "neg-1")
	_, err := e.attach(project, zone, "neg-1", endpoints(501))
	gerr := wantAPIError(t, err, http.StatusBadRequest, fakegce.ReasonInvalid)
	if !strings.Contains(gerr.Message, "500") {
		t.Errorf("message %q does not state the limit", gerr.Message)
	}
	if got, _ := e.srv.Endpoints(project, zone, "neg-1"); len(got) != 0 {
		t.Errorf("refused attach attached %d endpoints", len(got))
	}
	_, err = e.attach(project, zone, "neg-1", endpoints(500))
	noErr(t, err)
	_, err = e.attach(project, zone, "neg-1", endpointsFrom(500, 1))
	noErr(t, err)
	_, err = e.detach(project, zone, "neg-1", endpoints(501))
	wantAPIError(t, err, http.StatusBadRequest, fakegce.ReasonInvalid)
	_, err = e.detach(project, zone, "neg-1", endpoints(500))
	noErr(t, err)
	if got, _ := e.srv.Endpoints(project, zone, "neg-1"); len(got) != 1 {
		t.Errorf("%d endpoints left, want 1", len(got))
	}
	_, err = e.attach(project, zone, "neg-1", nil)
	wantAPIError(t, err, http.StatusBadRequest, fakegce.ReasonRequired)
}

func TestAttachOfAttachedEndpointIsInvalidAndChangesNothing(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	e.insert(t, project, zone, "neg-1")
	_, err := e.attach(project, zone, "neg-1", endpoints(2))
	noErr(t, err)

	// A batch with one endpoint already attached fails as a whole: the new endpoints in it are not attached.
	_, err = e.attach(project, zone, "neg-1", endpointsFrom(1, 3)) // 10.0.0.2 is attached
	gerr := wantAPIError(t, err, http.StatusBadRequest, fakegce.ReasonInvalid)
	if !strings.Contains(gerr.Message, "10.0.0.2") || !strings.Contains(gerr.Message, "already attached") {
		t.Errorf("message %q", gerr.Message)
	}
	// The same IP and port on another instance is the same endpoint address.
	moved := []*compute.NetworkEndpoint{{IpAddress: "10.0.0.1", Port: 8080, Instance: "node-9"}}
	_, err = e.attach(project, zone, "neg-1", moved)
	wantAPIError(t, err, http.StatusBadRequest, fakegce.ReasonInvalid)
	// Duplicates inside one request.
	dup := append(endpointsFrom(10, 1), endpointsFrom(10, 1)...)
	_, err = e.attach(project, zone, "neg-1", dup)
	wantAPIError(t, err, http.StatusBadRequest, fakegce.ReasonInvalid)

	if got, _ := e.srv.Endpoints(project, zone, "neg-1"); len(got) != 2 {
		t.Errorf("%d endpoints after refused attaches, want 2", len(got))
	}
}

func TestDetachOfEndpointNotAttachedIsInvalid(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	e.insert(t, project, zone, "neg-1")
	_, err := e.attach(project, zone, "neg-1", endpoints(2))
	noErr(t, err)
	for name, eps := range map[string][]*compute.NetworkEndpoint{
		"never attached":   endpointsFrom(5, 1),
		"other instance":   {{IpAddress: "10.0.0.1", Port: 8080, Instance: "node-9"}},
		"other port":       {{IpAddress: "10.0.0.1", Port: 9090, Instance: "node-1"}},
		"one of two known": endpointsFrom(1, 2),
	} {
		_, err := e.detach(project, zone, "neg-1", eps)
		gerr := wantAPIError(t, err, http.StatusBadRequest, fakegce.ReasonInvalid)
		if !strings.Contains(gerr.Message, "not attached") {
			t.Errorf("%s: message %q", name, gerr.Message)
		}
	}
	if got, _ := e.srv.Endpoints(project, zone, "neg-1"); len(got) != 2 {
		t.Errorf("%d endpoints after refused detaches, want 2", len(got))
	}
}

func TestEndpointValidationForGCEVMIPPort(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	_, err := e.svc.NetworkEndpointGroups.Insert(project, zone, &compute.NetworkEndpointGroup{Name: "no-default-port"}).Do()
	noErr(t, err)
	e.insert(t, project, zone, "neg-1")
	otherZoneURL := "https://www.googleapis.com/compute/v1/projects/" + project + "/zones/us-central1-b/instances/node-1"
	for _, tc := range []struct {
		desc   string
		neg    string
		ep     compute.NetworkEndpoint
		reason string
	}{
		{"no instance", "neg-1", compute.NetworkEndpoint{IpAddress: "10.0.0.1", Port: 80}, fakegce.ReasonRequired},
		{"instance in another zone", "neg-1", compute.NetworkEndpoint{IpAddress: "10.0.0.1", Port: 80, Instance: otherZoneURL}, fakegce.ReasonInvalid},
		{"invalid instance name", "neg-1", compute.NetworkEndpoint{IpAddress: "10.0.0.1", Port: 80, Instance: "Node_1"}, fakegce.ReasonInvalid},
		{"not an IP", "neg-1", compute.NetworkEndpoint{IpAddress: "10.0.0.300", Port: 80, Instance: "node-1"}, fakegce.ReasonInvalid},
		{"IPv6 in ipAddress", "neg-1", compute.NetworkEndpoint{IpAddress: "fd00::1", Port: 80, Instance: "node-1"}, fakegce.ReasonInvalid},
		{"port out of range", "neg-1", compute.NetworkEndpoint{IpAddress: "10.0.0.1", Port: 65536, Instance: "node-1"}, fakegce.ReasonInvalid},
		{"no port and no defaultPort", "no-default-port", compute.NetworkEndpoint{IpAddress: "10.0.0.1", Instance: "node-1"}, fakegce.ReasonInvalid},
		{"fqdn on a VM NEG", "neg-1", compute.NetworkEndpoint{IpAddress: "10.0.0.1", Port: 80, Instance: "node-1", Fqdn: "a.example"}, fakegce.ReasonInvalid},
		// GCE would use the VM's primary IP, which the fake knows only for registered instances.
		{"no IP, unregistered instance", "neg-1", compute.NetworkEndpoint{Port: 80, Instance: "node-1"}, fakegce.ReasonNotImplemented},
	} {
		_, err := e.attach(project, zone, tc.neg, []*compute.NetworkEndpoint{&tc.ep})
		gerr := wantAPIError(t, err, http.StatusBadRequest, tc.reason)
		if !strings.Contains(gerr.Message, "networkEndpoints[0]") {
			t.Errorf("%s: message %q does not name the endpoint", tc.desc, gerr.Message)
		}
	}
	if got, _ := e.srv.Endpoints(project, zone, "neg-1"); len(got) != 0 {
		t.Errorf("invalid endpoints were attached: %v", got)
	}
}

func TestRegisteredInstancesMustBeInTheNEGsZone(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	noErr(t, e.srv.AddInstance(project, zone, "node-a", "192.168.0.10"))
	noErr(t, e.srv.AddInstance(project, "us-central1-b", "node-b", ""))
	e.insert(t, project, zone, "neg-1")

	_, err := e.attach(project, zone, "neg-1", []*compute.NetworkEndpoint{{IpAddress: "10.0.0.1", Instance: "node-b"}})
	wantAPIError(t, err, http.StatusBadRequest, fakegce.ReasonInvalid)
	_, err = e.attach(project, zone, "neg-1", []*compute.NetworkEndpoint{{IpAddress: "10.0.0.1", Instance: "node-unknown"}})
	wantAPIError(t, err, http.StatusBadRequest, fakegce.ReasonInvalid)

	// Without ipAddress the endpoint gets the instance's primary IP.
	_, err = e.attach(project, zone, "neg-1", []*compute.NetworkEndpoint{{Instance: "node-a"}, {IpAddress: "10.0.0.1", Instance: "node-a"}})
	noErr(t, err)
	got, _ := e.srv.Endpoints(project, zone, "neg-1")
	if len(got) != 2 || got[0].IpAddress != "10.0.0.1" || got[1].IpAddress != "192.168.0.10" || got[1].Port != 8080 {
		t.Errorf("endpoints = %+v %+v", got[0], got[len(got)-1])
	}
	// Projects without registered instances do not check instances.
	e.insert(t, "tenant-b", zone, "neg-1")
	_, err = e.attach("tenant-b", zone, "neg-1", []*compute.NetworkEndpoint{{IpAddress: "10.0.0.1", Instance: "node-b"}})
	noErr(t, err)
}

func TestGCEVMIPNEGsTakeWholeVMs(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	_, err := e.svc.NetworkEndpointGroups.Insert(project, zone, &compute.NetworkEndpointGroup{Name: "l4", NetworkEndpointType: "GCE_VM_IP"}).Do()
	noErr(t, err)
	_, err = e.attach(project, zone, "l4", []*compute.NetworkEndpoint{{IpAddress: "10.0.0.1", Instance: "node-1", Port: 80}})
	wantAPIError(t, err, http.StatusBadRequest, fakegce.ReasonInvalid)
	_, err = e.attach(project, zone, "l4", []*compute.NetworkEndpoint{{IpAddress: "10.0.0.1", Instance: "node-1"}, {Instance: "node-2"}})
	noErr(t, err)
	// One endpoint per VM.
	_, err = e.attach(project, zone, "l4", []*compute.NetworkEndpoint{{IpAddress: "10.0.0.5", Instance: "node-1"}})
	wantAPIError(t, err, http.StatusBadRequest, fakegce.ReasonInvalid)
	neg, _ := e.srv.NEG(project, zone, "l4")
	if neg.Size != 2 {
		t.Errorf("size = %d, want 2", neg.Size)
	}
}

func TestListNetworkEndpointsPagesThrough1200Endpoints(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	e.insert(t, project, zone, "neg-1")
	const n = 1200
	for first := 0; first < n; first += fakegce.MaxEndpointsPerCall {
		_, err := e.attach(project, zone, "neg-1", endpointsFrom(first, min(fakegce.MaxEndpointsPerCall, n-first)))
		noErr(t, err)
	}
	if c := e.srv.Calls(project)[fakegce.MethodAttachEndpoints]; c != 3 {
		t.Errorf("attach calls = %d, want ceil(1200/500) = 3", c)
	}

	items, pages := e.listAllEndpoints(t, project, zone, "neg-1", 0)
	if pages != 3 {
		t.Errorf("default page size took %d pages, want 3 (500, 500, 200)", pages)
	}
	seen := map[string]bool{}
	for _, it := range items {
		seen[it.NetworkEndpoint.IpAddress] = true
	}
	if len(items) != n || len(seen) != n {
		t.Errorf("listed %d endpoints (%d distinct), want %d", len(items), len(seen), n)
	}
	for _, ep := range endpointsFrom(0, n) {
		if !seen[ep.IpAddress] {
			t.Fatalf("endpoint %s missing from the listing", ep.IpAddress)
		}
	}

	items, pages = e.listAllEndpoints(t, project, zone, "neg-1", 7)
	if pages != (n+6)/7 || len(items) != n {
		t.Errorf("maxResults 7: %d endpoints in %d pages, want %d in %d", len(items), pages, n, (n+6)/7)
	}
	if c := e.srv.Calls(project)[fakegce.MethodListEndpoints]; c != 3+(n+6)/7 {
		t.Errorf("listNetworkEndpoints calls = %d, want %d", c, 3+(n+6)/7)
	}
}

func TestListNetworkEndpointsPageTokenSurvivesChanges(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	e.insert(t, project, zone, "neg-1")
	_, err := e.attach(project, zone, "neg-1", endpoints(4))
	noErr(t, err)
	req := &compute.NetworkEndpointGroupsListEndpointsRequest{}
	first, err := e.svc.NetworkEndpointGroups.ListNetworkEndpoints(project, zone, "neg-1", req).MaxResults(2).Do()
	noErr(t, err)
	// Detach an endpoint that was on the first page: the next page still starts after the last one returned.
	_, err = e.detach(project, zone, "neg-1", endpoints(1))
	noErr(t, err)
	second, err := e.svc.NetworkEndpointGroups.ListNetworkEndpoints(project, zone, "neg-1", req).MaxResults(2).PageToken(first.NextPageToken).Do()
	noErr(t, err)
	if len(second.Items) != 2 || second.Items[0].NetworkEndpoint.IpAddress != "10.0.0.3" || second.NextPageToken != "" {
		t.Errorf("second page = %d items starting %v, next %q", len(second.Items), second.Items[0].NetworkEndpoint, second.NextPageToken)
	}
}

func TestListNetworkEndpointsHealthStatus(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	e.insert(t, project, zone, "neg-1")
	_, err := e.attach(project, zone, "neg-1", endpoints(2))
	noErr(t, err)
	list := func(health string) (*compute.NetworkEndpointGroupsListNetworkEndpoints, error) {
		return e.svc.NetworkEndpointGroups.ListNetworkEndpoints(project, zone, "neg-1",
			&compute.NetworkEndpointGroupsListEndpointsRequest{HealthStatus: health}).Do()
	}
	res, err := list("SHOW")
	noErr(t, err)
	if len(res.Items[0].Healths) != 0 {
		t.Errorf("healths of a NEG no backend service uses: %v", res.Items[0].Healths)
	}
	noErr(t, e.srv.SetInUseBy(project, zone, "neg-1", "bs-1"))
	res, err = list("SHOW")
	noErr(t, err)
	for _, it := range res.Items {
		if len(it.Healths) != 1 || it.Healths[0].HealthState != "HEALTHY" ||
			!strings.HasSuffix(it.Healths[0].BackendService.BackendService, "/global/backendServices/bs-1") {
			t.Errorf("healths = %+v", it.Healths)
		}
	}
	_, err = list("MAYBE")
	wantAPIError(t, err, http.StatusBadRequest, fakegce.ReasonInvalid)
	_, err = e.svc.NetworkEndpointGroups.ListNetworkEndpoints(project, zone, "neg-1",
		&compute.NetworkEndpointGroupsListEndpointsRequest{}).Filter("ipAddress = 10.0.0.1").Do()
	wantAPIError(t, err, http.StatusBadRequest, fakegce.ReasonNotImplemented)
}

func TestEndpointsPerNEGAreLimited(t *testing.T) {
	e := newEnv(t, fakegce.Options{MaxEndpointsPerNEG: 3})
	e.insert(t, project, zone, "neg-1")
	_, err := e.attach(project, zone, "neg-1", endpoints(2))
	noErr(t, err)
	_, err = e.attach(project, zone, "neg-1", endpointsFrom(2, 2))
	wantAPIError(t, err, http.StatusForbidden, fakegce.ReasonQuotaExceeded)
	_, err = e.attach(project, zone, "neg-1", endpointsFrom(2, 1))
	noErr(t, err)
}

func TestRequestIDMakesARetriedCallApplyOnce(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	e.insert(t, project, zone, "neg-1")
	const id = "4f1c1f0e-6a2b-4c3d-9e8f-0a1b2c3d4e5f"
	attach := func() (*compute.Operation, error) {
		return e.svc.NetworkEndpointGroups.AttachNetworkEndpoints(project, zone, "neg-1",
			&compute.NetworkEndpointGroupsAttachEndpointsRequest{NetworkEndpoints: endpoints(2)}).RequestId(id).Do()
	}
	op1, err := attach()
	noErr(t, err)
	// Without the request id this retry would fail: the endpoints are attached.
	op2, err := attach()
	noErr(t, err)
	if op1.Name != op2.Name || op2.ClientOperationId != id {
		t.Errorf("retry got operation %s (client id %q), want %s", op2.Name, op2.ClientOperationId, op1.Name)
	}
	if got, _ := e.srv.Endpoints(project, zone, "neg-1"); len(got) != 2 {
		t.Errorf("%d endpoints, want 2", len(got))
	}
	_, err = e.svc.NetworkEndpointGroups.Delete(project, zone, "neg-1").RequestId("not-a-uuid").Do()
	wantAPIError(t, err, http.StatusBadRequest, fakegce.ReasonInvalid)
}

func TestNonGCPPrivateIPPortEndpointsHaveNoInstance(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	_, err := e.svc.NetworkEndpointGroups.Insert(project, zone, &compute.NetworkEndpointGroup{
		Name: "on-prem", NetworkEndpointType: "NON_GCP_PRIVATE_IP_PORT", DefaultPort: 443,
	}).Do()
	noErr(t, err)
	_, err = e.attach(project, zone, "on-prem", []*compute.NetworkEndpoint{{IpAddress: "10.0.0.1", Instance: "node-1"}})
	wantAPIError(t, err, http.StatusBadRequest, fakegce.ReasonInvalid)
	_, err = e.attach(project, zone, "on-prem", []*compute.NetworkEndpoint{{Port: 443}})
	wantAPIError(t, err, http.StatusBadRequest, fakegce.ReasonRequired)
	_, err = e.attach(project, zone, "on-prem", []*compute.NetworkEndpoint{{IpAddress: "10.0.0.1"}})
	noErr(t, err)
	got, _ := e.srv.Endpoints(project, zone, "on-prem")
	if len(got) != 1 || got[0].Port != 443 || got[0].Instance != "" {
		t.Errorf("endpoints = %+v", got)
	}
}
