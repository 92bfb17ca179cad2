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

package translator

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
)

// errCacheLagging says a sync read a cache that does not show the translator's own last write yet: acting on it
// would write again (an update bound to conflict, a create answered AlreadyExists) or miss what it made. The
// write's own event brings the key back once the cache shows it, so the translator's workers take it as a wait,
// not a failure.
var errCacheLagging = fmt.Errorf("%w for the informer cache to show the translator's own writes", worker.ErrWaiting)

// ownWriteTimeout bounds how long a write is waited for: far more than an informer's lag, and short enough that a
// write the cache can never show (its object deleted and the watch relisted meanwhile) holds nothing up for long.
// Past it the cache is trusted again; the API's preconditions still refuse a write based on a stale object.
const ownWriteTimeout = time.Minute

// ownWrite is one write of the translator that the cache may not show yet.
type ownWrite struct {
	uid types.UID
	// created: the write created the object; the cache lags until it shows it.
	created bool
	// generation, if set, is the generation a spec patch gave the object: the cache lags as long as it shows an
	// older one. A patch carries no resourceVersion, so another writer's change (the pusher's status) may reach the
	// cache before it; generations, unlike resourceVersions, may be compared for order.
	generation int64
	// before is the resourceVersion an updated or patched object had: the cache lags as long as it shows the object
	// at that version (resourceVersions are only compared for equality, as the API asks).
	before string
	at     time.Time
	// waited: a sync found the cache without the write and was turned away (translationsPending), so the write's
	// event must bring the Service back.
	waited bool
}

// cached is what an informer cache holds of an object, for ownWrite.shows.
type cached struct {
	exists          bool
	uid             types.UID
	resourceVersion string
	generation      int64
}

// shows says whether the object the cache holds reflects the write. An update's object that is gone or replaced
// reflects it too: the cache held it when it was updated, and a cache only moves forward.
func (w ownWrite) shows(c cached) bool {
	switch {
	case w.created:
		return c.exists && c.uid == w.uid
	case !c.exists || c.uid != w.uid:
		return true
	case w.generation > 0:
		return c.generation >= w.generation
	default:
		return c.resourceVersion != w.before
	}
}

// ownWrites remembers the writes of the translator its caches do not show yet: per Service, the Translations it
// created or updated and the Service's neg-status patch; and the Translations it asked to delete. It is the
// translator's one own-write tracker, the endpointslice controller's endpointSliceTracker: a sync that finds the
// cache older than its own last write waits for the cache instead of writing again, and a Translation whose
// deletion the cache does not show yet counts as leaving, so a lagging view causes neither a second delete nor a
// second Event.
type ownWrites struct {
	clock clock.PassiveClock

	mu sync.Mutex
	// translations: Service key → Translation name → the last write of it.
	translations map[string]map[string]ownWrite
	// status: Service key → the last neg-status patch.
	status map[string]ownWrite
	// deleted: the UIDs of the Translations the translator asked to delete; an entry goes when the cache drops the
	// Translation (translationGone).
	deleted map[types.UID]struct{}
}

func newOwnWrites(c clock.PassiveClock) *ownWrites {
	return &ownWrites{clock: c}
}

// createdTranslation records the create of the Service's Translation name.
func (o *ownWrites) createdTranslation(service, name string, uid types.UID) {
	o.recordTranslation(service, name, ownWrite{uid: uid, created: true})
}

// updatedTranslation records an update of the Service's Translation name made on version before.
func (o *ownWrites) updatedTranslation(service, name string, uid types.UID, before string) {
	o.recordTranslation(service, name, ownWrite{uid: uid, before: before})
}

// patchedTranslationSpec records a spec patch of the Service's Translation name that gave it generation.
func (o *ownWrites) patchedTranslationSpec(service, name string, uid types.UID, generation int64) {
	o.recordTranslation(service, name, ownWrite{uid: uid, generation: generation})
}

