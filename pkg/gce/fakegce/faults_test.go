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
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	compute "google.golang.org/api/compute/v1"
	"google.golang.org/api/googleapi"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
)

func (e *env) get(proj, name string) error {
	_, err := e.svc.NetworkEndpointGroups.Get(proj, zone, name).Context(e.ctx).Do()
	return err
}

func TestFaultForTheNextNCalls(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	e.insert(t, project, zone, "neg-1")
	e.srv.InjectFault(project, fakegce.MethodGet, fakegce.Fault{Code: http.StatusServiceUnavailable, Times: 2})
	for i := range 2 {
		gerr := wantAPIError(t, e.get(project, "neg-1"), http.StatusServiceUnavailable, fakegce.ReasonBackendError)
		if !strings.Contains(gerr.Message, "injected") {
			t.Errorf("call %d: message %q", i, gerr.Message)
		}
	}
	noErr(t, e.get(project, "neg-1"))
	calls, errs := e.srv.Calls(project), e.srv.Errors(project)
	if calls[fakegce.MethodGet] != 3 || errs[fakegce.MethodGet] != 2 {
		t.Errorf("get calls = %d, errors = %d; want 3, 2", calls[fakegce.MethodGet], errs[fakegce.MethodGet])
	}
}

func TestFaultsCarryCodeReasonAndMessage(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	e.insert(t, project, zone, "neg-1")
	for _, tc := range []struct {
		fault  fakegce.Fault
		reason string
	}{
		{fakegce.Fault{Code: 403, Reason: fakegce.ReasonRateLimitExceeded, Message: "Rate Limit Exceeded"}, fakegce.ReasonRateLimitExceeded},
		{fakegce.Fault{Code: 429}, fakegce.ReasonRateLimitExceeded},
		{fakegce.Fault{Code: 500}, fakegce.ReasonBackendError},
		{fakegce.Fault{Code: 503, Reason: "unavailable"}, "unavailable"},
	} {
		tc.fault.Times = 1
		e.srv.InjectFault(project, fakegce.MethodGet, tc.fault)
		err := e.get(project, "neg-1")
		gerr := wantAPIError(t, err, tc.fault.Code, tc.reason)
		if tc.fault.Message != "" && gerr.Message != tc.fault.Message {
			t.Errorf("message = %q, want %q", gerr.Message, tc.fault.Message)
		}
	}
	// errors.As finds the *googleapi.Error through any wrapping by the caller as well.
	e.srv.InjectFault(project, fakegce.MethodGet, fakegce.Fault{Code: 503, Times: 1})
	wrapped := errors.Join(errors.New("syncing neg-1"), e.get(project, "neg-1"))
	var gerr *googleapi.Error
	if !errors.As(wrapped, &gerr) || gerr.Code != 503 {
		t.Errorf("errors.As on a wrapped error: %v", wrapped)
	}
}

func TestFaultOnEveryNthCall(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	e.insert(t, project, zone, "neg-1")
	e.srv.InjectFault(project, fakegce.MethodAttachEndpoints, fakegce.Fault{Code: 500, EveryNth: 3})
	var failed []int
	for i := range 9 {
		if _, err := e.attach(project, zone, "neg-1", endpointsFrom(i, 1)); err != nil {
			wantAPIError(t, err, 500, fakegce.ReasonBackendError)
			failed = append(failed, i+1)
		}
	}
	if len(failed) != 3 || failed[0] != 3 || failed[1] != 6 || failed[2] != 9 {
		t.Errorf("failed calls %v, want [3 6 9]", failed)
	}
	if got, _ := e.srv.Endpoints(project, zone, "neg-1"); len(got) != 6 {
		t.Errorf("%d endpoints attached, want the 6 calls that succeeded", len(got))
	}
}

