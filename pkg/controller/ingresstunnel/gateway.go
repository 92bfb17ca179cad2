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
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclientset "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gatewaylisters "sigs.k8s.io/gateway-api/pkg/client/listers/apis/v1"

	"github.com/multiproject/multiproject-controller-manager/pkg/claims"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
)

// ControllerName is the GatewayClass spec.controllerName of the classes the ingress-tunnel controller implements:
// the Gateways of such a class in a tenant's namespaces publish, through the tenant's Pangolin tunnels, the
// HTTPRoutes of the tenant attached to them.
const ControllerName gatewayv1.GatewayController = "multiproject.io/ingress-tunnel"

// Kinds in the controller's workqueue keys (claims.KindKey), beside the Ingresses' bare namespace/name.
const (
	gatewayKind = "Gateway"
	routeKind   = "HTTPRoute"
)

var routeGVK = gatewayv1.SchemeGroupVersion.WithKind(routeKind)

func gatewayKey(namespace, name string) string {
	return claims.KindKey(gatewayKind, namespace+"/"+name)
}
func routeKey(namespace, name string) string { return claims.KindKey(routeKind, namespace+"/"+name) }

// gatewayAPI is what the controller reads of Gateway API, when the cluster serves it as the controller starts.
type gatewayAPI struct {
	client gatewayclientset.Interface

	classInformer   cache.SharedIndexInformer
	gatewayInformer cache.SharedIndexInformer
	routeInformer   cache.SharedIndexInformer
	grantInformer   cache.SharedIndexInformer

	// classes and allGateways read the shared, unfiltered informers: a GatewayClass is the cluster's, and a Gateway
	// a route names in another tenant's namespace must be told from one of another implementation. The others
	// read the tenant's views.
	classes     gatewaylisters.GatewayClassLister
	gateways    gatewaylisters.GatewayLister
	allGateways gatewaylisters.GatewayLister
	routes      gatewaylisters.HTTPRouteLister
	// allRoutes reads the shared, unfiltered informer: a route gone from the tenant's view that is still there has
	// left the tenant, whose resources for it are withdrawn.
	allRoutes  gatewaylisters.HTTPRouteLister
	grants     gatewaylisters.ReferenceGrantLister
	namespaces corelisters.NamespaceLister
	// readOnly are the informers read without a handler (every Gateway, every route, the Namespaces): the workers
	// wait for them too, or a first sync would take a backend's namespace for another tenant's and never look again.
	readOnly []cache.InformerSynced
}

// newGatewayAPI returns the controller's Gateway API side, or nil when the process has no Gateway client or the
// cluster does not serve Gateway API: the informers are optional, and without them the Ingress side runs alone.
func newGatewayAPI(c *tenant.Context) *gatewayAPI {
	if c.GatewayClient == nil {
		return nil
	}
	var informers [7]cache.SharedIndexInformer
	for i, r := range []struct {
		gvr    schema.GroupVersionResource
		shared bool
	}{{informerset.GatewayClasses, true}, {informerset.Gateways, false}, {informerset.Gateways, true},
		{informerset.HTTPRoutes, false}, {informerset.ReferenceGrants, false}, {informerset.Namespaces, true}, {informerset.HTTPRoutes, true}} {
		var inf cache.SharedIndexInformer
		var err error
		if r.shared {
			inf, err = c.Informers.Shared(r.gvr)
		} else {
			inf, err = c.Informers.Informer(r.gvr)
		}
		if err != nil {
			// Not served: the Gateway API CRDs are not installed.
			return nil
		}
		informers[i] = inf
	}
	return &gatewayAPI{
		client:          c.GatewayClient,
		classInformer:   informers[0],
		gatewayInformer: informers[1],
		routeInformer:   informers[3],
		grantInformer:   informers[4],
		classes:         gatewaylisters.NewGatewayClassLister(informers[0].GetIndexer()),
		gateways:        gatewaylisters.NewGatewayLister(informers[1].GetIndexer()),
		allGateways:     gatewaylisters.NewGatewayLister(informers[2].GetIndexer()),
		routes:          gatewaylisters.NewHTTPRouteLister(informers[3].GetIndexer()),
		grants:          gatewaylisters.NewReferenceGrantLister(informers[4].GetIndexer()),
		namespaces:      corelisters.NewNamespaceLister(informers[5].GetIndexer()),
		allRoutes:       gatewaylisters.NewHTTPRouteLister(informers[6].GetIndexer()),
		readOnly:        []cache.InformerSynced{informers[2].HasSynced, informers[5].HasSynced, informers[6].HasSynced},
	}
}

