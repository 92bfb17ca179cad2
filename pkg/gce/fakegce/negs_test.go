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
	"net/http"
	"strings"
	"testing"
	"time"

	compute "google.golang.org/api/compute/v1"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
)

func TestInsertThenGetReturnsNEGAsGCEDoes(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	op, err := e.svc.NetworkEndpointGroups.Insert(project, zone, &compute.NetworkEndpointGroup{
		Name:                "neg-1",
		NetworkEndpointType: "GCE_VM_IP_PORT",
		DefaultPort:         8080,
		Network:             "default",
		Subnetwork:          "nodes",
		Description:         `{"owner":"` + marker + `"}`,
		Id:                  42, // output-only: ignored
	}).Context(e.ctx).Do()
	noErr(t, err)
	if op.Status != "DONE" || op.OperationType != "insert" || op.Error != nil {
		t.Errorf("insert operation = %+v, want DONE insert without error", op)
	}

	got, err := e.svc.NetworkEndpointGroups.Get(project, zone, "neg-1").Context(e.ctx).Do()
	noErr(t, err)
	base := "https://www.googleapis.com/compute/v1/projects/" + project
	checks := map[string][2]string{
		"kind":              {got.Kind, "compute#networkEndpointGroup"},
		"description":       {got.Description, `{"owner":"` + marker + `"}`},
		"selfLink":          {got.SelfLink, base + "/zones/" + zone + "/networkEndpointGroups/neg-1"},
		"zone":              {got.Zone, base + "/zones/" + zone},
		"network":           {got.Network, base + "/global/networks/default"},
		"subnetwork":        {got.Subnetwork, base + "/regions/us-central1/subnetworks/nodes"},
		"type":              {got.NetworkEndpointType, "GCE_VM_IP_PORT"},
		"creationTimestamp": {got.CreationTimestamp, "2026-03-04T05:06:30.000+00:00"},
	}
	for field, c := range checks {
		if c[0] != c[1] {
			t.Errorf("%s = %q, want %q", field, c[0], c[1])
		}
	}
	if _, err := time.Parse(time.RFC3339, got.CreationTimestamp); err != nil {
		t.Errorf("creationTimestamp %q is not RFC 3339: %v", got.CreationTimestamp, err)
	}
	if got.Id == 0 || got.Id == 42 {
		t.Errorf("id = %d, want a server-assigned id", got.Id)
	}
	if op.TargetId != got.Id || op.TargetLink != got.SelfLink {
		t.Errorf("operation target = %d %s, want %d %s", op.TargetId, op.TargetLink, got.Id, got.SelfLink)
	}
	if got.DefaultPort != 8080 || got.Size != 0 {
		t.Errorf("defaultPort, size = %d, %d; want 8080, 0", got.DefaultPort, got.Size)
	}
}

func TestInsertNormalizesNetworkReferences(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	base := "https://www.googleapis.com/compute/v1/"
	for i, tc := range []struct{ network, subnetwork, wantNetwork, wantSubnetwork string }{
		{"", "", base + "projects/" + project + "/global/networks/default", ""},
		{"projects/host/global/networks/vpc", "projects/host/regions/us-central1/subnetworks/s",
			base + "projects/host/global/networks/vpc", base + "projects/host/regions/us-central1/subnetworks/s"},
		{"https://compute.googleapis.com/compute/v1/projects/host/global/networks/vpc", "regions/us-central1/subnetworks/s",
			base + "projects/host/global/networks/vpc", base + "projects/" + project + "/regions/us-central1/subnetworks/s"},
	} {
		name := "neg-" + string(rune('a'+i))
		_, err := e.svc.NetworkEndpointGroups.Insert(project, zone, &compute.NetworkEndpointGroup{
			Name: name, Network: tc.network, Subnetwork: tc.subnetwork,
		}).Do()
		noErr(t, err)
		got, _ := e.srv.NEG(project, zone, name)
		if got.Network != tc.wantNetwork || got.Subnetwork != tc.wantSubnetwork {
			t.Errorf("%d: network, subnetwork = %q, %q; want %q, %q", i, got.Network, got.Subnetwork, tc.wantNetwork, tc.wantSubnetwork)
		}
	}
	_, err := e.svc.NetworkEndpointGroups.Insert(project, zone, &compute.NetworkEndpointGroup{
		Name: "wrong-region", Subnetwork: "regions/europe-west1/subnetworks/s",
	}).Do()
	wantAPIError(t, err, http.StatusBadRequest, fakegce.ReasonInvalid)
}

