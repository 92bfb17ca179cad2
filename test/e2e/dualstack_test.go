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
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
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
	w.setPodSlice("svc-0", eps)
	w.waitConverged("svc-0, single-stack")
	ids := w.negIDs("svc-0")

	w.setIPv6Slice("svc-0", eps)
	waitUntil(t, "every Pod's endpoint to carry both addresses in the same NEGs", w.negsHold(ids, dualStackWant(eps, len(eps))))

	if err := w.kube.DiscoveryV1().EndpointSlices(w.appNS).Delete(w.ctx, "svc-0-http-v6", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "every Pod's endpoint to be IPv4 only again in the same NEGs", w.negsHold(ids, dualStackWant(eps, 0)))
}

// ipv6Of is the IPv6 address the dual-stack helpers give the Pod of the i-th endpoint.
func ipv6Of(i int) string { return fmt.Sprintf("fd00::%x", i+1) }

// setPodSlice rewrites the Service's EndpointSlice (setService's) with the targetRef the EndpointSlice controller
// writes, the i-th endpoint's Pod named pod-<i>.
func (w *workload) setPodSlice(service string, eps []endpoint) {
	w.t.Helper()
	v4 := endpointSlice(w.appNS, service, eps)
	for i := range v4.Endpoints {
		v4.Endpoints[i].TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: w.appNS, Name: fmt.Sprintf("pod-%d", i)}
	}
	w.writeSlice(v4)
}

// setIPv6Slice creates or updates the Service's IPv6 slice: the endpoints of setPodSlice, with ipv6Of(i) for the i-th.
func (w *workload) setIPv6Slice(service string, eps []endpoint) {
	w.t.Helper()
	v6 := endpointSlice(w.appNS, service, eps)
	v6.Name += "-v6"
	v6.AddressType = discoveryv1.AddressTypeIPv6
	for i := range v6.Endpoints {
		v6.Endpoints[i].Addresses = []string{ipv6Of(i)}
		v6.Endpoints[i].TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: w.appNS, Name: fmt.Sprintf("pod-%d", i)}
	}
	w.writeSlice(v6)
}

func (w *workload) writeSlice(slice *discoveryv1.EndpointSlice) {
	w.t.Helper()
	api := w.kube.DiscoveryV1().EndpointSlices(w.appNS)
	stored, err := api.Get(w.ctx, slice.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = api.Create(w.ctx, slice, metav1.CreateOptions{})
	case err == nil:
		slice.ResourceVersion = stored.ResourceVersion
		_, err = api.Update(w.ctx, slice, metav1.UpdateOptions{})
	}
	if err != nil {
		w.t.Fatalf("EndpointSlice %s: %v", slice.Name, err)
	}
}

// negIDs are the GCE ids of the Service's NEGs, by zone and name, as its Translation names them.
func (w *workload) negIDs(service string) map[string]uint64 {
	w.t.Helper()
	ids := map[string]uint64{}
	for _, res := range w.translation(translationName(service)).Spec.Resources {
		for _, n := range w.gce.NEGs(w.project) {
			if path.Base(n.Zone) == res.Zone && n.Name == res.Name {
				ids[res.Zone+"/"+res.Name] = n.Id
			}
		}
	}
	if len(ids) != len(zones) {
		w.t.Fatalf("Service %s: NEGs %v in GCE, want one per zone", service, ids)
	}
	return ids
}

// dualStackWant is what negsHold wants: eps by IPv4 address, the first n with their IPv6 address (ipv6Of).
func dualStackWant(eps []endpoint, n int) map[string]string {
	want := map[string]string{}
	for i, ep := range eps {
		want[ep.ip] = ""
		if i < n {
			want[ep.ip] = ipv6Of(i)
		}
	}
	return want
}

// negsHold says whether the NEGs in ids (negIDs) hold exactly want, IPv4 address → IPv6 address ("" for none); it
// fails the test when one of them is gone or was recreated.
func (w *workload) negsHold(ids map[string]uint64, want map[string]string) func() (bool, string) {
	return func() (bool, string) {
		got := map[string]string{}
		found := 0
		for _, n := range w.gce.NEGs(w.project) {
			key := path.Base(n.Zone) + "/" + n.Name
			id, ours := ids[key]
			if !ours {
				continue
			}
			if found++; id != n.Id {
				w.t.Fatalf("NEG %s was recreated (id %d, was %d)", key, n.Id, id)
			}
			inGCE, _ := w.gce.Endpoints(w.project, path.Base(n.Zone), n.Name)
			for _, ep := range inGCE {
				got[ep.IpAddress] = ep.Ipv6Address
			}
		}
		if found != len(ids) {
			w.t.Fatalf("of the NEGs %v, GCE holds %d", ids, found)
		}
		return fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprintf("GCE holds %v, want %v", got, want)
	}
}

// translationCarries says whether each endpoint of the Service's Translation names its Pod (pods) or none does
// (!pods), and exactly ipv6 of them carry an IPv6 address.
func (w *workload) translationCarries(service string, pods bool, ipv6 int) func() (bool, string) {
	return func() (bool, string) {
		tr, err := w.mp.MultiprojectV1alpha1().Translations(w.appNS).Get(w.ctx, translationName(service), metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		var eps []mpv1alpha1.NetworkEndpoint
		for _, res := range tr.Spec.Resources {
			if res.NetworkEndpointGroup != nil {
				eps = append(eps, res.NetworkEndpointGroup.Endpoints...)
			}
		}
		withIPv6 := 0
		for _, ep := range eps {
			if (ep.Pod != "") != pods {
				return false, fmt.Sprintf("Translation %s lists %+v", tr.Name, eps)
			}
			if ep.Ipv6Address != "" {
				withIPv6++
			}
		}
		return len(eps) > 0 && withIPv6 == ipv6, fmt.Sprintf("Translation %s lists %+v", tr.Name, eps)
	}
}

// awaitingDeletion says whether the Service's NEGs (negIDs, taken while it existed) await deletion: each still in
// GCE with its GCE id and no endpoint, and no Translation of the Service.
func (w *workload) awaitingDeletion(service string, ids map[string]uint64) func() (bool, string) {
	return func() (bool, string) {
		if _, err := w.mp.MultiprojectV1alpha1().Translations(w.appNS).Get(w.ctx, translationName(service), metav1.GetOptions{}); err == nil {
			return false, "Translation " + translationName(service) + " exists"
		}
		for key, id := range ids {
			zone, name, _ := strings.Cut(key, "/")
			n, ok := w.gce.NEG(w.project, zone, name)
			if !ok || n.Id != id {
				return false, fmt.Sprintf("NEG %s gone or recreated", key)
			}
			if eps, _ := w.gce.Endpoints(w.project, zone, name); len(eps) > 0 {
				return false, fmt.Sprintf("NEG %s has %d endpoints", key, len(eps))
			}
		}
		return true, ""
	}
}

// negsIn returns the NEGs of ids ("zone/name") still in GCE.
func (w *workload) negsIn(ids map[string]uint64) []string {
	var left []string
	for key := range ids {
		zone, name, _ := strings.Cut(key, "/")
		if _, ok := w.gce.NEG(w.project, zone, name); ok {
			left = append(left, key)
		}
	}
	sort.Strings(left)
	return left
}
