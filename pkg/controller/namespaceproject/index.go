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

package namespaceproject

import (
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/util/sets"

	rancherv3 "github.com/multiproject/api/rancher/management/v3"

	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
)

// projectNameLabels are the Project labels that name a Project besides its display name (informerset keeps the one
// list, so that the shared Project informer files a Project under the same names this package matches).
var projectNameLabels = informerset.ProjectNameLabels

// fold is the one case-insensitive form used for the index, the interest keys and matching, so they never disagree.
func fold(s string) string { return informerset.FoldProjectName(s) }

// matchKeys are the folded names under which p matches an app owner. They ignore a deletion (matches does not), so
// that the Project handler still finds the namespaces a deleted Project matched.
func matchKeys(p *rancherv3.Project) []string { return informerset.ProjectNames(p) }

// matches reports whether p is a candidate for the folded app owner.
func matches(p *rancherv3.Project, foldedOwner string) bool {
	return p.DeletionTimestamp == nil && slices.Contains(matchKeys(p), foldedOwner)
}

// sameMatchFields reports whether two states of a Project match the same app owners.
func sameMatchFields(a, b *rancherv3.Project) bool {
	if a.Spec.DisplayName != b.Spec.DisplayName || (a.DeletionTimestamp == nil) != (b.DeletionTimestamp == nil) {
		return false
	}
	for _, label := range projectNameLabels {
		if a.Labels[label] != b.Labels[label] {
			return false
		}
	}
	return true
}

// ownerIndex maps a folded app owner to the tenant's namespaces labeled with it. The tenant's Namespace informer is
// a view of a shared informer, which takes no indexers once started, so the controller keeps this one itself from
// the view's events.
type ownerIndex struct {
	mu      sync.RWMutex
	byOwner map[string]sets.Set[string]
	ownerOf map[string]string
	// watch, if set, is told when an app owner enters the index (true) and when its last namespace leaves it
	// (false), under the index's lock, so the Project events it asks for never lag the index.
	watch func(owner string, watched bool)
}

func newOwnerIndex(watch func(owner string, watched bool)) *ownerIndex {
	return &ownerIndex{watch: watch}
}

// watchWith sets watch; the owners already indexed are reported to it at once.
func (x *ownerIndex) watchWith(watch func(owner string, watched bool)) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.watch = watch
	for owner := range x.byOwner {
		watch(owner, true)
	}
}

// set records namespace's app owner; "" removes it from the index.
func (x *ownerIndex) set(namespace, owner string) {
	owner = fold(owner)
	x.mu.Lock()
	defer x.mu.Unlock()
	if old, ok := x.ownerOf[namespace]; ok {
		if old == owner {
			return
		}
		x.unlink(namespace, old)
	}
	if owner == "" {
		return
	}
	if x.ownerOf == nil {
		// Made by the first labeled Namespace: most tenants have few or none.
		x.ownerOf, x.byOwner = map[string]string{}, map[string]sets.Set[string]{}
	}
	x.ownerOf[namespace] = owner
	if x.byOwner[owner] == nil {
		x.byOwner[owner] = sets.New[string]()
		if x.watch != nil {
			x.watch(owner, true)
		}
	}
	x.byOwner[owner].Insert(namespace)
}

func (x *ownerIndex) remove(namespace string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if old, ok := x.ownerOf[namespace]; ok {
		x.unlink(namespace, old)
	}
}

func (x *ownerIndex) unlink(namespace, owner string) {
	delete(x.ownerOf, namespace)
	x.byOwner[owner].Delete(namespace)
	if x.byOwner[owner].Len() == 0 {
		delete(x.byOwner, owner)
		if x.watch != nil {
			x.watch(owner, false)
		}
	}
}

// namespaces returns the namespaces whose folded app owner is key.
func (x *ownerIndex) namespaces(key string) []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.byOwner[key].UnsortedList()
}

// len returns how many namespaces are indexed.
func (x *ownerIndex) len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.ownerOf)
}
