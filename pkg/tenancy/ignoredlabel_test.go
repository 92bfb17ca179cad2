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

package tenancy_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/multiproject/multiproject-controller-manager/pkg/tenancy"
)

// ignored is the Event the router records for a Service whose tenant label is ignored; owner "" is no tenant.
func ignored(service, label, owner string) string {
	namespace, _, _ := strings.Cut(service, "/")
	belongs := "to no tenant"
	if owner != "" {
		belongs = "to tenant " + owner
	}
	return fmt.Sprintf("Warning %s services %s: Label %s=%s is ignored: namespace %s belongs %s, and a namespaced object "+
		"belongs to its namespace's tenant", tenancy.ReasonTenantLabelIgnored, service, labelKey, label, namespace, belongs)
}

// TestIgnoredTenantLabelIsReported checks the TenantLabelIgnored Events: one per object and label value, on
// Namespaced objects only, never on a resync or an update that leaves the label as it was, and never before the
// object's namespace is known (informers sync in any order at startup).
func TestIgnoredTenantLabelIsReported(t *testing.T) {
	svc := serviceObj
	cases := []struct {
		name    string
		objects []runtime.Object
		// atStart are the Events once the informers have synced, want those after act.
		atStart []string
		act     func(f *fixture)
		want    []string
		// records is how many reported labels the router remembers in the end.
		records int
	}{
		{
			name: "a label naming another tenant, or any tenant in a namespace of none, is reported once",
			objects: []runtime.Object{
				namespaceObj("ns-a", "a"), namespaceObj("ns-x", ""),
				svc("ns-a", "plain", ""), svc("ns-a", "right", "a"), svc("ns-a", "wrong", "b"), svc("ns-x", "any", "a"),
				// Neither a manager-written object nor a Node is judged: their label decides.
				writtenObj("ns-a", "w1", "b"), nodeObj("n1", "b"),
			},
			atStart: []string{ignored("ns-a/wrong", "b", "a"), ignored("ns-x/any", "a", "")},
			act: func(f *fixture) {
				for range 2 {
					for _, name := range []string{"plain", "right", "wrong"} {
						f.touch(svc("ns-a", name, ""))
					}
					f.touch(svc("ns-x", "any", ""))
				}
			},
			records: 2,
		},
		{
			name:    "a changed label is reported again, a label put back too",
			objects: []runtime.Object{namespaceObj("ns-a", "a"), svc("ns-a", "s1", "")},
			act: func(f *fixture) {
				f.relabel(svc("ns-a", "s1", ""), "b")
				f.touch(svc("ns-a", "s1", ""))
				f.relabel(svc("ns-a", "s1", ""), "c")
				f.relabel(svc("ns-a", "s1", ""), "b")
				f.relabel(svc("ns-a", "s1", ""), "a")
			},
			want:    []string{ignored("ns-a/s1", "b", "a"), ignored("ns-a/s1", "c", "a"), ignored("ns-a/s1", "b", "a")},
			records: 0,
		},
		{
			name:    "objects created before their namespace are judged when it appears",
			objects: []runtime.Object{svc("ns-late", "right", "a"), svc("ns-late", "wrong", "b")},
			act:     func(f *fixture) { f.create(namespaceObj("ns-late", "a")) },
			want:    []string{ignored("ns-late/wrong", "b", "a")},
			records: 1,
		},
		{
			name:    "a namespace move judges its objects against the new tenant",
			objects: []runtime.Object{namespaceObj("ns-1", "a"), svc("ns-1", "s1", "a"), svc("ns-1", "s2", "b")},
			atStart: []string{ignored("ns-1/s2", "b", "a")},
			act: func(f *fixture) {
				f.relabel(namespaceObj("ns-1", ""), "b")
				// Both labels have been reported now; unlabeling the namespace reports neither again.
				f.relabel(namespaceObj("ns-1", ""), "")
			},
			want:    []string{ignored("ns-1/s1", "a", "b")},
			records: 2,
		},
		{
			name:    "a deleted object is forgotten; re-created, it is reported again",
			objects: []runtime.Object{namespaceObj("ns-a", "a"), svc("ns-a", "s1", "b"), svc("ns-a", "s2", "b")},
			atStart: []string{ignored("ns-a/s1", "b", "a"), ignored("ns-a/s2", "b", "a")},
			act: func(f *fixture) {
				f.remove(svc("ns-a", "s1", ""))
				f.remove(svc("ns-a", "s2", ""))
				f.create(svc("ns-a", "s1", "b"))
			},
			want:    []string{ignored("ns-a/s1", "b", "a")},
			records: 1,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.objects...)
			recorders := map[string]*recorder{"a": newRecorder(), "b": newRecorder()}
			for name, rec := range recorders {
				f.watch(f.tenant(name), rec)
			}
			f.barrier(recorders)
			if got := f.events.take(); !slices.Equal(sorted(got), sorted(tc.atStart)) {
				t.Errorf("Events at start:\n  %q\nwant\n  %q", got, tc.atStart)
			}
			if tc.act != nil {
				tc.act(f)
				f.barrier(recorders)
			}
			if got := f.events.take(); !slices.Equal(got, tc.want) {
				t.Errorf("Events:\n  %q\nwant\n  %q", got, tc.want)
			}
			if _, records := tenancy.DeliveredNamespaced(f.router); records != tc.records {
				t.Errorf("the router remembers %d reported labels, want %d", records, tc.records)
			}
		})
	}
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