// ourClass returns the GatewayClass name if it is one of the controller's.
func (g *gatewayAPI) ourClass(name gatewayv1.ObjectName) (*gatewayv1.GatewayClass, bool) {
	class, err := g.classes.Get(string(name))
	if err != nil || class.Spec.ControllerName != ControllerName {
		return nil, false
	}
	return class, true
}

// gatewayVerdict is what the controller makes of one of its Gateways.
type gatewayVerdict struct {
	// tunnel is the PangolinTunnel (in the tenant's tunnel namespace) the Gateway publishes through.
	tunnel string
	// accepted: the Gateway is valid; otherwise reason and message say why not.
	accepted bool
	reason   gatewayv1.GatewayConditionReason
	message  string
	// listeners, by name: the listeners the controller serves (HTTP and HTTPS, for HTTPRoutes).
	listeners map[gatewayv1.SectionName]listenerVerdict
}

type listenerVerdict struct {
	// accepted: the protocol is served; kindsResolved: HTTPRoute is among the route kinds the listener allows.
	accepted      bool
	kindsResolved bool
}

// serves says whether routes may attach to the listener.
func (l listenerVerdict) serves() bool { return l.accepted && l.kindsResolved }

// judgeGateway decides whether the controller can implement gw. The tunnel is picked as an Ingress's is: the
// tunnel-name annotation on the Gateway, else for class "pangolin-<suffix>" the tenant's tunnelsByClassSuffix,
// else the tenant's defaultTunnel; only tunnels of the tenant's tunnel namespace are ever named.
func (c *Controller) judgeGateway(gw *gatewayv1.Gateway) gatewayVerdict {
	v := gatewayVerdict{accepted: true, reason: gatewayv1.GatewayReasonAccepted, listeners: map[gatewayv1.SectionName]listenerVerdict{}}
	served := 0
	for _, l := range gw.Spec.Listeners {
		lv := listenerVerdict{
			accepted:      l.Protocol == gatewayv1.HTTPProtocolType || l.Protocol == gatewayv1.HTTPSProtocolType,
			kindsResolved: allowsRouteKind(l),
		}
		v.listeners[l.Name] = lv
		if lv.serves() {
			served++
		}
	}
	tunnel, err := tunnelFor(gw.Annotations, string(gw.Spec.GatewayClassName), gatewayKind, c.config)
	switch {
	case len(gw.Spec.Addresses) > 0:
		v.accepted, v.reason = false, gatewayv1.GatewayReasonUnsupportedAddress
		v.message = "spec.addresses is not supported: a Pangolin tunnel publishes host names, not addresses"
	case err != nil:
		v.accepted, v.reason, v.message = false, gatewayv1.GatewayReasonInvalidParameters, capitalize(err.Error())
	case served == 0:
		v.accepted, v.reason = false, gatewayv1.GatewayReasonListenersNotValid
		v.message = "No listener serves HTTPRoutes over HTTP or HTTPS"
	default:
		v.tunnel = tunnel
		v.message = fmt.Sprintf("Publishes its routes through PangolinTunnel %s/%s", c.config.TunnelNamespace, tunnel)
	}
	return v
}

// allowsRouteKind says whether a listener lets HTTPRoutes attach: it lists no kinds, or lists HTTPRoute.
func allowsRouteKind(l gatewayv1.Listener) bool {
	if l.AllowedRoutes == nil || len(l.AllowedRoutes.Kinds) == 0 {
		return true
	}
	for _, k := range l.AllowedRoutes.Kinds {
		if k.Kind == routeKind && (k.Group == nil || *k.Group == gatewayv1.GroupName) {
			return true
		}
	}
	return false
}

// allowsNamespace says whether a listener of gw lets a route of namespace attach (allowedRoutes.namespaces.from;
// Same by default). The route is the tenant's, as the Gateway is: All and Selector never reach another tenant.
func (g *gatewayAPI) allowsNamespace(gw *gatewayv1.Gateway, l gatewayv1.Listener, namespace string) bool {
	from := gatewayv1.NamespacesFromSame
	if l.AllowedRoutes != nil && l.AllowedRoutes.Namespaces != nil && l.AllowedRoutes.Namespaces.From != nil {
		from = *l.AllowedRoutes.Namespaces.From
	}
	switch from {
	case gatewayv1.NamespacesFromAll:
		return true
	case gatewayv1.NamespacesFromSelector:
		if l.AllowedRoutes.Namespaces.Selector == nil {
			return false
		}
		selector, err := metav1.LabelSelectorAsSelector(l.AllowedRoutes.Namespaces.Selector)
		if err != nil {
			return false
		}
		ns, err := g.namespaces.Get(namespace)
		return err == nil && selector.Matches(labels.Set(ns.Labels))
	default:
		return namespace == gw.Namespace
	}
}