func (o *ownWrites) recordTranslation(service, name string, w ownWrite) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.translations == nil {
		o.translations = map[string]map[string]ownWrite{}
	}
	if o.translations[service] == nil {
		o.translations[service] = map[string]ownWrite{}
	}
	w.at = o.clock.Now()
	o.translations[service][name] = w
}

// translationsPending says whether the cache (lookup: a Translation of the Service's namespace by name) lacks one
// of the Service's Translation writes. The writes it shows are forgotten.
func (o *ownWrites) translationsPending(service string, lookup func(name string) cached) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	pending := false
	for name, w := range o.translations[service] {
		if w.shows(lookup(name)) || o.expired(w) {
			delete(o.translations[service], name)
			continue
		}
		w.waited = true
		o.translations[service][name] = w
		pending = true
	}
	if len(o.translations[service]) == 0 {
		delete(o.translations, service)
	}
	return pending
}

// ownSpecPatchArrived says whether a Translation's new generation, as its update event brings it, is the
// translator's own last spec patch of it (same object, same generation), which no sync has been turned away for; it
// then forgets the write. Such an event needs no sync: the sync that patched wrote what the caches held then, and
// every change since has its own event, or was turned away and is waiting for this one (and then it is not ours
// alone). An event the cache delivers after updating its store, so a sync that reads the store under o.mu (as
// translationsPending does) either sees the patch or is marked as waiting before this runs.
func (o *ownWrites) ownSpecPatchArrived(service, name string, uid types.UID, generation int64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	w, ok := o.translations[service][name]
	if !ok || w.created || w.generation == 0 || w.uid != uid || w.generation != generation || w.waited {
		return false
	}
	delete(o.translations[service], name)
	if len(o.translations[service]) == 0 {
		delete(o.translations, service)
	}
	return true
}

// translationWritten says whether the cache may lack one of the Service's Translation writes: one is remembered.
func (o *ownWrites) translationWritten(service string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.translations[service]) > 0
}

// deletedTranslation records the translator's delete of a Translation.
func (o *ownWrites) deletedTranslation(uid types.UID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.deleted == nil {
		o.deleted = map[types.UID]struct{}{}
	}
	o.deleted[uid] = struct{}{}
}

// deleteAsked says whether the translator asked to delete the Translation and the cache still holds it.
func (o *ownWrites) deleteAsked(uid types.UID) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, asked := o.deleted[uid]
	return asked
}

// translationGone forgets the writes of a Translation the cache has seen deleted (namespace's, of Service service:
// "" when it names none).
func (o *ownWrites) translationGone(namespace, service, name string, uid types.UID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.deleted, uid)
	if service == "" {
		return
	}
	service = namespace + "/" + service
	if w, ok := o.translations[service][name]; ok && w.uid == uid {
		delete(o.translations[service], name)
		if len(o.translations[service]) == 0 {
			delete(o.translations, service)
		}
	}
}

// patchedStatus records a neg-status patch of the Service made on the version before.
func (o *ownWrites) patchedStatus(service string, uid types.UID, before string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.status == nil {
		o.status = map[string]ownWrite{}
	}
	o.status[service] = ownWrite{uid: uid, before: before, at: o.clock.Now()}
}

// statusPending says whether the cached Service (uid, resourceVersion) predates the translator's last neg-status
// patch of it.
func (o *ownWrites) statusPending(service string, uid types.UID, resourceVersion string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	w, ok := o.status[service]
	if !ok {
		return false
	}
	if w.shows(cached{exists: true, uid: uid, resourceVersion: resourceVersion}) || o.expired(w) {
		delete(o.status, service)
		return false
	}
	return true
}

// forget drops what is remembered of a Service the tenant no longer has.
func (o *ownWrites) forget(service string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.translations, service)
	delete(o.status, service)
}

func (o *ownWrites) expired(w ownWrite) bool {
	return o.clock.Since(w.at) > ownWriteTimeout
}

// len is how many writes are remembered, for tests.
func (o *ownWrites) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := len(o.status) + len(o.deleted)
	for _, ws := range o.translations {
		n += len(ws)
	}
	return n
}
