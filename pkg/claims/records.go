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
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
)

// A claim record is a coordination.k8s.io Lease, one per claimed name and kind, in the manager's namespace. Its name
// derives from the name, so the API server lets exactly one be created, and every change is an Update carrying the
// resourceVersion that was read: two processes never both win a name. Leases hold no secret, and the manager
// already writes its leader-election (and shard) Leases there.
const (
	// KindLabel marks a Lease as a claim record and says which kind of claimant ("ingress", "service") it is for.
	// The manager's informer of claim records selects on it.
	KindLabel = "multiproject.io/claim-kind"
	// RecordPrefix starts every claim record's name: "multiproject-claim-<kind>-<hash of the name>".
	RecordPrefix = "multiproject-claim-"

	annotationName    = "multiproject.io/claimed-name"
	annotationTenant  = "multiproject.io/claimant-tenant"
	annotationKey     = "multiproject.io/claimant"
	annotationUID     = "multiproject.io/claimant-uid"
	annotationCreated = "multiproject.io/claimant-created"
	// annotationObject is the object the holder publishes the name through, written before it is created, and
	// annotationPrevious the objects of holders the record was taken from: a new holder creates nothing while one
	// of them still exists, even if its own cache has not seen it yet.
	annotationObject   = "multiproject.io/published-by"
	annotationPrevious = "multiproject.io/previous-holders-objects"
	// annotationLetGo marks a record whose holder no longer claims the name while its object still publishes it:
	// written once, so that the claimants of other processes, which wait for the record to change, are woken.
	annotationLetGo = "multiproject.io/holder-let-go"
)

// LiveFunc reads from the API server (not a cache, which may not hold another shard's objects) the names the
// object key of tenant, with uid, claims now: none when the object is gone, has another UID, is being deleted, no
// longer belongs to tenant, or tenant no longer runs the controller (its ProviderConfig is gone, being deleted, or
// lacks the controller's section).
type LiveFunc func(ctx context.Context, tenant, key string, uid types.UID) ([]string, error)

// ObjectFunc reads from the API server whether the object key (namespace/name) of the holdings resource still
// publishes name.
type ObjectFunc func(ctx context.Context, key, name string) (bool, error)

// PublishersFunc lists from the API server, in every namespace, the objects of the holdings resource that publish
// name, by key (namespace/name), with what each publishes.
type PublishersFunc func(ctx context.Context, name string) (map[string]Holding, error)

// Records makes the claims of a kind hold across processes (replicas): each name's holder is recorded in a claim
// record in the API server.
type Records struct {
	Client    kubernetes.Interface
	Namespace string
	// Informer is the shared informer of the claim records (Leases of Namespace labeled KindLabel).
	Informer cache.SharedIndexInformer
	// Live tells whether a recorded holder of another process still claims the name.
	Live LiveFunc
	// Object tells whether an object a previous holder published the name through still does.
	Object ObjectFunc
	// Publishers and Partial: see Kind.Publishers and RecordsConfig.PartialHoldings; Partial nil means a whole view.
	Publishers PublishersFunc
	Partial    func() bool
}

// RecordName is the name of the claim record of name for claimants of kind.
func RecordName(kind, name string) string {
	sum := sha256.Sum256([]byte(name))
	return RecordPrefix + strings.ToLower(kind) + "-" + hex.EncodeToString(sum[:16])
}

// record is a decoded claim record.
type record struct {
	lease    *coordinationv1.Lease
	name     string
	holder   Claimant
	object   string
	previous []string
}

func decodeRecord(obj any) (*record, bool) {
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return nil, false
	}
	a := lease.Annotations
	created, err := time.Parse(time.RFC3339, a[annotationCreated])
	if err != nil || a[annotationName] == "" || a[annotationUID] == "" {
		return nil, false
	}
	rec := &record{lease: lease, name: a[annotationName], object: a[annotationObject],
		holder: Claimant{Key: a[annotationKey], UID: types.UID(a[annotationUID]), Created: metav1.NewTime(created), tenant: a[annotationTenant]}}
	if p := a[annotationPrevious]; p != "" {
		rec.previous = strings.Split(p, ",")
	}
	return rec, true
}

