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
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
)

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
		t.batch.forget(key)
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
