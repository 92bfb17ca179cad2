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
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	compute "google.golang.org/api/compute/v1"
	"google.golang.org/api/googleapi"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
)

const (
	project = "tenant-a"
	zone    = "us-central1-a"
	marker  = "multiproject.io/owned-by=tenant-a"
)

// testStart is mid-minute on purpose: quota windows are synchronized to minute boundaries, not to the first call.
var testStart = time.Date(2026, 3, 4, 5, 6, 30, 0, time.UTC)

// env is a started fake with a real compute/v1 client pointed at it over HTTP, on a fake clock.
type env struct {
	srv   *fakegce.Server
	svc   *compute.Service
	clock *clocktesting.FakeClock
	ctx   context.Context
}

func newEnv(t *testing.T, opts fakegce.Options) *env {
	t.Helper()
	clk := clocktesting.NewFakeClock(testStart)
	opts.Clock = clk
	srv := fakegce.New(opts)
	srv.Start()
	t.Cleanup(srv.Close)
	ctx := context.Background()
	svc, err := srv.ComputeService(ctx)
	if err != nil {
		t.Fatalf("compute.NewService: %v", err)
	}
	return &env{srv: srv, svc: svc, clock: clk, ctx: ctx}
}

func (e *env) insert(t *testing.T, proj, z, name string) *compute.Operation {
	t.Helper()
	op, err := e.svc.NetworkEndpointGroups.Insert(proj, z, &compute.NetworkEndpointGroup{
		Name:                name,
		NetworkEndpointType: "GCE_VM_IP_PORT",
		DefaultPort:         8080,
		Description:         marker,
	}).Context(e.ctx).Do()
	if err != nil {
		t.Fatalf("insert %s/%s/%s: %v", proj, z, name, err)
	}
	return op
}

// endpoints returns n distinct GCE_VM_IP_PORT endpoints on instance "node-1", starting at 10.0.0.1.
func endpoints(n int) []*compute.NetworkEndpoint {
	return endpointsFrom(0, n)
}

func endpointsFrom(first, n int) []*compute.NetworkEndpoint {
	out := make([]*compute.NetworkEndpoint, n)
	for i := range out {
		k := first + i + 1
		out[i] = &compute.NetworkEndpoint{
			IpAddress: fmt.Sprintf("10.%d.%d.%d", k>>16&0xff, k>>8&0xff, k&0xff),
			Port:      8080,
			Instance:  "node-1",
		}
	}
	return out
}

func (e *env) attach(proj, z, neg string, eps []*compute.NetworkEndpoint) (*compute.Operation, error) {
	return e.svc.NetworkEndpointGroups.AttachNetworkEndpoints(proj, z, neg,
		&compute.NetworkEndpointGroupsAttachEndpointsRequest{NetworkEndpoints: eps}).Context(e.ctx).Do()
}

func (e *env) detach(proj, z, neg string, eps []*compute.NetworkEndpoint) (*compute.Operation, error) {
	return e.svc.NetworkEndpointGroups.DetachNetworkEndpoints(proj, z, neg,
		&compute.NetworkEndpointGroupsDetachEndpointsRequest{NetworkEndpoints: eps}).Context(e.ctx).Do()
}

// listAllEndpoints lists the NEG's endpoints through the client's page iterator and returns them with the number
// of pages it took.
func (e *env) listAllEndpoints(t *testing.T, proj, z, neg string, maxResults int64) ([]*compute.NetworkEndpointWithHealthStatus, int) {
	t.Helper()
	var items []*compute.NetworkEndpointWithHealthStatus
	pages := 0
	call := e.svc.NetworkEndpointGroups.ListNetworkEndpoints(proj, z, neg,
		&compute.NetworkEndpointGroupsListEndpointsRequest{HealthStatus: "SKIP"})
	if maxResults > 0 {
		call = call.MaxResults(maxResults)
	}
	err := call.Pages(e.ctx, func(page *compute.NetworkEndpointGroupsListNetworkEndpoints) error {
		pages++
		items = append(items, page.Items...)
		return nil
	})
	if err != nil {
		t.Fatalf("listNetworkEndpoints %s: %v", neg, err)
	}
	return items, pages
}

// wantAPIError checks that err is a *googleapi.Error, as the client builds it from the response, with the code and
// the reason of its first error item.
func wantAPIError(t *testing.T, err error, code int, reason string) *googleapi.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %d %s", code, reason)
	}
	var gerr *googleapi.Error
	if !errors.As(err, &gerr) {
		t.Fatalf("got %T %v, want a *googleapi.Error", err, err)
	}
	if gerr.Code != code {
		t.Errorf("code = %d, want %d (%v)", gerr.Code, code, err)
	}
	if len(gerr.Errors) == 0 {
		t.Fatalf("no error items in %v; body %s", err, gerr.Body)
	}
	if gerr.Errors[0].Reason != reason {
		t.Errorf("reason = %q, want %q (%v)", gerr.Errors[0].Reason, reason, err)
	}
	return gerr
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

// waitForWaiters yields until the fake clock has n timers waiting on it, so that a goroutine is known to be blocked
// on the clock before the test advances it. It polls a condition; it does not sleep.
func waitForWaiters(t *testing.T, clk *clocktesting.FakeClock, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for clk.Waiters() < n {
		if time.Now().After(deadline) {
			t.Fatalf("fake clock has %d waiters, want %d", clk.Waiters(), n)
		}
		runtime.Gosched()
	}
}