// encodeRecord writes holder (and the objects still to wait for) into lease.
func (r *Registry) encodeRecord(lease *coordinationv1.Lease, name string, holder Claimant, object string, previous []string) {
	lease.Namespace, lease.Name = r.records.Namespace, RecordName(r.kind, name)
	if lease.Labels == nil {
		lease.Labels = map[string]string{}
	}
	lease.Labels[KindLabel] = strings.ToLower(r.kind)
	lease.Annotations = map[string]string{
		annotationName:    name,
		annotationTenant:  holder.tenant,
		annotationKey:     holder.Key,
		annotationUID:     string(holder.UID),
		annotationCreated: holder.Created.UTC().Format(time.RFC3339),
	}
	if object != "" {
		lease.Annotations[annotationObject] = object
	}
	if len(previous) > 0 {
		lease.Annotations[annotationPrevious] = strings.Join(previous, ",")
	}
	// For kubectl get leases: who holds the name.
	identity := holder.tenant + " " + r.describe(holder.Key)
	lease.Spec.HolderIdentity = &identity
}

// cachedRecord returns the record of name as the informer holds it.
func (r *Registry) cachedRecord(name string) (*record, bool) {
	obj, exists, err := r.records.Informer.GetIndexer().GetByKey(r.records.Namespace + "/" + RecordName(r.kind, name))
	if err != nil || !exists {
		return nil, false
	}
	return r.recordOf(obj, name)
}

