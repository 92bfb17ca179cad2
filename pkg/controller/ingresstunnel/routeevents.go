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
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
)

// The Gateway API handlers: one type per resource, as for the others (controller.go).
type (
	routeEvents   struct{ c *Controller }
	gatewayEvents struct{ c *Controller }
	classEvents   struct{ c *Controller }
	grantEvents   struct{ c *Controller }
)

func (e routeEvents) OnAdd(obj any, _ bool) { e.c.onRoute(obj) }
func (e routeEvents) OnUpdate(oldObj, newObj any) {
	if specChanged(oldObj, newObj) {
		e.c.onRoute(newObj)
	}
}
func (e routeEvents) OnDelete(obj any)        { e.c.onRouteDelete(obj) }
func (e gatewayEvents) OnAdd(obj any, _ bool) { e.c.onGateway(obj) }
func (e gatewayEvents) OnUpdate(oldObj, newObj any) {
	if specChanged(oldObj, newObj) {
		e.c.onGateway(newObj)
	}
}
func (e gatewayEvents) OnDelete(obj any)    { e.c.onGateway(worker.LastState(obj)) }
func (e classEvents) OnAdd(obj any, _ bool) { e.c.onClass(obj) }
func (e classEvents) OnUpdate(oldObj, newObj any) {
	if specChanged(oldObj, newObj) {
		e.c.onClass(newObj)
	}
}
func (e classEvents) OnDelete(obj any)            { e.c.onClass(worker.LastState(obj)) }
func (e grantEvents) OnAdd(obj any, _ bool)       { e.c.onGrant(obj) }
func (e grantEvents) OnUpdate(oldObj, newObj any) { e.c.onGrant(newObj) }
func (e grantEvents) OnDelete(obj any)            { e.c.onGrant(worker.LastState(obj)) }

// specChanged skips resyncs and status-only updates, which the controller's own status writes are.
func specChanged(oldObj, newObj any) bool {
	o, ok1 := oldObj.(metav1.Object)
	n, ok2 := newObj.(metav1.Object)
	if !ok1 || !ok2 {
		return true
	}
	return o.GetGeneration() != n.GetGeneration() || !maps.Equal(o.GetAnnotations(), n.GetAnnotations()) ||
		!o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp())
}

// onRoute records the hosts the route claims before it is synced, as onIngress does, and enqueues the route and
// the Gateways it names (their attached routes).
func (c *Controller) onRoute(obj any) {
	route, ok := obj.(*gatewayv1.HTTPRoute)
	if !ok {
		return
	}
	c.hosts.Claim(routeClaimant(route), c.routeClaims(route))
	c.workers.Add(routeKey(route.Namespace, route.Name))
	c.enqueueParents(route)
}

func (c *Controller) onRouteDelete(obj any) {
	route, ok := worker.LastState(obj).(*gatewayv1.HTTPRoute)
	if !ok {
		return
	}
	self := routeClaimant(route)
	c.hosts.Claim(self, nil)
	c.warnings.Forget(self.Key)
	c.workers.Add(self.Key)
	c.enqueueParents(route)
}

func (c *Controller) enqueueParents(route *gatewayv1.HTTPRoute) {
	for _, ref := range route.Spec.ParentRefs {
		ns := route.Namespace
		if ref.Namespace != nil {
			ns = string(*ref.Namespace)
		}
		c.workers.Add(gatewayKey(ns, string(ref.Name)))
	}
}

func (c *Controller) onGateway(obj any) {
	if gw, ok := obj.(*gatewayv1.Gateway); ok {
		c.enqueueGateway(gw.Namespace, gw.Name)
	}
}

// onClass enqueues the tenant's Gateways of a class, and their routes.
func (c *Controller) onClass(obj any) {
	class, ok := obj.(*gatewayv1.GatewayClass)
	if !ok {
		return
	}
	gateways, err := c.gateway.gateways.List(labels.Everything())
	if err != nil {
		return
	}
	for _, gw := range gateways {
		if string(gw.Spec.GatewayClassName) == class.Name {
			c.enqueueGateway(gw.Namespace, gw.Name)
		}
	}
}

// onGrant enqueues the tenant's routes with a backend in the grant's namespace: a grant that comes opens it, one
// that goes closes it again.
func (c *Controller) onGrant(obj any) {
	grant, ok := obj.(*gatewayv1.ReferenceGrant)
	if !ok {
		return
	}
	c.enqueueRoutesUsing(func(namespace, _ string) bool { return namespace == grant.Namespace })
}

// enqueueRoutesUsing enqueues the tenant's routes with a backend Service for which uses is true.
func (c *Controller) enqueueRoutesUsing(uses func(namespace, name string) bool) {
	routes, err := c.gateway.routes.List(labels.Everything())
	if err != nil {
		return
	}
	for _, route := range routes {
	rules:
		for _, rule := range route.Spec.Rules {
			for _, b := range rule.BackendRefs {
				ns := route.Namespace
				if b.Namespace != nil {
					ns = string(*b.Namespace)
				}
				if uses(ns, string(b.Name)) {
					c.workers.Add(routeKey(route.Namespace, route.Name))
					break rules
				}
			}
		}
	}
}
