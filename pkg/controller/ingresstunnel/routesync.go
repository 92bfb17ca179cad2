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
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	tunnelv1alpha1 "github.com/multiproject/api/pangolin/tunnel/v1alpha1"
	"github.com/multiproject/multiproject-controller-manager/pkg/claims"
)

// syncRoute brings the PangolinResources of one HTTPRoute in line with it and writes its status.parents entries.
func (c *Controller) syncRoute(ctx context.Context, key, namespace, name string) error {
	route, err := c.gateway.routes.HTTPRoutes(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		// Deleted (the garbage collector deletes what it owns), or gone from the tenant's view while it still
		// exists: its namespace left the tenant.
		c.forget(key)
		return c.withdrawRoute(ctx, namespace, name)
	}
	if err != nil {
		return err
	}
	if route.DeletionTimestamp != nil {
		c.forget(key)
		return nil
	}
	self := routeClaimant(route)
	c.hosts.Claim(self, c.routeClaims(route))
	owned, err := c.ownedBy(route)
	if err != nil {
		return err
	}
	v := c.judgeRoute(route)
	hosts := v.hosts()
	// One tunnel is watched per key: a route whose hosts go through several (several parents) is synced again by
	// the others' Gateways' events.
	if tunnels := sets.List(sets.New(slices.Collect(maps.Values(hosts))...)); len(tunnels) > 0 {
		c.deps.set(key, tunnels[0], nil)
	} else {
		c.deps.forget(key)
	}
	var found problems
	keep := sets.New[string]()
	var errs []error
	for _, host := range sets.List(sets.KeySet(hosts)) {
		if err := c.publishRouteHost(ctx, route, self, v, host, hosts[host], keep, &found); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.deleteUnwanted(ctx, route, owned, keep, nil, &found); err != nil {
		errs = append(errs, err)
	}
	var notes []string
	for _, w := range found {
		notes = append(notes, w.Message)
	}
	if err := c.writeRouteStatus(ctx, route, v, notes); err != nil {
		errs = append(errs, err)
	}
	c.warnings.Report(key, route, found...)
	return utilerrors.NewAggregate(errs)
}

// publishRouteHost makes the PangolinResource of one host of a route through tunnel, if the tenant may publish it
// and the route holds it, and adds its name to keep when it must stay (also while the tunnel is missing, or the
// holder is undecided). What the user must know is added to found.
func (c *Controller) publishRouteHost(ctx context.Context, route *gatewayv1.HTTPRoute, self claims.Claimant, v routeVerdict,
	host, tunnel string, keep sets.Set[string], found *problems) error {
	name := routeResourceName(route.Namespace, route.Name, host)
	if !c.allowed.allows(host) {
		found.add(ReasonHostNotAllowed, "%s", c.allowed.refusal(host, host))
		return nil
	}
	subdomain, domain, err := splitWithSettings(host, v.settings)
	if err != nil {
		found.add(ReasonInvalidHost, "%v; this host is skipped", err)
		return nil
	}
	holder, isSelf, err := c.hosts.Decide(ctx, host, self)
	if err != nil {
		keep.Insert(name)
		return err
	}
	if !isSelf {
		found.add(ReasonHostConflict, "%s", routeConflict(host, c.hosts.Describe(holder)))
		return nil
	}
	if _, err := c.tunnels.PangolinTunnels(c.config.TunnelNamespace).Get(tunnel); apierrors.IsNotFound(err) {
		// What exists stays, as for an Ingress: a tunnel being re-created should not take the host offline.
		keep.Insert(name)
		found.add(ReasonTunnelNotFound, "PangolinTunnel %s/%s does not exist; host %s is published once it does", c.config.TunnelNamespace, tunnel, host)
		return nil
	} else if err != nil {
		keep.Insert(name)
		return err
	}
	if len(v.targets) == 0 {
		found.add(ReasonInvalidHost, "Host %q has no Service backend that can be published; this host is skipped", host)
		return nil
	}
	keep.Insert(name)
	want := c.routeResource(route, name, host, tunnel, subdomain, domain, v.settings, v.targets)
	blockedBy, _, err := c.apply(ctx, route, self, want, found)
	if blockedBy != "" {
		found.add(ReasonHostConflict, "%s", routeConflict(host, blockedBy))
	}
	return err
}

func routeConflict(host, holder string) string {
	return fmt.Sprintf("Host %s is already published by %s; this HTTPRoute gets no PangolinResource for it until that one lets it go", host, holder)
}

// withdrawRoute deletes the PangolinResources the tenant made for a route that still exists but is no longer the
// tenant's, as withdraw does for an Ingress: they publish through this tenant's tunnels, and the garbage collector
// leaves them while the route lives.
func (c *Controller) withdrawRoute(ctx context.Context, namespace, name string) error {
	route, err := c.gateway.allRoutes.HTTPRoutes(namespace).Get(name)
	if apierrors.IsNotFound(err) || (err == nil && route.DeletionTimestamp != nil) {
		return nil
	}
	if err != nil {
		return err
	}
	owned, err := c.ownedBy(route)
	if err != nil {
		return err
	}
	var errs []error
	for _, res := range owned {
		if res.DeletionTimestamp != nil {
			continue
		}
		deleted, err := c.deleteResource(ctx, res)
		if err != nil {
			errs = append(errs, fmt.Errorf("delete PangolinResource %s/%s: %w", res.Namespace, res.Name, err))
			continue
		}
		if deleted {
			klog.FromContext(ctx).V(2).Info("Deleted PangolinResource of an HTTPRoute that left the tenant", "resource", klog.KObj(res), "host", hostOf(res))
			c.recorder.Eventf(route, corev1.EventTypeNormal, ReasonDeleted, "Deleted PangolinResource %s for host %s: namespace %s no longer belongs to tenant %s",
				res.Name, hostOf(res), route.Namespace, c.tenant)
		}
	}
	return utilerrors.NewAggregate(errs)
}

// ownedBy lists the PangolinResources p controls.
func (c *Controller) ownedBy(p publisher) ([]*tunnelv1alpha1.PangolinResource, error) {
	list, err := c.resources.PangolinResources(p.GetNamespace()).List(labels.SelectorFromSet(labels.Set{LabelIngressUID: string(p.GetUID())}))
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(list, func(res *tunnelv1alpha1.PangolinResource) bool { return !metav1.IsControlledBy(res, p) }), nil
}

// routeResource builds the PangolinResource of one host of a route, as planner.resource does for an Ingress.
func (c *Controller) routeResource(route *gatewayv1.HTTPRoute, name, host, tunnel, subdomain, domain string, s hostSettings,
	targets []tunnelv1alpha1.Target) *tunnelv1alpha1.PangolinResource {
	return c.planner.publishedResource(route, routeGVK, name, host, tunnel, subdomain, domain, s, targets)
}

// writeRouteStatus makes the route's status.parents entries of this controller those of v, with notes added to
// the Accepted message of each entry that accepts the route, and leaves the other implementations' entries alone. It writes
// only on a difference.
func (c *Controller) writeRouteStatus(ctx context.Context, route *gatewayv1.HTTPRoute, v routeVerdict, notes []string) error {
	updated := route.DeepCopy()
	var parents []gatewayv1.RouteParentStatus
	for _, p := range route.Status.Parents {
		if p.ControllerName != ControllerName {
			parents = append(parents, p)
		}
	}
	for _, p := range v.parents {
		entry := gatewayv1.RouteParentStatus{ParentRef: p.ref, ControllerName: ControllerName}
		for _, old := range route.Status.Parents {
			if old.ControllerName == ControllerName && equality.Semantic.DeepEqual(old.ParentRef, p.ref) {
				entry.Conditions = slices.Clone(old.Conditions)
			}
		}
		message := p.message
		if p.accepted() && len(notes) > 0 {
			message += ". " + strings.Join(notes, ". ")
		}
		setCondition(&entry.Conditions, string(gatewayv1.RouteConditionAccepted), p.status, string(p.reason), message, route.Generation)
		setCondition(&entry.Conditions, string(gatewayv1.RouteConditionResolvedRefs), v.resolved, string(v.reason), v.message, route.Generation)
		parents = append(parents, entry)
	}
	updated.Status.Parents = parents
	if equality.Semantic.DeepEqual(route.Status, updated.Status) {
		return nil
	}
	if _, err := c.gateway.client.GatewayV1().HTTPRoutes(route.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update the status of HTTPRoute %s/%s: %w", route.Namespace, route.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Updated HTTPRoute status", "route", klog.KObj(route))
	return nil
}

// routeResourceName is the name of the PangolinResource of one host of an HTTPRoute: ResourceName's form with
// the prefix "phr-" and the hash of "HTTPRoute/<namespace>/<route>/<host>", so an Ingress and an HTTPRoute of one
// name never name the same resource.
func routeResourceName(namespace, route, host string) string {
	return resourceName(routeResourceNamePrefix, routeKind+"/"+namespace+"/"+route+"/"+host, namespace, route)
}
