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

package readiness

import (
	"context"
	"testing"
	"time"

	compute "google.golang.org/api/compute/v1"
	"k8s.io/klog/v2/ktesting"

	gceclient "github.com/multiproject/multiproject-controller-manager/pkg/gce/client"
	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
)

// TestHealthThroughTheGCEClient reads health as the reflector does in production, through the tenant's GCE client
// and the fake GCE over HTTP: no backend service uses the NEG (no health entry: without health check), then one
// does (HEALTHY); a failing list is an error, not a health.
func TestHealthThroughTheGCEClient(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	srv := fakegce.New(fakegce.Options{})
	srv.Start()
	t.Cleanup(srv.Close)
	neg := negRef{project: testProject, zone: "zone-a", name: "neg-web"}
	if _, err := srv.SeedNEG(neg.project, neg.zone, &compute.NetworkEndpointGroup{Name: neg.name,
		NetworkEndpointType: "GCE_VM_IP_PORT", DefaultPort: 8080, Network: "default"},
		&compute.NetworkEndpoint{Instance: "node-a", IpAddress: "10.0.0.1", Port: 8080}); err != nil {
		t.Fatal(err)
	}
	client, err := gceclient.New(ctx, gceclient.Config{ProviderConfig: testTenant, ProjectID: testProject, Endpoint: srv.Endpoint(), QPS: 1000, Burst: 1000})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	p := &polls{clients: func(context.Context, string) (HealthLister, error) { return client, nil }, round: time.Second,
		now: func() time.Time { return now }}
	healthNow := func() health {
		t.Helper()
		items, err := p.list(ctx, neg)
		if err != nil {
			t.Fatal(err)
		}
		h, _ := healthOf(items, addresses{ipv4: "10.0.0.1"}, 8080)
		return h
	}
	if h := healthNow(); h != healthNoCheck {
		t.Errorf("health in a NEG no backend service uses = %v, want without health check", h)
	}
	if err := srv.SetInUseBy(neg.project, neg.zone, neg.name, "bs-1"); err != nil {
		t.Fatal(err)
	}
	if h := healthNow(); h != healthNoCheck {
		t.Errorf("health within the round = %v, want the round's list (without health check)", h)
	}
	now = now.Add(time.Second)
	if h := healthNow(); h != healthHealthy {
		t.Errorf("health in a NEG of a backend service = %v, want healthy", h)
	}
	if other, _ := healthOf(nil, addresses{ipv4: "10.0.0.2"}, 8080); other != healthUnknown {
		t.Errorf("health of an endpoint not listed = %v, want unknown", other)
	}
	if calls := srv.Calls(testProject)[fakegce.MethodListEndpoints]; calls != 2 {
		t.Errorf("list calls = %d, want 2 (one per round)", calls)
	}
	srv.InjectFault(testProject, fakegce.MethodListEndpoints, fakegce.Fault{Code: 503})
	now = now.Add(time.Second)
	if _, err := p.list(ctx, neg); err == nil {
		t.Error("a failing list returned no error")
	}
}
