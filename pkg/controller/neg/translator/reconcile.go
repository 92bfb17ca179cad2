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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpv1alpha1client "github.com/multiproject/client-go/clientset/versioned/typed/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
)

// errWaiting says a sync must be retried because a Translation it wants to write still exists in another form (being
// deleted, or another tenant's): nothing failed, so it is logged only at V(4).
var errWaiting = fmt.Errorf("%w for an old Translation of the same name to be deleted", worker.ErrWaiting)

// reconcileTranslations makes the Service's Translations in the API exactly desired. It reads them from the
// unfiltered Translation cache, which also holds those labeled for another tenant (made before the Service moved
// here, or by a former Service of its name), and makes no API read: a cache that does not show the translator's
// own last writes yet is waited for (errCacheLagging), and so is one that does not show yet a Translation a create
// meets (errWaiting).
//
// Translations that are going (stale ones it deletes, ones already being deleted, and ones left by a former Service
// of the same name) hold back the creation of a desired Translation that has the same name or lists one of the same
// NEGs: a NEG belongs to one Translation at a time, so the old one's deletion never takes the new one's NEG. So does
// a Translation of another Service, of any tenant, that declares a custom NEG name (custom: by Translation name) the
// desired one declares; the NEGNameConflict warnings that says so are returned.
func (t *Translator) reconcileTranslations(ctx context.Context, svc *corev1.Service, desired []*mpv1alpha1.Translation, custom map[string]string) ([]tenant.Warning, error) {
	logger := klog.FromContext(ctx)
	key := svc.Namespace + "/" + svc.Name
	if t.writes.translationsPending(key, t.cachedTranslation(svc.Namespace)) {
		return nil, errCacheLagging
	}
	client := t.mp.MultiprojectV1alpha1().Translations(svc.Namespace)
	wanted := map[string]*mpv1alpha1.Translation{}
	for _, tr := range desired {
		wanted[tr.Name] = tr
	}
	// own: made for this Service (its UID), whatever their tenant label. predecessors: made for a former Service of
	// its name; the tenant's, and another tenant's that hold a name the Service needs.
	existing := map[string]*mpv1alpha1.Translation{}
	var own, predecessors []*mpv1alpha1.Translation
	for _, tr := range t.cachedTranslationsFor(svc) {
		switch {
		case ownerUID(tr) == svc.UID:
			own = append(own, tr)
			existing[tr.Name] = tr
		case tr.Labels[t.labelKey] == t.tenant || wanted[tr.Name] != nil:
			predecessors = append(predecessors, tr)
		}
	}
	var errs []error
	var leaving []*mpv1alpha1.Translation
	for _, have := range own {
		if wanted[have.Name] != nil && have.Labels[t.labelKey] == t.tenant {
			continue
		}
		if t.leaving(have) {
			leaving = append(leaving, have)
			continue
		}
		if successor := t.pendingSuccessor(svc, have, wanted, existing); successor != "" {
			logger.V(4).Info("Keeping a Translation of another version until its successor is synced",
				"translation", have.Name, "successor", successor)
			continue
		}
		// Stale: its port is no longer exposed, its version is old (and its successor synced, or sharing its
		// NEGs), or it was made for another tenant (the Service moved; that tenant's pusher deletes its NEGs in its
		// own project).
		deleted, err := t.deleteTranslation(ctx, have)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if deleted {
			leaving = append(leaving, have)
			t.recorder.Eventf(svc, corev1.EventTypeNormal, ReasonTranslationDeleted,
				"Deleted Translation %s; its NEGs are deleted before it disappears", have.Name)
		}
	}
	// Translations left by a former Service of this name: it was deleted with --cascade=orphan, so the garbage
	// collector removed their owner reference and left them, with their NEGs.
	for _, old := range predecessors {
		if t.leaving(old) {
			leaving = append(leaving, old)
			continue
		}
		deleted, err := t.deletePredecessor(ctx, svc, old)
		if err != nil {
			errs = append(errs, err)
		} else if deleted {
			leaving = append(leaving, old)
		}
	}

	waiting := false
	var blocked []tenant.Warning
	for _, want := range desired {
		have, ok := existing[want.Name]
		// A custom name the Service's Translation does not declare yet is reserved before the write: no other
		// Service's Translation may declare it, nor be about to.
		reserving, object := custom[want.Name], want.Namespace+"/"+want.Name
		if ok && declares(have, reserving) {
			reserving = ""
		}
		reserve := func() bool {
			if reserving == "" {
				return true
			}
			holder, free, err := t.reserveName(ctx, svc, reserving, object)
			if err != nil {
				errs = append(errs, err)
				return false
			}
			if !free {
				logger.V(2).Info("Waiting for another Service's Translation to let a custom NEG name go",
					"translation", want.Name, "neg", reserving, "usedBy", holder)
				if holder != "" {
					blocked = append(blocked, tenant.Warning{Reason: ReasonNameConflict, Message: nameConflictMessage(reserving, portOf(want), holder)})
				}
			}
			return free
		}
		switch {
		case !ok:
			if blocker := blockedBy(want, leaving); blocker != nil {
				logger.V(4).Info("Waiting for a Translation to be deleted before creating its successor",
					"translation", want.Name, "deleting", blocker.Name)
				waiting = true
				continue
			}
			if !reserve() {
				continue
			}
			created, err := client.Create(ctx, want, metav1.CreateOptions{})
			if reserving != "" {
				t.nameCreated(reserving, object, err == nil)
			}
			switch {
			case apierrors.IsAlreadyExists(err):
				// One the unfiltered cache does not show yet: once it does, a retry (with backoff: one labeled for
				// another tenant brings no event) finds it the Service's own (compared), a former Service's
				// (deleted) or leaving (waited for).
				waiting = true
			case err != nil:
				errs = append(errs, fmt.Errorf("creating Translation %s: %w", want.Name, err))
			default:
				t.writes.createdTranslation(key, created.Name, created.UID)
				t.recorder.Eventf(svc, corev1.EventTypeNormal, ReasonTranslationCreated,
					"Created Translation %s declaring NEG %s in %d zones", want.Name, negNameOf(want), len(want.Spec.Resources))
			}
		case have.DeletionTimestamp != nil || have.Labels[t.labelKey] != t.tenant:
			waiting = true
		case onlySpecDiffers(have, want):
			if !reserve() {
				continue
			}
			err := t.patchSpec(ctx, client, key, have, want)
			if reserving != "" {
				t.nameCreated(reserving, object, err == nil)
			}
			if err != nil {
				errs = append(errs, err)
			}
		case needsUpdate(have, want):
			if !reserve() {
				continue
			}
			updated := have.DeepCopy()
			updated.Spec = want.Spec
			if updated.Labels == nil {
				updated.Labels = map[string]string{}
			}
			maps.Copy(updated.Labels, want.Labels)
			updated.OwnerReferences = withController(updated.OwnerReferences, want.OwnerReferences[0])
			out, err := client.Update(ctx, updated, metav1.UpdateOptions{})
			if reserving != "" {
				t.nameCreated(reserving, object, err == nil)
			}
			if err != nil {
				// A conflict (the pusher wrote the status since the cache's version) is retried from the cache.
				errs = append(errs, fmt.Errorf("updating Translation %s: %w", want.Name, err))
			} else {
				if out.ResourceVersion != have.ResourceVersion {
					t.writes.updatedTranslation(key, out.Name, out.UID, have.ResourceVersion)
				}
				logger.V(2).Info("Updated Translation", "translation", want.Name, "endpoints", endpointCount(want))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return blocked, err
	}
	if waiting {
		return blocked, errWaiting
	}
	return blocked, nil
}

// pendingSuccessor returns the name of the Translation of this version that replaces have, a Translation of the
// tenant of another version for a Service port still exposed, when have must stay until it is synced: the new
// NEGs are pushed before the old ones are deleted. It returns "" when have may go now: it has no successor, its
// successor is synced, or they share a NEG (a custom name), which must be deleted by the old one before the new one
// may declare it.
func (t *Translator) pendingSuccessor(svc *corev1.Service, have *mpv1alpha1.Translation, wanted, existing map[string]*mpv1alpha1.Translation) string {
	version, _, port, ok := parseTranslationName(have.Name)
	if !ok || version == translationVersion || have.Labels[t.labelKey] != t.tenant {
		return ""
	}
	name := translationName(svc.Name, port)
	want := wanted[name]
	if want == nil || sharesNEGs(have, want) {
		return ""
	}
	if current := existing[name]; current != nil && current.DeletionTimestamp == nil &&
		current.Labels[t.labelKey] == t.tenant && isSynced(current) {
		return ""
	}
	return name
}

// blockedBy returns a leaving Translation that want must wait for: one of the same name, or one that lists one of
// want's NEGs.
func blockedBy(want *mpv1alpha1.Translation, leaving []*mpv1alpha1.Translation) *mpv1alpha1.Translation {
	for _, old := range leaving {
		if old.Name == want.Name || sharesNEGs(old, want) {
			return old
		}
	}
	return nil
}

// deletePredecessor deletes a Translation left by a former Service of svc's name and says so on svc.
func (t *Translator) deletePredecessor(ctx context.Context, svc *corev1.Service, old *mpv1alpha1.Translation) (bool, error) {
	deleted, err := t.deleteTranslation(ctx, old)
	if deleted {
		klog.FromContext(ctx).Info("Deleted a Translation left by a former Service of the same name",
			"translation", old.Name, "formerUID", ownerUID(old), "uid", svc.UID)
		t.recorder.Eventf(svc, corev1.EventTypeNormal, ReasonStaleTranslationDeleted,
			"Deleted Translation %s left by a former Service of this name (UID %s); its NEGs are deleted before it "+
				"disappears, and this Service's own Translations are declared without it", old.Name, ownerUID(old))
	}
	return deleted, err
}

// deleteTranslation deletes a Translation, with its UID as precondition so that a successor of the same name is
// never hit. It reports whether this call asked for the deletion: false if it was gone or already going.
func (t *Translator) deleteTranslation(ctx context.Context, tr *mpv1alpha1.Translation) (bool, error) {
	if t.leaving(tr) {
		return false, nil
	}
	uid := tr.UID
	err := t.mp.MultiprojectV1alpha1().Translations(tr.Namespace).Delete(ctx, tr.Name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case apierrors.IsConflict(err):
		// The precondition failed: the name now belongs to another Translation, which is not this one's to delete.
		return false, nil
	case err != nil:
		return false, fmt.Errorf("deleting stale Translation %s: %w", tr.Name, err)
	}
	if uid != "" {
		t.deleting.Store(uid, struct{}{})
	}
	return true, nil
}

// releaseDeparted handles a Service the tenant no longer sees. Still there (relabeled to another tenant, or to
// none): the Translations this tenant made for it are stale, and deleting them lets this tenant's pusher delete the
// NEGs in this tenant's project. Deleted: the garbage collector deletes its Translations, except after a delete with
// --cascade=orphan, which leaves them without owner; either way the Translations of the tenant that still name it
// are deleted here, so that the pusher deletes their NEGs and removes their finalizer. They are read from the
// tenant's view; only when there is one to delete, one read of the Service confirms that the view's absence of it
// is not a lag (and tells a Service that left from one that was deleted, for the log).
func (t *Translator) releaseDeparted(ctx context.Context, namespace, name string) error {
	logger := klog.FromContext(ctx)
	key := namespace + "/" + name
	if t.writes.translationsPending(key, t.cachedTranslation(namespace)) {
		return errCacheLagging
	}
	var stale []*mpv1alpha1.Translation
	for _, tr := range t.translationsNaming(namespace, name) {
		if !t.leaving(tr) {
			stale = append(stale, tr)
		}
	}
	if len(stale) == 0 {
		t.writes.forget(key)
		return nil
	}
	svc, err := t.kube.CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		svc = nil
	case err != nil:
		return fmt.Errorf("looking up a Service that left the tenant: %w", err)
	default:
		if _, err := t.serviceLister.Services(namespace).Get(name); err == nil {
			// The view has it now (it came back, or the view lagged behind its creation): its own sync, which its
			// Add event brings, deals with it.
			return nil
		}
	}
	var errs []error
	for _, tr := range stale {
		deleted, err := t.deleteTranslation(ctx, tr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		switch {
		case !deleted:
		case svc != nil && ownerUID(tr) == svc.UID:
			logger.V(2).Info("Deleted the Translation of a Service that left the tenant", "translation", tr.Name)
		case metav1.GetControllerOf(tr) == nil:
			logger.Info("Deleted a Translation whose Service no longer exists and that has no owner (the Service was deleted with --cascade=orphan)",
				"translation", tr.Name, "formerUID", ownerUID(tr))
		default:
			logger.V(2).Info("Deleted the Translation of a deleted Service", "translation", tr.Name)
		}
	}
	return errors.Join(errs...)
}

// translationsNaming returns the Translations of ours in the tenant's view (labeled for the tenant) that were made
// for a Service of that namespace and name, whatever its UID. It reads the cache's owner index only.
func (t *Translator) translationsNaming(namespace, service string) []*mpv1alpha1.Translation {
	var out []*mpv1alpha1.Translation
	for _, tr := range translationsByOwner(t.translationIndex, serviceKeys(namespace, service)...) {
		if s, ok := serviceOf(tr); ok && s == service && IsOurs(tr) && tr.Labels[t.labelKey] == t.tenant {
			out = append(out, tr)
		}
	}
	return out
}

// cachedTranslationsFor returns, sorted by name, the Translations of ours of any tenant in the Service's namespace
// that were made for it (its UID) or for a Service of its name. It reads the unfiltered cache's owner index only.
func (t *Translator) cachedTranslationsFor(svc *corev1.Service) []*mpv1alpha1.Translation {
	keys := append(serviceKeys(svc.Namespace, svc.Name), informerset.TranslationOwnerUIDKey(svc.Namespace, svc.UID))
	var out []*mpv1alpha1.Translation
	for _, tr := range translationsByOwner(t.allTranslationIndex, keys...) {
		if !IsOurs(tr) {
			continue
		}
		if service, ok := serviceOf(tr); ownerUID(tr) == svc.UID || (ok && service == svc.Name) {
			out = append(out, tr)
		}
	}
	slices.SortFunc(out, func(a, b *mpv1alpha1.Translation) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// serviceKeys are the owner-index values under which a Translation made for a Service of that name may be filed:
// controlled by it, or left without a controller (its name then says which Service it was for; see serviceOf). A
// Translation controlled by anything but a Service was not made by this controller.
func serviceKeys(namespace, service string) []string {
	return []string{
		informerset.TranslationControllerKey(namespace, "v1", "Service", service),
		informerset.TranslationUncontrolledKey(namespace),
	}
}

// translationsByOwner returns the Translations that indexer's owner index files under any of keys, each once.
// newTranslator made sure the index exists, so a lookup cannot fail.
func translationsByOwner(indexer cache.Indexer, keys ...string) []*mpv1alpha1.Translation {
	var out []*mpv1alpha1.Translation
	for _, key := range keys {
		objs, _ := indexer.ByIndex(informerset.TranslationsByOwner, key)
		for _, obj := range objs {
			if tr, ok := obj.(*mpv1alpha1.Translation); ok && !slices.Contains(out, tr) {
				out = append(out, tr)
			}
		}
	}
	return out
}

// cachedTranslation looks a Translation of the namespace up by name in the unfiltered cache, for ownWrites.
func (t *Translator) cachedTranslation(namespace string) func(name string) cached {
	return func(name string) cached {
		obj, exists, err := t.allTranslationIndex.GetByKey(namespace + "/" + name)
		if err != nil || !exists {
			return cached{}
		}
		tr, ok := obj.(*mpv1alpha1.Translation)
		if !ok {
			return cached{}
		}
		return cached{exists: true, uid: tr.UID, resourceVersion: tr.ResourceVersion, generation: tr.Generation}
	}
}

// leaving says whether a Translation is on its way out: marked for deletion, or deleted by this translator and not
// yet seen so by the view.
func (t *Translator) leaving(tr *mpv1alpha1.Translation) bool {
	if tr.DeletionTimestamp != nil {
		return true
	}
	_, asked := t.deleting.Load(tr.UID)
	return asked
}

// needsUpdate compares what the translator owns: the spec, its labels and the controller reference. Status and
// finalizers belong to the pusher.
// onlySpecDiffers says whether have differs from want in its spec alone (its labels and controller are as
// wanted): the common change, an endpoint of the Service became ready or went away.
func onlySpecDiffers(have, want *mpv1alpha1.Translation) bool {
	return !apiequality.Semantic.DeepEqual(have.Spec, want.Spec) && !metadataDiffers(have, want)
}

// patchSpec replaces the Translation's spec with want's by a JSON patch that first tests its UID. The patch
// carries no resourceVersion: the translator is the only writer of a Translation's spec (its Service's key is
// synced by one worker at a time, and a tenant runs on one replica), and the pusher's status writes change the
// resourceVersion all the time, so an update bound to the cached version would often be refused (409) and
// retried. A failed test (422: the Translation was replaced) or a missing one (404) is retried from the cache.
func (t *Translator) patchSpec(ctx context.Context, client mpv1alpha1client.TranslationInterface, key string, have, want *mpv1alpha1.Translation) error {
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": have.UID},
		{"op": "replace", "path": "/spec", "value": want.Spec},
	})
	if err != nil {
		return err
	}
	out, err := client.Patch(ctx, have.Name, types.JSONPatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("updating the spec of Translation %s: %w", want.Name, err)
	}
	if out.Generation > have.Generation {
		t.writes.patchedTranslationSpec(key, out.Name, out.UID, out.Generation)
	}
	klog.FromContext(ctx).V(2).Info("Updated Translation", "translation", want.Name, "endpoints", endpointCount(want))
	return nil
}

func needsUpdate(have, want *mpv1alpha1.Translation) bool {
	return !apiequality.Semantic.DeepEqual(have.Spec, want.Spec) || metadataDiffers(have, want)
}

// metadataDiffers says whether have lacks one of want's labels or another controller than want's.
func metadataDiffers(have, want *mpv1alpha1.Translation) bool {
	for k, v := range want.Labels {
		if have.Labels[k] != v {
			return true
		}
	}
	ref := metav1.GetControllerOf(have)
	return ref == nil || !apiequality.Semantic.DeepEqual(*ref, want.OwnerReferences[0])
}

func withController(refs []metav1.OwnerReference, controller metav1.OwnerReference) []metav1.OwnerReference {
	out := []metav1.OwnerReference{controller}
	for _, r := range refs {
		if r.UID != controller.UID && (r.Controller == nil || !*r.Controller) {
			out = append(out, r)
		}
	}
	return out
}

func negNameOf(tr *mpv1alpha1.Translation) string {
	if len(tr.Spec.Resources) == 0 {
		return "(none: the tenant has no Nodes with a zone)"
	}
	return tr.Spec.Resources[0].Name
}

func endpointCount(tr *mpv1alpha1.Translation) int {
	n := 0
	for _, r := range tr.Spec.Resources {
		if r.NetworkEndpointGroup != nil {
			n += len(r.NetworkEndpointGroup.Endpoints)
		}
	}
	return n
}
