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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	rancherv3 "github.com/multiproject/api/rancher/management/v3"
	rancherlisters "github.com/multiproject/client-go/listers/management/v3"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/tenancy"
	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
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
	// Without a management cluster: the shared informer, every tenant's, of all Projects of all clusters, read
	// through prLister and watched through an Interest in the app owners of the tenant's namespaces (interest).
	projects cache.SharedIndexInformer
	prLister rancherlisters.ProjectLister
	interest func() (*tenancy.Interest, error)
	// With one (spec.rancher.managementClusterKubeconfigSecretRef): the tenant's own informer there.
	remote *managementCluster

	workers   *worker.Queue
	recorder  record.EventRecorder
	condition tenant.ConditionReporter

	owners *ownerIndex
	// warnings reports a persisting problem (a missing or ambiguous Project) once per change, not on every sync.
	warnings *tenant.Warnings
	// stop is the run's StopSignal (tenant.Context.Stop), nil when ctx's end is the signal.
	stop *worker.StopSignal

	// reportMu orders condition reports, so the last one reported is the latest state.
	reportMu sync.Mutex
	started  bool
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
	ctrl := &Controller{
		tenant:      c.Name(),
		clusterID:   c.ProviderConfig.Spec.Rancher.ClusterID,
		appOwnerKey: c.Options.AppOwnerLabelKey,
		kube:        c.KubeClient,
		namespaces:  namespaces,
		nsLister:    corelisters.NewNamespaceLister(namespaces.GetIndexer()),
		recorder:    c.EventRecorder,
		condition:   c.Condition,
		owners:      newOwnerIndex(nil),
		warnings:    tenant.NewWarnings(c.EventRecorder),
		stop:        c.Stop,
	}
	if ref := c.ProviderConfig.Spec.Rancher.ManagementClusterKubeconfigSecretRef; ref != nil {
		// Rancher keeps the Projects in its management cluster; this cluster (downstream) need not serve them.
		userAgent := rest.DefaultKubernetesUserAgent() + " namespace-project/" + c.Name()
		ctrl.remote = newManagementCluster(ctrl.clusterID, *ref, c.KubeClient.CoreV1(), userAgent, ctrl.projectHandler(), ctrl.remoteChanged)
	} else {
		projects, err := c.Informers.Shared(informerset.Projects)
		if err != nil {
			return nil, fmt.Errorf("namespace-project: %w", err)
		}
		ctrl.projects = projects
		ctrl.prLister = rancherlisters.NewProjectLister(projects.GetIndexer())
		informers := c.Informers // not c: the controller keeps nothing else of the Context
		ctrl.interest = func() (*tenancy.Interest, error) { return tenant.InterestOf(informers, informerset.Projects) }
	}
	ctrl.workers = worker.New(worker.Config{
		Tenant:     c.Name(),
		Controller: c.Controller,
		KeyName:    "namespace",
		Workers:    c.Workers,
		Sync: func(ctx context.Context, name string) (worker.Result, error) {
			return worker.Result{}, ctrl.sync(ctx, name)
		},
	})
	return ctrl, nil
}

// RequiredAPIs are the APIs this cluster must serve for a tenant's controller (tenant.Factory): Rancher's Projects,
// unless the tenant reads them from Rancher's management cluster (spec.rancher.managementClusterKubeconfigSecretRef),
// as a manager in a downstream cluster does.
func RequiredAPIs(spec *mpv1alpha1.ProviderConfigSpec) []schema.GroupVersionResource {
	if spec.Rancher != nil && spec.Rancher.ManagementClusterKubeconfigSecretRef != nil {
		return nil
	}
	return []schema.GroupVersionResource{informerset.Projects}
}

// Run assigns the tenant's namespaces until ctx ends. On return both of its handlers are removed, its queue is shut
// down, its workers are gone and so is its informer on the management cluster, if it has one.
func (c *Controller) Run(ctx context.Context) { tenant.RunStarter(ctx, c) }

