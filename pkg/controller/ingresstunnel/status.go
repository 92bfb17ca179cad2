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
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	tunnelv1alpha1 "github.com/multiproject/api/pangolin/tunnel/v1alpha1"
)

// ReasonTunnelResourceError: the Pangolin operator reports an error on a PangolinResource of the Ingress.
const ReasonTunnelResourceError = "TunnelResourceError"

// conditionReady is the condition the Pangolin operator keeps on every PangolinResource.
const conditionReady = "Ready"

// publishedDomain is the host name the Pangolin operator reports a PangolinResource served on: status.fullDomain,
// else the host of status.url; "" while it reports none (not ready yet), or a name an Ingress status cannot hold (the
// API server accepts only DNS-1123 subdomains that are not IP addresses there).
func publishedDomain(res *tunnelv1alpha1.PangolinResource) string {
	domain := res.Status.FullDomain
	if domain == "" && res.Status.URL != "" {
		if u, err := url.Parse(res.Status.URL); err == nil {
			domain = u.Hostname()
		}
	}
	domain = strings.TrimSuffix(strings.ToLower(domain), ".")
	if domain == "" || len(validation.IsDNS1123Subdomain(domain)) > 0 || net.ParseIP(domain) != nil {
		return ""
	}
	return domain
}

// resourceError is the error the Pangolin operator reports on a PangolinResource, "" for none. The operator writes
// Ready=False also while it waits (for the tunnel, the organization) or works (Creating, Deleting): those states
// are not errors. Status Error is, and so is a False condition beside status Ready or no status value at all.
func resourceError(res *tunnelv1alpha1.PangolinResource) string {
	cond := falseCondition(res.Status.Conditions)
	switch res.Status.Status {
	case tunnelv1alpha1.ResourceStatusCreating, tunnelv1alpha1.ResourceStatusWaiting, tunnelv1alpha1.ResourceStatusDeleting:
		return ""
	case tunnelv1alpha1.ResourceStatusError:
		if cond == nil || cond.Message == "" {
			return "status Error"
		}
		return "status Error: " + cond.Message
	}
	if cond == nil {
		return ""
	}
	msg := fmt.Sprintf("condition %s is False", cond.Type)
	if cond.Reason != "" {
		msg += " (" + cond.Reason + ")"
	}
	if cond.Message != "" {
		msg += ": " + cond.Message
	}
	return msg
}

// falseCondition is the Ready condition if it is False, else the first False condition.
func falseCondition(conditions []metav1.Condition) *metav1.Condition {
	var first *metav1.Condition
	for i := range conditions {
		c := &conditions[i]
		if c.Status != metav1.ConditionFalse {
			continue
		}
		if c.Type == conditionReady {
			return c
		}
		if first == nil {
			first = c
		}
	}
	return first
}

// statusView is what the controller reads of a PangolinResource's status; an update that leaves it unchanged (the
// operator's target IDs, timestamps, a rewrite with the same values) does not concern the Ingress.
type statusView struct {
	domain, err string
	deleting    bool
}

func viewOf(res *tunnelv1alpha1.PangolinResource) statusView {
	return statusView{domain: publishedDomain(res), err: resourceError(res), deleting: res.Status.Status == tunnelv1alpha1.ResourceStatusDeleting}
}

// listed says whether the Ingress status lists the resource's published domain: not while it is being deleted.
func listed(res *tunnelv1alpha1.PangolinResource) bool {
	return res.DeletionTimestamp == nil && res.Status.Status != tunnelv1alpha1.ResourceStatusDeleting
}

// entry is the only form of load balancer entry the controller writes: a host name and nothing else.
func entry(host string) networkingv1.IngressLoadBalancerIngress {
	return networkingv1.IngressLoadBalancerIngress{Hostname: host}
}

// isOurs says whether an entry of an Ingress's status.loadBalancer.ingress is one this controller wrote: exactly a
// host name (no IP, no ports) that ours accepts. Every other entry belongs to another controller and is kept.
func isOurs(e networkingv1.IngressLoadBalancerIngress, ours func(host string) bool) bool {
	return e.IP == "" && e.Hostname != "" && len(e.Ports) == 0 && ours(e.Hostname)
}

