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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	tunnelv1alpha1 "github.com/multiproject/api/pangolin/tunnel/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
)

// Annotations on Ingresses, the reference controller's names.
const (
	annotationPrefix = "pangolin.ingress.k8s.io/"
	// AnnotationEnabled "false" opts an Ingress of a Pangolin class out; "true" opts any Ingress in.
	AnnotationEnabled = annotationPrefix + "enabled"
	// AnnotationTunnelName names the PangolinTunnel (in the tenant's tunnel namespace) to use.
	AnnotationTunnelName = annotationPrefix + "tunnel-name"
	// AnnotationDomainName names the Pangolin domain of every host of the Ingress; each host must be below it.
	AnnotationDomainName = annotationPrefix + "domain-name"
	// AnnotationSubdomain replaces the subdomain of an Ingress's only host.
	AnnotationSubdomain = annotationPrefix + "subdomain"
	// AnnotationSSO "true" or "false" overrides the tenant's ssoDefault.
	AnnotationSSO = annotationPrefix + "sso"
	// AnnotationBlockAccess "true" or "false" overrides the tenant's blockAccessDefault.
	AnnotationBlockAccess = annotationPrefix + "block-access"
	// AnnotationBackendScheme "http" (default) or "https" is how Pangolin talks to the Services.
	AnnotationBackendScheme = annotationPrefix + "backend-scheme"

	// legacyIngressClassAnnotation is read when spec.ingressClassName is unset.
	legacyIngressClassAnnotation = "kubernetes.io/ingress.class"
)

// Labels on the PangolinResources written, the reference controller's names. Only LabelIngressUID is selected on.
const (
	LabelIngressUID       = "pic.ingress.k8s.io/uid"
	LabelIngressName      = "pic.ingress.k8s.io/name"
	LabelIngressNamespace = "pic.ingress.k8s.io/namespace"
)

// Ingress classes: "pangolin", or "pangolin-<suffix>" for a tunnel chosen by suffix.
const (
	ingressClass       = "pangolin"
	ingressClassPrefix = ingressClass + "-"
)

// Event reasons on Ingresses.
const (
	ReasonCreated                = "Created"
	ReasonUpdated                = "Updated"
	ReasonDeleted                = "Deleted"
	ReasonEmptyHost              = "EmptyHost"
	ReasonNoRules                = "NoRules"
	ReasonTunnelNotFound         = "TunnelNotFound"
	ReasonTunnelResolutionFailed = "TunnelResolutionFailed"
	ReasonInvalidHost            = "InvalidHost"
	ReasonInvalidAnnotation      = "InvalidAnnotation"
	ReasonInvalidBackend         = "InvalidBackend"
	ReasonServiceNotFound        = "ServiceNotFound"
	ReasonResourceConflict       = "ResourceConflict"
	ReasonWriteFailed            = "WriteFailed"
)

// maxDisplayNameLength is Pangolin's limit on a resource name.
const maxDisplayNameLength = 255

var ingressGVK = networkingv1.SchemeGroupVersion.WithKind("Ingress")

// problems are Warning Events for an Ingress, found by one sync and reported together at its end.
type problems []tenant.Warning

func (ps *problems) add(reason, format string, args ...any) {
	*ps = append(*ps, tenant.Warning{Reason: reason, Message: fmt.Sprintf(format, args...)})
}

// plan is what one Ingress should have.
type plan struct {
	// resources are the desired PangolinResources, by host order.
	resources []*tunnelv1alpha1.PangolinResource
	// keep names the PangolinResources of the Ingress that must not be deleted: the desired ones and those of hosts
	// that cannot be computed now (a Service not there yet, an invalid annotation), which are left as they are.
	keep     sets.Set[string]
	problems problems
	// refused names the resources of hosts the tenant may not publish, with why they go: none is in keep.
	refused map[string]string
}

func (p *plan) warn(reason, format string, args ...any) { p.problems.add(reason, format, args...) }