// syncGateway writes the status of one of the tenant's Gateways of the controller's classes: Accepted, Programmed
// (its tunnel exists), and per listener Accepted, ResolvedRefs, Conflicted, Programmed and the routes attached.
func (c *Controller) syncGateway(ctx context.Context, key, namespace, name string) error {
	g := c.gateway
	gw, err := g.gateways.Gateways(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		c.deps.forget(key)
		return nil
	}
	if err != nil {
		return err
	}
	class, ours := g.ourClass(gw.Spec.GatewayClassName)
	if !ours || gw.DeletionTimestamp != nil {
		c.deps.forget(key)
		return nil
	}
	if err := c.acceptClass(ctx, class); err != nil {
		return err
	}
	v := c.judgeGateway(gw)
	programmed, programmedReason := v.accepted, gatewayv1.GatewayReasonProgrammed
	programmedMessage := "Routes attached to it are published through Pangolin"
	if v.accepted {
		c.deps.set(key, v.tunnel, nil)
		if _, err := c.tunnels.PangolinTunnels(c.config.TunnelNamespace).Get(v.tunnel); apierrors.IsNotFound(err) {
			programmed, programmedReason = false, gatewayv1.GatewayReasonPending
			programmedMessage = fmt.Sprintf("PangolinTunnel %s/%s does not exist; routes are published once it does", c.config.TunnelNamespace, v.tunnel)
		} else if err != nil {
			return err
		}
	} else {
		c.deps.forget(key)
		programmedReason, programmedMessage = gatewayv1.GatewayReasonInvalid, "The Gateway is not accepted"
	}

	attached, err := c.attachedRoutes(namespace, name)
	if err != nil {
		return err
	}
	updated := gw.DeepCopy()
	st := &updated.Status
	setCondition(&st.Conditions, string(gatewayv1.GatewayConditionAccepted), v.accepted, string(v.reason), v.message, gw.Generation)
	setCondition(&st.Conditions, string(gatewayv1.GatewayConditionProgrammed), programmed, string(programmedReason), programmedMessage, gw.Generation)
	st.Listeners = listenerStatuses(gw, v, attached, programmed, programmedMessage)
	if equality.Semantic.DeepEqual(gw.Status, updated.Status) {
		return nil
	}
	if _, err := g.client.GatewayV1().Gateways(namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update the status of Gateway %s: %w", namespace+"/"+name, err)
	}
	klog.FromContext(ctx).V(2).Info("Updated Gateway status", "gateway", klog.KObj(gw), "accepted", v.accepted, "programmed", programmed)
	return nil
}

// attachedRoutes counts, per listener of the Gateway namespace/name, the tenant's routes attached to it.
func (c *Controller) attachedRoutes(namespace, name string) (map[gatewayv1.SectionName]int32, error) {
	attached := map[gatewayv1.SectionName]int32{}
	routes, err := c.gateway.routes.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	for _, route := range routes {
		for _, p := range c.judgeRoute(route).parents {
			if p.gateway == namespace+"/"+name && p.accepted() {
				for _, l := range p.listeners {
					attached[l]++
				}
			}
		}
	}
	return attached, nil
}

// listenerStatuses are the status of each listener of gw: its conditions (kept from the current status, so their
// transition times move only with them), the route kinds it supports and the routes attached to it.
func listenerStatuses(gw *gatewayv1.Gateway, v gatewayVerdict, attached map[gatewayv1.SectionName]int32, programmed bool,
	programmedMessage string) []gatewayv1.ListenerStatus {
	gen := gw.Generation
	listeners := make([]gatewayv1.ListenerStatus, 0, len(gw.Spec.Listeners))
	for _, l := range gw.Spec.Listeners {
		ls := gatewayv1.ListenerStatus{Name: l.Name, AttachedRoutes: attached[l.Name], SupportedKinds: []gatewayv1.RouteGroupKind{}}
		for _, old := range gw.Status.Listeners {
			if old.Name == l.Name {
				ls.Conditions = append(ls.Conditions, old.Conditions...)
			}
		}
		lv := v.listeners[l.Name]
		if lv.kindsResolved {
			ls.SupportedKinds = append(ls.SupportedKinds, gatewayv1.RouteGroupKind{Group: ptr.To(gatewayv1.Group(gatewayv1.GroupName)), Kind: routeKind})
			setCondition(&ls.Conditions, string(gatewayv1.ListenerConditionResolvedRefs), true, string(gatewayv1.ListenerReasonResolvedRefs), "", gen)
		} else {
			setCondition(&ls.Conditions, string(gatewayv1.ListenerConditionResolvedRefs), false, string(gatewayv1.ListenerReasonInvalidRouteKinds),
				"Only HTTPRoutes (gateway.networking.k8s.io) are supported", gen)
		}
		if lv.accepted {
			setCondition(&ls.Conditions, string(gatewayv1.ListenerConditionAccepted), true, string(gatewayv1.ListenerReasonAccepted), "", gen)
		} else {
			setCondition(&ls.Conditions, string(gatewayv1.ListenerConditionAccepted), false, string(gatewayv1.ListenerReasonUnsupportedProtocol),
				fmt.Sprintf("Protocol %s is not supported: Pangolin publishes HTTP and HTTPS", l.Protocol), gen)
		}
		setCondition(&ls.Conditions, string(gatewayv1.ListenerConditionConflicted), false, string(gatewayv1.ListenerReasonNoConflicts), "", gen)
		if programmed && lv.serves() {
			setCondition(&ls.Conditions, string(gatewayv1.ListenerConditionProgrammed), true, string(gatewayv1.ListenerReasonProgrammed), "", gen)
		} else {
			setCondition(&ls.Conditions, string(gatewayv1.ListenerConditionProgrammed), false, string(gatewayv1.ListenerReasonPending), programmedMessage, gen)
		}
		listeners = append(listeners, ls)
	}
	return listeners
}