func TestProbabilisticFaultsAreRepeatableForASeed(t *testing.T) {
	pattern := func(seed uint64) string {
		e := newEnv(t, fakegce.Options{Seed: seed})
		e.insert(t, project, zone, "neg-1")
		e.srv.InjectFault(project, fakegce.MethodGet, fakegce.Fault{Code: 503, Probability: 0.5})
		var b strings.Builder
		for range 200 {
			if e.get(project, "neg-1") != nil {
				b.WriteByte('x')
			} else {
				b.WriteByte('.')
			}
		}
		return b.String()
	}
	a, b := pattern(7), pattern(7)
	if a != b {
		t.Errorf("the same seed gave different fault patterns:\n%s\n%s", a, b)
	}
	// 200 draws at p=0.5: outside [60, 140] has a probability below 1e-8.
	if n := strings.Count(a, "x"); n < 60 || n > 140 {
		t.Errorf("%d of 200 calls failed at probability 0.5", n)
	}
}

func TestFaultsOfOneProjectDoNotReachAnother(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	e.insert(t, "tenant-a", zone, "neg-1")
	e.insert(t, "tenant-b", zone, "neg-1")
	e.srv.InjectFault("tenant-a", fakegce.AnyMethod, fakegce.Fault{Code: 503})
	wantAPIError(t, e.get("tenant-a", "neg-1"), 503, fakegce.ReasonBackendError)
	_, err := e.attach("tenant-a", zone, "neg-1", endpoints(1))
	wantAPIError(t, err, 503, fakegce.ReasonBackendError)
	noErr(t, e.get("tenant-b", "neg-1"))
	_, err = e.attach("tenant-b", zone, "neg-1", endpoints(1))
	noErr(t, err)

	e.srv.ClearFaults("tenant-a")
	noErr(t, e.get("tenant-a", "neg-1"))
}

func TestAsyncFaultFailsTheOperationAndChangesNothing(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	e.insert(t, project, zone, "neg-1")
	e.srv.InjectFault(project, fakegce.MethodDelete, fakegce.Fault{
		Code: 400, Reason: fakegce.ReasonResourceInUse, Message: "in use by a backend service", Async: true, Times: 1,
	})
	op, err := e.svc.NetworkEndpointGroups.Delete(project, zone, "neg-1").Do()
	noErr(t, err)
	if op.Status != "DONE" || op.Error == nil || op.HttpErrorStatusCode != 400 ||
		op.Error.Errors[0].Code != "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE" || op.Error.Errors[0].Message != "in use by a backend service" {
		t.Errorf("operation = %+v, error %+v", op, op.Error)
	}
	if _, ok := e.srv.NEG(project, zone, "neg-1"); !ok {
		t.Error("the failed delete operation removed the NEG")
	}

	// An async fault on an insert frees the name it reserved.
	e2 := newEnv(t, fakegce.Options{OperationPolls: 1})
	e2.srv.InjectFault(project, fakegce.MethodInsert, fakegce.Fault{Code: 503, Async: true, Times: 1})
	op = e2.insert(t, project, zone, "neg-1")
	got, err := e2.svc.ZoneOperations.Wait(project, zone, op.Name).Do()
	noErr(t, err)
	if got.Status != "DONE" || got.HttpErrorStatusCode != 503 {
		t.Errorf("insert operation = %+v", got)
	}
	if _, ok := e2.srv.NEG(project, zone, "neg-1"); ok {
		t.Error("the failed insert operation created the NEG")
	}
	e2.insert(t, project, zone, "neg-1")
}

func TestLatencyDelaysCallsOnTheClock(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	e.insert(t, project, zone, "neg-1")
	e.srv.SetLatency(project, fakegce.MethodGet, 5*time.Second)
	errc := make(chan error, 1)
	go func() { errc <- e.get(project, "neg-1") }()
	waitForWaiters(t, e.clock, 1)
	select {
	case err := <-errc:
		t.Fatalf("get returned (%v) before its latency passed", err)
	default:
	}
	// Another project and another method are not delayed.
	wantAPIError(t, e.get("tenant-b", "neg-1"), http.StatusNotFound, fakegce.ReasonNotFound)
	_, err := e.attach(project, zone, "neg-1", endpoints(1))
	noErr(t, err)

	e.clock.Step(5 * time.Second)
	noErr(t, <-errc)
	e.srv.SetLatency(project, fakegce.MethodGet, 0)
	noErr(t, e.get(project, "neg-1"))
}

