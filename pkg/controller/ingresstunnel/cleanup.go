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

package ingresstunnel

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	tunnelv1alpha1 "github.com/multiproject/api/pangolin/tunnel/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"
	tunnellisters "github.com/multiproject/client-go/listers/tunnel/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
)

// cleanup deletes every PangolinResource of a tenant that no longer configures spec.pangolin or is being deleted:
// otherwise the Pangolin operator would go on publishing the tenant's Ingresses through the tenant's tunnels. The
// tenant's are those its view holds, the ones that carry its label: those the controller made and any other given
// the label (only the manager may write PangolinResources, see docs/tenancy.md). The Ingresses themselves are the
// users' and stay; the entries the controller wrote to their status go with the resources. Each deletion is an
// Event: on the Ingress the resource was made for, or on the ProviderConfig for one made for none.
type cleanup struct {
	client   mpclientset.Interface
	kube     kubernetes.Interface
	lister   tunnellisters.PangolinResourceLister
	recorder record.EventRecorder
	pc       *mpv1alpha1.ProviderConfig
}

// NewCleanup builds the cleanup of the tenant c describes.
func NewCleanup(_ context.Context, c *tenant.Context) (tenant.Controller, error) {
	informer, err := c.Informers.Informer(informerset.PangolinResources)
	if err != nil {
		return nil, fmt.Errorf("ingress-tunnel cleanup: %w", err)
	}
	cl := &cleanup{client: c.MultiprojectClient, kube: c.KubeClient, lister: tunnellisters.NewPangolinResourceLister(informer.GetIndexer()),
		recorder: c.EventRecorder, pc: c.ProviderConfig}
	return &tenant.Retirer{
		Name:     c.Name() + "-" + c.Controller + "-cleanup",
		Informer: informer,
		Select: func(obj any) (string, bool) {
			// Every one of the tenant's, also those being deleted: their host may still be listed in their Ingress's
			// status.
			res, ok := obj.(*tunnelv1alpha1.PangolinResource)
			if !ok {
				return "", false
			}
			return res.Namespace + "/" + res.Name, true
		},
		Delete: cl.delete,
	}, nil
}

// made says whether the controller made the PangolinResource: it is controlled by an Ingress or an HTTPRoute and
// carries the Ingress-UID label (which holds the route's UID for a route's).
func made(res *tunnelv1alpha1.PangolinResource) bool {
	ref := metav1.GetControllerOf(res)
	_, labeled := res.Labels[LabelIngressUID]
	if !labeled || ref == nil {
		return false
	}
	return (ref.Kind == ingressGVK.Kind && ref.APIVersion == ingressGVK.GroupVersion().String()) ||
		(ref.Kind == routeGVK.Kind && ref.APIVersion == routeGVK.GroupVersion().String())
}

func (c *cleanup) delete(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	res, err := c.lister.PangolinResources(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	// Before the resource goes: afterwards nothing names the entry as the controller's.
	if err := removeFromIngressStatus(ctx, c.kube, res); apierrors.IsForbidden(err) {
		// Retrying would not help, and the host must not stay published because of a status entry.
		klog.FromContext(ctx).Error(err, "Could not remove the host from the Ingress status", "resource", key)
	} else if err != nil {
		return err
	}
	if res.DeletionTimestamp != nil {
		return nil
	}
	uid := res.UID
	err = c.client.TunnelV1alpha1().PangolinResources(namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	if err != nil {
		// Already gone, or re-created under the same name since the cache saw it (its own add brings it back).
		return nil
	}
	klog.FromContext(ctx).V(2).Info("Deleted PangolinResource of a departed tenant", "resource", key, "host", hostOf(res))
	if made(res) {
		ref := metav1.GetControllerOf(res)
		c.recorder.Eventf(&corev1.ObjectReference{Kind: ref.Kind, APIVersion: ref.APIVersion, Namespace: res.Namespace, Name: ref.Name, UID: ref.UID},
			corev1.EventTypeNormal, ReasonDeleted, "Deleted PangolinResource %s for host %s: tenant %s no longer publishes through Pangolin",
			res.Name, hostOf(res), c.pc.Name)
	} else {
		c.recorder.Eventf(c.pc, corev1.EventTypeNormal, ReasonDeleted, "Deleted PangolinResource %s (name %q), which carried the tenant's label: "+
			"the tenant no longer publishes through Pangolin", key, publishedName(res))
	}
	return nil
}

// Pending lists the tenant's PangolinResources that still exist.
func Pending(_ context.Context, c *tenant.Context) (string, error) {
	informer, err := c.Informers.Informer(informerset.PangolinResources)
	if err != nil {
		return "", err
	}
	var names []string
	if err := cache.ListAll(informer.GetIndexer(), labels.Everything(), func(obj any) {
		if res, ok := obj.(*tunnelv1alpha1.PangolinResource); ok {
			names = append(names, res.Namespace+"/"+res.Name)
		}
	}); err != nil {
		return "", err
	}
	if len(names) == 0 {
		return "", nil
	}
	sort.Strings(names)
	const shown = 5
	msg := fmt.Sprintf("%d PangolinResources still publish the tenant's hosts: %s", len(names), strings.Join(names[:min(shown, len(names))], ", "))
	if len(names) > shown {
		msg += fmt.Sprintf(" and %d more", len(names)-shown)
	}
	return msg, nil
}
