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
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	compute "google.golang.org/api/compute/v1"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
)

// selfLinkParts splits an operation selfLink into project, zone and name the way k8s-cloud-provider parses it.
func selfLinkParts(t *testing.T, link string) (string, string, string) {
	t.Helper()
	const prefix = "https://www.googleapis.com/compute/v1/"
	parts := strings.Split(strings.TrimPrefix(link, prefix), "/")
	if !strings.HasPrefix(link, prefix) || len(parts) != 6 || parts[0] != "projects" || parts[2] != "zones" || parts[4] != "operations" {
		t.Fatalf("operation selfLink %q is not projects/{p}/zones/{z}/operations/{name}", link)
	}
	return parts[1], parts[3], parts[5]
}

func TestOperationsCompleteAtOnceByDefault(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	op := e.insert(t, project, zone, "neg-1")
	if op.Status != "DONE" || op.Progress != 100 || op.Kind != "compute#operation" || op.EndTime == "" {
		t.Errorf("operation = %+v", op)
	}
	p, z, name := selfLinkParts(t, op.SelfLink)
	if p != project || z != zone || name != op.Name {
		t.Errorf("selfLink names %s/%s/%s, want %s/%s/%s", p, z, name, project, zone, op.Name)
	}
	if !strings.HasSuffix(op.Zone, "/projects/"+project+"/zones/"+zone) {
		t.Errorf("zone = %q", op.Zone)
	}
	got, err := e.svc.ZoneOperations.Get(p, z, name).Do()
	noErr(t, err)
	waited, err := e.svc.ZoneOperations.Wait(p, z, name).Do()
	noErr(t, err)
	if got.Status != "DONE" || waited.Status != "DONE" || got.Id != op.Id || waited.Name != op.Name {
		t.Errorf("get = %s %d, wait = %s %s; want DONE %d %s", got.Status, got.Id, waited.Status, waited.Name, op.Id, op.Name)
	}
}

func TestOperationCanBeFetchedByID(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	op := e.insert(t, project, zone, "neg-1")
	// The API accepts an operation's numeric id in place of its name.
	got, err := e.svc.ZoneOperations.Get(project, zone, strconv.FormatUint(op.Id, 10)).Do()
	noErr(t, err)
	if got.Name != op.Name {
		t.Errorf("get by id %d returned %s, want %s", op.Id, got.Name, op.Name)
	}
	_, err = e.svc.ZoneOperations.Get(project, zone, strconv.FormatUint(op.Id+1000, 10)).Do()
	wantAPIError(t, err, http.StatusNotFound, fakegce.ReasonNotFound)
}

func TestOperationIsScopedToItsProjectAndZone(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	op := e.insert(t, project, zone, "neg-1")
	_, err := e.svc.ZoneOperations.Get(project, "us-central1-b", op.Name).Do()
	wantAPIError(t, err, http.StatusNotFound, fakegce.ReasonNotFound)
	_, err = e.svc.ZoneOperations.Wait("tenant-b", zone, op.Name).Do()
	wantAPIError(t, err, http.StatusNotFound, fakegce.ReasonNotFound)
	_, err = e.svc.ZoneOperations.Get(project, zone, "operation-none").Do()
	wantAPIError(t, err, http.StatusNotFound, fakegce.ReasonNotFound)
}