// Start sets the controller up and returns; the workers start as keys arrive, and done is called once everything
// has stopped after ctx ended (tenant.Starter).
func (c *Controller) Start(ctx context.Context, done func()) {
	logger := klog.FromContext(ctx).WithValues("rancherCluster", c.clusterID)
	ctx = klog.NewContext(ctx, logger)

	var projects *tenancy.Interest
	stop := func() {
		if projects != nil {
			projects.Close()
		}
		done()
	}
	if c.remote == nil {
		// The shared Project informer hands this tenant the events of the Projects its namespaces' app owners name,
		// and no others. Each app owner is added before its namespace is enqueued, so no Project event falls
		// between the key and the sync that reads the lister.
		var err error
		if projects, err = c.interest(); err != nil {
			logger.Error(err, "Could not watch Projects")
			c.workers.Close(ctx)
			stop()
			return
		}
		c.owners.watchWith(func(owner string, watched bool) {
			if key := informerset.ProjectKey(c.clusterID, owner); watched {
				projects.Add(key)
			} else {
				projects.Remove(key)
			}
		})
	}
	if err := c.workers.Watch(c.namespaces, namespaceEvents{c}); err != nil {
		logger.Error(err, "Could not watch Namespaces")
		c.workers.Close(ctx)
		stop()
		return
	}
	if c.remote == nil {
		if err := c.workers.Watch(projects, c.projectHandler()); err != nil {
			logger.Error(err, "Could not watch Projects")
			c.workers.Close(ctx)
			stop()
			return
		}
	} else {
		// The workers do not wait for the management cluster: until it answers, syncs leave namespaces as they are,
		// and its first answer decides every namespace again (remoteChanged).
		var remote sync.WaitGroup
		remote.Go(func() { c.remote.run(ctx) })
		localStop := stop
		stop = func() {
			remote.Wait()
			localStop()
		}
	}

	logger.Info("Starting namespace-project controller", "appOwnerLabel", c.appOwnerKey, "managementCluster", c.remote != nil)
	c.workers.Start(ctx, worker.RunOptions{Stop: c.stop, Started: func() {
		c.reportMu.Lock()
		c.started = true
		c.reportMu.Unlock()
		c.report()
	}}, stop)
}

func (c *Controller) projectHandler() cache.ResourceEventHandler { return projectEvents{c} }

// The controller's event handlers, one type per resource. Each is a single pointer, which an interface holds
// without an allocation: a ResourceEventHandlerFuncs of three method values costs about 80 bytes, for each handler
// of every tenant.
type (
	namespaceEvents struct{ c *Controller }
	projectEvents   struct{ c *Controller }
)

func (e namespaceEvents) OnAdd(obj any, _ bool)     { e.c.onNamespace(obj) }
func (e namespaceEvents) OnUpdate(_, newObj any)    { e.c.onNamespace(newObj) }
func (e namespaceEvents) OnDelete(obj any)          { e.c.onNamespaceDelete(obj) }
func (e projectEvents) OnAdd(obj any, _ bool)       { e.c.onProject(nil, obj) }
func (e projectEvents) OnUpdate(oldObj, newObj any) { e.c.onProject(oldObj, newObj) }
func (e projectEvents) OnDelete(obj any)            { e.c.onProject(obj, nil) }

// clusterProjects returns the lister of the tenant's cluster's Projects, and false when they cannot be read (the
// management cluster does not answer): nothing may then be decided.
func (c *Controller) clusterProjects() (rancherlisters.ProjectNamespaceLister, bool) {
	if c.remote == nil {
		return c.prLister.Projects(c.clusterID), true
	}
	return c.remote.projects()
}

// remoteChanged reports the management cluster's new state and, once it answers again, decides every namespace
// anew: the syncs made meanwhile left them alone, and Projects may have changed unseen.
func (c *Controller) remoteChanged() {
	c.report()
	if _, ok := c.remote.projects(); !ok {
		return
	}
	namespaces, err := c.nsLister.List(labels.Everything())
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	for _, ns := range namespaces {
		if ns.Labels[c.appOwnerKey] != "" {
			c.workers.Add(ns.Name)
		}
	}
}

// report sets the condition from the current state. Running is reported once the workers run and, with a
// management cluster, while it answers; its failures are reported at once.
func (c *Controller) report() {
	c.reportMu.Lock()
	defer c.reportMu.Unlock()
	running := fmt.Sprintf("assigning namespaces labeled %s to the Projects of Rancher cluster %s", c.appOwnerKey, c.clusterID)
	if c.remote == nil {
		if c.started {
			c.condition.Report(metav1.ConditionTrue, ConditionReasonRunning, running)
		}
		return
	}
	switch s := c.remote.currentStatus(); s.state {
	case stateReady:
		if c.started {
			c.condition.Report(metav1.ConditionTrue, ConditionReasonRunning, running+", read from Rancher's management cluster "+s.server)
		}
	case stateFailed:
		c.condition.Report(metav1.ConditionFalse, s.reason, s.message)
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
	obj = worker.LastState(obj)
	p, ok := obj.(*rancherv3.Project)
	if !ok || p.Namespace != c.clusterID {
		return nil
	}
	return p
}

var _ tenant.Controller = (*Controller)(nil)
