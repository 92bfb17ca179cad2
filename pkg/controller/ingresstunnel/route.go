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
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	tunnelv1alpha1 "github.com/multiproject/api/pangolin/tunnel/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/claims"
)

// routeClaimant is an HTTPRoute as a claimant of hosts, among the Ingresses: its key carries its kind
// (claims.KindKey), so the Ingresses' keys, and their claim records, stay as they are.
func routeClaimant(route *gatewayv1.HTTPRoute) claims.Claimant {
	return claims.Claimant{Key: routeKey(route.Namespace, route.Name), UID: route.UID, Created: route.CreationTimestamp}
}

// parentVerdict is what the controller makes of one parentRef of a route that names one of its Gateways, or one
// of another tenant's.
type parentVerdict struct {
	ref gatewayv1.ParentReference
	// gateway is the Gateway's namespace/name.
	gateway string
	// accepted is the route's Accepted condition for this parent.
	status  bool
	reason  gatewayv1.RouteConditionReason
	message string
	// hosts are the exact host names the route publishes through this parent (its hostnames intersected with the
	// listeners'), listeners the listeners it is attached to, tunnel the Gateway's tunnel.
	hosts     []string
	listeners []gatewayv1.SectionName
	tunnel    string
}

func (p parentVerdict) accepted() bool { return p.status }

// routeVerdict is what the controller makes of a route: one verdict per parentRef it answers for, whether its
// backends resolve, and the targets its rules make.
type routeVerdict struct {
	parents []parentVerdict
	// resolved, reason and message are the ResolvedRefs condition.
	resolved bool
	reason   gatewayv1.RouteConditionReason
	message  string
	targets  []tunnelv1alpha1.Target
	// unsupported lists what of the route Pangolin cannot express; the route is then accepted by no parent.
	unsupported []string
	settings    hostSettings
}

// hosts are the host names the route publishes through the parents that accept it, sorted, each with the tunnel
// of the first of them (by Gateway) that accepts it.
func (v routeVerdict) hosts() map[string]string {
	out := map[string]string{}
	parents := slices.Clone(v.parents)
	slices.SortStableFunc(parents, func(a, b parentVerdict) int { return strings.Compare(a.gateway, b.gateway) })
	for _, p := range parents {
		if !p.accepted() {
			continue
		}
		for _, h := range p.hosts {
			if _, ok := out[h]; !ok {
				out[h] = p.tunnel
			}
		}
	}
	return out
}

// judgeRoute decides, from the caches alone, what route publishes and the conditions it gets. It writes nothing.
func (c *Controller) judgeRoute(route *gatewayv1.HTTPRoute) routeVerdict {
	v := routeVerdict{resolved: true, reason: gatewayv1.RouteReasonResolvedRefs}
	var p plan
	settings, ok := c.planner.settings(route.Annotations, &p)
	if !ok {
		for _, w := range p.problems {
			v.unsupported = append(v.unsupported, w.Message)
		}
	}
	if settings.subdomain != "" {
		v.unsupported = append(v.unsupported, fmt.Sprintf("annotation %s applies to Ingresses only", AnnotationSubdomain))
	}
	v.settings = settings
	v.unsupported = append(v.unsupported, unsupportedFeatures(route)...)
	v.targets = c.routeTargets(route, settings.method, &v)

	for _, ref := range route.Spec.ParentRefs {
		gw, ours, foreign := c.gateway.gatewayOf(route.Namespace, ref)
		switch {
		case foreign:
			ns := route.Namespace
			if ref.Namespace != nil {
				ns = string(*ref.Namespace)
			}
			v.parents = append(v.parents, parentVerdict{ref: ref, gateway: ns + "/" + string(ref.Name),
				reason: gatewayv1.RouteReasonNotAllowedByListeners,
				message: fmt.Sprintf("Gateway %s/%s is not in a namespace of tenant %s: a route attaches only to its own tenant's Gateways",
					ns, ref.Name, c.tenant)})
			continue
		case !ours:
			continue
		}
		v.parents = append(v.parents, c.judgeParent(route, ref, gw, v.unsupported))
	}
	return v
}