func TestInsertValidatesName(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	for _, tc := range []struct {
		name   string
		reason string // "" means accepted
	}{
		{"a", ""},
		{"neg-0-ok", ""},
		{strings.Repeat("a", 63), ""},
		{"", fakegce.ReasonRequired},
		{strings.Repeat("a", 64), fakegce.ReasonInvalid},
		{"Upper", fakegce.ReasonInvalid},
		{"1starts-with-digit", fakegce.ReasonInvalid},
		{"ends-with-dash-", fakegce.ReasonInvalid},
		{"under_score", fakegce.ReasonInvalid},
	} {
		_, err := e.svc.NetworkEndpointGroups.Insert(project, zone, &compute.NetworkEndpointGroup{Name: tc.name}).Do()
		if tc.reason == "" {
			if err != nil {
				t.Errorf("insert %q: %v, want success", tc.name, err)
			}
			continue
		}
		wantAPIError(t, err, http.StatusBadRequest, tc.reason)
		if _, ok := e.srv.NEG(project, zone, tc.name); ok {
			t.Errorf("insert %q was refused but the NEG exists", tc.name)
		}
	}
}

func TestInsertValidatesTypeAndDefaultPort(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	for _, tc := range []struct {
		neg    compute.NetworkEndpointGroup
		reason string
	}{
		{compute.NetworkEndpointGroup{Name: "a", NetworkEndpointType: "GCE_VM_IP", DefaultPort: 80}, fakegce.ReasonInvalid},
		{compute.NetworkEndpointGroup{Name: "b", DefaultPort: 70000}, fakegce.ReasonInvalid},
		{compute.NetworkEndpointGroup{Name: "c", NetworkEndpointType: "NO_SUCH_TYPE"}, fakegce.ReasonInvalid},
		{compute.NetworkEndpointGroup{Name: "d", NetworkEndpointType: "SERVERLESS"}, fakegce.ReasonNotImplemented},
	} {
		_, err := e.svc.NetworkEndpointGroups.Insert(project, zone, &tc.neg).Do()
		wantAPIError(t, err, http.StatusBadRequest, tc.reason)
	}
	if got := e.srv.NEGs(project); len(got) != 0 {
		t.Errorf("refused inserts left NEGs: %v", got)
	}
}

func TestInsertOfExistingNameIsAlreadyExists(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	e.insert(t, project, zone, "neg-1")
	_, err := e.svc.NetworkEndpointGroups.Insert(project, zone, &compute.NetworkEndpointGroup{Name: "neg-1", Description: "other"}).Do()
	gerr := wantAPIError(t, err, http.StatusConflict, fakegce.ReasonAlreadyExists)
	if !strings.Contains(gerr.Message, "networkEndpointGroups/neg-1") {
		t.Errorf("message %q does not name the NEG", gerr.Message)
	}
	got, _ := e.srv.NEG(project, zone, "neg-1")
	if got.Description != marker {
		t.Errorf("description = %q: the refused insert changed the NEG", got.Description)
	}
	// The same name in another zone or project is another NEG.
	e.insert(t, project, "us-central1-b", "neg-1")
	e.insert(t, "tenant-b", zone, "neg-1")
}

func TestCallsOnMissingNEGAreNotFound(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	e.insert(t, project, "us-central1-b", "neg-1") // same name, other zone: must not be found
	eps := endpoints(1)
	calls := map[string]func() error{
		"get": func() error { _, err := e.svc.NetworkEndpointGroups.Get(project, zone, "neg-1").Do(); return err },
		"delete": func() error {
			_, err := e.svc.NetworkEndpointGroups.Delete(project, zone, "neg-1").Do()
			return err
		},
		"attach": func() error { _, err := e.attach(project, zone, "neg-1", eps); return err },
		"detach": func() error { _, err := e.detach(project, zone, "neg-1", eps); return err },
		"listNetworkEndpoints": func() error {
			_, err := e.svc.NetworkEndpointGroups.ListNetworkEndpoints(project, zone, "neg-1",
				&compute.NetworkEndpointGroupsListEndpointsRequest{}).Do()
			return err
		},
	}
	for name, call := range calls {
		gerr := wantAPIError(t, call(), http.StatusNotFound, fakegce.ReasonNotFound)
		want := "The resource 'projects/" + project + "/zones/" + zone + "/networkEndpointGroups/neg-1' was not found"
		if gerr.Message != want {
			t.Errorf("%s: message %q, want %q", name, gerr.Message, want)
		}
	}
}

