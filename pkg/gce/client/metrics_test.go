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
	"net/url"
	"testing"

	compute "google.golang.org/api/compute/v1"
	"google.golang.org/api/googleapi"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
)

const (
	requestsMetric = "multiproject_gce_requests_total"
	durationMetric = "multiproject_gce_request_duration_seconds"
)

// TestCallMetricsPerTenantMethodAndResult drives the client through the fake GCE with a success, a 404, injected
// 5xx and 429 answers and a failed operation, and checks the tenant's call counter by method and result, and that
// every HTTP call the fake received is counted once, under its method, in both the counter and the histogram.
func TestCallMetricsPerTenantMethodAndResult(t *testing.T) {
	metrics.Register()
	const tenant, project, zone = "tenant-gce-metrics", "p-gce-metrics", "europe-west1-b"
	// The series are process-wide: a run (go test -count=N) starts from none of either tenant's.
	metrics.ForgetProviderConfig(tenant)
	metrics.ForgetProviderConfig(tenant + "-other")
	t.Cleanup(func() { metrics.ForgetProviderConfig(tenant + "-other") })
	srv := fakegce.New(fakegce.Options{OperationPolls: 1})
	srv.Start()
	t.Cleanup(srv.Close)
	ctx := context.Background()
	c, err := New(ctx, Config{ProviderConfig: tenant, ProjectID: project, Endpoint: srv.Endpoint(), QPS: 1000, Burst: 1000})
	if err != nil {
		t.Fatal(err)
	}
	// Another tenant's calls must not show in this one's series.
	other, err := New(ctx, Config{ProviderConfig: tenant + "-other", ProjectID: "p-other", Endpoint: srv.Endpoint()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.GetNEG(ctx, zone, "missing"); !IsNotFound(err) {
		t.Fatalf("other tenant's get: %v", err)
	}

	neg := &compute.NetworkEndpointGroup{Name: "neg", NetworkEndpointType: "GCE_VM_IP_PORT", DefaultPort: 80}
	if _, err := c.InsertNEG(ctx, zone, neg); err != nil { // insert + one wait
		t.Fatal(err)
	}
	if _, err := c.GetNEG(ctx, zone, "neg"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetNEG(ctx, zone, "missing"); !IsNotFound(err) {
		t.Fatalf("get of a missing NEG: %v, want NotFound", err)
	}
	srv.InjectFault(project, fakegce.MethodGet, fakegce.Fault{Code: http.StatusServiceUnavailable, Times: 1})
	if _, err := c.GetNEG(ctx, zone, "neg"); !IsRetryable(err) {
		t.Fatalf("get with an injected 503: %v", err)
	}
	eps := []*compute.NetworkEndpoint{{Instance: "vm", IpAddress: "10.0.0.1", Port: 80}}
	srv.InjectFault(project, fakegce.MethodAttachEndpoints, fakegce.Fault{Code: http.StatusTooManyRequests, Times: 1})
	if err := c.AttachEndpoints(ctx, zone, "neg", eps); !IsRetryable(err) {
		t.Fatalf("attach with an injected 429: %v", err)
	}
	if err := c.AttachEndpoints(ctx, zone, "neg", eps); err != nil { // attach + one wait
		t.Fatal(err)
	}
	// GCE's rate quota answers 403 with a reason, not 429.
	srv.InjectFault(project, fakegce.MethodListEndpoints, fakegce.Fault{Code: http.StatusForbidden, Reason: fakegce.ReasonRateLimitExceeded, Times: 1})
	if _, err := c.ListEndpoints(ctx, zone, "neg"); !IsRetryable(err) {
		t.Fatalf("list with an injected 403 rateLimitExceeded: %v", err)
	}
	if _, err := c.ListEndpoints(ctx, zone, "neg"); err != nil {
		t.Fatal(err)
	}
	// Accepted, then failed in its operation: the wait that sees it DONE records the failure.
	srv.InjectFault(project, fakegce.MethodDetachEndpoints, fakegce.Fault{Code: http.StatusInternalServerError, Async: true, Times: 1})
	if err := c.DetachEndpoints(ctx, zone, "neg", eps); !IsRetryable(err) {
		t.Fatalf("detach whose operation fails: %v", err)
	}
	if err := c.DetachEndpoints(ctx, zone, "neg", eps); err != nil { // detach + one wait
		t.Fatal(err)
	}
	if _, err := c.ListNEGs(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteNEG(ctx, zone, "neg"); err != nil { // delete + one wait
		t.Fatal(err)
	}

	want := map[string]map[string]float64{
		MethodInsert:         {ResultSuccess: 1},
		MethodGet:            {ResultSuccess: 1, ResultNotFound: 1, ResultServerError: 1},
		MethodAttach:         {ResultRateLimited: 1, ResultSuccess: 1},
		MethodDetach:         {ResultSuccess: 2},
		MethodListEndpoints:  {ResultRateLimited: 1, ResultSuccess: 1},
		MethodAggregatedList: {ResultSuccess: 1},
		MethodDelete:         {ResultSuccess: 1},
		// insert, attach, the detach whose operation failed with the 500, detach, delete
		MethodOperationWait: {ResultSuccess: 4, ResultServerError: 1},
	}
	calls := srv.Calls(project)
	for method, results := range want {
		got, err := testutil.GetCounterValuesFromGatherer(legacyregistry.DefaultGatherer, requestsMetric,
			map[string]string{"provider_config": tenant, "method": method}, "result")
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(results) {
			t.Errorf("%s{method=%q} by result = %v, want %v", requestsMetric, method, got, results)
		}
		total := 0.0
		for _, n := range got {
			total += n
		}
		if int(total) != calls[fakegce.Method(method)] {
			t.Errorf("%s counted %v calls, the fake received %d", method, total, calls[fakegce.Method(method)])
		}
		hist, err := testutil.GetHistogramVecFromGatherer(legacyregistry.DefaultGatherer, durationMetric,
			map[string]string{"provider_config": tenant, "method": method})
		if err != nil {
			t.Fatal(err)
		}
		if n := hist.GetAggregatedSampleCount(); int(n) != calls[fakegce.Method(method)] {
			t.Errorf("%s{method=%q} has %d observations, the fake received %d calls", durationMetric, method, n, calls[fakegce.Method(method)])
		}
		if err := hist.Validate(); err != nil {
			t.Errorf("%s{method=%q}: %v", durationMetric, method, err)
		}
	}
	for method := range calls {
		if _, ok := want[string(method)]; !ok {
			t.Errorf("the fake received %s, which this test does not expect", method)
		}
	}
	otherCalls, err := testutil.GetCounterValuesFromGatherer(legacyregistry.DefaultGatherer, requestsMetric,
		map[string]string{"provider_config": tenant + "-other"}, "method")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(otherCalls) != fmt.Sprint(map[string]float64{MethodGet: 1}) {
		t.Errorf("the other tenant's calls by method = %v, want its one get", otherCalls)
	}

	// A deleted tenant leaves no series behind.
	metrics.ForgetProviderConfig(tenant)
	for _, name := range []string{requestsMetric, durationMetric} {
		if n := seriesOf(t, name, tenant); n != 0 {
			t.Errorf("%s has %d series of the forgotten tenant", name, n)
		}
	}
	if n := seriesOf(t, requestsMetric, tenant+"-other"); n != 1 {
		t.Errorf("forgetting one tenant left %d series of another, want 1", n)
	}
}

// seriesOf counts the series of a metric family that carry the tenant's label.
func seriesOf(t *testing.T, name, tenant string) int {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if testutil.LabelsMatch(m, map[string]string{"provider_config": tenant}) {
				n++
			}
		}
	}
	return n
}

func TestResult(t *testing.T) {
	gerr := func(code int, reason string) error {
		return fmt.Errorf("wrapped: %w", &googleapi.Error{Code: code, Errors: []googleapi.ErrorItem{{Reason: reason}}})
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ResultSuccess},
		{gerr(http.StatusNotFound, "notFound"), ResultNotFound},
		{gerr(http.StatusConflict, "alreadyExists"), ResultConflict},
		{gerr(http.StatusTooManyRequests, ""), ResultRateLimited},
		{gerr(http.StatusForbidden, "rateLimitExceeded"), ResultRateLimited},
		{gerr(http.StatusForbidden, "userRateLimitExceeded"), ResultRateLimited},
		{gerr(http.StatusForbidden, "quotaExceeded"), ResultQuotaExceeded},
		{gerr(http.StatusForbidden, "forbidden"), ResultForbidden},
		{gerr(http.StatusUnauthorized, "authError"), ResultForbidden},
		{gerr(http.StatusBadRequest, "resourceInUseByAnotherResource"), ResultClientError},
		{gerr(http.StatusBadRequest, "invalid"), ResultClientError},
		{gerr(http.StatusInternalServerError, "backendError"), ResultServerError},
		{gerr(http.StatusServiceUnavailable, "backendError"), ResultServerError},
		{&url.Error{Op: "Get", URL: "https://compute", Err: context.Canceled}, ResultCanceled},
		{&url.Error{Op: "Get", URL: "https://compute", Err: context.DeadlineExceeded}, ResultTimeout},
		{&OperationWaitError{Operation: "op", Err: context.DeadlineExceeded}, ResultTimeout},
		{&url.Error{Op: "Get", URL: "https://compute", Err: timeoutError{}}, ResultTimeout},
		{errors.New("dial tcp: connection refused"), ResultTransportError},
	} {
		if got := Result(tc.err); got != tc.want {
			t.Errorf("Result(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// timeoutError is a transport timeout (net.Error) that is not the context's.
type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }
