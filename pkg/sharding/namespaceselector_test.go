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

package sharding

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiserversharding "k8s.io/apiserver/pkg/sharding"
)

// matches parses the selector as kube-apiserver does and says whether it selects an object in namespace.
// matcher parses the selector as kube-apiserver does, once (a parse compiles it, which costs far more than a
// match), and returns whether it selects a namespace's objects.
func matcher(t *testing.T, selector string) func(namespace string) bool {
	t.Helper()
	sel, err := apiserversharding.Parse(selector)
	if err != nil {
		t.Fatalf("kube-apiserver refuses the selector %q: %v", selector, err)
	}
	return func(namespace string) bool {
		t.Helper()
		ok, err := sel.Matches(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "s"}})
		if err != nil {
			t.Fatalf("matching %s: %v", namespace, err)
		}
		return ok
	}
}

func TestNamespaceSelectorSelectsExactlyItsBuckets(t *testing.T) {
	var mine []string
	var buckets []uint32
	for i := range 40 {
		ns := fmt.Sprintf("tenant-%d-app", i)
		mine = append(mine, ns)
		buckets = append(buckets, NamespaceBucket(ns))
	}
	matches := matcher(t, NamespaceSelector(buckets))
	for _, ns := range mine {
		if !matches(ns) {
			t.Errorf("the selector misses namespace %s of its own buckets", ns)
		}
	}
	covered := map[uint32]bool{}
	for _, b := range buckets {
		covered[b] = true
	}
	for i := range 2000 {
		ns := fmt.Sprintf("other-%d", i)
		if got, want := matches(ns), covered[NamespaceBucket(ns)]; got != want {
			t.Errorf("namespace %s (bucket %d): selected %v, want %v", ns, NamespaceBucket(ns), got, want)
		}
	}
}

func TestNamespaceSelectorEdges(t *testing.T) {
	last := uint32(1<<BucketBits - 1)
	sel := NamespaceSelector([]uint32{0, 1, 2, last})
	if n := strings.Count(sel, "shardRange"); n != 2 {
		t.Errorf("buckets 0..2 and the last should be two ranges, got %d: %s", n, sel)
	}
	if !strings.Contains(sel, "'0x10000000000000000'") {
		t.Errorf("the last bucket must end at 2^64: %s", sel)
	}
	if _, err := apiserversharding.Parse(sel); err != nil {
		t.Errorf("kube-apiserver refuses %s: %v", sel, err)
	}
	none := matcher(t, NamespaceSelector(nil))
	for _, ns := range []string{"default", "kube-system", "tenant-1"} {
		if none(ns) {
			t.Errorf("the selector of no bucket selects %s", ns)
		}
	}
}

func TestNamespaceSelectorStaysWithinMaxTerms(t *testing.T) {
	// Every other bucket: 2,048 runs, which must become at most MaxSelectorTerms wider ones that still cover them.
	var buckets []uint32
	for b := uint32(0); b < 1<<BucketBits; b += 2 {
		buckets = append(buckets, b)
	}
	sel := NamespaceSelector(buckets)
	if n := strings.Count(sel, "shardRange"); n > MaxSelectorTerms || n == 0 {
		t.Fatalf("%d ranges, want 1..%d", n, MaxSelectorTerms)
	}
	parsed, err := apiserversharding.Parse(sel)
	if err != nil {
		t.Fatalf("kube-apiserver refuses the selector (%d bytes): %v", len(sel), err)
	}
	for i := range 3000 {
		ns := fmt.Sprintf("ns-%d", i)
		if NamespaceBucket(ns)%2 != 0 {
			continue
		}
		if ok, _ := parsed.Matches(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns}}); !ok {
			t.Fatalf("namespace %s of a covered bucket is not selected", ns)
		}
	}
}
