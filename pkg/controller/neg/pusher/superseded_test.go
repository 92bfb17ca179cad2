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

package pusher

import (
	"testing"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
)

// A status of a generation the spec has left is skipped only when it records nothing the Translation does not
// already: a NEG's id or self link learned from its insert, or a backend service it joined, is written, since the
// sweep and a later build detach exactly the recorded memberships.
func TestASupersededStatusIsSkippedOnlyWhenItRecordsNothingNew(t *testing.T) {
	neg := func(id, selfLink string, backends ...string) mpv1alpha1.BackendResourceStatus {
		return mpv1alpha1.BackendResourceStatus{Name: "k8s1-web", Zone: "us-central1-a", ID: id, SelfLink: selfLink, BackendServices: backends}
	}
	const link = "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a/networkEndpointGroups/k8s1-web"
	const bs = "https://www.googleapis.com/compute/v1/projects/p/global/backendServices/web"
	recorded := []mpv1alpha1.BackendResourceStatus{neg("1", link, bs)}
	for _, tc := range []struct {
		name string
		next []mpv1alpha1.BackendResourceStatus
		want bool
	}{
		{"the same records", []mpv1alpha1.BackendResourceStatus{neg("1", link, bs)}, true},
		{"no resource", nil, true},
		{"a NEG the Translation does not record", []mpv1alpha1.BackendResourceStatus{neg("1", link, bs), {Name: "k8s1-web", Zone: "us-central1-b", ID: "2"}}, false},
		{"a new id", []mpv1alpha1.BackendResourceStatus{neg("3", link, bs)}, false},
		{"a self link learned", []mpv1alpha1.BackendResourceStatus{neg("1", link+"x", bs)}, false},
		{"a backend joined", []mpv1alpha1.BackendResourceStatus{neg("1", link, bs, bs+"2")}, false},
		{"a backend left", []mpv1alpha1.BackendResourceStatus{neg("1", link)}, false},
	} {
		if got := recordsNothingNew(tc.next, recorded); got != tc.want {
			t.Errorf("%s: recordsNothingNew = %v, want %v", tc.name, got, tc.want)
		}
	}
}
