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

package pusher

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
)

// secretGetter is the part of the Kubernetes client the pusher uses: it reads one Secret by name, never lists.
type secretGetter = corev1client.SecretsGetter

var getOptions = metav1.GetOptions{}

// Pending reports what of the tenant would leak in GCE if the pusher stopped now: the Translations that still carry
// the deleter finalizer, i.e. whose NEGs are not known to be deleted, and the NEGs no Translation lists that wait
// for the garbage sweep (awaiting.go). It returns "" when there are none. It reads the tenant's informer view when
// it has synced, and lists from the API server (by the tenant label) otherwise.
//
// Only the sweep of a running cleanup knows the NEGs awaiting deletion: given any other Context (the cleanup cannot
// run in this process), Pending cannot rule them out and says so, unless sweeps are disabled
// (--neg-gc-period=0), in which case no NEG is ever left to them.
func Pending(ctx context.Context, c *tenant.Context) (string, error) {
	var names []string
	collect := func(tr *mpv1alpha1.Translation) {
		if hasFinalizer(tr) {
			names = append(names, tr.Namespace+"/"+tr.Name)
		}
	}
	informer, err := c.Informers.Informer(informerset.Translations)
	if err == nil && informer.HasSynced() {
		err = cache.ListAll(informer.GetIndexer(), labels.Everything(), func(obj any) {
			if tr, ok := obj.(*mpv1alpha1.Translation); ok {
				collect(tr)
			}
		})
		if err != nil {
			return "", err
		}
	} else {
		if c.MultiprojectClient == nil {
			return "", errors.New("neg pusher: no client to list Translations with")
		}
		selector := labels.Set{c.ProviderConfigLabelKey: c.Name()}.AsSelector().String()
		list, err := c.MultiprojectClient.MultiprojectV1alpha1().Translations(metav1.NamespaceAll).
			List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return "", fmt.Errorf("neg pusher: listing the tenant's Translations: %w", err)
		}
		for i := range list.Items {
			collect(&list.Items[i])
		}
	}
	left := ""
	project := ""
	if gcp := c.ProviderConfig.Spec.GCP; gcp != nil {
		project = gcp.ProjectID
	}
	if awaiting, ok := cleanups.Load(c); ok {
		left = awaiting.(*awaitingSet).left(project, len(names) > 0)
	} else if c.Options.NEGGCPeriod > 0 {
		left = fmt.Sprintf("NEGs awaiting deletion in project %s cannot be ruled out: only the neg cleanup's garbage sweep lists them", project)
	}
	if left != "" {
		left = "NEGs no Translation lists: " + left
	}
	if len(names) == 0 {
		return left, nil
	}
	slices.Sort(names)
	const shown = 5
	noun := "Translations"
	if len(names) == 1 {
		noun = "Translation"
	}
	msg := fmt.Sprintf("%d %s with NEGs not yet deleted: %s", len(names), noun, strings.Join(names[:min(shown, len(names))], ", "))
	if len(names) > shown {
		msg += fmt.Sprintf(" and %d more", len(names)-shown)
	}
	if left != "" {
		msg += "; " + left
	}
	return msg, nil
}

func hasFinalizer(tr *mpv1alpha1.Translation) bool {
	return slices.Contains(tr.Finalizers, mpv1alpha1.TranslationDeleterFinalizer)
}