func TestPathParametersAreValidated(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	_, err := e.svc.NetworkEndpointGroups.Get(project, zone, "Bad_Name").Do()
	wantAPIError(t, err, http.StatusBadRequest, fakegce.ReasonInvalid)
	_, err = e.svc.NetworkEndpointGroups.Get(project, "Zone_1", "neg").Do()
	wantAPIError(t, err, http.StatusBadRequest, fakegce.ReasonInvalid)
	_, err = e.svc.NetworkEndpointGroups.Get("Bad Project", zone, "neg").Do()
	wantAPIError(t, err, http.StatusBadRequest, fakegce.ReasonInvalid)
	if got := e.srv.Projects(); len(got) != 1 || got[0] != project {
		t.Errorf("projects = %v: an invalid project ID must not create state", got)
	}
	if got := e.srv.Errors(project)[fakegce.MethodGet]; got != 2 {
		t.Errorf("get errors of %s = %d, want 2 (invalid NEG name, invalid zone)", project, got)
	}
	// Domain-scoped projects and project numbers are valid project identifiers.
	for _, p := range []string{"example.com:tenant", "123456789012"} {
		_, err = e.svc.NetworkEndpointGroups.Get(p, zone, "neg").Do()
		wantAPIError(t, err, http.StatusNotFound, fakegce.ReasonNotFound)
	}
}

func TestDeleteOfNEGInUseIsRefused(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	e.insert(t, project, zone, "neg-1")
	if err := e.srv.SetInUseBy(project, zone, "neg-1", "bs-1"); err != nil {
		t.Fatal(err)
	}
	_, err := e.svc.NetworkEndpointGroups.Delete(project, zone, "neg-1").Do()
	gerr := wantAPIError(t, err, http.StatusBadRequest, fakegce.ReasonResourceInUse)
	// ingress-gce's IsInUsedByError matches this phrase.
	if !strings.Contains(gerr.Message, "is already being used by") || !strings.Contains(gerr.Message, "global/backendServices/bs-1") {
		t.Errorf("message %q", gerr.Message)
	}
	if _, ok := e.srv.NEG(project, zone, "neg-1"); !ok {
		t.Fatal("refused delete removed the NEG")
	}

	if err := e.srv.SetInUseBy(project, zone, "neg-1"); err != nil {
		t.Fatal(err)
	}
	op, err := e.svc.NetworkEndpointGroups.Delete(project, zone, "neg-1").Do()
	noErr(t, err)
	if op.Status != "DONE" || op.OperationType != "delete" || op.Error != nil {
		t.Errorf("delete operation = %+v", op)
	}
	_, err = e.svc.NetworkEndpointGroups.Get(project, zone, "neg-1").Do()
	wantAPIError(t, err, http.StatusNotFound, fakegce.ReasonNotFound)
}

func TestListPagesThroughNEGsInNameOrder(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	names := []string{"neg-c", "neg-a", "neg-g", "neg-e", "neg-b", "neg-f", "neg-d"}
	for _, n := range names {
		e.insert(t, project, zone, n)
	}
	e.insert(t, project, "us-central1-b", "neg-other-zone")
	e.insert(t, "tenant-b", zone, "neg-other-project")

	var got []string
	var pageSizes []int
	err := e.svc.NetworkEndpointGroups.List(project, zone).MaxResults(3).Pages(e.ctx, func(l *compute.NetworkEndpointGroupList) error {
		pageSizes = append(pageSizes, len(l.Items))
		for _, n := range l.Items {
			got = append(got, n.Name)
		}
		return nil
	})
	noErr(t, err)
	want := "neg-a neg-b neg-c neg-d neg-e neg-f neg-g"
	if strings.Join(got, " ") != want {
		t.Errorf("listed %v, want %s", got, want)
	}
	if len(pageSizes) != 3 || pageSizes[0] != 3 || pageSizes[1] != 3 || pageSizes[2] != 1 {
		t.Errorf("page sizes %v, want [3 3 1]", pageSizes)
	}
	if c := e.srv.Calls(project)[fakegce.MethodList]; c != 3 {
		t.Errorf("list calls = %d, want 3", c)
	}

	// Without maxResults one page holds up to 500, and there is no next page.
	l, err := e.svc.NetworkEndpointGroups.List(project, zone).Do()
	noErr(t, err)
	if len(l.Items) != 7 || l.NextPageToken != "" {
		t.Errorf("default page: %d items, next %q", len(l.Items), l.NextPageToken)
	}
}

func TestAggregatedListGroupsNEGsByZone(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	e.insert(t, project, "us-central1-a", "neg-1")
	e.insert(t, project, "us-central1-b", "neg-1")
	e.insert(t, project, "us-central1-b", "neg-2")
	e.insert(t, "tenant-b", zone, "neg-3")
	got := map[string][]string{}
	err := e.svc.NetworkEndpointGroups.AggregatedList(project).MaxResults(2).Pages(e.ctx,
		func(l *compute.NetworkEndpointGroupAggregatedList) error {
			for scope, sl := range l.Items {
				for _, n := range sl.NetworkEndpointGroups {
					got[scope] = append(got[scope], n.Name)
				}
			}
			return nil
		})
	noErr(t, err)
	if len(got) != 2 || strings.Join(got["zones/us-central1-a"], ",") != "neg-1" ||
		strings.Join(got["zones/us-central1-b"], ",") != "neg-1,neg-2" {
		t.Errorf("aggregated list = %v", got)
	}
}