func TestCallCountersAndReset(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	e.insert(t, project, zone, "neg-1")
	_, err := e.attach(project, zone, "neg-1", endpoints(2))
	noErr(t, err)
	_, err = e.detach(project, zone, "neg-1", endpoints(1))
	noErr(t, err)
	noErr(t, e.get(project, "neg-1"))
	_, err = e.svc.NetworkEndpointGroups.List(project, zone).Do()
	noErr(t, err)
	_, err = e.attach(project, zone, "neg-1", endpointsFrom(1, 1)) // already attached: fails, still counted
	wantAPIError(t, err, 400, fakegce.ReasonInvalid)

	want := map[fakegce.Method]int{
		fakegce.MethodInsert: 1, fakegce.MethodAttachEndpoints: 2, fakegce.MethodDetachEndpoints: 1,
		fakegce.MethodGet: 1, fakegce.MethodList: 1,
	}
	got := e.srv.Calls(project)
	if len(got) != len(want) {
		t.Errorf("calls = %v, want %v", got, want)
	}
	for m, n := range want {
		if got[m] != n {
			t.Errorf("%s calls = %d, want %d", m, got[m], n)
		}
	}
	if n := e.srv.MutatingCalls(project); n != 4 {
		t.Errorf("mutating calls = %d, want 4", n)
	}
	if errs := e.srv.Errors(project); len(errs) != 1 || errs[fakegce.MethodAttachEndpoints] != 1 {
		t.Errorf("errors = %v", errs)
	}
	// The returned map is a copy.
	got[fakegce.MethodGet] = 100
	if e.srv.Calls(project)[fakegce.MethodGet] != 1 {
		t.Error("Calls returned the live map")
	}

	e.srv.ResetCalls()
	if len(e.srv.Calls(project)) != 0 || len(e.srv.Errors(project)) != 0 || e.srv.MutatingCalls(project) != 0 {
		t.Errorf("after reset: calls %v, errors %v", e.srv.Calls(project), e.srv.Errors(project))
	}
	if _, ok := e.srv.NEG(project, zone, "neg-1"); !ok {
		t.Error("ResetCalls removed state")
	}
	// A resync that finds everything in place makes no mutating calls: what "zero writes after restart" asserts.
	noErr(t, e.get(project, "neg-1"))
	if n := e.srv.MutatingCalls(project); n != 0 {
		t.Errorf("mutating calls after a read = %d", n)
	}
	if len(e.srv.Calls("never-called")) != 0 {
		t.Error("a project never called has calls")
	}
}

