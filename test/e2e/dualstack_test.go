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
	"fmt"
	"path"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestAServiceTurningDualStackKeepsItsNEGs: a single-stack Service's NEGs hold its Pods' IPv4 addresses; once the
// Service has an IPv6 EndpointSlice too (it turned dual-stack), the same NEGs (same GCE ids) hold each Pod as one
// endpoint with both addresses, and without it again only the IPv4 addresses. The slices are the test's (a
// selector-less Service), with the targetRefs the EndpointSlice controller writes.
func TestAServiceTurningDualStackKeepsItsNEGs(t *testing.T) {
	resetLease(t)
	gce := startFakeGCE(t)
	w := newWorkload(t, gce)
	m := startManager(t, "a", managerKubeconfig(t), gce.Endpoint(), lifecycleElection)
	waitLeader(t, m.identity(), 2*time.Minute)

	eps := w.endpoints(0, 0, 2)
	w.setService("svc-0", eps)
	v4 := endpointSlice(w.appNS, "svc-0", eps)
	for i := range v4.Endpoints {
		v4.Endpoints[i].TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: w.appNS, Name: fmt.Sprintf("pod-%d", i)}
	}
	stored, err := w.kube.DiscoveryV1().EndpointSlices(w.appNS).Get(w.ctx, v4.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v4.ResourceVersion = stored.ResourceVersion
	if _, err := w.kube.DiscoveryV1().EndpointSlices(w.appNS).Update(w.ctx, v4, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.waitConverged("svc-0, single-stack")
	ids := map[string]uint64{}
	for _, n := range gce.NEGs(w.project) {
		ids[n.Zone+"/"+n.Name] = n.Id
	}

	// want: IPv4 address → IPv6 address ("" for none) of every endpoint of the Service's NEGs.
	ipv6Of := func(i int) string { return fmt.Sprintf("fd00::%x", i+1) }
	holds := func(dualStack bool) func() (bool, string) {
		return func() (bool, string) {
			got, want := map[string]string{}, map[string]string{}
			for i, ep := range eps {
				want[ep.ip] = ""
				if dualStack {
					want[ep.ip] = ipv6Of(i)
				}
			}
			for _, n := range gce.NEGs(w.project) {
				if ids[n.Zone+"/"+n.Name] != n.Id {
					t.Fatalf("NEG %s/%s was recreated (id %d, was %d)", n.Zone, n.Name, n.Id, ids[n.Zone+"/"+n.Name])
				}
				inGCE, _ := gce.Endpoints(w.project, path.Base(n.Zone), n.Name)
				for _, ep := range inGCE {
					got[ep.IpAddress] = ep.Ipv6Address
				}
			}
			return fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprintf("GCE holds %v, want %v", got, want)
		}
	}

	v6 := v4.DeepCopy()
	v6.ObjectMeta = metav1.ObjectMeta{Namespace: w.appNS, Name: "svc-0-http-v6", Labels: v4.Labels}
	v6.AddressType = discoveryv1.AddressTypeIPv6
	for i := range v6.Endpoints {
		v6.Endpoints[i].Addresses = []string{ipv6Of(i)}
	}
	if _, err := w.kube.DiscoveryV1().EndpointSlices(w.appNS).Create(w.ctx, v6, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "every Pod's endpoint to carry both addresses in the same NEGs", holds(true))

	if err := w.kube.DiscoveryV1().EndpointSlices(w.appNS).Delete(w.ctx, v6.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "every Pod's endpoint to be IPv4 only again in the same NEGs", holds(false))
}
