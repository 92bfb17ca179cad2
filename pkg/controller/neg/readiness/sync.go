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

package readiness

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
)

// sync decides one Pod's condition and writes it when it changes. A Pod that waits on GCE's health report comes
// back with backoff (an ErrWaiting); one that waits for its attach comes back with the events of its namespace's
// Translations and Services; both come back at the timeout.
func (r *Reflector) sync(ctx context.Context, key string) (worker.Result, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return worker.Result{}, nil
	}
	pod, err := r.podLister.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		r.forget(ns, name)
		return worker.Result{}, nil
	}
	if err != nil {
		return worker.Result{}, err
	}
	if !r.gated(pod) || pod.DeletionTimestamp != nil {
		r.forget(ns, name)
		return worker.Result{}, nil
	}
	// Recorded as waiting before anything is read: a Translation or Service event that lands while this sync reads
	// or writes then brings the Pod back, instead of finding no waiter and being lost.
	r.wait(ns, name, false)
	in, pollErr := r.gather(ctx, pod)
	v := decide(in)
	if v.write {
		if err := r.write(ctx, pod, in.current, v); err != nil {
			if apierrors.IsNotFound(err) {
				// Deleted meanwhile: nothing left to do, and its delete event has forgotten it or will.
				r.forget(ns, name)
				return worker.Result{}, nil
			}
			return worker.Result{}, err
		}
	}
	if v.status == corev1.ConditionTrue {
		r.warnings.Report(key, pod, r.gatedOnBoth(pod)...)
		w := r.forget(ns, name)
		if v.reason == ReasonReady || v.reason == ReasonWithoutHealthCheck {
			if attachedAny(in.negs) {
				metrics.ObserveNEGReadiness(r.tenant, in.now.Sub(firstOr(w.attachedAt, in.now)))
				if trigger, ok := r.triggerOf(ns, podIPs(pod)); ok && v.write {
					metrics.ObserveNEGReadinessProgramming(r.tenant, trigger, r.now())
				}
			}
		}
		return worker.Result{}, nil
	}
	r.warnings.Report(key, pod, append(frozenWarnings(in), r.gatedOnBoth(pod)...)...)
	r.wait(ns, name, attachedAny(in.negs))
	if !v.poll && pollErr == nil {
		return worker.Result{RequeueAfter: v.timeoutIn}, nil
	}
	// The retry's backoff brings the Pod back; the timeout stands beside it (the earlier of the two fires first).
	if v.timeoutIn > 0 {
		r.workers.AddAfter(key, v.timeoutIn)
	}
	if pollErr != nil {
		return worker.Result{}, pollErr
	}
	return worker.Result{}, fmt.Errorf("%w: %s", worker.ErrWaiting, v.message)
}

// gather reads what decide needs: the Pod's NEGs from the Translations of its namespace, whether a NEG Service
// selects it, and the health of its endpoint in its attached NEGs, polled until one of them makes it ready. A
// failed poll leaves that NEG's health unknown and is returned.
func (r *Reflector) gather(ctx context.Context, pod *corev1.Pod) (input, error) {
	in := input{current: r.keys.Condition(pod), annotation: r.keys.Annotation, created: pod.CreationTimestamp.Time, timeout: r.timeout}
	ips := podIPs(pod)
	in.negs = r.memberships(pod, ips)
	in.selected, in.frozen = r.selected(pod)
	in.unread = r.namespacesRead != nil && !r.namespacesRead()
	var errs []error
	for i := range in.negs {
		m := &in.negs[i]
		if !m.attached {
			continue
		}
		items, err := r.polls.list(ctx, m.neg)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if m.health, m.states = healthOf(items, m.endpoint, m.port); m.health == healthHealthy || m.health == healthNoCheck {
			break
		}
	}
	in.now = r.now()
	return in, errors.Join(errs...)
}

// memberships are the NEGs whose Translation (of the tenant, in the Pod's namespace) lists the Pod's endpoint
// (listsPod). One is attached once the pusher has synced the Translation's current spec
// (pushed.Generations.Synced).
func (r *Reflector) memberships(pod *corev1.Pod, ips []string) []membership {
	if len(ips) == 0 {
		return nil
	}
	objs, _ := r.translations.GetIndexer().ByIndex(cache.NamespaceIndex, pod.Namespace)
	var out []membership
	for _, obj := range objs {
		tr, ok := obj.(*mpv1alpha1.Translation)
		if !ok || tr.DeletionTimestamp != nil {
			continue
		}
		attached := r.pushed.Synced(tr)
		for i := range tr.Spec.Resources {
			res := &tr.Spec.Resources[i]
			if res.NetworkEndpointGroup == nil {
				continue
			}
			for _, ep := range res.NetworkEndpointGroup.Endpoints {
				if listsPod(&ep, pod.Name, ips) {
					port := ep.Port
					if port == 0 {
						port = res.NetworkEndpointGroup.Port
					}
					neg := negRef{project: r.projectOf(tr, res), zone: res.Zone, name: res.Name}
					out = append(out, membership{neg: neg, port: port, attached: attached,
						endpoint:        addresses{ipv4: ep.IPAddress, ipv6: ep.Ipv6Address},
						backendServices: backendServicesOf(res.NetworkEndpointGroup)})
					break
				}
			}
		}
	}
	return out
}

