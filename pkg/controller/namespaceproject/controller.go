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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	rancherv3 "github.com/multiproject/api/rancher/management/v3"
	rancherlisters "github.com/multiproject/client-go/listers/management/v3"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
)

// DefaultConcurrentSyncs is the default of --concurrent-namespace-project-syncs.
const DefaultConcurrentSyncs = 5

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

	workers   *tenant.Workers
	recorder  record.EventRecorder
	condition tenant.ConditionReporter

	owners *ownerIndex
	// warnings reports a persisting problem (a missing or ambiguous Project) once per change, not on every sync.
	warnings *tenant.Warnings
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
	ctrl := &Controller{
		tenant:      c.Name(),
		clusterID:   c.ProviderConfig.Spec.Rancher.ClusterID,
		appOwnerKey: c.Options.AppOwnerLabelKey,
		kube:        c.KubeClient,
		namespaces:  namespaces,
		nsLister:    corelisters.NewNamespaceLister(namespaces.GetIndexer()),
		projects:    projects,
		prLister:    rancherlisters.NewProjectLister(projects.GetIndexer()),
		recorder:    c.EventRecorder,
		condition:   c.Condition,
		owners:      newOwnerIndex(),
		warnings:    tenant.NewWarnings(c.EventRecorder),
	}
	ctrl.workers = tenant.NewWorkers(tenant.WorkerConfig{
		Tenant:     c.Name(),
		Controller: c.Controller,
		KeyName:    "namespace",
		Workers:    c.Workers,
		Sync: func(ctx context.Context, name string) (tenant.Result, error) {
			return tenant.Result{}, ctrl.sync(ctx, name)
		},
	})
	return ctrl, nil
}

// Run assigns the tenant's namespaces until ctx ends. On return both of its handlers are removed, its queue is shut
// down and its workers are gone.
func (c *Controller) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("rancherCluster", c.clusterID)
	ctx = klog.NewContext(ctx, logger)

	if err := c.workers.Watch(c.namespaces, cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onNamespace,
		UpdateFunc: func(_, newObj any) { c.onNamespace(newObj) },
		DeleteFunc: c.onNamespaceDelete,
	}); err != nil {
		logger.Error(err, "Could not watch Namespaces")
		return
	}
	if err := c.workers.Watch(c.projects, cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.onProject(nil, obj) },
		UpdateFunc: c.onProject,
		DeleteFunc: func(obj any) { c.onProject(obj, nil) },
	}); err != nil {
		logger.Error(err, "Could not watch Projects")
		c.workers.Close(ctx)
		return
	}

	logger.Info("Starting namespace-project controller", "appOwnerLabel", c.appOwnerKey)
	c.workers.Run(ctx, tenant.RunOptions{Started: func() {
		c.condition.Report(metav1.ConditionTrue, "Running", fmt.Sprintf(
			"assigning namespaces labeled %s to the Projects of Rancher cluster %s", c.appOwnerKey, c.clusterID))
	}})
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
	c.workers.Add(ns.Name)
}

// onNamespaceDelete forgets the namespace. A Delete also arrives when the namespace leaves the tenant (relabeled).
func (c *Controller) onNamespaceDelete(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.owners.remove(key)
	c.warnings.Forget(key)
}

// onProject enqueues the namespaces a Project event may re-decide.
func (c *Controller) onProject(oldObj, newObj any) {
	for _, name := range c.affectedBy(oldObj, newObj) {
		c.workers.Add(name)
	}
}

// affectedBy returns, sorted, the tenant's namespaces whose app owner the Project matched before or matches now, so
// that a Project created, renamed or deleted re-decides exactly those namespaces. Projects of other clusters are
// ignored. The lookup is an index read: it costs O(namespaces with those app owners), not O(namespaces).
func (c *Controller) affectedBy(oldObj, newObj any) []string {
	oldProject, newProject := c.ownProject(oldObj), c.ownProject(newObj)
	if oldProject == nil && newProject == nil {
		return nil
	}
	if oldProject != nil && newProject != nil && sameMatchFields(oldProject, newProject) {
		return nil // a resync or a change that cannot alter any match (status, quota)
	}
	names := sets.New[string]()
	for _, key := range append(matchKeys(oldProject), matchKeys(newProject)...) {
		names.Insert(c.owners.namespaces(key)...)
	}
	return sets.List(names)
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

var _ tenant.Controller = (*Controller)(nil)