func TestListRefusesWhatTheFakeDoesNotImplement(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	e.insert(t, project, zone, "neg-1")
	e.insert(t, project, zone, "neg-2")
	_, err := e.svc.NetworkEndpointGroups.List(project, zone).Filter(`name = "neg-1"`).Do()
	gerr := wantAPIError(t, err, http.StatusBadRequest, fakegce.ReasonNotImplemented)
	if !strings.Contains(gerr.Message, "filter") {
		t.Errorf("message %q does not say filter is the problem", gerr.Message)
	}
	_, err = e.svc.NetworkEndpointGroups.List(project, zone).OrderBy("creationTimestamp desc").Do()
	wantAPIError(t, err, http.StatusBadRequest, fakegce.ReasonNotImplemented)
	if _, err := e.svc.NetworkEndpointGroups.List(project, zone).OrderBy("name").Do(); err != nil {
		t.Fatal(err)
	}

	_, err = e.svc.NetworkEndpointGroups.List(project, zone).MaxResults(501).Do()
	wantAPIError(t, err, http.StatusBadRequest, fakegce.ReasonInvalid)
	_, err = e.svc.NetworkEndpointGroups.List(project, zone).PageToken("garbage").Do()
	wantAPIError(t, err, http.StatusBadRequest, fakegce.ReasonInvalid)

	// A token is valid only for the list that issued it.
	first, err := e.svc.NetworkEndpointGroups.List(project, zone).MaxResults(1).Do()
	noErr(t, err)
	if first.NextPageToken == "" {
		t.Fatal("no next page token")
	}
	_, err = e.svc.NetworkEndpointGroups.List(project, "us-central1-b").PageToken(first.NextPageToken).Do()
	wantAPIError(t, err, http.StatusBadRequest, fakegce.ReasonInvalid)
	second, err := e.svc.NetworkEndpointGroups.List(project, zone).MaxResults(1).PageToken(first.NextPageToken).Do()
	noErr(t, err)
	if len(second.Items) != 1 || second.Items[0].Name != "neg-2" || second.NextPageToken != "" {
		t.Errorf("second page = %+v", second)
	}
}

func TestProjectsAreIsolated(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	e.insert(t, "tenant-a", zone, "neg-1")
	if _, err := e.attach("tenant-a", zone, "neg-1", endpoints(3)); err != nil {
		t.Fatal(err)
	}
	e.insert(t, "tenant-b", zone, "neg-1")

	a, _ := e.srv.NEG("tenant-a", zone, "neg-1")
	b, _ := e.srv.NEG("tenant-b", zone, "neg-1")
	if a.Size != 3 || b.Size != 0 {
		t.Errorf("sizes a=%d b=%d, want 3 and 0", a.Size, b.Size)
	}
	if a.Id == b.Id || a.SelfLink == b.SelfLink {
		t.Errorf("NEGs of two projects share id or selfLink: %d %s", a.Id, a.SelfLink)
	}
	if _, err := e.svc.NetworkEndpointGroups.Delete("tenant-b", zone, "neg-1").Do(); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.srv.NEG("tenant-a", zone, "neg-1"); !ok {
		t.Error("deleting tenant-b's NEG removed tenant-a's")
	}
	if got := e.srv.Projects(); strings.Join(got, ",") != "tenant-a,tenant-b" {
		t.Errorf("projects = %v", got)
	}
}

func TestSeededNEGIsServedLikeAnyOther(t *testing.T) {
	e := newEnv(t, fakegce.Options{})
	seeded, err := e.srv.SeedNEG(project, zone, &compute.NetworkEndpointGroup{
		Name: "not-ours", Description: "created by someone else", DefaultPort: 80,
	}, endpoints(2)...)
	noErr(t, err)
	got, err := e.svc.NetworkEndpointGroups.Get(project, zone, "not-ours").Do()
	noErr(t, err)
	if got.Description != "created by someone else" || got.Size != 2 || got.Id != seeded.Id {
		t.Errorf("get = %+v", got)
	}
	if e.srv.MutatingCalls(project) != 0 {
		t.Errorf("seeding counted as mutating calls: %v", e.srv.Calls(project))
	}
	if _, err := e.srv.SeedNEG(project, zone, &compute.NetworkEndpointGroup{Name: "not-ours"}); err == nil {
		t.Error("seeding an existing name succeeded")
	}
	if _, err := e.srv.SeedNEG(project, zone, &compute.NetworkEndpointGroup{Name: "Bad"}); err == nil {
		t.Error("seeding an invalid name succeeded")
	}
}
