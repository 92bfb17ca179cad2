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
	emptyLabelNode := nodeObj("empty-label", "")
	emptyLabelNode.Labels = map[string]string{labelKey: ""}
	emptyLabelWritten := writtenObj("ns-a", "empty-label", "")
	emptyLabelWritten.Labels = map[string]string{labelKey: ""}

	cases := []struct {
		name    string
		objects []runtime.Object
		// want maps a tenant to the ids ("<resource> <key>") it owns.
		want map[string][]string
	}{
		{
			name:    "an object belongs to its namespace's tenant",
			objects: []runtime.Object{namespaceObj("ns-a", "a"), serviceObj("ns-a", "s1", "")},
			want:    map[string][]string{"a": {"namespaces ns-a", "services ns-a/s1"}},
		},
		{
			name:    "an object's own label grants nothing: the namespace decides",
			objects: []runtime.Object{namespaceObj("ns-b", "b"), serviceObj("ns-b", "s1", "a")},
			want:    map[string][]string{"b": {"namespaces ns-b", "services ns-b/s1"}},
		},
		{
			name:    "a label that names the namespace's tenant changes nothing",
			objects: []runtime.Object{namespaceObj("ns-a", "a"), serviceObj("ns-a", "s1", "a")},
			want:    map[string][]string{"a": {"namespaces ns-a", "services ns-a/s1"}},
		},
		{
			name:    "an object in an unlabeled namespace belongs to nobody, labeled or not",
			objects: []runtime.Object{namespaceObj("ns-x", ""), serviceObj("ns-x", "s1", ""), serviceObj("ns-x", "s2", "a")},
			want:    map[string][]string{},
		},
		{
			name:    "an object in a namespace that does not exist belongs to nobody, labeled or not",
			objects: []runtime.Object{serviceObj("ghost", "s1", ""), serviceObj("ghost", "s2", "a")},
			want:    map[string][]string{},
		},
		{
			name:    "a manager-written object belongs to the tenant its label names, whatever its namespace",
			objects: []runtime.Object{namespaceObj("ns-b", "b"), writtenObj("ns-b", "w1", "a"), writtenObj("ghost", "w2", "a")},
			want:    map[string][]string{"a": {"configmaps ghost/w2", "configmaps ns-b/w1"}, "b": {"namespaces ns-b"}},
		},
		{
			name:    "an unlabeled manager-written object belongs to nobody",
			objects: []runtime.Object{namespaceObj("ns-a", "a"), writtenObj("ns-a", "w1", "")},
			want:    map[string][]string{"a": {"namespaces ns-a"}},
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
			name:    "empty label value counts as no label",
			objects: []runtime.Object{emptyLabelNode, emptyLabelWritten},
			want:    map[string][]string{"a": {"nodes empty-label"}, "b": {"nodes empty-label"}},
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
				writtenObj("ns-a", "w1", "b"), writtenObj("ns-b", "w1", "a"),
			},
			want: map[string][]string{
				"a": {"configmaps ns-b/w1", "namespaces ns-a", "services ns-a/s1", "services ns-a/s2"},
				"b": {"configmaps ns-a/w1", "namespaces ns-b", "services ns-b/s1", "services ns-b/s2"},
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
			name:    "labeling a service in an unowned namespace gives it to nobody",
			objects: []runtime.Object{namespaceObj("ns-x", ""), svc("ns-x", "s1", "")},
			act:     func(f *fixture) { f.relabel(svc("ns-x", "s1", ""), "a") },
			want:    map[string][]string{},
		},
		{
			name:    "relabeling a service moves nothing: it is an update for its namespace's tenant",
			objects: []runtime.Object{namespaceObj("ns-a", "a"), svc("ns-a", "s1", "")},
			act: func(f *fixture) {
				f.relabel(svc("ns-a", "s1", ""), "b")
				f.relabel(svc("ns-a", "s1", ""), "a")
				f.relabel(svc("ns-a", "s1", ""), "")
			},
			want: map[string][]string{"a": {"UPDATE services ns-a/s1", "UPDATE services ns-a/s1", "UPDATE services ns-a/s1"}},
		},
		{
			name:    "an update within one tenant is an update",
			objects: []runtime.Object{namespaceObj("ns-a", "a"), svc("ns-a", "s1", ""), svc("ns-a", "s2", "b")},
			act: func(f *fixture) {
				f.touch(svc("ns-a", "s1", ""))
				f.touch(svc("ns-a", "s2", ""))
			},
			want: map[string][]string{"a": {"UPDATE services ns-a/s1", "UPDATE services ns-a/s2"}},
		},
		{
			name: "relabeling a namespace moves every object in it, whatever its label",
			objects: []runtime.Object{
				namespaceObj("ns-1", "a"), svc("ns-1", "s1", ""), svc("ns-1", "s2", "a"), svc("ns-1", "s3", "c"),
			},
			act: func(f *fixture) { f.relabel(namespaceObj("ns-1", ""), "b") },
			want: map[string][]string{
				"a": {"DELETE namespaces ns-1", "DELETE services ns-1/s1", "DELETE services ns-1/s2", "DELETE services ns-1/s3"},
				"b": {"ADD namespaces ns-1", "ADD services ns-1/s1", "ADD services ns-1/s2", "ADD services ns-1/s3"},
			},
		},
		{
			name:    "unlabeling a namespace takes its objects from the tenant",
			objects: []runtime.Object{namespaceObj("ns-1", "a"), svc("ns-1", "s1", ""), svc("ns-1", "s2", "a")},
			act:     func(f *fixture) { f.relabel(namespaceObj("ns-1", ""), "") },
			want:    map[string][]string{"a": {"DELETE namespaces ns-1", "DELETE services ns-1/s1", "DELETE services ns-1/s2"}},
		},
		{
			name:    "labeling a namespace gives its objects to the tenant",
			objects: []runtime.Object{namespaceObj("ns-1", ""), svc("ns-1", "s1", ""), svc("ns-1", "s2", "b")},
			act:     func(f *fixture) { f.relabel(namespaceObj("ns-1", ""), "a") },
			want:    map[string][]string{"a": {"ADD namespaces ns-1", "ADD services ns-1/s1", "ADD services ns-1/s2"}},
		},
		{
			name:    "objects created before their namespace follow it when it appears",
			objects: []runtime.Object{svc("ns-late", "s1", ""), svc("ns-late", "s2", "b")},
			act:     func(f *fixture) { f.create(namespaceObj("ns-late", "a")) },
			want:    map[string][]string{"a": {"ADD namespaces ns-late", "ADD services ns-late/s1", "ADD services ns-late/s2"}},
		},
		{
			name:    "a service created in a tenant's namespace is added, whatever its label",
			objects: []runtime.Object{namespaceObj("ns-a", "a")},
			act: func(f *fixture) {
				f.create(svc("ns-a", "s1", ""))
				f.create(svc("ns-a", "s2", "b"))
			},
			want: map[string][]string{"a": {"ADD services ns-a/s1", "ADD services ns-a/s2"}},
		},
		{
			name:    "deleted services are deleted for their namespace's tenant",
			objects: []runtime.Object{namespaceObj("ns-a", "a"), svc("ns-a", "s1", ""), svc("ns-a", "s2", "b")},
			act: func(f *fixture) {
				f.remove(svc("ns-a", "s1", ""))
				f.remove(svc("ns-a", "s2", ""))
			},
			want: map[string][]string{"a": {"DELETE services ns-a/s1", "DELETE services ns-a/s2"}},
		},
		{
			name:    "deleting a namespace that still holds objects deletes them for the tenant",
			objects: []runtime.Object{namespaceObj("ns-a", "a"), svc("ns-a", "s1", ""), svc("ns-a", "s2", "b")},
			act:     func(f *fixture) { f.remove(namespaceObj("ns-a", "")) },
			want:    map[string][]string{"a": {"DELETE namespaces ns-a", "DELETE services ns-a/s1", "DELETE services ns-a/s2"}},
		},
		{
			name:    "relabeling a manager-written object is a delete for the old tenant and an add for the new",
			objects: []runtime.Object{namespaceObj("ns-a", "a"), writtenObj("ns-a", "w1", "a")},
			act: func(f *fixture) {
				f.relabel(writtenObj("ns-a", "w1", ""), "b")
				f.relabel(writtenObj("ns-a", "w1", ""), "")
			},
			want: map[string][]string{
				"a": {"DELETE configmaps ns-a/w1"},
				"b": {"ADD configmaps ns-a/w1", "DELETE configmaps ns-a/w1"},
			},
		},
		{
			// What the neg controller relies on: Translations left behind in a namespace that moved to another
			// tenant stay with the tenant that wrote them, whose pusher deletes their NEGs in its own project.
			name:    "manager-written objects stay with their label's tenant when their namespace moves",
			objects: []runtime.Object{namespaceObj("ns-1", "a"), writtenObj("ns-1", "w1", "a")},
			act: func(f *fixture) {
				f.relabel(namespaceObj("ns-1", ""), "b")
				f.touch(writtenObj("ns-1", "w1", ""))
				f.remove(writtenObj("ns-1", "w1", ""))
			},
			want: map[string][]string{
				"a": {"DELETE namespaces ns-1", "UPDATE configmaps ns-1/w1", "DELETE configmaps ns-1/w1"},
				"b": {"ADD namespaces ns-1"},
			},
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
			tenants := map[string]*tenancy.TenantViews{}
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
	case *corev1.ConfigMap:
		return configMapsResource, key
	}
	t.Fatalf("unexpected %T", obj)
	return schema.GroupVersionResource{}, ""
}
