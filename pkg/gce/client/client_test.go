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

package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	compute "google.golang.org/api/compute/v1"
	"google.golang.org/api/googleapi"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
)

func newClient(t *testing.T, opts fakegce.Options) (*Client, *fakegce.Server) {
	t.Helper()
	srv := fakegce.New(opts)
	srv.Start()
	t.Cleanup(srv.Close)
	c, err := New(context.Background(), Config{ProjectID: "p-tenant-a", Endpoint: srv.Endpoint(), QPS: 1000, Burst: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return c, srv
}

func TestCallsThroughTheFakeWaitForOperations(t *testing.T) {
	ctx := context.Background()
	c, srv := newClient(t, fakegce.Options{OperationPolls: 2})
	const zone = "europe-west1-b"
	if _, err := c.InsertNEG(ctx, zone, &compute.NetworkEndpointGroup{Name: "neg", NetworkEndpointType: "GCE_VM_IP_PORT", DefaultPort: 80}); err != nil {
		t.Fatal(err)
	}
	var eps []*compute.NetworkEndpoint
	for i := range 1200 {
		eps = append(eps, &compute.NetworkEndpoint{Instance: "vm", IpAddress: fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)})
	}
	if err := c.AttachEndpoints(ctx, zone, "neg", eps); err == nil {
		t.Error("a batch of 1,200 was sent")
	}
	for i := 0; i < len(eps); i += MaxEndpointsPerCall {
		if err := c.AttachEndpoints(ctx, zone, "neg", eps[i:min(i+MaxEndpointsPerCall, len(eps))]); err != nil {
			t.Fatal(err)
		}
	}
	listed, err := c.ListEndpoints(ctx, zone, "neg")
	if err != nil || len(listed) != 1200 {
		t.Fatalf("listed %d endpoints, %v; want 1200", len(listed), err)
	}
	if err := c.DeleteNEG(ctx, zone, "neg"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetNEG(ctx, zone, "neg"); !IsNotFound(err) {
		t.Errorf("get after delete: %v, want NotFound", err)
	}
	if srv.PendingOperations("p-tenant-a") != 0 {
		t.Error("an operation was left running")
	}
	if c.MutatingCalls() != 5 {
		t.Errorf("mutating calls = %d, want 5 (insert, 3 attaches, delete)", c.MutatingCalls())
	}
}

func TestFailedOperationIsClassifiedLikeASynchronousError(t *testing.T) {
	ctx := context.Background()
	c, srv := newClient(t, fakegce.Options{OperationPolls: 1})
	srv.InjectFault("p-tenant-a", fakegce.MethodInsert, fakegce.Fault{Code: 503, Async: true, Times: 1})
	_, err := c.InsertNEG(ctx, "europe-west1-b", &compute.NetworkEndpointGroup{Name: "neg"})
	if Classify(err) != ClassRetryable {
		t.Errorf("failed operation: %v classified %q, want Retryable", err, Classify(err))
	}
	srv.InjectFault("p-tenant-a", fakegce.MethodOperationWait, fakegce.Fault{Code: 429, Times: 1})
	_, err = c.InsertNEG(ctx, "europe-west1-b", &compute.NetworkEndpointGroup{Name: "neg"})
	var waitErr *OperationWaitError
	if !errors.As(err, &waitErr) || !IsRetryable(err) {
		t.Fatalf("failed wait: %v, want an OperationWaitError that is retryable", err)
	}
	if err := c.WaitOperation(ctx, "europe-west1-b", waitErr.Operation); err != nil {
		t.Errorf("waiting again: %v", err)
	}
}

func TestClassify(t *testing.T) {
	gerr := func(code int, reason string) error {
		return fmt.Errorf("wrapped: %w", &googleapi.Error{Code: code, Errors: []googleapi.ErrorItem{{Reason: reason}}})
	}
	for _, tc := range []struct {
		err  error
		want Class
	}{
		{nil, ClassNone},
		{errors.New("dial tcp: refused"), ClassOther},
		{gerr(http.StatusNotFound, "notFound"), ClassNotFound},
		{gerr(http.StatusConflict, "alreadyExists"), ClassAlreadyExists},
		{gerr(http.StatusForbidden, "rateLimitExceeded"), ClassRetryable},
		{gerr(http.StatusForbidden, "forbidden"), ClassInvalid},
		{gerr(http.StatusTooManyRequests, ""), ClassRetryable},
		{gerr(http.StatusServiceUnavailable, "backendError"), ClassRetryable},
		{gerr(http.StatusBadRequest, "resourceInUseByAnotherResource"), ClassInUse},
		{gerr(http.StatusBadRequest, "invalid"), ClassInvalid},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestNewChecksEndpointAndCredentials(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"no project", Config{Endpoint: "http://127.0.0.1:1/compute/v1/"}},
		{"endpoint without /compute/v1/", Config{ProjectID: "p-tenant-a", Endpoint: "http://127.0.0.1:1/"}},
		{"not a service-account key", Config{ProjectID: "p-tenant-a", Endpoint: "http://127.0.0.1:1/compute/v1/",
			CredentialsJSON: []byte(`{"type":"external_account","credential_source":{"file":"/etc/passwd"}}`)}},
		{"not JSON", Config{ProjectID: "p-tenant-a", Endpoint: "http://127.0.0.1:1/compute/v1/", CredentialsJSON: []byte("x")}},
	} {
		if _, err := New(ctx, tc.cfg); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
}

// TestUserAgentNamesTheReplica: Config.UserAgent reaches the server with every call, so the fake GCE (and GCE's
// audit logs) can tell which replica made it.
func TestUserAgentNamesTheReplica(t *testing.T) {
	var agents []string
	var mu sync.Mutex
	srv := fakegce.New(fakegce.Options{OnCall: func(r fakegce.CallRecord) {
		mu.Lock()
		defer mu.Unlock()
		agents = append(agents, r.UserAgent)
	}})
	srv.Start()
	t.Cleanup(srv.Close)
	c, err := New(context.Background(), Config{ProjectID: "p-tenant-a", Endpoint: srv.Endpoint(), UserAgent: "mpcm/v1 (shard-a-x1)"})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.GetNEG(context.Background(), "europe-west1-b", "missing")
	mu.Lock()
	defer mu.Unlock()
	if len(agents) != 1 || !strings.Contains(agents[0], "mpcm/v1 (shard-a-x1)") {
		t.Errorf("user agents %q, want one call carrying the replica's name", agents)
	}
}

// ListEndpointHealths shows what the backend services that use a NEG report of its endpoints, and nothing while no
// backend service uses it (where attached is all a readiness check can learn).
func TestListEndpointHealthsShowsTheBackendServicesView(t *testing.T) {
	ctx := context.Background()
	c, srv := newClient(t, fakegce.Options{})
	const zone = "europe-west1-b"
	if _, err := c.InsertNEG(ctx, zone, &compute.NetworkEndpointGroup{Name: "neg", NetworkEndpointType: "GCE_VM_IP_PORT", DefaultPort: 80}); err != nil {
		t.Fatal(err)
	}
	if err := c.AttachEndpoints(ctx, zone, "neg", []*compute.NetworkEndpoint{{Instance: "vm", IpAddress: "10.0.0.1", Port: 8080}}); err != nil {
		t.Fatal(err)
	}
	listed, err := c.ListEndpointHealths(ctx, zone, "neg")
	if err != nil || len(listed) != 1 || listed[0].NetworkEndpoint.IpAddress != "10.0.0.1" {
		t.Fatalf("listed %+v, %v; want the one endpoint", listed, err)
	}
	if h := listed[0].Healths; len(h) != 0 {
		t.Errorf("healths of a NEG in no backend service: %+v, want none", h)
	}
	if err := srv.SetInUseBy("p-tenant-a", zone, "neg", "web-backend"); err != nil {
		t.Fatal(err)
	}
	listed, err = c.ListEndpointHealths(ctx, zone, "neg")
	if err != nil || len(listed) != 1 {
		t.Fatalf("listed %+v, %v; want the one endpoint", listed, err)
	}
	if h := listed[0].Healths; len(h) != 1 || h[0].HealthState != "HEALTHY" || h[0].BackendService == nil {
		t.Errorf("healths in a backend service: %+v, want one HEALTHY naming its backend service", h)
	}
	plain, err := c.ListEndpoints(ctx, zone, "neg")
	if err != nil || len(plain) != 1 || plain[0].Port != 8080 {
		t.Errorf("ListEndpoints = %+v, %v; want the endpoint with its port", plain, err)
	}
}

// A readiness check learns from ListEndpointHealths which endpoints a backend service reports UNHEALTHY: each
// endpoint carries its own state, not the NEG's.
func TestListEndpointHealthsReportsEachEndpointsState(t *testing.T) {
	ctx := context.Background()
	c, srv := newClient(t, fakegce.Options{})
	const zone = "europe-west1-b"
	if _, err := c.InsertNEG(ctx, zone, &compute.NetworkEndpointGroup{Name: "neg", NetworkEndpointType: "GCE_VM_IP_PORT", DefaultPort: 80}); err != nil {
		t.Fatal(err)
	}
	if err := c.AttachEndpoints(ctx, zone, "neg", []*compute.NetworkEndpoint{
		{Instance: "vm", IpAddress: "10.0.0.1", Port: 8080},
		{Instance: "vm", IpAddress: "10.0.0.2", Port: 8080},
	}); err != nil {
		t.Fatal(err)
	}
	if err := srv.SetInUseBy("p-tenant-a", zone, "neg", "web-backend"); err != nil {
		t.Fatal(err)
	}
	if err := srv.SetEndpointHealth("p-tenant-a", zone, "neg", "10.0.0.1", 8080, fakegce.HealthUnhealthy); err != nil {
		t.Fatal(err)
	}
	listed, err := c.ListEndpointHealths(ctx, zone, "neg")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, ep := range listed {
		if len(ep.Healths) != 1 || ep.Healths[0].BackendService == nil ||
			!strings.HasSuffix(ep.Healths[0].BackendService.BackendService, "/global/backendServices/web-backend") {
			t.Fatalf("healths of %s: %+v, want one naming web-backend", ep.NetworkEndpoint.IpAddress, ep.Healths)
		}
		got[ep.NetworkEndpoint.IpAddress] = ep.Healths[0].HealthState
	}
	if want := map[string]string{"10.0.0.1": "UNHEALTHY", "10.0.0.2": "HEALTHY"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("health states %v, want %v", got, want)
	}
}