// planner turns an Ingress into its plan. It only reads.
type planner struct {
	tenant   string
	labelKey string
	config   *mpv1alpha1.PangolinConfig
	// allowed is what the tenant may publish: a host whose published name it does not allow is not planned.
	allowed hostAllowance
	// service returns a Service of the tenant, or a NotFound error.
	service func(namespace, name string) (*corev1.Service, error)
}

// hostPaths is one host of an Ingress and its paths, merged over every rule with that host.
type hostPaths struct {
	host  string
	paths []networkingv1.HTTPIngressPath
}

// collectHosts groups the paths of ing by host, merging rules with the same host, sorted by host; rules without a
// host are reported.
func collectHosts(ing *networkingv1.Ingress, p *plan) []hostPaths {
	byHost := map[string]*hostPaths{}
	for i, rule := range ing.Spec.Rules {
		if rule.Host == "" {
			p.warn(ReasonEmptyHost, "Rule %d has no host and is skipped: a Pangolin resource is made for each host", i+1)
			continue
		}
		group, ok := byHost[rule.Host]
		if !ok {
			group = &hostPaths{host: rule.Host}
			byHost[rule.Host] = group
		}
		if rule.HTTP != nil {
			group.paths = append(group.paths, rule.HTTP.Paths...)
		}
	}
	groups := make([]hostPaths, 0, len(byHost))
	for _, g := range byHost {
		groups = append(groups, *g)
	}
	slices.SortFunc(groups, func(a, b hostPaths) int { return strings.Compare(a.host, b.host) })
	return groups
}

// hostSettings are the per-Ingress settings from annotations and the tenant's defaults.
type hostSettings struct {
	sso, blockAccess bool
	method           tunnelv1alpha1.TargetMethod
	domainName       string
	subdomain        string
}

// settings reads the annotations of an Ingress or an HTTPRoute; ok is false when one is invalid (reported), and
// then nothing is changed.
func (pl *planner) settings(annotations map[string]string, p *plan) (hostSettings, bool) {
	s := hostSettings{sso: pl.config.SSODefault, blockAccess: pl.config.BlockAccessDefault, method: tunnelv1alpha1.TargetMethodHTTP}
	ok := true
	for _, flag := range []struct {
		key  string
		into *bool
	}{{AnnotationSSO, &s.sso}, {AnnotationBlockAccess, &s.blockAccess}} {
		key, into := flag.key, flag.into
		value, set := annotations[key]
		if !set {
			continue
		}
		switch strings.ToLower(value) {
		case "true":
			*into = true
		case "false":
			*into = false
		default:
			p.warn(ReasonInvalidAnnotation, "Annotation %s=%q is neither \"true\" nor \"false\"; nothing is changed until it is fixed", key, value)
			ok = false
		}
	}
	if value, set := annotations[AnnotationBackendScheme]; set {
		switch method := tunnelv1alpha1.TargetMethod(strings.ToLower(value)); method {
		case tunnelv1alpha1.TargetMethodHTTP, tunnelv1alpha1.TargetMethodHTTPS:
			s.method = method
		default:
			p.warn(ReasonInvalidAnnotation, "Annotation %s=%q is neither \"http\" nor \"https\"; nothing is changed until it is fixed", AnnotationBackendScheme, value)
			ok = false
		}
	}
	if value, set := annotations[AnnotationDomainName]; set {
		if !validDomainName(value) {
			p.warn(ReasonInvalidAnnotation, "Annotation %s=%q is not a domain name; nothing is changed until it is fixed", AnnotationDomainName, value)
			ok = false
		}
		s.domainName = value
	}
	if value, set := annotations[AnnotationSubdomain]; set {
		if !validSubdomain(value) {
			p.warn(ReasonInvalidAnnotation, "Annotation %s=%q is not a DNS name; nothing is changed until it is fixed", AnnotationSubdomain, value)
			ok = false
		}
		s.subdomain = value
	}
	return s, ok
}