func TestOperationsThatNeedPollsApplyOnlyWhenDone(t *testing.T) {
	e := newEnv(t, fakegce.Options{OperationPolls: 2})
	op := e.insert(t, project, zone, "neg-1")
	if op.Status != "RUNNING" {
		t.Fatalf("insert operation status = %s, want RUNNING", op.Status)
	}
	// Until the operation is done, the NEG does not exist, and its name is taken.
	_, err := e.svc.NetworkEndpointGroups.Get(project, zone, "neg-1").Do()
	wantAPIError(t, err, http.StatusNotFound, fakegce.ReasonNotFound)
	_, err = e.svc.NetworkEndpointGroups.Insert(project, zone, &compute.NetworkEndpointGroup{Name: "neg-1"}).Do()
	wantAPIError(t, err, http.StatusConflict, fakegce.ReasonAlreadyExists)
	if n := e.srv.PendingOperations(project); n != 1 {
		t.Errorf("pending operations = %d, want 1", n)
	}

	// The first wait is one poll short: it returns the RUNNING operation at once, as the real wait may.
	w1, err := e.svc.ZoneOperations.Wait(project, zone, op.Name).Do()
	noErr(t, err)
	if w1.Status != "RUNNING" {
		t.Errorf("first wait: %s, want RUNNING", w1.Status)
	}
	w2, err := e.svc.ZoneOperations.Get(project, zone, op.Name).Do()
	noErr(t, err)
	if w2.Status != "DONE" || w2.Error != nil {
		t.Errorf("second poll: %+v, want DONE", w2)
	}
	if _, ok := e.srv.NEG(project, zone, "neg-1"); !ok {
		t.Error("NEG missing after its insert operation completed")
	}
	if c := e.srv.Calls(project); c[fakegce.MethodOperationWait] != 1 || c[fakegce.MethodOperationGet] != 1 {
		t.Errorf("calls = %v", c)
	}
}

func TestWaitBlocksUntilTheOperationIsDone(t *testing.T) {
	e := newEnv(t, fakegce.Options{OperationDelay: 30 * time.Second})
	op := e.insert(t, project, zone, "neg-1")
	if op.Status != "RUNNING" {
		t.Fatalf("status = %s, want RUNNING", op.Status)
	}
	got, err := e.svc.ZoneOperations.Get(project, zone, op.Name).Do()
	noErr(t, err)
	if got.Status != "RUNNING" {
		t.Fatalf("get before the delay: %s, want RUNNING", got.Status)
	}

	done := make(chan *compute.Operation, 1)
	errc := make(chan error, 1)
	go func() {
		w, err := e.svc.ZoneOperations.Wait(project, zone, op.Name).Context(e.ctx).Do()
		done <- w
		errc <- err
	}()
	waitForWaiters(t, e.clock, 1)
	select {
	case w := <-done:
		t.Fatalf("wait returned %s before the operation's delay passed", w.Status)
	default:
	}
	e.clock.Step(30 * time.Second)
	w := <-done
	noErr(t, <-errc)
	if w.Status != "DONE" {
		t.Errorf("wait returned %s, want DONE", w.Status)
	}
	if _, ok := e.srv.NEG(project, zone, "neg-1"); !ok {
		t.Error("NEG missing after the wait returned DONE")
	}
}

func TestWaitReturnsRunningOperationAtTheTwoMinuteDeadline(t *testing.T) {
	e := newEnv(t, fakegce.Options{OperationDelay: 10 * time.Minute})
	op := e.insert(t, project, zone, "neg-1")
	done := make(chan *compute.Operation, 1)
	go func() {
		w, err := e.svc.ZoneOperations.Wait(project, zone, op.Name).Do()
		if err != nil {
			t.Errorf("wait: %v", err)
		}
		done <- w
	}()
	waitForWaiters(t, e.clock, 1)
	e.clock.Step(2 * time.Minute)
	if w := <-done; w == nil || w.Status != "RUNNING" {
		t.Fatalf("wait at its deadline returned %+v, want the RUNNING operation", w)
	}
	e.clock.Step(8 * time.Minute)
	w, err := e.svc.ZoneOperations.Wait(project, zone, op.Name).Do()
	noErr(t, err)
	if w.Status != "DONE" {
		t.Errorf("wait after the delay: %s, want DONE", w.Status)
	}
}

func TestWaitEndsWhenTheClientGivesUp(t *testing.T) {
	e := newEnv(t, fakegce.Options{OperationDelay: time.Minute})
	op := e.insert(t, project, zone, "neg-1")
	ctx, cancel := context.WithCancel(e.ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := e.svc.ZoneOperations.Wait(project, zone, op.Name).Context(ctx).Do()
		errc <- err
	}()
	waitForWaiters(t, e.clock, 1)
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("wait with a canceled context succeeded")
	}
	// The server side of the wait stops its timer.
	deadline := time.Now().Add(10 * time.Second)
	for e.clock.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("the server's wait kept its timer after the client canceled")
		}
		runtime.Gosched()
	}
}

