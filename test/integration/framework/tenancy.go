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

package framework

import (
	"context"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/tenancy"
)

// tenancySyncTimeout bounds the wait for an optional API to be served, synced and routed, as the manager's default
// --cache-sync-timeout bounds the wait for its informers.
const tenancySyncTimeout = 2 * time.Minute

// Tenancy is what the manager builds once per leadership term (informerset.NewRouting), as a test reads it: the
// tenancy Router that gives each tenant its filtered views, and the shared informers.
type Tenancy struct {
	Router *tenancy.Router
	// Informers holds the shared informer of every resource the manager always watches, and of each optional one
	// the test waited for (ManagerOptions.Served).
	Informers map[schema.GroupVersionResource]cache.SharedIndexInformer
	// Production is what informerset.NewRouting built; its Served and Shared are the binary's (they also count an
	// optional API the test did not wait for once the cluster serves it).
	Production *informerset.Routing
}

// servedTenancy waits until every resource of wanted is served, synced and routed (an optional API, a CRD, is
// routed once discovery shows it, as in the manager), and returns tn with the informers a test reads: those of
// every resource the manager always watches, and of each optional one in wanted.
func servedTenancy(t testing.TB, ctx context.Context, tn *informerset.Routing, wanted []schema.GroupVersionResource) *Tenancy {
	t.Helper()
	notServed := func() []schema.GroupVersionResource {
		return slices.DeleteFunc(slices.Clone(wanted), tn.Served)
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, tenancySyncTimeout, true, func(context.Context) (bool, error) {
		return len(notServed()) == 0, nil
	}); err != nil {
		t.Fatalf("framework: not served, synced and routed: %v (is its CRD installed?)", notServed())
	}
	informers := map[schema.GroupVersionResource]cache.SharedIndexInformer{}
	for _, r := range informerset.Resources {
		if r.Optional && !slices.Contains(wanted, r.GVR) {
			continue
		}
		inf, _ := tn.Shared(r.GVR)
		informers[r.GVR] = inf
	}
	return &Tenancy{Router: tn.Router, Informers: informers, Production: tn}
}