// TestZoneCallsCountPerZoneAndMethod: the per-zone counters split Calls by zone (aggregatedList under ""), count
// failed calls too, are copies, and go with ResetCalls.
func TestZoneCallsCountPerZoneAndMethod(t *testing.T) {
	const other = "us-central1-b"
	e := newEnv(t, fakegce.Options{})
	e.insert(t, project, zone, "neg-1")
	e.insert(t, project, other, "neg-1")
	_, err := e.attach(project, zone, "neg-1", endpoints(2))
	noErr(t, err)
	_, err = e.attach(project, zone, "neg-1", endpoints(1)) // already attached: fails, still counted
	wantAPIError(t, err, http.StatusBadRequest, fakegce.ReasonInvalid)
	_, err = e.attach(project, other, "neg-1", endpoints(1))
	noErr(t, err)
	_, err = e.svc.NetworkEndpointGroups.AggregatedList(project).Do()
	noErr(t, err)
	e.insert(t, "tenant-b", zone, "neg-1")

	want := map[string]map[fakegce.Method]int{
		zone:  {fakegce.MethodInsert: 1, fakegce.MethodAttachEndpoints: 2},
		other: {fakegce.MethodInsert: 1, fakegce.MethodAttachEndpoints: 1},
		"":    {fakegce.MethodAggregatedList: 1},
	}
	total := map[fakegce.Method]int{}
	for z, w := range want {
		got := e.srv.ZoneCalls(project, z)
		if len(got) != len(w) {
			t.Errorf("zone %q: calls = %v, want %v", z, got, w)
		}
		for m, n := range w {
			if got[m] != n {
				t.Errorf("zone %q: %s calls = %d, want %d", z, m, got[m], n)
			}
			total[m] += got[m]
		}
	}
	// The zones add up to the project's counters; another project's calls are its own.
	if calls := e.srv.Calls(project); len(calls) != len(total) {
		t.Errorf("project calls %v, zones add up to %v", calls, total)
	} else {
		for m, n := range total {
			if calls[m] != n {
				t.Errorf("%s: project %d, zones %d", m, calls[m], n)
			}
		}
	}
	if got := e.srv.ZoneCalls("tenant-b", zone); len(got) != 1 || got[fakegce.MethodInsert] != 1 {
		t.Errorf("tenant-b's calls in %s = %v", zone, got)
	}
	// The returned map is a copy.
	e.srv.ZoneCalls(project, zone)[fakegce.MethodInsert] = 100
	if n := e.srv.ZoneCalls(project, zone)[fakegce.MethodInsert]; n != 1 {
		t.Errorf("ZoneCalls returned the live map: insert = %d", n)
	}

	e.srv.ResetCalls()
	for _, z := range []string{zone, other, ""} {
		if got := e.srv.ZoneCalls(project, z); got == nil || len(got) != 0 {
			t.Errorf("after reset, zone %q: %v", z, got)
		}
	}
	if got := e.srv.ZoneCalls("never-called", zone); got == nil || len(got) != 0 {
		t.Errorf("a project never called has calls: %v", got)
	}
}

func TestQuotaRefusesCallsUntilTheNextMinute(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	e.insert(t, project, zone, "neg-1")
	e.insert(t, "tenant-b", zone, "neg-1")
	e.srv.SetQuota(project, fakegce.Quota{ReadsPerMinute: 3, MutationsPerMinute: 1})

	for range 3 {
		noErr(t, e.get(project, "neg-1"))
	}
	gerr := wantAPIError(t, e.get(project, "neg-1"), http.StatusForbidden, fakegce.ReasonRateLimitExceeded)
	if !strings.Contains(gerr.Message, "Quota exceeded") {
		t.Errorf("message %q", gerr.Message)
	}
	// Mutations have their own budget, and other projects their own quota.
	_, err := e.attach(project, zone, "neg-1", endpoints(1))
	noErr(t, err)
	_, err = e.attach(project, zone, "neg-1", endpointsFrom(1, 1))
	wantAPIError(t, err, http.StatusForbidden, fakegce.ReasonRateLimitExceeded)
	for range 10 {
		noErr(t, e.get("tenant-b", "neg-1"))
	}

	// Windows are synchronized minutes: the clock started at :30, so 30 seconds later the budget is fresh.
	e.clock.Step(29 * time.Second)
	wantAPIError(t, e.get(project, "neg-1"), http.StatusForbidden, fakegce.ReasonRateLimitExceeded)
	e.clock.Step(time.Second)
	for range 3 {
		noErr(t, e.get(project, "neg-1"))
	}
	wantAPIError(t, e.get(project, "neg-1"), http.StatusForbidden, fakegce.ReasonRateLimitExceeded)
	_, err = e.attach(project, zone, "neg-1", endpointsFrom(1, 1))
	noErr(t, err)

	// Refused calls are counted as calls and errors, and spend no quota.
	if c, errs := e.srv.Calls(project)[fakegce.MethodGet], e.srv.Errors(project)[fakegce.MethodGet]; c != 9 || errs != 3 {
		t.Errorf("get calls, errors = %d, %d; want 9, 3", c, errs)
	}
}

