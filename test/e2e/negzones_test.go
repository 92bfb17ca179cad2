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
	"path"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/neg/translator"
)

// TestNEGsInFixedZonesAndZonesWithoutNodesAreKept walks the story of NEGs a backend service can name ahead
// (docs/neg.md, "Zones"), on the built binary and the fake GCE:
//
//  1. a tenant listing zone g (spec.gcp.zones) and a Service asking for "*" (the tenant's zones), zone f and a name
//     that is no zone: before any endpoint it has empty NEGs in its Nodes' zones b, c, d and in f and g, a Warning
//     InvalidNEGZone, and a status giving each NEG's zone, GCE id and selfLink, every one Inactive;
//  2. endpoints come: b, c and d fill, the same NEGs (ids);
//  3. zone d loses all its Nodes: its NEG stays, emptied and Inactive, same id;
//  4. the Nodes return: the same NEG fills again, Active;
//  5. f leaves the Service's list: its NEG is deleted, g's (still listed) and d's stay;
//  6. the Service goes: every NEG goes, the kept ones included.
func TestNEGsInFixedZonesAndZonesWithoutNodesAreKept(t *testing.T) {
	resetLease(t)
	gce := startFakeGCE(t)
	w := newWorkload(t, gce)
	const zoneF, zoneG = "europe-west1-f", "europe-west1-g"
	// The tenant's zones, set before the manager starts (a change of spec.gcp restarts the tenant's controllers).
	if _, err := w.mp.MultiprojectV1alpha1().ProviderConfigs().Patch(w.ctx, w.tenant, types.MergePatchType,
		[]byte(`{"spec":{"gcp":{"zones":["`+zoneG+`"]}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	m := startManager(t, "a", managerKubeconfig(t), gce.Endpoint(), lifecycleElection)
	waitLeader(t, m.identity(), 2*time.Minute)

	w.fixed = map[string][]string{"svc-0": {zoneF, zoneG}}
	w.setService("svc-0", nil)
	w.setAnnotation("svc-0", `{"exposed_ports":{"80":{}},"zones":["*","`+zoneF+`","Europe-West1-X"]}`)
	w.waitConverged("1: empty NEGs in the Nodes' zones and in f and g, before any endpoint")
	ids := w.negIDsInZones("svc-0", 5)
	waitUntil(t, "1: the status to give each NEG's id and selfLink, every one Inactive", w.statusShows("svc-0", ids, nil))
	waitUntil(t, "1: a Warning about the zone name", func() (bool, string) {
		events, err := w.kube.CoreV1().Events(w.appNS).List(w.ctx, metav1.ListOptions{FieldSelector: fields.Set{
			"involvedObject.kind": "Service", "involvedObject.name": "svc-0", "reason": translator.ReasonInvalidZone}.String()})
		if err != nil || len(events.Items) == 0 {
			return false, fmt.Sprintf("no %s Event (%v)", translator.ReasonInvalidZone, err)
		}
		return strings.Contains(events.Items[0].Message, "Europe-West1-X"), events.Items[0].Message
	})

	eps := w.endpoints(0, 0, 2)
	w.setService("svc-0", eps)
	w.waitConverged("2: endpoints in b, c and d")
	w.sameNEGs("svc-0", ids)
	waitUntil(t, "2: b, c and d Active", w.statusShows("svc-0", ids, []string{zones[0], zones[1], zones[2]}))

	// 3: both Nodes of d go, and with them d's endpoints.
	var dNodes []*corev1.Node
	for i := range 2 {
		n, err := w.kube.CoreV1().Nodes().Get(w.ctx, w.nodeName(2, i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		dNodes = append(dNodes, n)
		if err := w.kube.CoreV1().Nodes().Delete(w.ctx, n.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var withoutD []endpoint
	for _, ep := range eps {
		if ep.zone != 2 {
			withoutD = append(withoutD, ep)
		}
	}
	w.setService("svc-0", withoutD)
	w.waitConverged("3: zone d without Nodes keeps its NEG, emptied")
	w.sameNEGs("svc-0", ids)
	waitUntil(t, "3: d Inactive with its id", w.statusShows("svc-0", ids, []string{zones[0], zones[1]}))

	// 4: the Nodes come back, and so do d's endpoints.
	for _, n := range dNodes {
		n.ResourceVersion, n.UID = "", ""
		if _, err := w.kube.CoreV1().Nodes().Create(w.ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w.setService("svc-0", eps)
	w.waitConverged("4: d's Nodes back, its NEG fills again")
	w.sameNEGs("svc-0", ids)
	waitUntil(t, "4: d Active again with its id", w.statusShows("svc-0", ids, []string{zones[0], zones[1], zones[2]}))

	// 5: f leaves the list.
	w.fixed["svc-0"] = []string{zoneG}
	w.setAnnotation("svc-0", `{"exposed_ports":{"80":{}},"zones":["*"]}`)
	w.waitConverged("5: f left the list: its NEG deleted")
	for key := range ids {
		if strings.HasPrefix(key, zoneF+"/") {
			delete(ids, key)
		}
	}
	w.sameNEGs("svc-0", ids)

	// 6: the Service goes, and every NEG of it.
	w.deleteService("svc-0")
	w.waitConverged("6: the Service deleted, every NEG of it too")
}

// setAnnotation sets the Service's NEG annotation.
func (w *workload) setAnnotation(service, value string) {
	w.t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, w.negAnnotation, value)
	if _, err := w.kube.CoreV1().Services(w.appNS).Patch(w.ctx, service, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		w.t.Fatalf("annotating Service %s: %v", service, err)
	}
}

// negIDsInZones are the GCE ids of the Service's NEGs ("zone/name"), which must be n.
func (w *workload) negIDsInZones(service string, n int) map[string]uint64 {
	w.t.Helper()
	ids := map[string]uint64{}
	for _, res := range w.translation(translationName(service)).Spec.Resources {
		if neg, ok := w.gce.NEG(w.project, res.Zone, res.Name); ok {
			ids[res.Zone+"/"+res.Name] = neg.Id
		}
	}
	if len(ids) != n {
		w.t.Fatalf("Service %s: NEGs %v in GCE, want %d", service, ids, n)
	}
	return ids
}

// sameNEGs fails the test unless the Service's Translation declares exactly the NEGs of ids and GCE holds each with
// its id: none recreated.
func (w *workload) sameNEGs(service string, ids map[string]uint64) {
	w.t.Helper()
	declared := 0
	for _, res := range w.translation(translationName(service)).Spec.Resources {
		key := res.Zone + "/" + res.Name
		id, ok := ids[key]
		neg, inGCE := w.gce.NEG(w.project, res.Zone, res.Name)
		switch {
		case !ok:
			w.t.Errorf("Service %s declares NEG %s, not one of %v", service, key, ids)
		case !inGCE:
			w.t.Errorf("NEG %s (id %d) was deleted", key, id)
		case neg.Id != id:
			w.t.Errorf("NEG %s was recreated (id %d, was %d)", key, neg.Id, id)
		}
		declared++
	}
	if declared != len(ids) {
		w.t.Errorf("Service %s declares %d NEGs, want %d: %v", service, declared, len(ids), ids)
	}
}

// statusShows says whether the Service's Translation status lists exactly the NEGs of ids, each with its GCE id and
// selfLink (as GCE gives them), Active in the zones of active and Inactive elsewhere, with the counts to match.
func (w *workload) statusShows(service string, ids map[string]uint64, active []string) func() (bool, string) {
	return func() (bool, string) {
		tr, err := w.mp.MultiprojectV1alpha1().Translations(w.appNS).Get(context.Background(), translationName(service), metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if len(tr.Status.Resources) != len(ids) {
			return false, fmt.Sprintf("status lists %d NEGs, want %d: %+v", len(tr.Status.Resources), len(ids), tr.Status.Resources)
		}
		for _, r := range tr.Status.Resources {
			id, ok := ids[r.Zone+"/"+r.Name]
			neg, _ := w.gce.NEG(w.project, r.Zone, r.Name)
			want := mpv1alpha1.BackendResourceLifecycleInactive
			for _, z := range active {
				if z == r.Zone {
					want = mpv1alpha1.BackendResourceLifecycleActive
				}
			}
			if !ok || r.ID != strconv.FormatUint(id, 10) || neg == nil || r.SelfLink != neg.SelfLink ||
				path.Base(r.SelfLink) != r.Name || r.Lifecycle != want {
				return false, fmt.Sprintf("zone %s: id %s, selfLink %s, %s; want id %d, GCE's selfLink, %s", r.Zone, r.ID, r.SelfLink, r.Lifecycle, id, want)
			}
		}
		if int(tr.Status.ActiveResources) != len(active) || int(tr.Status.InactiveResources) != len(ids)-len(active) {
			return false, fmt.Sprintf("active %d, inactive %d; want %d, %d", tr.Status.ActiveResources, tr.Status.InactiveResources, len(active), len(ids)-len(active))
		}
		return true, ""
	}
}
