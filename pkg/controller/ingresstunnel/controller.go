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
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	tunnelv1alpha1 "github.com/multiproject/api/pangolin/tunnel/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"
	tunnellisters "github.com/multiproject/client-go/listers/tunnel/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/claims"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/tenancy"
	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
)

// Condition reason once the controller runs.
const reasonRunning = "Running"

// DefaultConcurrentSyncs is the default of --concurrent-ingress-tunnel-syncs.
const DefaultConcurrentSyncs = 5

// Controller is one tenant's ingress-tunnel controller.
type Controller struct {
	tenant string
	config *mpv1alpha1.PangolinConfig
	// allowed is what the tenant may publish (spec.pangolin.allowedHostnames). The controller is restarted when
	// the ProviderConfig's spec.pangolin changes, and the new instance syncs every Ingress from its initial list.
	allowed hostAllowance
	client  mpclientset.Interface
	// kube writes the Ingresses' status (status.loadBalancer), nothing else of them.
	kube      kubernetes.Interface
	recorder  record.EventRecorder
	condition tenant.ConditionReporter
	planner   *planner

	ingressInformer  cache.SharedIndexInformer
	serviceInformer  cache.SharedIndexInformer
	resourceInformer cache.SharedIndexInformer
	// tunnelInformer is the shared informer of every tenant's PangolinTunnels, read through tunnels and watched
	// through an Interest in the tunnels the tenant's Ingresses use or wait for (tunnelInterest).
	tunnelInformer cache.SharedIndexInformer
	tunnelInterest func() (*tenancy.Interest, error)
	// allResources is the unfiltered PangolinResource informer: a host is published once in the whole cluster, so
	// every tenant's resources count when a host is taken over.
	allResources cache.SharedIndexInformer
	// allIngresses is the unfiltered Ingress informer, only read: an Ingress gone from the tenant's view that is
	// still there has left the tenant, whose resources for it are withdrawn.
	allIngresses cache.SharedIndexInformer

	ingresses networkinglisters.IngressLister
	services  corelisters.ServiceLister
	resources tunnellisters.PangolinResourceLister
	tunnels   tunnellisters.PangolinTunnelLister

	workers *worker.Queue
	deps    *dependencies
	// hosts is the controller's membership in the process's host claims, from Run on.
	hosts *claims.Member
	// claims is the run's claims.Service, which holds hosts once across tenants (and replicas); hostKind is how
	// the controller joins it (hostclaims.go).
	claims   *claims.Service
	hostKind claims.Kind
	// warnings reports an Ingress's problems once while they persist, not on every sync.
	warnings *tenant.Warnings
	// stop is the run's StopSignal (tenant.Context.Stop), nil when ctx's end is the signal.
	stop *worker.StopSignal
	// written is what this process last wrote to each Ingress's status.
	written writtenHosts
	// gateway is the Gateway API side (gateway.go, route.go): nil where the cluster did not serve Gateway API when
	// the controller was built.
	gateway *gatewayAPI
}

// New builds the controller of the tenant c describes. It adds no handler and makes no call; Run does.
func New(c *tenant.Context) (*Controller, error) {
	return newController(c, nil)
}