// acceptClass marks one of the controller's GatewayClasses Accepted, once: every tenant's controller finds the
// same thing, so only the first write changes anything.
func (c *Controller) acceptClass(ctx context.Context, class *gatewayv1.GatewayClass) error {
	updated := class.DeepCopy()
	setCondition(&updated.Status.Conditions, string(gatewayv1.GatewayClassConditionStatusAccepted), true,
		string(gatewayv1.GatewayClassReasonAccepted), "Gateways of this class publish their HTTPRoutes through Pangolin tunnels", class.Generation)
	if equality.Semantic.DeepEqual(class.Status, updated.Status) {
		return nil
	}
	_, err := c.gateway.client.GatewayV1().GatewayClasses().UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		// Another tenant's controller wrote it first; the class's event brings the Gateways back.
		return nil
	}
	return err
}

// setCondition sets a condition as meta.SetStatusCondition does: its transition time moves only with its status.
func setCondition(conditions *[]metav1.Condition, conditionType string, status bool, reason, message string, generation int64) {
	s := metav1.ConditionFalse
	if status {
		s = metav1.ConditionTrue
	}
	if message == "" {
		message = reason
	}
	meta.SetStatusCondition(conditions, metav1.Condition{Type: conditionType, Status: s, Reason: reason, Message: message,
		ObservedGeneration: generation})
}

// gatewayOf returns the Gateway a route's parentRef names, as the controller sees it: ours (a Gateway of one of
// the controller's classes in the tenant's namespaces), another tenant's (of one of the controller's classes, in a
// namespace of another tenant or of none), or neither (another implementation's, or none at all: the controller
// writes nothing about it).
func (g *gatewayAPI) gatewayOf(routeNamespace string, ref gatewayv1.ParentReference) (gw *gatewayv1.Gateway, ours, foreign bool) {
	if (ref.Group != nil && *ref.Group != gatewayv1.GroupName) || (ref.Kind != nil && *ref.Kind != gatewayKind) {
		return nil, false, false
	}
	namespace := routeNamespace
	if ref.Namespace != nil {
		namespace = string(*ref.Namespace)
	}
	if gw, err := g.gateways.Gateways(namespace).Get(string(ref.Name)); err == nil {
		_, ours := g.ourClass(gw.Spec.GatewayClassName)
		return gw, ours, false
	}
	if gw, err := g.allGateways.Gateways(namespace).Get(string(ref.Name)); err == nil {
		_, ourClass := g.ourClass(gw.Spec.GatewayClassName)
		return nil, false, ourClass
	}
	return nil, false, false
}

// enqueueGateway enqueues a Gateway of the tenant and the tenant's routes that name it.
func (c *Controller) enqueueGateway(namespace, name string) {
	c.workers.Add(gatewayKey(namespace, name))
	routes, err := c.gateway.routes.List(labels.Everything())
	if err != nil {
		return
	}
	for _, route := range routes {
		for _, ref := range route.Spec.ParentRefs {
			ns := route.Namespace
			if ref.Namespace != nil {
				ns = string(*ref.Namespace)
			}
			if ns == namespace && string(ref.Name) == name {
				c.workers.Add(routeKey(route.Namespace, route.Name))
				break
			}
		}
	}
}

// lowerHost lowercases a Gateway API hostname; DNS names compare without case.
func lowerHost(h gatewayv1.Hostname) string { return strings.ToLower(string(h)) }
