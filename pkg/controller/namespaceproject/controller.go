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
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	rancherv3 "github.com/multiproject/api/rancher/management/v3"
	rancherlisters "github.com/multiproject/client-go/listers/management/v3"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
)

// ControllerName is the controller's name in --controllers, logs, queue names and metrics.
const ControllerName = "namespace-project"

// Controller is one tenant's namespace-project controller.
type Controller struct {
	tenant      string
	clusterID   string
	appOwnerKey string

	kube       kubernetes.Interface
	namespaces cache.SharedIndexInformer // the tenant's view: only its Namespaces
	nsLister   corelisters.NamespaceLister
	projects   cache.SharedIndexInformer // shared by every tenant: all Projects of all clusters
	prLister   rancherlisters.ProjectLister

	queue     workqueue.TypedRateLimitingInterface[string]
	recorder  record.EventRecorder
	condition tenant.ConditionReporter
	workers   int

	owners   *ownerIndex
	reported *reportedEvents
}

// New builds the controller of the tenant c describes. It makes no API call.
func New(c *tenant.Context) (*Controller, error) {
	if c.ProviderConfig == nil || c.ProviderConfig.Spec.Rancher == nil || c.ProviderConfig.Spec.Rancher.ClusterID == "" {
		return nil, errors.New("namespace-project: the ProviderConfig has no spec.rancher.clusterID")
	}
	if c.KubeClient == nil {
		return nil, errors.New("namespace-project: no Kubernetes client")
	}
	if c.Options.AppOwnerLabelKey == "" {
		return nil, errors.New("namespace-project: no app-owner label key (--app-owner-label-key)")
	}
	namespaces, err := c.Informers.Informer(informerset.Namespaces)
	if err != nil {
		return nil, fmt.Errorf("namespace-project: %w", err)
	}
	projects, err := c.Informers.Shared(informerset.Projects)
	if err != nil {
		return nil, fmt.Errorf("namespace-project: %w", err)
	}
	workers := c.Workers
	if workers < 1 {
		workers = 1
	}
	name := c.Name()
	return &Controller{
		tenant:      name,
		clusterID:   c.ProviderConfig.Spec.Rancher.ClusterID,
		appOwnerKey: c.Options.AppOwnerLabelKey,
		kube:        c.KubeClient,
		namespaces:  namespaces,
		nsLister:    corelisters.NewNamespaceLister(namespaces.GetIndexer()),
		projects:    projects,
		prLister:    rancherlisters.NewProjectLister(projects.GetIndexer()),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: name + "-" + ControllerName}),
		recorder:  c.EventRecorder,
		condition: c.Condition,
		workers:   workers,
		owners:    newOwnerIndex(),
		reported:  newReportedEvents(),
	}, nil
}

// Run assigns the tenant's namespaces until ctx ends. On return both of its handlers are removed, its queue is shut
// down and its workers are gone.
func (c *Controller) Run(ctx context.Context) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx).WithValues("controller", ControllerName, "rancherCluster", c.clusterID)
	ctx = klog.NewContext(ctx, logger)

	var workers sync.WaitGroup
	var registrations []func()
	defer func() {
		c.queue.ShutDown()
		workers.Wait()
		for _, remove := range registrations {
			remove()
		}
		metrics.ForgetController(c.tenant, ControllerName)
	}()

	nsRegistration, err := c.namespaces.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onNamespace,
		UpdateFunc: func(_, newObj any) { c.onNamespace(newObj) },
		DeleteFunc: c.onNamespaceDelete,
	})
	if err != nil {
		logger.Error(err, "Could not watch Namespaces")
		return
	}
	registrations = append(registrations, c.remover(logger, c.namespaces, nsRegistration, "Namespace"))
	prRegistration, err := c.projects.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.onProject(nil, obj) },
		UpdateFunc: c.onProject,
		DeleteFunc: func(obj any) { c.onProject(obj, nil) },
	})
	if err != nil {
		logger.Error(err, "Could not watch Projects")
		return
	}
	registrations = append(registrations, c.remover(logger, c.projects, prRegistration, "Project"))

	logger.Info("Starting namespace-project controller", "appOwnerLabel", c.appOwnerKey, "workers", c.workers)
	if !cache.WaitForCacheSync(ctx.Done(), c.namespaces.HasSynced, c.projects.HasSynced,
		nsRegistration.HasSynced, prRegistration.HasSynced) {
		return
	}
	for range c.workers {
		workers.Go(func() { wait.UntilWithContext(ctx, c.runWorker, time.Second) })
	}
	c.condition.Report(metav1.ConditionTrue, "Running", fmt.Sprintf(
		"assigning namespaces labeled %s to the Projects of Rancher cluster %s", c.appOwnerKey, c.clusterID))
	<-ctx.Done()
	logger.Info("Stopping namespace-project controller")
}

func (c *Controller) remover(logger klog.Logger, informer cache.SharedIndexInformer, r cache.ResourceEventHandlerRegistration, kind string) func() {
	return func() {
		if err := informer.RemoveEventHandler(r); err != nil {
			logger.Error(err, "Could not remove an event handler", "kind", kind)
		}
	}
}

// onNamespace keeps the app-owner index current and syncs the namespace. Updates are not filtered: a sync of a
// converged namespace is a cache read and makes no API call.
func (c *Controller) onNamespace(obj any) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		utilruntime.HandleError(fmt.Errorf("namespace-project: unexpected object %T", obj))
		return
	}
	c.owners.set(ns.Name, ns.Labels[c.appOwnerKey])
	c.queue.Add(ns.Name)
}

// onNamespaceDelete forgets the namespace. A Delete also arrives when the namespace leaves the tenant (relabeled).
func (c *Controller) onNamespaceDelete(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.owners.remove(key)
	c.reported.forget(key)
}

// onProject enqueues the tenant's namespaces whose app owner the Project matched before or matches now, so that a
// Project created, renamed or deleted re-decides exactly those namespaces. Projects of other clusters are ignored.
// The lookup is an index read: it costs O(namespaces with those app owners), not O(namespaces).
func (c *Controller) onProject(oldObj, newObj any) {
	oldProject, newProject := c.ownProject(oldObj), c.ownProject(newObj)
	if oldProject == nil && newProject == nil {
		return
	}
	if oldProject != nil && newProject != nil && sameMatchFields(oldProject, newProject) {
		return // a resync or a change that cannot alter any match (status, quota)
	}
	for _, key := range append(matchKeys(oldProject), matchKeys(newProject)...) {
		for _, name := range c.owners.namespaces(key) {
			c.queue.Add(name)
		}
	}
}

// ownProject returns the Project obj is (or its tombstone held) if it belongs to the tenant's cluster.
func (c *Controller) ownProject(obj any) *rancherv3.Project {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	p, ok := obj.(*rancherv3.Project)
	if !ok || p.Namespace != c.clusterID {
		return nil
	}
	return p
}

func (c *Controller) runWorker(ctx context.Context) {
	for c.processNextWorkItem(ctx) {
	}
}

func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	name, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(name)

	logger := klog.FromContext(ctx).WithValues("namespace", name)
	err := c.sync(klog.NewContext(ctx, logger), name)
	metrics.ObserveSync(c.tenant, ControllerName, c.tenant+"-"+ControllerName, err, c.queue.Len())
	if err != nil {
		logger.V(2).Info("Sync failed; retrying with backoff", "err", err)
		c.queue.AddRateLimited(name)
		return true
	}
	c.queue.Forget(name)
	return true
}

var _ tenant.Controller = (*Controller)(nil)