func TestDefaultQuotaAppliesToEveryProject(t *testing.T) {
	e := newEnv(t, fakegce.Options{Quota: fakegce.Quota{ReadsPerMinute: 1}})
	for _, p := range []string{"tenant-a", "tenant-b"} {
		_, err := e.svc.NetworkEndpointGroups.List(p, zone).Do()
		noErr(t, err)
		_, err = e.svc.NetworkEndpointGroups.List(p, zone).Do()
		wantAPIError(t, err, http.StatusForbidden, fakegce.ReasonRateLimitExceeded)
	}
	// Polling operations spends read quota too.
	e.srv.SetQuota("tenant-c", fakegce.Quota{ReadsPerMinute: 1})
	op := e.insert(t, "tenant-c", zone, "neg-1")
	_, err := e.svc.ZoneOperations.Wait("tenant-c", zone, op.Name).Do()
	noErr(t, err)
	_, err = e.svc.ZoneOperations.Get("tenant-c", zone, op.Name).Do()
	wantAPIError(t, err, http.StatusForbidden, fakegce.ReasonRateLimitExceeded)
}

// A fault limited to healthStatus SHOW fails a readiness poll's health lists and leaves alone the endpoint lists a NEG
// controller makes (SKIP, or no healthStatus), so a test can fail the poll without failing the controller.
func TestFaultCanTargetTheHealthListsAlone(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	e.insert(t, project, zone, "neg-1")
	_, err := e.attach(project, zone, "neg-1", endpoints(1))
	noErr(t, err)
	list := func(health string) error {
		_, err := e.svc.NetworkEndpointGroups.ListNetworkEndpoints(project, zone, "neg-1",
			&compute.NetworkEndpointGroupsListEndpointsRequest{HealthStatus: health}).Do()
		return err
	}
	e.srv.InjectFault(project, fakegce.MethodListEndpoints, fakegce.Fault{Code: http.StatusServiceUnavailable, HealthStatus: "SHOW", Times: 2})
	noErr(t, list("SKIP"))
	wantAPIError(t, list("SHOW"), http.StatusServiceUnavailable, fakegce.ReasonBackendError)
	noErr(t, list(""))
	wantAPIError(t, list("SHOW"), http.StatusServiceUnavailable, fakegce.ReasonBackendError)
	// Times counted the SHOW calls alone: the two lists without health did not spend the fault.
	noErr(t, list("SHOW"))

	// EveryNth counts the SHOW calls alone too: the SKIP list between them is not the second.
	e.srv.InjectFault(project, fakegce.MethodListEndpoints, fakegce.Fault{Code: http.StatusServiceUnavailable, HealthStatus: "SHOW", EveryNth: 2})
	noErr(t, list("SHOW"))
	noErr(t, list("SKIP"))
	wantAPIError(t, list("SHOW"), http.StatusServiceUnavailable, fakegce.ReasonBackendError)
	e.srv.ClearFaults(project)

	// SKIP also matches a list without healthStatus, which the API treats as SKIP.
	e.srv.InjectFault(project, fakegce.MethodListEndpoints, fakegce.Fault{Code: http.StatusInternalServerError, HealthStatus: "SKIP"})
	noErr(t, list("SHOW"))
	wantAPIError(t, list(""), http.StatusInternalServerError, fakegce.ReasonBackendError)
	wantAPIError(t, list("SKIP"), http.StatusInternalServerError, fakegce.ReasonBackendError)

	for _, bad := range []struct {
		method fakegce.Method
		health string
	}{{fakegce.MethodGet, "SHOW"}, {fakegce.AnyMethod, "SHOW"}, {fakegce.MethodListEndpoints, "show"}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("InjectFault on %s with HealthStatus %q did not panic", bad.method, bad.health)
				}
			}()
			e.srv.InjectFault(project, bad.method, fakegce.Fault{Code: http.StatusServiceUnavailable, HealthStatus: bad.health})
		}()
	}
}
