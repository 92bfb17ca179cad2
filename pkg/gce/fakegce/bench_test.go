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
	"testing"
	"time"

	compute "google.golang.org/api/compute/v1"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
)

// BenchmarkAttachDetach500 measures a full batch round trip through the real client on loopback: attach 500
// endpoints, then detach them, each answered with a DONE operation. It reports the time per round trip as a multiple
// of one NEG get measured in the same process ("x-get"), which says what the fake's own work costs beyond HTTP.
func BenchmarkAttachDetach500(b *testing.B) {
	srv := fakegce.New(fakegce.Options{})
	srv.Start()
	defer srv.Close()
	ctx := context.Background()
	svc, err := srv.ComputeService(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := svc.NetworkEndpointGroups.Insert(project, zone, &compute.NetworkEndpointGroup{Name: "neg", DefaultPort: 80}).Do(); err != nil {
		b.Fatal(err)
	}
	const baselineCalls = 200
	start := time.Now()
	for range baselineCalls {
		if _, err := svc.NetworkEndpointGroups.Get(project, zone, "neg").Do(); err != nil {
			b.Fatal(err)
		}
	}
	perGet := time.Since(start) / baselineCalls

	eps := endpoints(fakegce.MaxEndpointsPerCall)
	attach := &compute.NetworkEndpointGroupsAttachEndpointsRequest{NetworkEndpoints: eps}
	detach := &compute.NetworkEndpointGroupsDetachEndpointsRequest{NetworkEndpoints: eps}
	for b.Loop() {
		if _, err := svc.NetworkEndpointGroups.AttachNetworkEndpoints(project, zone, "neg", attach).Do(); err != nil {
			b.Fatal(err)
		}
		if _, err := svc.NetworkEndpointGroups.DetachNetworkEndpoints(project, zone, "neg", detach).Do(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed())/float64(b.N)/float64(perGet), "x-get")
}
