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

package neg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"
	mplisters "github.com/multiproject/client-go/listers/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/neg/pusher"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/neg/translator"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
)

// cleanup is the neg controller's cleanup for a tenant that no longer configures spec.gcp or is being deleted: it
// deletes every Translation of the tenant, and a pusher that only deletes removes their NEGs from GCE (in the
// project each was made in, with the credentials the tenant last ran with) before their finalizers go. The
// translator does not run, so nothing declares new NEGs meanwhile.
type cleanup struct {
	retirer *tenant.Retirer
	pusher  tenant.Controller
	client  mpclientset.Interface
	lister  mplisters.TranslationLister
}

// Pending reports what of the tenant would leak in GCE if the neg controller stopped now, or "" (the Factory's
// Pending): the Translations whose NEGs are not known to be deleted and the NEGs awaiting the garbage sweep. The
// pusher, the only GCE writer, keeps that account (pusher.Pending).
func Pending(ctx context.Context, c *tenant.Context) (string, error) {
	return pusher.Pending(ctx, c)
}

// NewCleanup builds the cleanup of the tenant c describes; c's spec.gcp is the section it last ran with.
func NewCleanup(_ context.Context, c *tenant.Context) (tenant.Controller, error) {
	informer, err := c.Informers.Informer(informerset.Translations)
	if err != nil {
		return nil, fmt.Errorf("neg cleanup: %w", err)
	}
	p, err := pusher.NewCleanup(c)
	if err != nil {
		return nil, err
	}
	cl := &cleanup{pusher: p, client: c.MultiprojectClient, lister: mplisters.NewTranslationLister(informer.GetIndexer())}
	cl.retirer = &tenant.Retirer{
		Name:     c.Name() + "-" + c.Controller + "-cleanup",
		Informer: informer,
		Select: func(obj any) (string, bool) {
			tr, ok := obj.(*mpv1alpha1.Translation)
			if !ok || !translator.IsOurs(tr) || tr.DeletionTimestamp != nil {
				return "", false
			}
			return tr.Namespace + "/" + tr.Name, true
		},
		Delete: cl.deleteTranslation,
	}
	return cl, nil
}

// Run deletes the tenant's Translations and runs the deleting pusher until ctx ends.
func (c *cleanup) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { c.pusher.Run(ctx) })
	wg.Go(func() { c.retirer.Run(ctx) })
	wg.Wait()
}

func (c *cleanup) deleteTranslation(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	tr, err := c.lister.Translations(namespace).Get(name)
	if apierrors.IsNotFound(err) || (err == nil && tr.DeletionTimestamp != nil) {
		return nil
	}
	if err != nil {
		return err
	}
	uid := tr.UID
	err = c.client.MultiprojectV1alpha1().Translations(namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Deleted Translation; its NEGs go before it disappears", "translation", key)
	return nil
}

// Abandon releases the tenant's Translations without deleting their NEGs: each loses the deleter finalizer and is
// deleted. It returns the NEGs left in GCE, for the Event on the ProviderConfig.
func Abandon(ctx context.Context, c *tenant.Context) (string, error) {
	informer, err := c.Informers.Informer(informerset.Translations)
	if err != nil {
		return "", err
	}
	var translations []*mpv1alpha1.Translation
	if err := cache.ListAll(informer.GetIndexer(), labels.Everything(), func(obj any) {
		if tr, ok := obj.(*mpv1alpha1.Translation); ok && translator.IsOurs(tr) {
			translations = append(translations, tr)
		}
	}); err != nil {
		return "", err
	}
	project := ""
	if c.ProviderConfig.Spec.GCP != nil {
		project = c.ProviderConfig.Spec.GCP.ProjectID
	}
	var negs []string
	var errs []error
	for _, tr := range translations {
		negs = append(negs, negsOf(tr, project)...)
		client := c.MultiprojectClient.MultiprojectV1alpha1().Translations(tr.Namespace)
		if slices.Contains(tr.Finalizers, mpv1alpha1.TranslationDeleterFinalizer) {
			finalizers := slices.DeleteFunc(slices.Clone(tr.Finalizers), func(f string) bool { return f == mpv1alpha1.TranslationDeleterFinalizer })
			patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": finalizers, "resourceVersion": tr.ResourceVersion}})
			if err != nil {
				return "", err
			}
			if _, err := client.Patch(ctx, tr.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("releasing Translation %s/%s: %w", tr.Namespace, tr.Name, err))
				continue
			}
		}
		if tr.DeletionTimestamp == nil {
			if err := client.Delete(ctx, tr.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("deleting Translation %s/%s: %w", tr.Namespace, tr.Name, err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	if len(translations) == 0 {
		return "", nil
	}
	slices.Sort(negs)
	return fmt.Sprintf("%d NEGs left in GCE (%s), from %d Translations", len(negs), strings.Join(negs, ", "), len(translations)), nil
}

// negsOf lists the NEGs a Translation may have in GCE as project/zone/name: those its status records, or, before
// the pusher wrote any, those its spec declares.
func negsOf(tr *mpv1alpha1.Translation, project string) []string {
	var out []string
	for _, r := range tr.Status.Resources {
		p := r.Project
		if p == "" {
			p = project
		}
		out = append(out, p+"/"+r.Zone+"/"+r.Name)
	}
	if len(out) == 0 {
		for _, r := range tr.Spec.Resources {
			out = append(out, project+"/"+r.Zone+"/"+r.Name)
		}
	}
	return out
}
