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

package claims

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
)

// With --sharded-watch the holdings informer reads only this replica's namespaces: Reserve cannot see an object of
// another shard, and no event of this process tells when such an object goes. A claim record covers every object
// announced in it; for an object no record announces (made by a build before claim records or by hand, or whose
// record was deleted) the check is a live lookup, right before each publish. A live lookup rather than a record
// made the single source of truth: the object exists without any record, and only the replica that reads its
// namespace could write one for it, after the fact, so a record could not close the window; the lookup reads
// what exists at the moment it matters. It costs one paginated LIST per create, and only when the view is partial.

// unrecordedPublisher looks, when the holdings view is partial, for an object of any namespace that publishes name
// and is neither object nor another of self's. blocked says one does: self waits for it (waitForObject), and
// holder says whose it is, or err asks for a retry.
func (r *Registry) unrecordedPublisher(ctx context.Context, name string, self Claimant, object string) (holder string, blocked bool, err error) {
	if r.records.Partial == nil || r.records.Publishers == nil || !r.records.Partial() {
		return "", false, nil
	}
	found, err := r.records.Publishers(ctx, name)
	if err != nil {
		return "", false, fmt.Errorf("claims: looking for the objects that publish %q: %w", name, err)
	}
	for _, key := range slices.Sorted(maps.Keys(found)) {
		if h := found[key]; key != object && (h.Owner == "" || h.Owner != self.UID) {
			holder, _, err = r.waitForObject(name, self, key, h.Holder)
			return holder, true, err
		}
	}
	return "", false, nil
}

// waitForObject makes self wait for the object key, which publishes name (holder says whose it is): woken by the
// holdings informer when that shows the object, else retried with backoff (an error wrapping worker.ErrWaiting),
// since the object's deletion reaches no informer of this process.
func (r *Registry) waitForObject(name string, self Claimant, key, holder string) (string, bool, error) {
	if _, shown, err := r.store.GetByKey(key); err == nil && shown {
		r.mu.Lock()
		r.waitLocked(name, self)
		r.mu.Unlock()
		return holder, false, nil
	}
	return "", false, fmt.Errorf("%w: %s (%s), which this replica does not read, publishes %q", worker.ErrWaiting, key, holder, name)
}
