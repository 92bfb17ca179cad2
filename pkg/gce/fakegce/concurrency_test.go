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
	"sync"
	"testing"

	compute "google.golang.org/api/compute/v1"
	"google.golang.org/api/option"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
)

// TestConcurrentTenants runs several projects' controllers at once, each attaching, detaching, listing and waiting
// on operations from several goroutines, one project with faults. Under -race it checks the server's locking; the
// final state and counters check that no call was lost or applied to the wrong project.
func TestConcurrentTenants(t *testing.T) {
	var recMu sync.Mutex
	records := map[string]int{}
	e := newEnv(t, fakegce.Options{
		OperationPolls: 1,
		OnCall: func(r fakegce.CallRecord) {
			recMu.Lock()
			records[r.Project]++
			recMu.Unlock()
		},
	})
	projects := []string{"tenant-a", "tenant-b", "tenant-c", "tenant-d"}
	zones := []string{"us-central1-a", "us-central1-b"}
	const workers, batches, batchSize = 4, 5, 20
	e.srv.InjectFault("tenant-d", fakegce.MethodAttachEndpoints, fakegce.Fault{Code: 503, EveryNth: 2})

	// wait polls an operation until it is DONE, as a controller would.
	wait := func(proj, z string, op *compute.Operation) error {
		for op.Status != "DONE" {
			var err error
			if op, err = e.svc.ZoneOperations.Wait(proj, z, op.Name).Do(); err != nil {
				return err
			}
		}
		if op.Error != nil {
			return fmt.Errorf("operation %s failed: %s", op.Name, op.Error.Errors[0].Message)
		}
		return nil
	}
	// retry repeats a call that hit an injected 503.
	retry := func(f func() (*compute.Operation, error)) (*compute.Operation, error) {
		for {
			op, err := f()
			if err != nil && strings.Contains(err.Error(), "injected") {
				continue
			}
			return op, err
		}
	}

	var wg sync.WaitGroup
	errc := make(chan error, len(projects)*len(zones)*workers)
	for _, proj := range projects {
		for _, z := range zones {
			op, err := e.svc.NetworkEndpointGroups.Insert(proj, z, &compute.NetworkEndpointGroup{Name: "neg", DefaultPort: 80}).Do()
			noErr(t, err)
			noErr(t, wait(proj, z, op))
			for w := range workers {
				wg.Go(func() {
					for b := range batches {
						first := (w*batches + b) * batchSize
						op, err := retry(func() (*compute.Operation, error) { return e.attach(proj, z, "neg", endpointsFrom(first, batchSize)) })
						if err == nil {
							err = wait(proj, z, op)
						}
						if err == nil && b%2 == 1 { // detach half of every other batch
							op, err = e.detach(proj, z, "neg", endpointsFrom(first, batchSize/2))
							if err == nil {
								err = wait(proj, z, op)
							}
						}
						if err == nil {
							_, err = e.svc.NetworkEndpointGroups.ListNetworkEndpoints(proj, z, "neg",
								&compute.NetworkEndpointGroupsListEndpointsRequest{}).MaxResults(50).Do()
						}
						if err != nil {
							errc <- fmt.Errorf("%s/%s worker %d batch %d: %w", proj, z, w, b, err)
							return
						}
					}
				})
			}
		}
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}

	perZone := workers * batches * batchSize
	wantSize := perZone - workers*(batches/2)*(batchSize/2)
	for _, proj := range projects {
		for _, z := range zones {
			neg, ok := e.srv.NEG(proj, z, "neg")
			eps, _ := e.srv.Endpoints(proj, z, "neg")
			if !ok || neg.Size != int64(wantSize) || len(eps) != wantSize {
				t.Errorf("%s/%s: size %d, %d endpoints; want %d", proj, z, neg.Size, len(eps), wantSize)
			}
		}
		calls := e.srv.Calls(proj)
		wantAttach := len(zones) * workers * batches
		if proj == "tenant-d" {
			// Every 2nd call fails and is retried, so the successes are calls 1, 3, 5, ...: the last of
			// them is call 2n-1.
			wantAttach = 2*wantAttach - 1
		}
		if calls[fakegce.MethodAttachEndpoints] != wantAttach {
			t.Errorf("%s: %d attach calls, want %d", proj, calls[fakegce.MethodAttachEndpoints], wantAttach)
		}
		total := 0
		for _, n := range calls {
			total += n
		}
		recMu.Lock()
		if records[proj] != total {
			t.Errorf("%s: OnCall saw %d calls, counters %d", proj, records[proj], total)
		}
		recMu.Unlock()
	}
}

func TestRequestsTheFakeDoesNotServeAreNotImplemented(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	// A client whose endpoint lacks /compute/v1/ sends /projects/...: the answer says what endpoint to use.
	bare, err := compute.NewService(e.ctx, option.WithEndpoint(e.srv.URL()+"/"), option.WithoutAuthentication())
	noErr(t, err)
	_, err = bare.NetworkEndpointGroups.Get(project, zone, "neg-1").Do()
	gerr := wantAPIError(t, err, http.StatusNotImplemented, fakegce.ReasonNotImplemented)
	if !strings.Contains(gerr.Message, "/compute/v1/") {
		t.Errorf("message %q does not name the endpoint to use", gerr.Message)
	}
	// A method the fake does not implement is never answered as if the resource were missing.
	_, err = e.svc.NetworkEndpointGroups.TestIamPermissions(project, zone, "neg-1", &compute.TestPermissionsRequest{}).Do()
	wantAPIError(t, err, http.StatusNotImplemented, fakegce.ReasonNotImplemented)
	_, err = e.svc.GlobalNetworkEndpointGroups.Get(project, "neg-1").Do()
	wantAPIError(t, err, http.StatusNotImplemented, fakegce.ReasonNotImplemented)
	if len(e.srv.Projects()) != 0 {
		t.Errorf("unserved requests created projects %v", e.srv.Projects())
	}
}

func TestEndpointIsTheClientBasePath(t *testing.T) {
	srv := fakegce.New(fakegce.Options{})
	if srv.URL() != "" || srv.Endpoint() != "" {
		t.Errorf("before Start: URL %q, Endpoint %q", srv.URL(), srv.Endpoint())
	}
	url := srv.Start()
	defer srv.Close()
	if !strings.HasPrefix(url, "http://127.0.0.1:") || srv.Endpoint() != url+"/compute/v1/" {
		t.Errorf("URL %q, Endpoint %q", url, srv.Endpoint())
	}
	svc, err := compute.NewService(t.Context(), option.WithEndpoint(srv.Endpoint()), option.WithoutAuthentication())
	noErr(t, err)
	if _, err := svc.NetworkEndpointGroups.List(project, zone).Do(); err != nil {
		t.Errorf("list through Endpoint(): %v", err)
	}
}