// judgeParent decides whether route attaches to gw, one of the controller's Gateways of the tenant, through ref.
func (c *Controller) judgeParent(route *gatewayv1.HTTPRoute, ref gatewayv1.ParentReference, gw *gatewayv1.Gateway,
	unsupported []string) parentVerdict {
	p := parentVerdict{ref: ref, gateway: gw.Namespace + "/" + gw.Name}
	gv := c.judgeGateway(gw)
	if !gv.accepted {
		p.reason, p.message = gatewayv1.RouteReasonPending, fmt.Sprintf("Gateway %s is not accepted: %s", p.gateway, gv.message)
		return p
	}
	p.tunnel = gv.tunnel
	var matching, allowed []gatewayv1.Listener
	for _, l := range gw.Spec.Listeners {
		if (ref.SectionName != nil && *ref.SectionName != l.Name) || (ref.Port != nil && *ref.Port != l.Port) {
			continue
		}
		matching = append(matching, l)
		if gv.listeners[l.Name].serves() && c.gateway.allowsNamespace(gw, l, route.Namespace) {
			allowed = append(allowed, l)
		}
	}
	hosts := sets.New[string]()
	for _, l := range allowed {
		if names := intersectHostnames(l.Hostname, route.Spec.Hostnames); len(names) > 0 {
			hosts.Insert(names...)
			p.listeners = append(p.listeners, l.Name)
		}
	}
	var wildcards []string
	for _, h := range sets.List(hosts) {
		if strings.Contains(h, "*") {
			wildcards = append(wildcards, h)
		}
	}
	switch {
	case len(matching) == 0:
		p.reason, p.message = gatewayv1.RouteReasonNoMatchingParent, "No listener of the Gateway matches the parentRef's sectionName and port"
	case len(allowed) == 0:
		p.reason, p.message = gatewayv1.RouteReasonNotAllowedByListeners,
			"No listener of the Gateway allows HTTPRoutes of namespace "+route.Namespace+" (allowedRoutes)"
	case hosts.Len() == 0:
		p.reason, p.message = gatewayv1.RouteReasonNoMatchingListenerHostname, "No hostname of the route matches a listener's hostname"
	case len(wildcards) > 0:
		p.reason = gatewayv1.RouteReasonUnsupportedValue
		p.message = fmt.Sprintf("Wildcard hostnames cannot be published through Pangolin, which serves exact host names: %s",
			strings.Join(wildcards, ", "))
	case len(unsupported) > 0:
		p.reason = gatewayv1.RouteReasonUnsupportedValue
		p.message = "Pangolin cannot express " + strings.Join(unsupported, "; ")
	default:
		p.status, p.reason = true, gatewayv1.RouteReasonAccepted
		p.hosts = sets.List(hosts)
		p.message = "Published through Pangolin as " + strings.Join(p.hosts, ", ")
	}
	if !p.status {
		p.listeners = nil
	}
	return p
}

// unsupportedFeatures lists what of route Pangolin cannot express: a Pangolin resource routes by host and path to
// one target per path, so matches on headers, query parameters or methods, regular-expression paths, filters,
// several weighted backends, timeouts, retries and session persistence are refused, not silently dropped.
func unsupportedFeatures(route *gatewayv1.HTTPRoute) []string {
	var out []string
	add := func(format string, args ...any) {
		if msg := fmt.Sprintf(format, args...); !slices.Contains(out, msg) {
			out = append(out, msg)
		}
	}
	for i, rule := range route.Spec.Rules {
		n := i + 1
		for _, m := range rule.Matches {
			if len(m.Headers) > 0 {
				add("header matches (rule %d)", n)
			}
			if len(m.QueryParams) > 0 {
				add("query parameter matches (rule %d)", n)
			}
			if m.Method != nil {
				add("method matches (rule %d)", n)
			}
			if m.Path != nil && m.Path.Type != nil && *m.Path.Type == gatewayv1.PathMatchRegularExpression {
				add("regular-expression paths (rule %d)", n)
			}
		}
		if len(rule.Filters) > 0 {
			add("filters (rule %d)", n)
		}
		if len(rule.BackendRefs) > 1 {
			add("several backends with weights (rule %d): a Pangolin target has one", n)
		}
		for _, b := range rule.BackendRefs {
			if len(b.Filters) > 0 {
				add("backend filters (rule %d)", n)
			}
		}
		if rule.Timeouts != nil || rule.Retry != nil || rule.SessionPersistence != nil {
			add("timeouts, retries or session persistence (rule %d)", n)
		}
	}
	return out
}

