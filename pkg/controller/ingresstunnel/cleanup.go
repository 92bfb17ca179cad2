package ingresstunnel

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	tunnelv1alpha1 "github.com/multiproject/api/pangolin/tunnel/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"
	tunnellisters "github.com/multiproject/client-go/listers/tunnel/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
)

// cleanupName names the cleanup in logs and queue names.
const cleanupName = "ingress-tunnel-cleanup"

// cleanup deletes the PangolinResources the controller made for a tenant that no longer configures spec.pangolin or
// is being deleted: otherwise the Pangolin operator would go on publishing the tenant's Ingresses through the
// tenant's tunnels. The Ingresses themselves are the users' and stay.
type cleanup struct {
	client    mpclientset.Interface
	resources cache.SharedIndexInformer
	lister    tunnellisters.PangolinResourceLister
	queue     workqueue.TypedRateLimitingInterface[string]
}

// NewCleanup builds the cleanup of the tenant c describes.
func NewCleanup(_ context.Context, c *tenant.Context) (tenant.Controller, error) {
	informer, err := c.Informers.Informer(informerset.PangolinResources)
	if err != nil {
		return nil, fmt.Errorf("ingress-tunnel cleanup: %w", err)
	}
	return &cleanup{
		client:    c.MultiprojectClient,
		resources: informer,
		lister:    tunnellisters.NewPangolinResourceLister(informer.GetIndexer()),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: c.Name() + "-" + cleanupName}),
	}, nil
}

// made says whether the controller made the PangolinResource: it is controlled by an Ingress and carries the
// Ingress-UID label.
func made(res *tunnelv1alpha1.PangolinResource) bool {
	ref := metav1.GetControllerOf(res)
	_, labeled := res.Labels[LabelIngressUID]
	return labeled && ref != nil && ref.Kind == ingressGVK.Kind && ref.APIVersion == ingressGVK.GroupVersion().String()
}

// Run deletes the tenant's PangolinResources until ctx ends.
func (c *cleanup) Run(ctx context.Context) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx).WithValues("controller", cleanupName)
	ctx = klog.NewContext(ctx, logger)
	enqueue := func(obj any) {
		if res, ok := obj.(*tunnelv1alpha1.PangolinResource); ok && made(res) && res.DeletionTimestamp == nil {
			c.queue.Add(res.Namespace + "/" + res.Name)
		}
	}
	registration, err := c.resources.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }})
	if err != nil {
		logger.Error(err, "Could not watch PangolinResources")
		c.queue.ShutDown()
		return
	}
	var wg sync.WaitGroup
	defer func() {
		c.queue.ShutDown()
		wg.Wait()
		if err := c.resources.RemoveEventHandler(registration); err != nil {
			logger.Error(err, "Could not remove the PangolinResource handler")
		}
	}()
	logger.Info("Cleaning up the tenant's PangolinResources")
	if !cache.WaitForCacheSync(ctx.Done(), registration.HasSynced) {
		return
	}
	wg.Go(func() { wait.UntilWithContext(ctx, c.runWorker, time.Second) })
	<-ctx.Done()
}

func (c *cleanup) runWorker(ctx context.Context) {
	for c.processNextWorkItem(ctx) {
	}
}

func (c *cleanup) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	if err := c.delete(ctx, key); err != nil {
		klog.FromContext(ctx).Error(err, "Deleting a PangolinResource failed; retrying with backoff", "resource", key)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

func (c *cleanup) delete(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	res, err := c.lister.PangolinResources(namespace).Get(name)
	if apierrors.IsNotFound(err) || (err == nil && res.DeletionTimestamp != nil) {
		return nil
	}
	if err != nil {
		return err
	}
	uid := res.UID
	err = c.client.TunnelV1alpha1().PangolinResources(namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Deleted PangolinResource of a departed tenant", "resource", key, "host", hostOf(res))
	return nil
}

// Pending lists the PangolinResources the controller made for the tenant that still exist.
func Pending(_ context.Context, c *tenant.Context) (string, error) {
	informer, err := c.Informers.Informer(informerset.PangolinResources)
	if err != nil {
		return "", err
	}
	var names []string
	if err := cache.ListAll(informer.GetIndexer(), labels.Everything(), func(obj any) {
		if res, ok := obj.(*tunnelv1alpha1.PangolinResource); ok && made(res) {
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