// liveRecord reads the record of name from the API server. A Lease of the record's name that is not a record of
// name (errForeignRecord) is refused, not taken as one.
func (r *Registry) liveRecord(ctx context.Context, name string) (*record, error) {
	lease, err := r.records.Client.CoordinationV1().Leases(r.records.Namespace).Get(ctx, RecordName(r.kind, name), metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	rec, ok := r.recordOf(lease, name)
	if !ok {
		return nil, fmt.Errorf("%w: Lease %s/%s, which has the name of the claim record of %s %q, lacks its label %s=%s or "+
			"its annotations: a Lease the manager did not write. Until an administrator deletes it, %q is not published "+
			"(docs/security.md)", errForeignRecord, lease.Namespace, lease.Name, strings.ToLower(r.kind), name, KindLabel,
			strings.ToLower(r.kind), name)
	}
	return rec, nil
}

// errForeignRecord marks a Lease of a record's name that is not a claim record of that name.
var errForeignRecord = errors.New("claims: not a claim record")

// recordOf decodes obj as the claim record of name: a Lease labeled KindLabel with this registry's kind, as the
// manager writes every record and as the informer selects them, whose annotations name name. Any other Lease of
// that name (one made before the record, unlabeled) is not a record: taken as one, its forged holder would keep the
// name, and the manager's update that labels it would be refused by the admission policy.
func (r *Registry) recordOf(obj any, name string) (*record, bool) {
	rec, ok := decodeRecord(obj)
	if !ok || rec.name != name || rec.lease.Labels[KindLabel] != strings.ToLower(r.kind) {
		return nil, false
	}
	return rec, true
}

// stillClaims says whether the recorded holder still claims its name: from memory when it is a claimant of this
// process (its controller keeps the claims current), else read live.
func (r *Registry) stillClaims(ctx context.Context, rec *record) (bool, error) {
	if alive, local := r.localClaims(rec); local {
		return alive, nil
	}
	names, err := r.records.Live(ctx, rec.holder.tenant, rec.holder.Key, rec.holder.UID)
	if err != nil {
		return false, fmt.Errorf("claims: reading %s, which holds %q: %w", rec.holder.Key, rec.name, err)
	}
	return slices.Contains(names, rec.name), nil
}

// localClaims says whether the recorded holder is a claimant of this process (local), and then whether it still
// claims its name.
func (r *Registry) localClaims(rec *record) (alive, local bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, local = r.members[rec.holder.tenant]
	c, claims := r.claims[rec.name][rec.holder.id()]
	return local && claims && c.UID == rec.holder.UID, local
}

// announceGrace is how long a new holder waits for an object a previous holder announced and that the API server
// does not show: its create call may still be on its way. The previous holder's announcement failed if the record
// was taken first (a conflict), so only a create sent right after it can land late. An object once seen is
// waited for only until it is gone: its holder, which lost the record, cannot create it again. A variable for
// tests.
var announceGrace = 5 * time.Second

// Acquire is Reserve (see there) followed, for a Member with Records, by the record's part: self must hold the
// claim record of name (Decide took it), and no object that a holder it was taken from announced may still publish
// the name. Then the record announces object, with an Update carrying the resourceVersion read, so a holder that
// lost the record meanwhile fails here instead of creating. holder says whom self waits for when not ok; an error
// asks for a retry. After ok, Created must follow the create call, as after Reserve.
func (m *Member) Acquire(ctx context.Context, name string, self Claimant, object string) (holder string, ok bool, err error) {
	self.tenant = m.tenant
	if holder, ok := m.Reserve(name, self, object); !ok || m.r.records == nil {
		if !ok && m.r.records != nil {
			m.markSeen(ctx, name, self)
		}
		return holder, ok, nil
	}
	holder, ok, err = m.announce(ctx, name, self, object)
	if !ok || err != nil {
		m.Created(name, object, false)
	}
	return holder, ok, err
}

func (m *Member) announce(ctx context.Context, name string, self Claimant, object string) (holder string, ok bool, err error) {
	r := m.r
	rec, found := r.cachedRecord(name)
	if !found {
		// The informer may not show yet a record that Settle has just created for self: read it live, so that the
		// object is announced in it before it is made, and a claimant that takes the record next waits for that
		// object. Without that, it would make its own beside it.
		live, err := r.liveRecord(ctx, name)
		switch {
		case apierrors.IsNotFound(err):
			// The name an object publishes may differ from the names its claimant claims; the holdings informer
			// (or, when it reads only some namespaces, a live lookup) guards such a name alone.
			if holder, blocked, err := r.unrecordedPublisher(ctx, name, self, object); blocked || err != nil {
				return holder, false, err
			}
			return "", true, nil
		case err != nil:
			return "", false, fmt.Errorf("claims: reading the claim record of %q: %w", name, err)
		}
		rec = live
	}
	if rec.holder.UID != self.UID {
		r.mu.Lock()
		r.waitLocked(name, self)
		r.mu.Unlock()
		return m.Describe(rec.holder), false, nil
	}
	now := time.Now()
	var still []string
	for _, entry := range rec.previous {
		prev, at := splitPrevious(entry)
		if prev == object {
			continue
		}
		publishes, err := r.records.Object(ctx, prev, name)
		if err != nil {
			return "", false, err
		}
		if publishes {
			// Seen: from now on its absence means it is gone.
			still = append(still, previousEntry(prev, time.Time{}))
			continue
		}
		if at.IsZero() {
			continue
		}
		if wait := at.Add(announceGrace).Sub(now); wait > 0 {
			return "", false, fmt.Errorf("claims: %s was announced for %q %s ago and may still be created; waiting %s",
				prev, name, now.Sub(at).Round(time.Millisecond), wait.Round(time.Millisecond))
		}
	}
	if len(still) > 0 {
		if !slices.Equal(still, rec.previous) {
			// Marks what was seen, so that its deletion is final.
			lease := rec.lease.DeepCopy()
			r.encodeRecord(lease, name, self, rec.object, still)
			if _, err := r.records.Client.CoordinationV1().Leases(r.records.Namespace).Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
				return "", false, fmt.Errorf("claims: updating the claim record of %q: %w", name, err)
			}
		}
		prev, _ := splitPrevious(still[0])
		return r.waitForObject(name, self, prev, prev)
	}
	if holder, blocked, err := r.unrecordedPublisher(ctx, name, self, object); blocked || err != nil {
		return holder, false, err
	}
	// Always a write, even when the record already names object: it fails if another claimant took the record
	// since the cache showed it, so a holder that lost never creates.
	lease := rec.lease.DeepCopy()
	r.encodeRecord(lease, name, self, object, nil)
	stamp := metav1.NewMicroTime(now)
	lease.Spec.RenewTime = &stamp
	if _, err := r.records.Client.CoordinationV1().Leases(r.records.Namespace).Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		return "", false, fmt.Errorf("claims: announcing %s in the claim record of %q: %w", object, name, err)
	}
	return "", true, nil
}