// validDomainName says whether a domain-name annotation's value is valid.
func validDomainName(value string) bool {
	return len(validation.IsDNS1123Subdomain(value)) == 0 && strings.Contains(value, ".")
}

// validSubdomain says whether a subdomain annotation's value is valid.
func validSubdomain(value string) bool {
	return len(validation.IsDNS1123Subdomain(value)) == 0 && !strings.Contains(value, "*")
}

// plan computes the desired PangolinResources of a managed Ingress that uses tunnel.
func (pl *planner) plan(ing *networkingv1.Ingress, tunnel string, names resourceNames) plan {
	p := plan{keep: sets.New[string]()}
	if len(ing.Spec.Rules) == 0 {
		p.warn(ReasonNoRules, "The Ingress has no rules: nothing is exposed through Pangolin")
		return p
	}
	hosts := collectHosts(ing, &p)
	settings, ok := pl.settings(ing.Annotations, &p)
	if ok && settings.subdomain != "" && len(hosts) > 1 {
		p.warn(ReasonInvalidAnnotation, "Annotation %s applies to an Ingress with one host, this one has %d; nothing is changed until it is fixed",
			AnnotationSubdomain, len(hosts))
		ok = false
	}
	if !ok {
		for _, h := range hosts {
			p.keep.Insert(names.of(h.host))
		}
		return p
	}
	for _, h := range hosts {
		name := names.of(h.host)
		subdomain, domain, err := splitWithSettings(h.host, settings)
		if err != nil {
			p.warn(ReasonInvalidHost, "%v; this host is skipped", err)
			continue
		}
		// Checked by the name Pangolin publishes, which the subdomain annotation may make another than the host.
		if published := strings.ToLower(subdomain + "." + domain); !pl.allowed.allows(published) {
			p.warn(ReasonHostNotAllowed, "%s", pl.allowed.refusal(h.host, published))
			if p.refused == nil {
				p.refused = map[string]string{}
			}
			p.refused[name] = pl.allowed.withdrawal()
			continue
		}
		targets, resolved := pl.targets(ing, h, settings.method, &p)
		if !resolved {
			p.keep.Insert(name)
			continue
		}
		if len(targets) == 0 {
			p.warn(ReasonInvalidHost, "Host %q has no Service backend that can be exposed; this host is skipped", h.host)
			continue
		}
		p.keep.Insert(name)
		p.resources = append(p.resources, pl.resource(ing, name, h.host, tunnel, subdomain, domain, settings, targets))
	}
	return p
}

// splitWithSettings applies the domain-name and subdomain annotations to a host (see docs/ingress-tunnel.md).
func splitWithSettings(host string, s hostSettings) (subdomain, domain string, err error) {
	switch {
	case s.subdomain != "" && s.domainName != "":
		return s.subdomain, s.domainName, ValidateHost(host)
	case s.subdomain != "":
		domain, err := RegistrableDomain(host)
		return s.subdomain, domain, err
	case s.domainName != "":
		subdomain, err := SplitHostUnder(host, s.domainName)
		return subdomain, s.domainName, err
	default:
		return SplitHost(host)
	}
}