// newController is New with a hook that tests use to observe every sync's outcome.
func newController(c *tenant.Context, afterSync func(key string, err error)) (*Controller, error) {
	if c.ProviderConfig == nil || c.ProviderConfig.Spec.Pangolin == nil {
		return nil, errors.New("ingress-tunnel: the ProviderConfig has no spec.pangolin")
	}
	get := func(gvr schema.GroupVersionResource, shared bool) (cache.SharedIndexInformer, error) {
		if shared {
			return c.Informers.Shared(gvr)
		}
		return c.Informers.Informer(gvr)
	}
	var informers [6]cache.SharedIndexInformer
	for i, r := range []struct {
		gvr    schema.GroupVersionResource
		shared bool
	}{{informerset.Ingresses, false}, {informerset.Services, false}, {informerset.PangolinResources, false}, {informerset.PangolinTunnels, true},
		{informerset.PangolinResources, true}, {informerset.Ingresses, true}} {
		inf, err := get(r.gvr, r.shared)
		if err != nil {
			return nil, fmt.Errorf("ingress-tunnel: %w", err)
		}
		informers[i] = inf
	}
	name := c.Name()
	views := c.Informers // not c: the controller keeps nothing else of the Context
	config := c.ProviderConfig.Spec.Pangolin.DeepCopy()
	allowed := newHostAllowance(name, config.AllowedHostnames)
	ctrl := &Controller{
		tenant:           name,
		config:           config,
		allowed:          allowed,
		client:           c.MultiprojectClient,
		kube:             c.KubeClient,
		recorder:         c.EventRecorder,
		condition:        c.Condition,
		ingressInformer:  informers[0],
		serviceInformer:  informers[1],
		resourceInformer: informers[2],
		tunnelInformer:   informers[3],
		allResources:     informers[4],
		allIngresses:     informers[5],
		ingresses:        networkinglisters.NewIngressLister(informers[0].GetIndexer()),
		services:         corelisters.NewServiceLister(informers[1].GetIndexer()),
		resources:        tunnellisters.NewPangolinResourceLister(informers[2].GetIndexer()),
		tunnels:          tunnellisters.NewPangolinTunnelLister(informers[3].GetIndexer()),
		tunnelInterest:   func() (*tenancy.Interest, error) { return tenant.InterestOf(views, informerset.PangolinTunnels) },
		deps:             newDependencies(),
		warnings:         tenant.NewWarnings(c.EventRecorder),
		stop:             c.Stop,
		claims:           c.Claims,
		hostKind:         hostKindOf(c.KubeClient, c.MultiprojectClient, c.GatewayClient, c.ProviderConfigLabelKey),
		gateway:          newGatewayAPI(c),
	}
	ctrl.workers = worker.New(worker.Config{
		Tenant:     name,
		Controller: c.Controller,
		KeyName:    "ingress",
		Workers:    c.Workers,
		Sync: func(ctx context.Context, key string) (worker.Result, error) {
			return worker.Result{}, ctrl.sync(ctx, key)
		},
		AfterSync: afterSync,
	})
	ctrl.planner = &planner{
		tenant:   name,
		labelKey: c.ProviderConfigLabelKey,
		config:   config,
		allowed:  allowed,
		service: func(namespace, name string) (*corev1.Service, error) {
			return ctrl.services.Services(namespace).Get(name)
		},
	}
	return ctrl, nil
}

// The controller's event handlers, one type per resource. Each is a single pointer, which an interface holds
// without an allocation: a ResourceEventHandlerFuncs of three method values costs about 80 bytes, for each handler
// of every tenant.
type (
	ingressEvents  struct{ c *Controller }
	serviceEvents  struct{ c *Controller }
	resourceEvents struct{ c *Controller }
	tunnelEvents   struct{ c *Controller }
)

func (e ingressEvents) OnAdd(obj any, _ bool)        { e.c.onIngress(obj) }
func (e ingressEvents) OnUpdate(oldObj, newObj any)  { e.c.onIngressUpdate(oldObj, newObj) }
func (e ingressEvents) OnDelete(obj any)             { e.c.onIngressDelete(obj) }
func (e serviceEvents) OnAdd(obj any, _ bool)        { e.c.onService(obj) }
func (e serviceEvents) OnUpdate(oldObj, newObj any)  { e.c.onServiceUpdate(oldObj, newObj) }
func (e serviceEvents) OnDelete(obj any)             { e.c.onService(obj) }
func (e resourceEvents) OnAdd(obj any, _ bool)       { e.c.onResource(obj) }
func (e resourceEvents) OnUpdate(oldObj, newObj any) { e.c.onResourceUpdate(oldObj, newObj) }
func (e resourceEvents) OnDelete(obj any)            { e.c.onResource(obj) }

// A tunnel's changes do not matter, only whether it exists.
func (e tunnelEvents) OnAdd(obj any, _ bool) { e.c.onTunnel(obj) }
func (e tunnelEvents) OnUpdate(_, _ any)     {}
func (e tunnelEvents) OnDelete(obj any)      { e.c.onTunnel(obj) }

