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
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/multiproject/multiproject-controller-manager/pkg/tenancy"
)

// TestOwnership checks who owns what, both through a new handler's initial list and through the view's indexer.
func TestOwnership(t *testing.T) {
	emptyLabel := serviceObj("ns-a", "empty-label", "")
	emptyLabel.Labels = map[string]string{labelKey: ""}

	cases := []struct {
		name    string
		objects []runtime.Object
		// want maps a tenant to the ids ("<resource> <key>") it owns.
		want map[string][]string
	}{
		{
			name:    "own label wins over the namespace's",
			objects: []runtime.Object{namespaceObj("ns-b", "b"), serviceObj("ns-b", "s1", "a")},
			want:    map[string][]string{"a": {"services ns-b/s1"}, "b": {"namespaces ns-b"}},
		},
		{
			name:    "unlabeled object belongs to its namespace's tenant",
			objects: []runtime.Object{namespaceObj("ns-a", "a"), serviceObj("ns-a", "s1", "")},
			want:    map[string][]string{"a": {"namespaces ns-a", "services ns-a/s1"}},
		},
		{
			name:    "unlabeled object in an unlabeled namespace belongs to nobody",
			objects: []runtime.Object{namespaceObj("ns-x", ""), serviceObj("ns-x", "s1", "")},
			want:    map[string][]string{},
		},
		{
			name:    "unlabeled object in a namespace that does not exist belongs to nobody",
			objects: []runtime.Object{serviceObj("ghost", "s1", "")},
			want:    map[string][]string{},
		},
		{
			name:    "empty label value counts as no label",
			objects: []runtime.Object{namespaceObj("ns-a", "a"), emptyLabel},
			want:    map[string][]string{"a": {"namespaces ns-a", "services ns-a/empty-label"}},
		},
		{
			name:    "unlabeled node is shared by every tenant",
			objects: []runtime.Object{nodeObj("n1", "")},
			want:    map[string][]string{"a": {"nodes n1"}, "b": {"nodes n1"}},
		},
		{
			name:    "labeled node is seen by its tenant only",
			objects: []runtime.Object{nodeObj("n1", "a"), nodeObj("n2", "")},
			want:    map[string][]string{"a": {"nodes n1", "nodes n2"}, "b": {"nodes n2"}},
		},
		{
			name:    "a namespace belongs to its own label only",
			objects: []runtime.Object{namespaceObj("ns-a", "a"), namespaceObj("ns-x", "")},
			want:    map[string][]string{"a": {"namespaces ns-a"}},
		},
		{
			name: "two tenants are isolated",
			objects: []runtime.Object{
				namespaceObj("ns-a", "a"), namespaceObj("ns-b", "b"),
				serviceObj("ns-a", "s1", ""), serviceObj("ns-a", "s2", "b"),
				serviceObj("ns-b", "s1", ""), serviceObj("ns-b", "s2", "a"),
			},
			want: map[string][]string{
				"a": {"namespaces ns-a", "services ns-a/s1", "services ns-b/s2"},
				"b": {"namespaces ns-b", "services ns-a/s2", "services ns-b/s1"},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.objects...)
			for _, name := range []string{"a", "b"} {
				tenant := f.tenant(name)
				rec := newRecorder()
				f.watch(tenant, rec)
				want := tc.want[name]
				if got := rec.stateKeys(); !slices.Equal(got, want) {
					t.Errorf("tenant %s: initial list = %v, want %v", name, got, want)
				}
				for _, id := range want {
					if n := rec.initialCount(id); n != 1 {
						t.Errorf("tenant %s: %s delivered %d times with isInInitialList, want 1", name, id, n)
					}
				}
				if got := listedKeys(t, tenant, allResources...); !slices.Equal(got, want) {
					t.Errorf("tenant %s: ListKeys = %v, want %v", name, got, want)
				}
				// Get by key agrees with the list for every object, owned or not.
				for _, obj := range tc.objects {
					resource, key := resourceAndKey(t, obj)
					_, exists, err := f.view(tenant, resource).GetIndexer().GetByKey(key)
					if err != nil {
						t.Fatalf("GetByKey(%s): %v", key, err)
					}
					if wantExists := slices.Contains(want, resource.Resource+" "+key); exists != wantExists {
						t.Errorf("tenant %s: GetByKey(%s %s) exists = %v, want %v", name, resource.Resource, key, exists, wantExists)
					}
				}
			}
		})
	}
}