// targets builds one target per path of a host. resolved is false when a named port's Service cannot be read yet;
// the host is then left as it is until the Service appears.
func (pl *planner) targets(ing *networkingv1.Ingress, h hostPaths, method tunnelv1alpha1.TargetMethod, p *plan) (targets []tunnelv1alpha1.Target, resolved bool) {
	type pathKey struct {
		path  string
		match tunnelv1alpha1.PathMatchType
	}
	seen := map[pathKey]tunnelv1alpha1.Target{}
	resolved = true
	for _, path := range h.paths {
		svc := path.Backend.Service
		if svc == nil {
			p.warn(ReasonInvalidBackend, "Host %q path %q: only Service backends can be exposed through Pangolin; this path is skipped", h.host, path.Path)
			continue
		}
		port := svc.Port.Number
		if port == 0 {
			var err error
			port, err = pl.namedPort(ing.Namespace, svc.Name, svc.Port.Name)
			switch {
			case apierrors.IsNotFound(err):
				p.warn(ReasonServiceNotFound, "Host %q path %q: Service %q does not exist, so its port %q cannot be resolved; the host is left as it is until it does",
					h.host, path.Path, svc.Name, svc.Port.Name)
				resolved = false
				continue
			case err != nil:
				p.warn(ReasonInvalidBackend, "Host %q path %q: %v; this path is skipped", h.host, path.Path, err)
				continue
			}
		}
		t := target(ing.Namespace, svc.Name, port, method, path)
		key := pathKey{path: t.Path, match: t.PathMatchType}
		if first, dup := seen[key]; dup {
			if first != t {
				p.warn(ReasonInvalidBackend, "Host %q path %q (%s) is listed twice with different backends; the first one is used", h.host, t.Path, t.PathMatchType)
			}
			continue
		}
		seen[key] = t
		targets = append(targets, t)
	}
	return targets, resolved
}

// namedPort resolves a Service port name to its port number through the Service (the reference sends 0, which the
// CRD rejects).
func (pl *planner) namedPort(namespace, service, portName string) (int32, error) {
	svc, err := pl.service(namespace, service)
	if err != nil {
		return 0, err
	}
	for _, p := range svc.Spec.Ports {
		if p.Name == portName {
			return p.Port, nil
		}
	}
	return 0, fmt.Errorf("service %q has no port named %q", service, portName)
}

func target(namespace, service string, port int32, method tunnelv1alpha1.TargetMethod, path networkingv1.HTTPIngressPath) tunnelv1alpha1.Target {
	p := path.Path
	if p == "" {
		p = "/"
	}
	match := tunnelv1alpha1.PathMatchTypePrefix
	if path.PathType != nil && *path.PathType == networkingv1.PathTypeExact {
		match = tunnelv1alpha1.PathMatchTypeExact
	}
	return tunnelv1alpha1.Target{
		IP:            fmt.Sprintf("%s.%s.svc.cluster.local", service, namespace),
		Port:          port,
		Method:        method,
		Path:          p,
		PathMatchType: match,
		Priority:      priority(p),
	}
}

// priority makes longer paths match first, as in the reference: 100 + 10 per character, at most 1000 (the CRD's
// maximum).
func priority(path string) int32 {
	return int32(min(1000, 100+10*len(path)))
}

// resource builds the desired PangolinResource of one host of an Ingress.
func (pl *planner) resource(ing *networkingv1.Ingress, name, host, tunnel, subdomain, domain string, s hostSettings,
	targets []tunnelv1alpha1.Target) *tunnelv1alpha1.PangolinResource {
	return pl.publishedResource(ing, ingressGVK, name, host, tunnel, subdomain, domain, s, targets)
}

// publishedResource builds the desired PangolinResource of one host of a publisher (an Ingress or an HTTPRoute of
// kind gvk), owned and labeled by it. Every field the API server would default is set, so the stored object equals
// the desired one and a converged publisher costs no write.
func (pl *planner) publishedResource(owner metav1.Object, gvk schema.GroupVersionKind, name, host, tunnel, subdomain, domain string,
	s hostSettings, targets []tunnelv1alpha1.Target) *tunnelv1alpha1.PangolinResource {
	return &tunnelv1alpha1.PangolinResource{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       owner.GetNamespace(),
			Labels:          pl.labels(owner),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(owner, gvk)},
		},
		Spec: tunnelv1alpha1.PangolinResourceSpec{
			TunnelRef: &tunnelv1alpha1.TunnelReference{Name: tunnel, Namespace: pl.config.TunnelNamespace},
			Name:      displayName(owner.GetNamespace(), owner.GetName(), host),
			Protocol:  tunnelv1alpha1.ProtocolHTTP,
			HTTPConfig: &tunnelv1alpha1.HTTPConfig{
				Subdomain:   subdomain,
				DomainName:  domain,
				SSO:         s.sso,
				BlockAccess: s.blockAccess,
			},
			Targets: slices.Clone(targets),
			Enabled: ptr.To(true),
		},
	}
}

