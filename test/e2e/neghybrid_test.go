//go:build integration

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

package e2e

import (
	"context"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
)

// hybridMapping is the hybrid tenant's spec.gcp: its Nodes' zones are racks, rack-b and rack-c mapped to zones b and
// c, every other rack (rack-d) to the default zone d.
const hybridMapping = `{"spec":{"gcp":{"networkEndpointType":"NON_GCP_PRIVATE_IP_PORT",` +
	`"zoneMapping":{"rack-b":"europe-west1-b","rack-c":"europe-west1-c"},"defaultNEGZone":"europe-west1-d"}}}`

// TestHybridNEGsFollowTheMappedZonesAndATypeSwitchKeepsServing walks hybrid NEGs (docs/neg.md, "Hybrid NEGs") on
// the built binary and the fake GCE:
//
//  1. the CRD refuses a hybrid tenant with a subnetwork, or without a zone for its Nodes, and a GCE_VM_IP_PORT
//     tenant with a zone mapping, naming the field;
//  2. a hybrid tenant whose Nodes are in racks gets, for its Service, NON_GCP_PRIVATE_IP_PORT NEGs without a
//     subnetwork in the GCE zones the racks map to, holding exactly its ready endpoints as IPv4 address and port, no
//     instance; beside it, a GCE_VM_IP_PORT tenant in another project gets its usual NEGs;
//  3. a Node moved to another rack moves its endpoints to the NEG of the zone that rack maps to;
//  4. the GCE_VM_IP_PORT tenant switches to hybrid NEGs: they are made beside the old ones, which go once the new
//     ones are synced, and every sample of GCE during the switch holds every ready endpoint in some NEG.
func TestHybridNEGsFollowTheMappedZonesAndATypeSwitchKeepsServing(t *testing.T) {
	resetLease(t)
	gce := startFakeGCE(t)
	hybrid, vm := newWorkload(t, gce), newWorkload(t, gce)
	racks := map[string]string{} // Node → rack
	for zi := range zones {
		for i := range 2 {
			name, rack := hybrid.nodeName(zi, i), fmt.Sprintf("rack-%c", 'b'+zi)
			hybrid.setNodeZone(name, rack)
			racks[name] = rack
		}
	}

	// 1: what the CRD refuses, each naming its field: a hybrid tenant with a subnetwork, or without a zone for its
	// Nodes, and a GCE_VM_IP_PORT tenant with a zone mapping.
	pcs := hybrid.mp.MultiprojectV1alpha1().ProviderConfigs()
	for _, bad := range []struct{ patch, field string }{
		{`{"spec":{"gcp":{"networkEndpointType":"NON_GCP_PRIVATE_IP_PORT","defaultNEGZone":"europe-west1-d","subnetwork":"sub"}}}`, "spec.gcp.subnetwork"},
		{`{"spec":{"gcp":{"networkEndpointType":"NON_GCP_PRIVATE_IP_PORT"}}}`, "spec.gcp.zoneMapping"},
		{`{"spec":{"gcp":{"defaultNEGZone":"europe-west1-d"}}}`, "spec.gcp.defaultNEGZone"},
	} {
		_, err := pcs.Patch(hybrid.ctx, hybrid.tenant, types.MergePatchType, []byte(bad.patch), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), bad.field) {
			t.Errorf("patch %s: got %v, want Invalid naming %s", bad.patch, err, bad.field)
		}
	}
	if _, err := pcs.Patch(hybrid.ctx, hybrid.tenant, types.MergePatchType, []byte(hybridMapping), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	m := startManager(t, "hybrid", managerKubeconfig(t), gce.Endpoint(), lifecycleElection)
	waitLeader(t, m.identity(), 2*time.Minute)

	// 2: two ready endpoints per rack and one not ready, which no NEG may hold.
	eps := hybrid.endpoints(0, 0, 2)
	hybrid.setService("svc-0", eps)
	notReady := endpointSlice(hybrid.appNS, "svc-0", []endpoint{{ip: "10.0.99.1", node: hybrid.nodeName(0, 0)}})
	notReady.Name = "svc-0-not-ready"
	notReady.Endpoints[0].Conditions.Ready = ptr.To(false)
	if _, err := hybrid.kube.DiscoveryV1().EndpointSlices(hybrid.appNS).Create(hybrid.ctx, notReady, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	vm.setService("svc-0", vm.endpoints(1, 0, 2))
	waitUntil(t, "2: hybrid NEGs in the mapped zones with exactly the ready endpoints", hybrid.hybridNEGsHold(eps, racks))
	vm.waitConverged("2: the GCE_VM_IP_PORT tenant's NEGs beside them")
	for _, neg := range gce.NEGs(vm.project) {
		if neg.NetworkEndpointType != fakegce.TypeGCEVMIPPort {
			t.Errorf("the GCE_VM_IP_PORT tenant's NEG %s is of type %s", neg.Name, neg.NetworkEndpointType)
		}
	}

	// 3: Node c-0 moves to rack-b: its endpoints move from zone c's NEG to zone b's.
	moved := hybrid.nodeName(1, 0)
	hybrid.setNodeZone(moved, "rack-b")
	racks[moved] = "rack-b"
	waitUntil(t, "3: the moved Node's endpoints in zone b's NEG", hybrid.hybridNEGsHold(eps, racks))

	// 4: the GCE_VM_IP_PORT tenant switches to hybrid NEGs, its Nodes' zones mapped to themselves, while a sampler
	// reads GCE.
	ready := vm.endpoints(1, 0, 2)
	sampler := sampleServed(t, gce, vm.project, ready)
	if _, err := pcs.Patch(vm.ctx, vm.tenant, types.MergePatchType, []byte(`{"spec":{"gcp":{"networkEndpointType":"NON_GCP_PRIVATE_IP_PORT",`+
		`"zoneMapping":{"europe-west1-b":"europe-west1-b","europe-west1-c":"europe-west1-c","europe-west1-d":"europe-west1-d"}}}}`),
		metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	vmRacks := map[string]string{}
	for _, ep := range ready {
		vmRacks[ep.node] = zones[ep.zone]
	}
	waitUntil(t, "4: the switched tenant's hybrid NEGs only, the old ones gone", vm.hybridNEGsHold(ready, vmRacks))
	s := sampler()
	if s.missing != "" {
		t.Errorf("4: during the type switch the Service was not served by all its ready endpoints: %s", s.missing)
	}
	if s.both == 0 {
		t.Errorf("4: no sample of %d saw the old NEGs beside the new ones", s.samples)
	}
	t.Logf("4: %d samples of GCE during the type switch, %d with NEGs of both types", s.samples, s.both)
	if _, err := vm.mp.MultiprojectV1alpha1().Translations(vm.appNS).Get(vm.ctx, translationName("svc-0"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("4: the GCE_VM_IP_PORT Translation is still there (%v)", err)
	}

	// The Services go, and every NEG of both tenants with them.
	for _, w := range []*workload{hybrid, vm} {
		w.deleteService("svc-0")
		waitUntil(t, "the NEGs of "+w.tenant+" deleted with its Service", func() (bool, string) {
			negs := gce.NEGs(w.project)
			return len(negs) == 0, fmt.Sprintf("%d NEGs left in %s", len(negs), w.project)
		})
	}
}

// setNodeZone sets the topology.kubernetes.io/zone label of a Node of the workload.
func (w *workload) setNodeZone(node, zone string) {
	w.t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, corev1.LabelTopologyZone, zone)
	if _, err := w.kube.CoreV1().Nodes().Patch(w.ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		w.t.Fatalf("labelling Node %s: %v", node, err)
	}
}

// hybridZone is the GCE zone a hybrid tenant of hybridMapping (or of a mapping of zones to themselves) gives rack.
func hybridZone(rack string) string {
	switch rack {
	case "rack-b":
		return zones[0]
	case "rack-c":
		return zones[1]
	case "rack-d":
		return zones[2]
	}
	return rack
}

// hybridNEGsHold says whether the workload's project holds exactly the hybrid NEGs of its Service svc-0: one per
// zone its endpoints' Nodes map to (racks), each NON_GCP_PRIVATE_IP_PORT without a subnetwork and holding exactly
// the endpoints of that zone as IPv4 address and port 8080, without an instance; and no other NEG.
func (w *workload) hybridNEGsHold(eps []endpoint, racks map[string]string) func() (bool, string) {
	return func() (bool, string) {
		want := map[string]sets.Set[string]{}
		for _, ep := range eps {
			zone := hybridZone(racks[ep.node])
			if want[zone] == nil {
				want[zone] = sets.New[string]()
			}
			want[zone].Insert(ep.ip)
		}
		negs := w.gce.NEGs(w.project)
		got := map[string]sets.Set[string]{}
		for _, neg := range negs {
			zone := path.Base(neg.Zone)
			if neg.NetworkEndpointType != fakegce.TypeNonGCPPrivateIPPort || neg.Subnetwork != "" || !strings.HasPrefix(neg.Name, "mph1-") {
				return false, fmt.Sprintf("NEG %s/%s is of type %s, subnetwork %q", zone, neg.Name, neg.NetworkEndpointType, neg.Subnetwork)
			}
			inGCE, _ := w.gce.Endpoints(w.project, zone, neg.Name)
			got[zone] = sets.New[string]()
			for _, ep := range inGCE {
				if ep.Instance != "" || ep.Port != 8080 || ep.Ipv6Address != "" {
					return false, fmt.Sprintf("NEG %s/%s holds %+v", zone, neg.Name, ep)
				}
				got[zone].Insert(ep.IpAddress)
			}
		}
		// Zones with Nodes and no endpoint have their NEG, empty.
		for zone, ips := range got {
			if ips.Len() == 0 && want[zone] == nil {
				want[zone] = sets.New[string]()
			}
		}
		if len(got) != len(want) {
			return false, fmt.Sprintf("NEGs in zones %v, want %v", slices.Sorted(mapKeys(got)), slices.Sorted(mapKeys(want)))
		}
		for zone, ips := range want {
			if !ips.Equal(got[zone]) {
				return false, fmt.Sprintf("zone %s holds %v, want %v", zone, sets.List(got[zone]), sets.List(ips))
			}
		}
		return true, ""
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// servedSamples is what sampleServed saw: how many samples, how many held NEGs of both types, and the first that
// lacked a ready endpoint in every NEG ("" if none).
type servedSamples struct {
	samples, both int
	missing       string
}

// sampleServed reads the project's NEGs in GCE every few milliseconds until the returned function is called, which
// returns what it saw.
func sampleServed(t testing.TB, gce *fakegce.Server, project string, ready []endpoint) func() servedSamples {
	ctx, cancel := context.WithCancel(t.Context())
	var (
		mu   sync.Mutex
		seen servedSamples
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			served, types := sets.New[string](), sets.New[string]()
			for _, neg := range gce.NEGs(project) {
				types.Insert(neg.NetworkEndpointType)
				eps, _ := gce.Endpoints(project, path.Base(neg.Zone), neg.Name)
				for _, ep := range eps {
					served.Insert(ep.IpAddress)
				}
			}
			mu.Lock()
			seen.samples++
			if types.Len() > 1 {
				seen.both++
			}
			for _, ep := range ready {
				if !served.Has(ep.ip) && seen.missing == "" {
					seen.missing = fmt.Sprintf("sample %d at %s: %s in no NEG (served: %v)", seen.samples, time.Now().Format(time.StampMilli), ep.ip, sets.List(served))
				}
			}
			mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return func() servedSamples {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
}

// projectNEGIDs are the GCE ids of every NEG of the workload's project, by "zone/name".
func (w *workload) projectNEGIDs() map[string]uint64 {
	ids := map[string]uint64{}
	for _, neg := range w.gce.NEGs(w.project) {
		ids[path.Base(neg.Zone)+"/"+neg.Name] = neg.Id
	}
	return ids
}

// hybridUntouched fails the test unless the workload's hybrid NEGs are still the ones of ids, holding eps, and its
// Service svc-h has no Translation of the GCE_VM_IP_PORT layout: what a build that knows only that layout must leave.
func (w *workload) hybridUntouched(t *testing.T, phase string, eps []endpoint, racks map[string]string, ids map[string]uint64) {
	t.Helper()
	if ok, why := w.hybridNEGsHold(eps, racks)(); !ok {
		t.Errorf("%s: the hybrid NEGs changed: %s", phase, why)
	}
	if got := w.projectNEGIDs(); !maps.Equal(got, ids) {
		t.Errorf("%s: the hybrid NEGs were recreated or others made: GCE ids %v, were %v", phase, got, ids)
	}
	if _, err := w.mp.MultiprojectV1alpha1().Translations(w.appNS).Get(w.ctx, translationName("svc-h"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("%s: svc-h has a GCE_VM_IP_PORT Translation (%v)", phase, err)
	}
}