// loadBalancerIngress is the Ingress's status.loadBalancer.ingress with the controller's entries replaced by want:
// other controllers' entries first, in their order, then want sorted and deduplicated. nil when empty.
func loadBalancerIngress(current []networkingv1.IngressLoadBalancerIngress, want []string,
	ours func(host string) bool) []networkingv1.IngressLoadBalancerIngress {
	var out []networkingv1.IngressLoadBalancerIngress
	for _, e := range current {
		if !isOurs(e, ours) {
			out = append(out, e)
		}
	}
	hosts := slices.Clone(want)
	slices.Sort(hosts)
	for _, h := range slices.Compact(hosts) {
		out = append(out, entry(h))
	}
	return out
}

// sameEntries compares two load balancer lists, order included (the API keeps the order written).
func sameEntries(a, b []networkingv1.IngressLoadBalancerIngress) bool {
	return slices.EqualFunc(a, b, func(x, y networkingv1.IngressLoadBalancerIngress) bool {
		return x.IP == y.IP && x.Hostname == y.Hostname && slices.EqualFunc(x.Ports, y.Ports, func(p, q networkingv1.IngressPortStatus) bool {
			return p.Port == q.Port && p.Protocol == q.Protocol && ptrEqual(p.Error, q.Error)
		})
	})
}

func ptrEqual(a, b *string) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

// writtenHosts remembers, per Ingress, the controller's entries of its status as this process last wrote or found
// them. A host whose PangolinResource is gone (the host was renamed or removed), or whose domain the operator
// changed, is no longer any resource's domain; this record still recognises its entry as the controller's, so that
// it is removed, also when the write that should have removed it failed.
type writtenHosts struct {
	mu sync.Mutex
	m  map[string]written
}

type written struct {
	uid   types.UID
	hosts sets.Set[string]
	// from is the resourceVersion of the Ingress this process last wrote the status of, "" when it found the
	// status as it wanted it: while the cache still shows that version, the write is not yet in the cache, and a
	// sync would send it again (to a conflict).
	from string
}

func (w *writtenHosts) get(key string, uid types.UID) sets.Set[string] {
	w.mu.Lock()
	defer w.mu.Unlock()
	if rec, ok := w.m[key]; ok && rec.uid == uid {
		return rec.hosts
	}
	return nil
}

// awaiting says whether the cache still shows the version of the Ingress that this process last wrote the status of.
// The write's own update event re-enqueues the Ingress, so the sync that sees it writes what is then wanted.
func (w *writtenHosts) awaiting(key string, uid types.UID, resourceVersion string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	rec, ok := w.m[key]
	return ok && rec.uid == uid && rec.from != "" && rec.from == resourceVersion
}

// set records the controller's hosts in the Ingress's status; from is the resourceVersion the status was written
// from, "" when nothing was written.
func (w *writtenHosts) set(key string, uid types.UID, hosts []string, from string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(hosts) == 0 && from == "" {
		// Nothing of the controller's is listed: nothing to recognise later (and no record per unmanaged Ingress).
		delete(w.m, key)
		return
	}
	if w.m == nil {
		w.m = map[string]written{}
	}
	w.m[key] = written{uid: uid, hosts: sets.New(hosts...), from: from}
}

func (w *writtenHosts) forget(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, key)
}

// ownedResources are the PangolinResources of the tenant's view that ing controls.
func (c *Controller) ownedResources(ing *networkingv1.Ingress) ([]*tunnelv1alpha1.PangolinResource, error) {
	list, err := c.resources.PangolinResources(ing.Namespace).List(ingressSelector(ing))
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(list, func(res *tunnelv1alpha1.PangolinResource) bool { return !metav1.IsControlledBy(res, ing) }), nil
}