func TestPendingOperationsAreCheckedAgainWhenTheyComplete(t *testing.T) {
	e := newEnv(t, fakegce.Options{OperationDelay: time.Second})
	if _, err := e.srv.SeedNEG(project, zone, &compute.NetworkEndpointGroup{Name: "neg-1", DefaultPort: 80}); err != nil {
		t.Fatal(err)
	}
	// Both attaches are valid when they arrive; when they complete, the second finds its endpoint attached.
	first, err := e.attach(project, zone, "neg-1", endpoints(1))
	noErr(t, err)
	second, err := e.attach(project, zone, "neg-1", endpoints(1))
	noErr(t, err)
	// A delete accepted now finds no NEG when it completes after the one before it.
	del1, err := e.svc.NetworkEndpointGroups.Delete(project, zone, "neg-1").Do()
	noErr(t, err)
	del2, err := e.svc.NetworkEndpointGroups.Delete(project, zone, "neg-1").Do()
	noErr(t, err)

	e.clock.Step(time.Second)
	get := func(op *compute.Operation) *compute.Operation {
		got, err := e.svc.ZoneOperations.Get(project, zone, op.Name).Do()
		noErr(t, err)
		if got.Status != "DONE" {
			t.Fatalf("%s: %s, want DONE", op.OperationType, got.Status)
		}
		return got
	}
	if op := get(first); op.Error != nil {
		t.Errorf("first attach failed: %+v", op.Error.Errors[0])
	}
	op := get(second)
	if op.Error == nil || op.HttpErrorStatusCode != http.StatusBadRequest || op.Error.Errors[0].Code != "INVALID_FIELD_VALUE" ||
		op.HttpErrorMessage != "BAD REQUEST" {
		t.Errorf("second attach = %+v, want a 400 INVALID_FIELD_VALUE error", op)
	}
	if op := get(del1); op.Error != nil {
		t.Errorf("first delete failed: %+v", op.Error.Errors[0])
	}
	op = get(del2)
	if op.Error == nil || op.HttpErrorStatusCode != http.StatusNotFound || op.Error.Errors[0].Code != "RESOURCE_NOT_FOUND" {
		t.Errorf("second delete = %+v, want a 404 RESOURCE_NOT_FOUND error", op)
	}
}

func TestCompleteOperationsSettlesEverythingPending(t *testing.T) {
	e := newEnv(t, fakegce.Options{OperationPolls: 5, OperationDelay: time.Hour})
	e.insert(t, project, zone, "neg-1")
	e.insert(t, project, zone, "neg-2")
	e.insert(t, "tenant-b", zone, "neg-1")
	if n := e.srv.PendingOperations(project); n != 2 {
		t.Fatalf("pending = %d, want 2", n)
	}
	e.srv.CompleteOperations(project)
	if n := e.srv.PendingOperations(project); n != 0 {
		t.Errorf("pending after CompleteOperations = %d", n)
	}
	if len(e.srv.NEGs(project)) != 2 {
		t.Errorf("NEGs = %v", e.srv.NEGs(project))
	}
	if e.srv.PendingOperations("tenant-b") != 1 || len(e.srv.NEGs("tenant-b")) != 0 {
		t.Error("completing one project's operations touched another project")
	}
}

func TestCloseEndsWaitsBlockedOnTheClock(t *testing.T) {
	e := newEnv(t, fakegce.Options{OperationDelay: time.Hour})
	op := e.insert(t, project, zone, "neg-1")
	e.srv.SetLatency(project, fakegce.MethodGet, time.Hour)
	errc := make(chan error, 2)
	go func() { _, err := e.svc.ZoneOperations.Wait(project, zone, op.Name).Do(); errc <- err }()
	go func() { errc <- e.get(project, "neg-1") }()
	waitForWaiters(t, e.clock, 2)
	// Without ending them, Close would block until the blocked calls finish, which on this clock is never.
	e.srv.Close()
	for range 2 {
		if err := <-errc; err == nil {
			t.Error("a call blocked on the clock succeeded after Close")
		}
	}
}