// TestRouting checks which events each tenant receives when objects and namespaces change.
func TestRouting(t *testing.T) {
	svc := func(ns, name, tenant string) *corev1.Service { return serviceObj(ns, name, tenant) }
	cases := []struct {
		name    string
		objects []runtime.Object
		act     func(f *fixture)
		// want maps a tenant (of a, b, c) to the events it must receive, in order for each object.
		want map[string][]string
	}{
		{
			name:    "labeling an unowned service adds it to the tenant",
			objects: []runtime.Object{namespaceObj("ns-x", ""), svc("ns-x", "s1", "")},
			act:     func(f *fixture) { f.relabel(svc("ns-x", "s1", ""), "a") },
			want:    map[string][]string{"a": {"ADD services ns-x/s1"}},
		},
		{
			name:    "relabeling a service is a delete for the old tenant and an add for the new",
			objects: []runtime.Object{svc("ns-x", "s1", "a")},
			act:     func(f *fixture) { f.relabel(svc("ns-x", "s1", ""), "b") },
			want:    map[string][]string{"a": {"DELETE services ns-x/s1"}, "b": {"ADD services ns-x/s1"}},
		},
		{
			name:    "relabeling there and back",
			objects: []runtime.Object{svc("ns-x", "s1", "a")},
			act: func(f *fixture) {
				f.relabel(svc("ns-x", "s1", ""), "b")
				f.relabel(svc("ns-x", "s1", ""), "a")
			},
			want: map[string][]string{
				"a": {"DELETE services ns-x/s1", "ADD services ns-x/s1"},
				"b": {"ADD services ns-x/s1", "DELETE services ns-x/s1"},
			},
		},
		{
			name:    "an update within one tenant is an update",
			objects: []runtime.Object{namespaceObj("ns-a", "a"), svc("ns-a", "s1", ""), svc("ns-x", "s2", "a")},
			act: func(f *fixture) {
				f.touch(svc("ns-a", "s1", ""))
				f.touch(svc("ns-x", "s2", ""))
			},
			want: map[string][]string{"a": {"UPDATE services ns-a/s1", "UPDATE services ns-x/s2"}},
		},
		{
			name:    "removing the label hands the service to its namespace's tenant",
			objects: []runtime.Object{namespaceObj("ns-b", "b"), svc("ns-b", "s1", "a")},
			act:     func(f *fixture) { f.relabel(svc("ns-b", "s1", ""), "") },
			want:    map[string][]string{"a": {"DELETE services ns-b/s1"}, "b": {"ADD services ns-b/s1"}},
		},
		{
			name: "relabeling a namespace moves its unlabeled objects and only those",
			objects: []runtime.Object{
				namespaceObj("ns-1", "a"), svc("ns-1", "s1", ""), svc("ns-1", "s2", ""), svc("ns-1", "s3", "c"),
			},
			act: func(f *fixture) { f.relabel(namespaceObj("ns-1", ""), "b") },
			want: map[string][]string{
				"a": {"DELETE namespaces ns-1", "DELETE services ns-1/s1", "DELETE services ns-1/s2"},
				"b": {"ADD namespaces ns-1", "ADD services ns-1/s1", "ADD services ns-1/s2"},
			},
		},
		{
			name:    "unlabeling a namespace takes its objects from the tenant",
			objects: []runtime.Object{namespaceObj("ns-1", "a"), svc("ns-1", "s1", "")},
			act:     func(f *fixture) { f.relabel(namespaceObj("ns-1", ""), "") },
			want:    map[string][]string{"a": {"DELETE namespaces ns-1", "DELETE services ns-1/s1"}},
		},
		{
			name:    "labeling a namespace gives its objects to the tenant",
			objects: []runtime.Object{namespaceObj("ns-1", ""), svc("ns-1", "s1", "")},
			act:     func(f *fixture) { f.relabel(namespaceObj("ns-1", ""), "a") },
			want:    map[string][]string{"a": {"ADD namespaces ns-1", "ADD services ns-1/s1"}},
		},
		{
			name:    "objects created before their namespace follow it when it appears",
			objects: []runtime.Object{svc("ns-late", "s1", "")},
			act:     func(f *fixture) { f.create(namespaceObj("ns-late", "a")) },
			want:    map[string][]string{"a": {"ADD namespaces ns-late", "ADD services ns-late/s1"}},
		},
		{
			name:    "a service created in a tenant's namespace is added",
			objects: []runtime.Object{namespaceObj("ns-a", "a")},
			act:     func(f *fixture) { f.create(svc("ns-a", "s1", "")) },
			want:    map[string][]string{"a": {"ADD services ns-a/s1"}},
		},
		{
			name:    "deleted services are deleted for their owners",
			objects: []runtime.Object{namespaceObj("ns-a", "a"), svc("ns-a", "s1", ""), svc("ns-a", "s2", "b")},
			act: func(f *fixture) {
				f.remove(svc("ns-a", "s1", ""))
				f.remove(svc("ns-a", "s2", ""))
			},
			want: map[string][]string{"a": {"DELETE services ns-a/s1"}, "b": {"DELETE services ns-a/s2"}},
		},
		{
			name:    "deleting a namespace that still holds objects deletes them for the tenant",
			objects: []runtime.Object{namespaceObj("ns-a", "a"), svc("ns-a", "s1", "")},
			act:     func(f *fixture) { f.remove(namespaceObj("ns-a", "")) },
			want:    map[string][]string{"a": {"DELETE namespaces ns-a", "DELETE services ns-a/s1"}},
		},
		{
			name: "an unlabeled node goes to every tenant",
			act:  func(f *fixture) { f.create(nodeObj("n1", "")) },
			want: map[string][]string{"a": {"ADD nodes n1"}, "b": {"ADD nodes n1"}, "c": {"ADD nodes n1"}},
		},
		{
			name:    "an update of a shared node goes to every tenant",
			objects: []runtime.Object{nodeObj("n1", "")},
			act:     func(f *fixture) { f.touch(nodeObj("n1", "")) },
			want:    map[string][]string{"a": {"UPDATE nodes n1"}, "b": {"UPDATE nodes n1"}, "c": {"UPDATE nodes n1"}},
		},
		{
			name:    "labeling a shared node hides it from the other tenants",
			objects: []runtime.Object{nodeObj("n1", "")},
			act:     func(f *fixture) { f.relabel(nodeObj("n1", ""), "a") },
			want:    map[string][]string{"a": {"UPDATE nodes n1"}, "b": {"DELETE nodes n1"}, "c": {"DELETE nodes n1"}},
		},
		{
			name:    "unlabeling a node shares it again",
			objects: []runtime.Object{nodeObj("n1", "a")},
			act:     func(f *fixture) { f.relabel(nodeObj("n1", ""), "") },
			want:    map[string][]string{"a": {"UPDATE nodes n1"}, "b": {"ADD nodes n1"}, "c": {"ADD nodes n1"}},
		},
		{
			name:    "relabeling a node moves it between two tenants only",
			objects: []runtime.Object{nodeObj("n1", "a")},
			act:     func(f *fixture) { f.relabel(nodeObj("n1", ""), "b") },
			want:    map[string][]string{"a": {"DELETE nodes n1"}, "b": {"ADD nodes n1"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.objects...)
			recorders := map[string]*recorder{}
			tenants := map[string]*tenancy.Tenant{}
			for _, name := range []string{"a", "b", "c"} {
				rec := newRecorder()
				tenant := f.tenant(name)
				f.watch(tenant, rec)
				recorders[name] = rec
				tenants[name] = tenant
			}
			for _, rec := range recorders {
				rec.takeEvents() // the initial lists
			}

			tc.act(f)
			f.barrier(recorders)

			for name, rec := range recorders {
				if got, want := byObject(rec.takeEvents()), byObject(tc.want[name]); !slices.Equal(got, want) {
					t.Errorf("tenant %s: events = %v, want %v", name, got, want)
				}
				if got, want := rec.stateKeys(), listedKeys(t, tenants[name], allResources...); !slices.Equal(got, want) {
					t.Errorf("tenant %s: objects known from events = %v, but the view lists %v", name, got, want)
				}
			}
		})
	}
}

// byObject orders events by object, keeping the order of each object's events: the order between objects is not
// specified (a namespace move visits its objects in map order).
func byObject(events []string) []string {
	out := slices.Clone(events)
	slices.SortStableFunc(out, func(x, y string) int {
		_, idX, _ := strings.Cut(x, " ")
		_, idY, _ := strings.Cut(y, " ")
		return strings.Compare(idX, idY)
	})
	return out
}

func resourceAndKey(t testing.TB, obj runtime.Object) (schema.GroupVersionResource, string) {
	t.Helper()
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		t.Fatalf("key of %T: %v", obj, err)
	}
	switch obj.(type) {
	case *corev1.Namespace:
		return tenancy.NamespacesResource, key
	case *corev1.Service:
		return servicesResource, key
	case *corev1.Node:
		return nodesResource, key
	}
	t.Fatalf("unexpected %T", obj)
	return schema.GroupVersionResource{}, ""
}