// listsPod says whether ep is the endpoint of the Pod of name and ips: it names the Pod and has one of its
// addresses (a Pod of the same name made again, a StatefulSet's, has other addresses until it is listed itself).
// An endpoint that names no Pod, as in a Translation written by a build from before the reference or stored by
// its CRD, is matched by address alone, as those builds do; there a new Pod that reuses an address still listed
// for a gone one is taken for it.
func listsPod(ep *mpv1alpha1.NetworkEndpoint, name string, ips []string) bool {
	if ep.Pod != "" && ep.Pod != name {
		return false
	}
	return slices.Contains(ips, ep.IPAddress) || (ep.Ipv6Address != "" && slices.Contains(ips, ep.Ipv6Address))
}

// projectOf is the project the pusher put a NEG in: the one its status entry records, or the tenant's.
func (r *Reflector) projectOf(tr *mpv1alpha1.Translation, res *mpv1alpha1.BackendResource) string {
	for _, s := range tr.Status.Resources {
		if s.Name == res.Name && s.Zone == res.Zone && s.Project != "" && s.State != mpv1alpha1.BackendResourceStateDeleting {
			return s.Project
		}
	}
	return r.project
}

// selected reports whether a Service of the Pod's namespace that asks for NEGs selects it, and which of the Services
// that select it are frozen. A Service whose annotation does not parse asks for nothing while it has no Translation
// (the translator makes none), and selects the Pod, frozen, while it has some (the translator leaves them as they
// were); ingress: true asks for nothing here either.
func (r *Reflector) selected(pod *corev1.Pod) (selected bool, frozen []frozenService) {
	objs, _ := r.services.GetIndexer().ByIndex(cache.NamespaceIndex, pod.Namespace)
	for _, obj := range objs {
		svc, ok := obj.(*corev1.Service)
		if !ok || len(svc.Spec.Selector) == 0 || !labels.SelectorFromValidatedSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels)) {
			continue
		}
		ports, _, err := r.keys.ExposedPorts(svc)
		switch {
		case err != nil && r.hasTranslations(svc):
			selected = true
			frozen = append(frozen, frozenService{name: svc.Name, err: err})
		case len(ports) > 0:
			selected = true
		}
	}
	return selected, frozen
}

// hasTranslations says whether the tenant's cache holds a Translation made for the Service that is not being
// deleted.
func (r *Reflector) hasTranslations(svc *corev1.Service) bool {
	objs, err := r.translations.GetIndexer().ByIndex(informerset.TranslationsByOwner, informerset.TranslationOwnerUIDKey(svc.Namespace, svc.UID))
	if err != nil {
		utilruntime.HandleError(err)
	}
	return slices.ContainsFunc(objs, func(obj any) bool {
		tr, ok := obj.(*mpv1alpha1.Translation)
		return ok && tr.DeletionTimestamp == nil
	})
}

// gatedOnBoth is the Warning of a Pod that also declares ingress-gce's readiness gate: it is served as any other,
// since the kubelet waits for both gates (negapi.ReasonGatedOnBoth).
func (r *Reflector) gatedOnBoth(pod *corev1.Pod) []tenant.Warning {
	if msg, both := r.keys.GatedOnBoth(pod); both {
		return []tenant.Warning{{Reason: negapi.ReasonGatedOnBoth, Message: msg}}
	}
	return nil
}

// frozenWarnings are the Warnings a Pod that waits gets about the frozen Services that select it.
func frozenWarnings(in input) []tenant.Warning {
	warnings := make([]tenant.Warning, 0, len(in.frozen))
	for _, f := range in.frozen {
		warnings = append(warnings, tenant.Warning{Reason: negapi.ReasonInvalidAnnotation, Message: fmt.Sprintf(
			"Service %s selects the Pod, but %v; its NEGs stay as they were, so the Pod waits until the annotation is "+
				"fixed or the readiness timeout passes", f.name, f.err)})
	}
	return warnings
}

func podIPs(pod *corev1.Pod) []string {
	var ips []string
	if pod.Status.PodIP != "" {
		ips = append(ips, pod.Status.PodIP)
	}
	for _, ip := range pod.Status.PodIPs {
		if ip.IP != "" && !slices.Contains(ips, ip.IP) {
			ips = append(ips, ip.IP)
		}
	}
	return ips
}

func attachedAny(negs []membership) bool {
	return slices.ContainsFunc(negs, func(m membership) bool { return m.attached })
}

func firstOr(t, otherwise time.Time) time.Time {
	if t.IsZero() {
		return otherwise
	}
	return t
}

// backendServicesOf names the backend services the NEG's spec has it join.
func backendServicesOf(params *mpv1alpha1.NetworkEndpointGroupParameters) []string {
	var out []string
	for _, m := range params.BackendServices {
		out = append(out, cmp.Or(m.Region, "global")+"/"+m.Name)
	}
	return out
}