// displayName is the resource's name in Pangolin, "<namespace>/<ingress>/<host>" as in the reference, unique per
// host. Pangolin allows 255 characters: the ingress part is shortened first, then the namespace; the host is always
// whole and last, so hostOf can read it back.
func displayName(namespace, ingress, host string) string {
	room := maxDisplayNameLength - len(host) - 2
	if room < 0 {
		return host
	}
	if len(namespace)+len(ingress) > room {
		ingress = ingress[:max(0, room-len(namespace))]
		namespace = namespace[:min(len(namespace), room)]
	}
	return namespace + "/" + ingress + "/" + host
}

// labels say which publisher and tenant a PangolinResource is for.
func (pl *planner) labels(owner metav1.Object) map[string]string {
	return map[string]string{
		LabelIngressUID:       string(owner.GetUID()),
		LabelIngressName:      labelValue(owner.GetName()),
		LabelIngressNamespace: owner.GetNamespace(),
		pl.labelKey:           pl.tenant,
	}
}

// labelValue shortens an Ingress name (a DNS subdomain, up to 253 characters) to a valid label value.
func labelValue(s string) string {
	if len(s) <= validation.LabelValueMaxLength {
		return s
	}
	return strings.TrimRight(s[:validation.LabelValueMaxLength], "-.")
}

// isManaged says whether the controller exposes ing: the enabled annotation decides when it is "true" or "false",
// otherwise the ingress class must be "pangolin" or "pangolin-<suffix>".
func isManaged(ing *networkingv1.Ingress) bool {
	switch strings.ToLower(ing.Annotations[AnnotationEnabled]) {
	case "false":
		return false
	case "true":
		return true
	}
	class := ingressClassOf(ing)
	return class == ingressClass || (strings.HasPrefix(class, ingressClassPrefix) && len(class) > len(ingressClassPrefix))
}

func ingressClassOf(ing *networkingv1.Ingress) string {
	if ing.Spec.IngressClassName != nil {
		return *ing.Spec.IngressClassName
	}
	return ing.Annotations[legacyIngressClassAnnotation]
}

// resolveTunnel picks the tunnel name of a managed Ingress: the tunnel-name annotation; else for class
// "pangolin-<s>" the tenant's tunnelsByClassSuffix[s]; else the tenant's defaultTunnel. An unmapped suffix falls back
// to the default rather than to a tunnel named s (the reference controller's rule): a typo in a class name then
// lands on the tenant's chosen tunnel instead of a tunnel nobody configured. The error is a message for a Warning.
func resolveTunnel(ing *networkingv1.Ingress, config *mpv1alpha1.PangolinConfig) (string, error) {
	return tunnelFor(ing.Annotations, ingressClassOf(ing), "Ingress", config)
}

// tunnelFor is resolveTunnel for an object of kind with annotations and class (an Ingress class, or a Gateway's
// GatewayClass).
func tunnelFor(annotations map[string]string, class, kind string, config *mpv1alpha1.PangolinConfig) (string, error) {
	if name, set := annotations[AnnotationTunnelName]; set {
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return "", fmt.Errorf("annotation %s=%q is not a PangolinTunnel name: %s", AnnotationTunnelName, name, strings.Join(errs, "; "))
		}
		return name, nil
	}
	if suffix, ok := strings.CutPrefix(class, ingressClassPrefix); ok && suffix != "" {
		if name, mapped := config.TunnelsByClassSuffix[suffix]; mapped {
			return string(name), nil
		}
	}
	if config.DefaultTunnel == "" {
		return "", fmt.Errorf("the %s names no tunnel (annotation %s) and the tenant has no spec.pangolin.defaultTunnel", kind, AnnotationTunnelName)
	}
	return string(config.DefaultTunnel), nil
}