// routeTargets builds one target per path of the route's rules, each to its rule's one backend, and sets v's
// ResolvedRefs from the backends: a backend that is not a Service, a Service of another namespace that no
// ReferenceGrant of that namespace opens to the route (or of another tenant: grants are read from the tenant's
// namespaces only), or a Service or port that does not exist leaves its rule out.
func (c *Controller) routeTargets(route *gatewayv1.HTTPRoute, method tunnelv1alpha1.TargetMethod, v *routeVerdict) []tunnelv1alpha1.Target {
	type pathKey struct {
		path  string
		match tunnelv1alpha1.PathMatchType
	}
	seen := map[pathKey]bool{}
	var targets []tunnelv1alpha1.Target
	var problems []string
	fail := func(reason gatewayv1.RouteConditionReason, format string, args ...any) {
		if v.resolved {
			v.resolved, v.reason = false, reason
		}
		problems = append(problems, fmt.Sprintf(format, args...))
	}
	for i, rule := range route.Spec.Rules {
		if len(rule.BackendRefs) != 1 {
			continue
		}
		ref := rule.BackendRefs[0].BackendObjectReference
		if (ref.Group != nil && *ref.Group != "") || (ref.Kind != nil && *ref.Kind != "Service") {
			fail(gatewayv1.RouteReasonInvalidKind, "rule %d: backend %s is not a Service", i+1, ref.Name)
			continue
		}
		namespace := route.Namespace
		if ref.Namespace != nil {
			namespace = string(*ref.Namespace)
		}
		if namespace != route.Namespace {
			if owner := c.namespaceTenant(namespace); owner != c.tenant {
				fail(gatewayv1.RouteReasonRefNotPermitted, "rule %d: Service %s/%s is in a namespace of another tenant", i+1, namespace, ref.Name)
				continue
			}
			if !c.granted(route.Namespace, namespace, string(ref.Name)) {
				fail(gatewayv1.RouteReasonRefNotPermitted, "rule %d: no ReferenceGrant in namespace %s lets HTTPRoutes of %s use Service %s",
					i+1, namespace, route.Namespace, ref.Name)
				continue
			}
		}
		svc, err := c.services.Services(namespace).Get(string(ref.Name))
		if err != nil {
			fail(gatewayv1.RouteReasonBackendNotFound, "rule %d: Service %s/%s does not exist", i+1, namespace, ref.Name)
			continue
		}
		if ref.Port == nil || !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == *ref.Port }) {
			fail(gatewayv1.RouteReasonBackendNotFound, "rule %d: Service %s/%s has no port %s", i+1, namespace, ref.Name, portString(ref.Port))
			continue
		}
		matches := rule.Matches
		if len(matches) == 0 {
			matches = []gatewayv1.HTTPRouteMatch{{}}
		}
		for _, m := range matches {
			path := networkingv1.HTTPIngressPath{Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix)}
			if m.Path != nil {
				if m.Path.Value != nil {
					path.Path = *m.Path.Value
				}
				if m.Path.Type != nil && *m.Path.Type == gatewayv1.PathMatchExact {
					path.PathType = ptr.To(networkingv1.PathTypeExact)
				}
			}
			t := target(namespace, string(ref.Name), int32(*ref.Port), method, path)
			key := pathKey{path: t.Path, match: t.PathMatchType}
			if seen[key] {
				continue
			}
			seen[key] = true
			targets = append(targets, t)
		}
	}
	if v.resolved {
		v.message = "Every backend is a Service that exists"
	} else {
		v.message = capitalize(strings.Join(problems, "; "))
	}
	return targets
}

func portString(p *gatewayv1.PortNumber) string {
	if p == nil {
		return "(none given)"
	}
	return fmt.Sprint(*p)
}

// namespaceTenant is the tenant a namespace belongs to, "" for none.
func (c *Controller) namespaceTenant(namespace string) string {
	ns, err := c.gateway.namespaces.Get(namespace)
	if err != nil {
		return ""
	}
	return ns.Labels[c.planner.labelKey]
}

// granted says whether a ReferenceGrant of namespace (one of the tenant's) lets the HTTPRoutes of from use its
// Service name. The grants are read from the tenant's view: another tenant's grant never opens anything.
func (c *Controller) granted(from, namespace, name string) bool {
	grants, err := c.gateway.grants.ReferenceGrants(namespace).List(labels.Everything())
	if err != nil {
		return false
	}
	for _, g := range grants {
		fromOK := slices.ContainsFunc(g.Spec.From, func(f gatewayv1.ReferenceGrantFrom) bool {
			return f.Group == gatewayv1.GroupName && f.Kind == routeKind && string(f.Namespace) == from
		})
		toOK := slices.ContainsFunc(g.Spec.To, func(t gatewayv1.ReferenceGrantTo) bool {
			return t.Group == "" && t.Kind == "Service" && (t.Name == nil || string(*t.Name) == name)
		})
		if fromOK && toOK {
			return true
		}
	}
	return false
}

// intersectHostnames returns the host names a route with hostnames publishes through a listener with hostname
// (nil: any host), as Gateway API intersects them: a wildcard "*.a.com" matches names below a.com at any depth,
// not a.com itself; a route without hostnames takes the listener's; the more specific of two matching names is
// kept.
func intersectHostnames(listener *gatewayv1.Hostname, hostnames []gatewayv1.Hostname) []string {
	l := ""
	if listener != nil {
		l = lowerHost(*listener)
	}
	if len(hostnames) == 0 {
		if l == "" {
			return []string{"*"}
		}
		return []string{l}
	}
	var out []string
	for _, h := range hostnames {
		r := lowerHost(h)
		switch {
		case l == "":
			out = append(out, r)
		case r == l:
			out = append(out, r)
		case matchesWildcard(l, r):
			out = append(out, r)
		case matchesWildcard(r, l):
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// matchesWildcard says whether pattern is a wildcard "*.<suffix>" that covers name (an exact name, or a narrower
// wildcard) strictly below suffix.
func matchesWildcard(pattern, name string) bool {
	suffix, ok := strings.CutPrefix(pattern, "*")
	if !ok {
		return false
	}
	name = strings.TrimPrefix(name, "*")
	return len(name) > len(suffix) && strings.HasSuffix(name, suffix) || (name == suffix && strings.HasPrefix(name, "."))
}

// routeClaims are the names a route claims: the hosts its accepted parents publish that the tenant may publish.
func (c *Controller) routeClaims(route *gatewayv1.HTTPRoute) []string {
	if route.DeletionTimestamp != nil {
		return nil
	}
	var names []string
	for host := range c.judgeRoute(route).hosts() {
		if c.allowed.allows(host) {
			names = append(names, host)
		}
	}
	slices.Sort(names)
	return names
}