// markSeen marks, in the record self holds, the previous holders' objects that the holdings informer shows: once
// they are gone, self need not give them the grace of an object that may still be on its way. Best effort: a
// failed write leaves the grace, nothing worse.
func (m *Member) markSeen(ctx context.Context, name string, self Claimant) {
	r := m.r
	rec, found := r.cachedRecord(name)
	if !found || rec.holder.UID != self.UID || len(rec.previous) == 0 {
		return
	}
	changed := false
	marked := make([]string, len(rec.previous))
	for i, entry := range rec.previous {
		marked[i] = entry
		prev, at := splitPrevious(entry)
		if at.IsZero() {
			continue
		}
		if obj, exists, err := r.store.GetByKey(prev); err == nil && exists {
			if h, publishes := r.holdingOf(obj); publishes && slices.Contains(h.Names, name) {
				marked[i], changed = previousEntry(prev, time.Time{}), true
			}
		}
	}
	if !changed {
		return
	}
	lease := rec.lease.DeepCopy()
	r.encodeRecord(lease, name, self, rec.object, marked)
	if _, err := r.records.Client.CoordinationV1().Leases(r.records.Namespace).Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		klog.FromContext(ctx).V(4).Info("Could not mark a previous holder's object as seen", "name", name, "err", err)
	}
}

// previousEntry is how a record lists an object of a holder it was taken from: "<namespace>/<name>@<unix ms of
// its announcement>", or "@0" once the object was seen.
func previousEntry(object string, announced time.Time) string {
	if announced.IsZero() {
		return object + "@0"
	}
	return fmt.Sprintf("%s@%d", object, announced.UnixMilli())
}

func splitPrevious(entry string) (string, time.Time) {
	object, ms, _ := strings.Cut(entry, "@")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil || n == 0 {
		return object, time.Time{}
	}
	return object, time.UnixMilli(n)
}

// release deletes the record of name if it names a claimant of this process that no longer claims the name, once
// the object it announced no longer publishes the name (a finalizer or the garbage collector can keep it for a
// while): until then the record stays, so the next claimant takes it over, with that object among the previous
// holders' objects it waits for, instead of creating a record of its own that knows nothing of it (with
// --sharded-watch its holdings informer may not show another shard's objects). It runs on the registry's queue,
// never in an event handler; the object's deletion, or the queue's backoff, brings the name back.
func (r *Registry) release(ctx context.Context, name string) error {
	rec, found := r.cachedRecord(name)
	if !found {
		// The cache may not show yet a record this process created a moment ago.
		var err error
		if rec, err = r.liveRecord(ctx, name); apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
	}
	if alive, local := r.localClaims(rec); !local || alive {
		// Not this process's to release: a tenant that stopped (a drain, a restart) keeps its names until another
		// process finds its claimant gone.
		return nil
	}
	if rec.object != "" {
		publishes, err := r.records.Object(ctx, rec.object, name)
		if err != nil {
			return err
		}
		if publishes {
			if err := r.markLetGo(ctx, rec); err != nil {
				return err
			}
			return fmt.Errorf("%w: %s, which the record announced, still publishes %q", worker.ErrWaiting, rec.object, name)
		}
	}
	uid, rv := rec.lease.UID, rec.lease.ResourceVersion
	err := r.records.Client.CoordinationV1().Leases(r.records.Namespace).Delete(ctx, rec.lease.Name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// markLetGo writes, once, that the holder of rec let go of its name: the record's event wakes the claimants of
// other processes, which then find the holder gone and take the record over (waiting for its object), as none of
// the object's events may reach them.
func (r *Registry) markLetGo(ctx context.Context, rec *record) error {
	if _, marked := rec.lease.Annotations[annotationLetGo]; marked {
		return nil
	}
	lease := rec.lease.DeepCopy()
	metav1.SetMetaDataAnnotation(&lease.ObjectMeta, annotationLetGo, time.Now().UTC().Format(time.RFC3339))
	if _, err := r.records.Client.CoordinationV1().Leases(r.records.Namespace).Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("claims: marking that the holder of %q let go: %w", rec.name, err)
	}
	return nil
}

func (r *Registry) onRecord(obj any) {
	obj = worker.LastState(obj)
	rec, ok := decodeRecord(obj)
	if !ok || rec.lease.Labels[KindLabel] != strings.ToLower(r.kind) {
		return
	}
	// Every claimant of the name in this process decides again: the holder may have changed or gone.
	r.mu.Lock()
	var wake []func()
	for _, c := range r.claims[rec.name] {
		wake = append(wake, r.enqueueLocked(c.id()))
	}
	wake = append(wake, r.takeWaitersLocked(rec.name)...)
	r.mu.Unlock()
	r.wake(wake)
}
