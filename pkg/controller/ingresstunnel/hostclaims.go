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
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclientset "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	tunnelv1alpha1 "github.com/multiproject/api/pangolin/tunnel/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"

	"github.com/multiproject/multiproject-controller-manager/pkg/claims"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
)

// ReasonHostConflict: a host of the Ingress is already published by another Ingress (any namespace, any tenant),
// which claimed it first; this Ingress gets no PangolinResource for it until that one lets it go.
const ReasonHostConflict = "HostConflict"

// claimKind names the claimants of hosts in the claims registry and in Event messages.
const claimKind = "Ingress"

// claimantOf is the Ingress as a claimant of hosts: the earliest creation, then the smallest UID, holds a host.
func claimantOf(ing *networkingv1.Ingress) claims.Claimant {
	return claims.Claimant{Key: ing.Namespace + "/" + ing.Name, UID: ing.UID, Created: ing.CreationTimestamp}
}

// claimedHost is one rule host of an Ingress and the name it claims: the name it is published under.
type claimedHost struct {
	host, name string
}

// claimedHosts are the hosts an Ingress claims, sorted by host: every rule host of a managed Ingress that is not
// being deleted, whether or not it can be published now (a missing tunnel or Service does not give the host away),
// and that its tenant may publish (allowed): a host outside the tenant's list claims nothing, so it never keeps
// another tenant from the host. Each claims the name Pangolin would publish it under (publishedAs), so an Ingress
// whose subdomain annotation renames its host to another Ingress's host is ordered against that Ingress like any
// other claimant, and the renamed host is allowed or refused by that name.
func claimedHosts(ing *networkingv1.Ingress, allowed hostAllowance) []claimedHost {
	if ing.DeletionTimestamp != nil || !isManaged(ing) {
		return nil
	}
	var hosts []string
	for _, rule := range ing.Spec.Rules {
		if rule.Host != "" && !slices.Contains(hosts, rule.Host) {
			hosts = append(hosts, rule.Host)
		}
	}
	slices.Sort(hosts)
	out := make([]claimedHost, 0, len(hosts))
	for _, host := range hosts {
		if name := publishedAs(ing, host, len(hosts)); allowed.allows(name) {
			out = append(out, claimedHost{host: host, name: name})
		}
	}
	return out
}