// finish ends a sync that reached a verdict on ing. owned are the resources ing controlled when the sync began and
// keep the names of those that stay: the Ingress's status lists their published domains, and the errors the
// operator reports on them join found, which is reported. It returns the status write's error.
func (c *Controller) finish(ctx context.Context, key string, ing *networkingv1.Ingress, owned []*tunnelv1alpha1.PangolinResource,
	keep sets.Set[string], found problems) error {
	var want []string
	for _, res := range owned {
		if !keep.Has(res.Name) || !listed(res) {
			continue
		}
		if domain := publishedDomain(res); domain != "" {
			want = append(want, domain)
		}
		if msg := resourceError(res); msg != "" {
			found.add(ReasonTunnelResourceError, "PangolinResource %s for host %s: the Pangolin operator reports %s", res.Name, hostOf(res), msg)
		}
	}
	err := c.writeStatus(ctx, key, ing, owned, want, &found)
	c.warnings.Report(key, ing, found...)
	return err
}

// writeStatus makes the controller's entries of ing's status.loadBalancer.ingress exactly want, keeping the others'.
// An entry is the controller's if it is a bare host name that is the published domain of a resource ing controls
// (owned, in any state) or that this process wrote or found as the controller's for ing. It writes only on a
// difference.
func (c *Controller) writeStatus(ctx context.Context, key string, ing *networkingv1.Ingress, owned []*tunnelv1alpha1.PangolinResource,
	want []string, found *problems) error {
	if c.written.awaiting(key, ing.UID, ing.ResourceVersion) {
		return nil
	}
	mine := c.written.get(key, ing.UID).Clone()
	if mine == nil {
		mine = sets.New[string]()
	}
	for _, res := range owned {
		if domain := publishedDomain(res); domain != "" {
			mine.Insert(domain)
		}
	}
	mine.Insert(want...)
	current := ing.Status.LoadBalancer.Ingress
	next := loadBalancerIngress(current, want, mine.Has)
	if sameEntries(current, next) {
		// The status holds want as the controller's entries, also when an earlier process wrote them: a domain that
		// changes from now on is recognised as the controller's.
		c.written.set(key, ing.UID, want, "")
		return nil
	}
	updated := ing.DeepCopy()
	updated.Status.LoadBalancer.Ingress = next
	if _, err := c.kube.NetworkingV1().Ingresses(ing.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsConflict(err) {
			// The cache is behind the API server: the newer Ingress is on its way to the informer, whose update
			// event brings the Ingress back. Retrying now would conflict again.
			klog.FromContext(ctx).V(4).Info("The Ingress changed since it was read; its status is written on its next sync", "ingress", klog.KObj(ing))
			return nil
		}
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
			found.add(ReasonWriteFailed, "Could not update the Ingress status: %v", err)
		}
		return fmt.Errorf("update the status of Ingress %s: %w", key, err)
	}
	c.written.set(key, ing.UID, want, ing.ResourceVersion)
	klog.FromContext(ctx).V(2).Info("Updated the Ingress status", "ingress", klog.KObj(ing), "hosts", slices.Sorted(slices.Values(want)))
	return nil
}

// removeFromIngressStatus removes the entry of res's published domain from the status of the Ingress that controls
// res: the tenant's cleanup calls it before it deletes the resource, since no controller will do it afterwards.
func removeFromIngressStatus(ctx context.Context, kube kubernetes.Interface, res *tunnelv1alpha1.PangolinResource) error {
	ref := metav1.GetControllerOf(res)
	domain := publishedDomain(res)
	if ref == nil || ref.Kind != ingressGVK.Kind || domain == "" {
		return nil
	}
	client := kube.NetworkingV1().Ingresses(res.Namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ing, err := client.Get(ctx, ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && ing.UID != ref.UID) {
			return nil
		}
		if err != nil {
			return err
		}
		current := ing.Status.LoadBalancer.Ingress
		next := loadBalancerIngress(current, nil, func(host string) bool { return host == domain })
		if sameEntries(current, next) {
			return nil
		}
		ing.Status.LoadBalancer.Ingress = next
		if _, err := client.UpdateStatus(ctx, ing, metav1.UpdateOptions{}); err != nil {
			return err
		}
		klog.FromContext(ctx).V(2).Info("Removed a host from the Ingress status", "ingress", klog.KObj(ing), "host", domain)
		return nil
	})
}