// Run watches the tenant's Ingresses, Services and PangolinResources and the PangolinTunnels of its tunnel
// namespace, and reconciles until ctx ends. On return its handlers are removed, its queue is shut down and its
// workers are gone.
func (c *Controller) Run(ctx context.Context) { tenant.RunStarter(ctx, c) }

// Start sets the controller up and returns; the workers start as keys arrive, and done is called once everything
// has stopped after ctx ended (tenant.Starter).
func (c *Controller) Start(ctx context.Context, done func()) {
	logger := klog.FromContext(ctx)

	// The shared tunnel informer hands this tenant the events of the tunnels its Ingresses use or wait for, and no
	// others. A sync records its Ingress's tunnel (adding the key) before it looks the tunnel up, so no event falls
	// between the two.
	tunnels, err := c.tunnelInterest()
	if err != nil {
		logger.Error(err, "Could not watch", "resource", "PangolinTunnels")
		done()
		return
	}
	stop := func() {
		tunnels.Close()
		done()
	}
	c.deps.watchTunnelsWith(func(tunnel string, watched bool) {
		if key := informerset.TunnelKey(c.config.TunnelNamespace, tunnel); watched {
			tunnels.Add(key)
		} else {
			tunnels.Remove(key)
		}
	})

	// Joined before the Ingress handler is added, which claims the tenant's hosts from its initial list on.
	hosts, err := c.joinClaims()
	if err != nil {
		logger.Error(err, "Could not join the process's host claims")
		stop()
		return
	}
	c.hosts = hosts
	// Left after the workers removed their handlers: the tenant's hosts are released once, and no late Ingress event
	// claims them again.
	stop = func() {
		hosts.Leave()
		tunnels.Close()
		done()
	}

	for _, h := range c.handlers(tunnels) {
		if err := c.workers.Watch(h.informer, h.handler); err != nil {
			logger.Error(err, "Could not watch", "resource", h.what)
			c.workers.Close(ctx)
			stop()
			return
		}
	}
	c.workers.WaitFor(hosts.HasSynced)
	if c.gateway != nil {
		c.workers.WaitFor(c.gateway.readOnly...)
	}

	logger.Info("Starting ingress-tunnel controller", "tunnelNamespace", c.config.TunnelNamespace, "gatewayAPI", c.gateway != nil)
	c.workers.Start(ctx, worker.RunOptions{Stop: c.stop, Started: func() {
		c.condition.Report(metav1.ConditionTrue, reasonRunning, fmt.Sprintf("Exposing the tenant's Pangolin-class Ingresses through the tunnels of namespace %s", c.config.TunnelNamespace))
	}}, stop)
}

// handler is one of the controller's event handlers and the informer it watches.
type handler struct {
	what     string
	informer cache.SharedIndexInformer
	handler  cache.ResourceEventHandler
}

// handlers are the controller's event handlers: the Ingress side's, and Gateway API's where it is served.
func (c *Controller) handlers(tunnels cache.SharedIndexInformer) []handler {
	out := []handler{
		{"Ingresses", c.ingressInformer, ingressEvents{c}},
		{"Services", c.serviceInformer, serviceEvents{c}},
		{"PangolinResources", c.resourceInformer, resourceEvents{c}},
		{"PangolinTunnels", tunnels, tunnelEvents{c}},
	}
	if g := c.gateway; g != nil {
		out = append(out,
			handler{"GatewayClasses", g.classInformer, classEvents{c}},
			handler{"Gateways", g.gatewayInformer, gatewayEvents{c}},
			handler{"HTTPRoutes", g.routeInformer, routeEvents{c}},
			handler{"ReferenceGrants", g.grantInformer, grantEvents{c}})
	}
	return out
}

// onIngress records the hosts the Ingress claims before it is synced, so that its sync and the other claimants'
// see the claim.
func (c *Controller) onIngress(obj any) {
	if ing, ok := obj.(*networkingv1.Ingress); ok {
		c.hosts.Claim(claimantOf(ing), claimedNames(ing, c.allowed))
	}
	c.workers.AddObject(obj)
}