// claimedNames are the names of claimedHosts, sorted, each once, as the claims registry takes them.
func claimedNames(ing *networkingv1.Ingress, allowed hostAllowance) []string {
	var names []string
	for _, h := range claimedHosts(ing, allowed) {
		names = append(names, h.name)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// publishedAs is the name a host of an Ingress of n hosts is published under: the host itself, or under a valid
// subdomain annotation of a single-host Ingress, <subdomain>.<domain> as the planner builds it. A host that cannot
// be split claims itself.
func publishedAs(ing *networkingv1.Ingress, host string, n int) string {
	var s hostSettings
	if value, set := ing.Annotations[AnnotationSubdomain]; set && n == 1 && validSubdomain(value) {
		s.subdomain = value
	}
	if value, set := ing.Annotations[AnnotationDomainName]; set && validDomainName(value) {
		s.domainName = value
	}
	subdomain, domain, err := splitWithSettings(host, s)
	if err != nil {
		return host
	}
	return strings.ToLower(subdomain + "." + domain)
}

// publishedName is the name Pangolin publishes a resource under, <subdomain>.<domain>: what the operator's 409
// compares. It is the Ingress host except under the subdomain annotation.
func publishedName(res *tunnelv1alpha1.PangolinResource) string {
	if res.Spec.HTTPConfig == nil {
		return ""
	}
	return strings.ToLower(strings.TrimPrefix(res.Spec.HTTPConfig.Subdomain+"."+res.Spec.HTTPConfig.DomainName, "."))
}

// resourceHolding says which name a PangolinResource publishes (any PangolinResource of the cluster, not only
// ours) and which Ingress it was made for.
func resourceHolding(obj any) (claims.Holding, bool) {
	res, ok := obj.(*tunnelv1alpha1.PangolinResource)
	if !ok {
		return claims.Holding{}, false
	}
	name := publishedName(res)
	if name == "" {
		return claims.Holding{}, false
	}
	h := claims.Holding{Names: []string{name}, Holder: "PangolinResource " + res.Namespace + "/" + res.Name}
	if ref := metav1.GetControllerOf(res); ref != nil {
		switch {
		case ref.Kind == ingressGVK.Kind && ref.APIVersion == ingressGVK.GroupVersion().String():
			h.Owner, h.Holder = ref.UID, claimKind+" "+res.Namespace+"/"+ref.Name
		case ref.Kind == routeGVK.Kind && ref.APIVersion == routeGVK.GroupVersion().String():
			h.Owner, h.Holder = ref.UID, routeKind+" "+res.Namespace+"/"+ref.Name
		}
	}
	return h, true
}

// hostKindOf is how the controller's host claims are watched and checked: a PangolinResource publishes a host,
// and with claim records a recorded holder is read live (its Ingress and its tenant, whose allowed hostnames scope
// what it claims: a holder whose host its tenant no longer allows claims it no more than in its own controller, so
// another replica's allowed claimant takes the record over) and a previous holder's PangolinResource.
//
// HTTPRoutes claim hosts in the same Kind (one publisher per host across both), under keys that carry their kind
// (claims.KindKey): a recorded route is read live as a route, and claims the exact hostnames it names (more than
// its controller may publish, never less, so another replica never takes a host from a route that publishes it).
func hostKindOf(kube kubernetes.Interface, client mpclientset.Interface, gateway gatewayclientset.Interface, labelKey string) claims.Kind {
	// Ingresses and HTTPRoutes publish hosts alike: the same allowed hosts, the same publishers.
	allowedHostsOf := func(pc *mpv1alpha1.ProviderConfig, names []string) []string {
		allowed := newHostAllowance(pc.Name, pc.Spec.Pangolin.AllowedHostnames)
		return slices.DeleteFunc(names, func(name string) bool { return !allowed.allows(name) })
	}
	getPublisher := func(ctx context.Context, namespace, name string) (*tunnelv1alpha1.PangolinResource, error) {
		return client.TunnelV1alpha1().PangolinResources(namespace).Get(ctx, name, metav1.GetOptions{})
	}
	kind := claims.TenantObjects[*networkingv1.Ingress, *tunnelv1alpha1.PangolinResource]{
		Kube: kube, MP: client, LabelKey: labelKey,
		GetClaimant: func(ctx context.Context, namespace, name string) (*networkingv1.Ingress, error) {
			return kube.NetworkingV1().Ingresses(namespace).Get(ctx, name, metav1.GetOptions{})
		},
		ClaimedNames: func(ing *networkingv1.Ingress) []string { return claimedNames(ing, hostAllowance{}) },
		Runs:         func(pc *mpv1alpha1.ProviderConfig) bool { return pc.Spec.Pangolin != nil },
		ScopeNames:   allowedHostsOf,
		GetPublisher: getPublisher,
		HoldingOf:    resourceHolding,
		ListPublishers: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return client.TunnelV1alpha1().PangolinResources(metav1.NamespaceAll).List(ctx, opts)
		},
	}.Kind(claimKind, informerset.PangolinResources)
	ingressLive := kind.Live
	routes := claims.TenantObjects[*gatewayv1.HTTPRoute, *tunnelv1alpha1.PangolinResource]{
		Kube: kube, MP: client, LabelKey: labelKey,
		GetClaimant: func(ctx context.Context, namespace, name string) (*gatewayv1.HTTPRoute, error) {
			if gateway == nil {
				return nil, apierrors.NewNotFound(gatewayv1.Resource("httproutes"), name)
			}
			return gateway.GatewayV1().HTTPRoutes(namespace).Get(ctx, name, metav1.GetOptions{})
		},
		ClaimedNames: routeNamedHosts,
		Runs:         func(pc *mpv1alpha1.ProviderConfig) bool { return pc.Spec.Pangolin != nil },
		ScopeNames:   allowedHostsOf,
		GetPublisher: getPublisher,
		HoldingOf:    resourceHolding,
	}.Kind(claimKind, informerset.PangolinResources)
	kind.Live = func(ctx context.Context, tenant, key string, uid types.UID) ([]string, error) {
		if k, objectKey := claims.SplitKindKey(key); k == routeKind {
			return routes.Live(ctx, tenant, objectKey, uid)
		}
		return ingressLive(ctx, tenant, key, uid)
	}
	return kind
}

// routeNamedHosts are the exact hostnames a route that names a parent asks for, lowercased: what a live read of a
// recorded route takes it to claim.
func routeNamedHosts(route *gatewayv1.HTTPRoute) []string {
	if route.DeletionTimestamp != nil || len(route.Spec.ParentRefs) == 0 {
		return nil
	}
	var names []string
	for _, h := range route.Spec.Hostnames {
		if name := lowerHost(h); !strings.Contains(name, "*") {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// joinClaims joins the run's host claims.
func (c *Controller) joinClaims() (*claims.Member, error) {
	if c.claims == nil {
		return nil, errors.New("ingress-tunnel: the tenant.Context has no claims.Service")
	}
	return c.claims.Join(c.hostKind, c.tenant, c.workers.Add)
}

// conflictMessage is the same whether the holder claimed the host first or is letting it go while its
// PangolinResource is deleted, so one conflict is one Event. name is the name the host is published under, which
// the message names when the subdomain annotation makes it another.
func conflictMessage(host, name, holder string) string {
	if name == host {
		return fmt.Sprintf("Host %s is already published by %s; this Ingress gets no PangolinResource for it until that "+
			"one lets it go", host, holder)
	}
	return fmt.Sprintf("Host %s is published as %s (annotation %s), which is already published by %s; this Ingress "+
		"gets no PangolinResource for it until that one lets it go", host, name, AnnotationSubdomain, holder)
}