// onIngressUpdate skips resyncs and status-only changes (the load balancer status another controller writes).
func (c *Controller) onIngressUpdate(oldObj, newObj any) {
	if worker.IsResync(oldObj, newObj) {
		return
	}
	c.onIngress(newObj)
}

// onIngressDelete releases the hosts of an Ingress that is gone, or that left the tenant (the tenant that gains it
// claims them again), and forgets its warnings: an Ingress that comes back is told again.
func (c *Controller) onIngressDelete(obj any) {
	obj = worker.LastState(obj)
	if ing, ok := obj.(*networkingv1.Ingress); ok {
		self := claimantOf(ing)
		c.hosts.Claim(self, nil)
		c.warnings.Forget(self.Key)
	}
	c.workers.AddObject(obj)
}

// onService enqueues the Ingresses whose named ports the Service resolves.
func (c *Controller) onService(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	for _, ing := range c.deps.usersOfService(key) {
		c.workers.Add(ing)
	}
	if c.gateway != nil {
		namespace, name, _ := cache.SplitMetaNamespaceKey(key)
		c.enqueueRoutesUsing(func(ns, n string) bool { return ns == namespace && n == name })
	}
}

func (c *Controller) onServiceUpdate(oldObj, newObj any) {
	if worker.IsResync(oldObj, newObj) {
		return
	}
	c.onService(newObj)
}

// onResource enqueues the Ingress that controls a PangolinResource, so a resource changed or deleted behind the
// controller's back is put right, and one that reaches the cache late is compared again.
func (c *Controller) onResource(obj any) {
	obj = worker.LastState(obj)
	res, ok := obj.(*tunnelv1alpha1.PangolinResource)
	if !ok {
		return
	}
	ref := metav1.GetControllerOf(res)
	switch {
	case ref == nil:
	case ref.Kind == ingressGVK.Kind && ref.APIVersion == ingressGVK.GroupVersion().String():
		c.workers.Add(res.Namespace + "/" + ref.Name)
	case ref.Kind == routeGVK.Kind && ref.APIVersion == routeGVK.GroupVersion().String():
		c.workers.Add(routeKey(res.Namespace, ref.Name))
	}
}

// onResourceUpdate skips resyncs, and updates that change nothing the controller reads: of the operator's status
// writes, only those that change the published domain or the reported error concern the Ingress.
func (c *Controller) onResourceUpdate(oldObj, newObj any) {
	oldRes, ok1 := oldObj.(*tunnelv1alpha1.PangolinResource)
	newRes, ok2 := newObj.(*tunnelv1alpha1.PangolinResource)
	if ok1 && ok2 && !resourceChanged(oldRes, newRes) {
		return
	}
	c.onResource(newObj)
}

// resourceChanged says whether an update of a PangolinResource changes what the controller reads of it.
func resourceChanged(oldRes, newRes *tunnelv1alpha1.PangolinResource) bool {
	if worker.IsResync(oldRes, newRes) {
		return false
	}
	return oldRes.Generation != newRes.Generation || !maps.Equal(oldRes.Labels, newRes.Labels) ||
		!oldRes.DeletionTimestamp.Equal(newRes.DeletionTimestamp) || viewOf(oldRes) != viewOf(newRes)
}

// onTunnel enqueues the Ingresses that use or wait for a tunnel of the tenant's tunnel namespace. Tunnel updates are
// not watched: the controller only needs to know that the tunnel exists.
func (c *Controller) onTunnel(obj any) {
	obj = worker.LastState(obj)
	tunnel, ok := obj.(*tunnelv1alpha1.PangolinTunnel)
	if !ok || tunnel.Namespace != c.config.TunnelNamespace {
		return
	}
	for _, ing := range c.deps.usersOfTunnel(tunnel.Name) {
		c.workers.Add(ing)
	}
}

var _ tenant.Controller = (*Controller)(nil)
