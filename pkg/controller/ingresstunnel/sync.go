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
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	tunnelv1alpha1 "github.com/multiproject/api/pangolin/tunnel/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/claims"
	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
)

// sync brings the PangolinResources of one Ingress in line with it, and reports what it found wrong with the
// Ingress: each problem once while it persists.
func (c *Controller) sync(ctx context.Context, key string) error {
	if kind, objectKey := claims.SplitKindKey(key); kind != "" {
		namespace, name, err := cache.SplitMetaNamespaceKey(objectKey)
		if err != nil || c.gateway == nil {
			return nil
		}
		if kind == gatewayKind {
			return c.syncGateway(ctx, key, namespace, name)
		}
		return c.syncRoute(ctx, key, namespace, name)
	}
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	ing, err := c.ingresses.Ingresses(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		// Deleted (garbage collection deletes the resources it owns), or gone from the tenant's view while it still
		// exists: its namespace left the tenant.
		c.forget(key)
		return c.withdraw(ctx, key)
	}
	if err != nil {
		return err
	}
	if ing.DeletionTimestamp != nil {
		// Being deleted (possibly in the foreground): creating anything now would race the garbage collector.
		c.forget(key)
		return nil
	}
	// What the Ingress controls as the sync begins: the resources it deletes below still name the entries of its
	// status that are the controller's.
	owned, err := c.ownedResources(ing)
	if err != nil {
		return err
	}
	all := sets.New[string]()
	for _, res := range owned {
		all.Insert(res.Name)
	}
	var found problems
	if !isManaged(ing) {
		c.deps.forget(key)
		err := c.deleteUnwanted(ctx, ing, owned, nil, nil, &found)
		return utilerrors.NewAggregate([]error{err, c.finish(ctx, key, ing, owned, sets.New[string](), found)})
	}

	tunnel, err := resolveTunnel(ing, c.config)
	if err != nil {
		c.deps.forget(key)
		found.add(ReasonTunnelResolutionFailed, "%s", capitalize(err.Error()))
		return c.keepAsTheyAre(ctx, key, ing, owned, all, found)
	}
	// Recorded before the lookups: a tunnel or Service that appears after a miss then finds this Ingress.
	c.deps.set(key, tunnel, namedPortServices(ing))
	if _, err := c.tunnels.PangolinTunnels(c.config.TunnelNamespace).Get(tunnel); apierrors.IsNotFound(err) {
		// Existing resources stay: a tunnel that is being re-created should not take every host offline.
		found.add(ReasonTunnelNotFound, "PangolinTunnel %s/%s does not exist; the Ingress is exposed once it does",
			c.config.TunnelNamespace, tunnel)
		return c.keepAsTheyAre(ctx, key, ing, owned, all, found)
	} else if err != nil {
		return err
	}

	return c.publish(ctx, key, ing, tunnel, owned)
}

// publish makes the Ingress's PangolinResources on tunnel those of its plan, for the hosts it holds, and deletes the
// rest of owned.
func (c *Controller) publish(ctx context.Context, key string, ing *networkingv1.Ingress, tunnel string,
	owned []*tunnelv1alpha1.PangolinResource) error {
	names := namesOf(ing.Namespace, ing.Name, owned)
	p := c.planner.plan(ing, tunnel, names)
	found := p.problems
	planned := sets.New[string]()
	for _, want := range p.resources {
		planned.Insert(want.Name)
	}
	refused := c.withholdRefused(owned, p.keep, planned, &found)
	self := claimantOf(ing)
	lost, taken, errs := c.decideHosts(ctx, ing, self, names, p.keep, &found)
	maps.Copy(taken, p.refused)
	maps.Copy(taken, refused)
	for _, want := range p.resources {
		if lost[hostOf(want)] {
			continue
		}
		blockedBy, renameRefused, err := c.apply(ctx, ing, self, want, &found)
		if err != nil {
			errs = append(errs, err)
		}
		if renameRefused {
			// The resource must not go on publishing a name the Ingress no longer asks for: it goes, and the
			// Ingress gets its new name as a create once the name is free.
			p.keep.Delete(want.Name)
			taken[want.Name] = fmt.Sprintf("its new name %s is published by another PangolinResource", publishedName(want))
		}
		if blockedBy != "" {
			found.add(ReasonHostConflict, "%s", conflictMessage(hostOf(want), publishedName(want), blockedBy))
		}
	}
	// Cleanup runs even when a write failed: a host that is gone must not stay exposed.
	if err := c.deleteUnwanted(ctx, ing, owned, p.keep, taken, &found); err != nil {
		errs = append(errs, err)
	}
	if err := c.finish(ctx, key, ing, owned, p.keep, found); err != nil {
		errs = append(errs, err)
	}
	return utilerrors.NewAggregate(errs)
}

// keepAsTheyAre ends a sync that leaves the Ingress's resources as they are (its tunnel is missing or cannot be
// chosen), all but those that publish a name the tenant may not publish: they go.
func (c *Controller) keepAsTheyAre(ctx context.Context, key string, ing *networkingv1.Ingress,
	owned []*tunnelv1alpha1.PangolinResource, keep sets.Set[string], found problems) error {
	refused := c.withholdRefused(owned, keep, nil, &found)
	var errs []error
	if len(refused) > 0 {
		errs = append(errs, c.deleteUnwanted(ctx, ing, owned, keep, refused, &found))
	}
	return utilerrors.NewAggregate(append(errs, c.finish(ctx, key, ing, owned, keep, found)))
}

// withholdRefused takes out of keep the resources of owned that the sync leaves as they are (kept, and not in
// rewritten, the names the plan writes) and that publish a name the tenant may not publish: the tenant's list
// changed, and an invalid annotation or a missing tunnel must not keep a host published that the tenant may no
// longer publish. It returns why each goes.
func (c *Controller) withholdRefused(owned []*tunnelv1alpha1.PangolinResource, keep, rewritten sets.Set[string],
	found *problems) map[string]string {
	refused := map[string]string{}
	for _, res := range owned {
		name := publishedName(res)
		if !keep.Has(res.Name) || rewritten.Has(res.Name) || name == "" || c.allowed.allows(name) {
			continue
		}
		keep.Delete(res.Name)
		refused[res.Name] = c.allowed.withdrawal()
		found.add(ReasonHostNotAllowed, "%s", c.allowed.refusal(hostOf(res), name))
	}
	return refused
}

// decideHosts decides, across replicas, who holds each host the Ingress claims. A host another Ingress claimed first
// is not this Ingress's to publish: its resource of that host, if any, goes from keep (the holder waits for that),
// whatever the plan would keep, and taken says why. lost lists the hosts the Ingress must not write now: those
// another holds, and those left undecided by an error (another replica raced for the name), for which nothing is
// created, what exists stays, and the retry decides.
func (c *Controller) decideHosts(ctx context.Context, ing *networkingv1.Ingress, self claims.Claimant, names resourceNames,
	keep sets.Set[string], found *problems) (lost map[string]bool, taken map[string]string, errs []error) {
	lost, taken = map[string]bool{}, map[string]string{}
	for _, h := range claimedHosts(ing, c.allowed) {
		holder, isSelf, err := c.hosts.Decide(ctx, h.name, self)
		if err != nil {
			lost[h.host] = true
			errs = append(errs, err)
			continue
		}
		if !isSelf {
			lost[h.host] = true
			name := names.of(h.host)
			keep.Delete(name)
			taken[name] = "another Ingress claimed its host first"
			found.add(ReasonHostConflict, "%s", conflictMessage(h.host, h.name, c.hosts.Describe(holder)))
		}
	}
	return lost, taken, errs
}

// withdraw deletes the PangolinResources the tenant made for an Ingress that still exists but is no longer the
// tenant's: its namespace was relabeled to another tenant or to none. They publish its hosts through this tenant's
// tunnels, in this tenant's Pangolin organization, so only this tenant may undo them, and nobody else would: the
// Ingress is not deleted, so the garbage collector leaves them. The tenant that gains the namespace publishes the
// Ingress afresh once they are gone (apply). An Ingress that is gone, or being deleted, is left to the garbage
// collector.
func (c *Controller) withdraw(ctx context.Context, key string) error {
	obj, exists, err := c.allIngresses.GetIndexer().GetByKey(key)
	if err != nil || !exists {
		return err
	}
	ing, ok := obj.(*networkingv1.Ingress)
	if !ok || ing.DeletionTimestamp != nil {
		return nil
	}
	owned, err := c.ownedResources(ing)
	if err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	var errs []error
	for _, res := range owned {
		if res.DeletionTimestamp != nil {
			continue
		}
		// Before the resource goes: afterwards nothing names the entry as this controller's, and this tenant does
		// not see the Ingress any more.
		if err := removeFromIngressStatus(ctx, c.kube, res); apierrors.IsForbidden(err) {
			logger.Error(err, "Could not remove the host from the Ingress status", "resource", klog.KObj(res))
		} else if err != nil {
			errs = append(errs, err)
			continue
		}
		deleted, err := c.deleteResource(ctx, res)
		if err != nil {
			errs = append(errs, fmt.Errorf("delete PangolinResource %s/%s: %w", res.Namespace, res.Name, err))
			continue
		}
		if !deleted {
			continue
		}
		logger.V(2).Info("Deleted PangolinResource of an Ingress that left the tenant", "resource", klog.KObj(res), "host", hostOf(res))
		c.recorder.Eventf(ing, corev1.EventTypeNormal, ReasonDeleted, "Deleted PangolinResource %s for host %s: namespace %s no longer belongs to tenant %s",
			res.Name, hostOf(res), ing.Namespace, c.tenant)
	}
	return utilerrors.NewAggregate(errs)
}

// forget drops what the controller remembers of an Ingress that is gone from the tenant's view or being deleted.
func (c *Controller) forget(key string) {
	c.deps.forget(key)
	c.warnings.Forget(key)
	c.written.forget(key)
}

// apply creates or updates one desired PangolinResource; it sends nothing when the stored one already matches. A
// resource is created, or changed to publish another name, only while no other Ingress's resource publishes the
// name; blockedBy then says whose does, and the Ingress is enqueued again once that one is gone. renameRefused says
// that an existing resource was refused its new name: it still publishes the old one, which the Ingress no longer
// asks for. Problems the user must fix are added to found.
func (c *Controller) apply(ctx context.Context, ing publisher, self claims.Claimant, want *tunnelv1alpha1.PangolinResource,
	found *problems) (blockedBy string, renameRefused bool, err error) {
	logger := klog.FromContext(ctx)
	client := c.client.TunnelV1alpha1().PangolinResources(want.Namespace)
	name, object := publishedName(want), want.Namespace+"/"+want.Name
	existing, err := c.resources.PangolinResources(want.Namespace).Get(want.Name)
	if apierrors.IsNotFound(err) {
		holder, ok, err := c.hosts.Acquire(ctx, name, self, object)
		if err != nil {
			return "", false, err
		}
		if !ok {
			logger.V(2).Info("Waiting for another PangolinResource of the host to be deleted", "host", hostOf(want), "publishedBy", holder)
			return holder, false, nil
		}
		created, err := client.Create(ctx, want, metav1.CreateOptions{})
		c.hosts.Created(name, object, err == nil)
		switch {
		case err == nil:
			logger.V(2).Info("Created PangolinResource", "resource", klog.KObj(created), "host", hostOf(want))
			c.recorder.Eventf(ing, corev1.EventTypeNormal, ReasonCreated, "Created PangolinResource %s for host %s", want.Name, hostOf(want))
			return "", false, nil
		case !apierrors.IsAlreadyExists(err):
			return "", false, writeFailed(found, ing, "create", want.Name, err)
		}
		// Not in the tenant's view: the cache is behind, or the resource still carries another tenant's label (the
		// Ingress moved here).
		existing, err = client.Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			return "", false, err
		}
	} else if err != nil {
		return "", false, err
	}
	if !metav1.IsControlledBy(existing, ing) {
		found.add(ReasonResourceConflict,
			"PangolinResource %s for host %s exists but is not controlled by this %s; it is left alone", want.Name, hostOf(want), kindOf(ing))
		return "", false, fmt.Errorf("PangolinResource %s/%s is not controlled by %s %s (uid %s)", want.Namespace, want.Name, kindOf(ing), ing.GetName(), ing.GetUID())
	}
	if owner := existing.Labels[c.planner.labelKey]; owner != "" && owner != c.tenant {
		// Made by the tenant the Ingress moved here from, which withdraws it: it publishes through that tenant's
		// tunnel and organization, so this tenant never adopts it but publishes the host afresh once it is gone.
		// Its deletion reaches that tenant's view, not this one's, so the Ingress is retried with backoff.
		return "", false, fmt.Errorf("PangolinResource %s/%s still belongs to tenant %s, which withdraws it: %w",
			existing.Namespace, existing.Name, owner, worker.ErrWaiting)
	}
	if existing.DeletionTimestamp != nil {
		// Deleted by someone; once it is gone its deletion event brings the Ingress back to create it again.
		return "", false, nil
	}
	if renamed := publishedName(existing) != name; renamed {
		// A change of the published name (the subdomain or domain-name annotation) publishes a name as a create
		// does, so it passes the same check.
		holder, ok, err := c.hosts.Acquire(ctx, name, self, object)
		if err != nil {
			return "", false, err
		}
		if !ok {
			logger.V(2).Info("Not renaming a PangolinResource: another one publishes the new name", "resource", klog.KObj(existing),
				"from", publishedName(existing), "to", name, "publishedBy", holder)
			return holder, true, nil
		}
		err = c.update(ctx, ing, existing, want, found)
		c.hosts.Created(name, object, err == nil)
		return "", false, err
	}
	return "", false, c.update(ctx, ing, existing, want, found)
}

// update changes existing to match want, when it does not already.
func (c *Controller) update(ctx context.Context, ing publisher, existing, want *tunnelv1alpha1.PangolinResource,
	found *problems) error {
	client := c.client.TunnelV1alpha1().PangolinResources(want.Namespace)
	updated := existing.DeepCopy()
	updated.Spec = want.Spec
	if updated.Labels == nil {
		updated.Labels = map[string]string{}
	}
	maps.Copy(updated.Labels, want.Labels)
	if equality.Semantic.DeepEqual(existing.Spec, updated.Spec) && maps.Equal(existing.Labels, updated.Labels) {
		return nil
	}
	if _, err := client.Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsConflict(err) {
			return err
		}
		return writeFailed(found, ing, "update", want.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Updated PangolinResource", "resource", klog.KObj(updated), "host", hostOf(want))
	c.recorder.Eventf(ing, corev1.EventTypeNormal, ReasonUpdated, "Updated PangolinResource %s for host %s", want.Name, hostOf(want))
	return nil
}

// writeFailed adds to found a write the API server refused for a reason a user may have to act on (validation,
// RBAC).
func writeFailed(found *problems, ing publisher, verb, name string, err error) error {
	if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
		found.add(ReasonWriteFailed, "Could not %s PangolinResource %s: %v", verb, name, err)
	}
	return fmt.Errorf("%s PangolinResource %s/%s: %w", verb, ing.GetNamespace(), name, err)
}

// deleteUnwanted deletes the PangolinResources of owned (those this Ingress controls) whose names are not in keep
// (nil: all of them); taken says why of those whose names another Ingress's resource holds.
func (c *Controller) deleteUnwanted(ctx context.Context, ing publisher, owned []*tunnelv1alpha1.PangolinResource,
	keep sets.Set[string], taken map[string]string, found *problems) error {
	var errs []error
	for _, res := range owned {
		if keep.Has(res.Name) || !metav1.IsControlledBy(res, ing) || res.DeletionTimestamp != nil {
			continue
		}
		deleted, err := c.deleteResource(ctx, res)
		if err != nil {
			errs = append(errs, writeFailed(found, ing, "delete", res.Name, err))
			continue
		}
		if !deleted {
			continue
		}
		why := "its host is no longer in the " + kindOf(ing)
		if keep == nil {
			why = "the " + kindOf(ing) + " is no longer exposed through Pangolin"
		} else if w, ok := taken[res.Name]; ok {
			why = w
		}
		klog.FromContext(ctx).V(2).Info("Deleted PangolinResource", "resource", klog.KObj(res), "host", hostOf(res))
		c.recorder.Eventf(ing, corev1.EventTypeNormal, ReasonDeleted, "Deleted PangolinResource %s for host %s: %s", res.Name, hostOf(res), why)
	}
	return utilerrors.NewAggregate(errs)
}

// deleteResource deletes res as the cache saw it. It reports false, and no error, when res is already gone or was
// re-created under the same name since (the UID precondition fails): no Event is recorded for a delete that did
// not happen.
func (c *Controller) deleteResource(ctx context.Context, res *tunnelv1alpha1.PangolinResource) (bool, error) {
	err := c.client.TunnelV1alpha1().PangolinResources(res.Namespace).Delete(ctx, res.Name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &res.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return false, nil
	}
	return err == nil, err
}

// publisher is what PangolinResources are made for: an Ingress, or an HTTPRoute (route.go).
type publisher interface {
	metav1.Object
	runtime.Object
}

// kindOf names the kind of a publisher in messages.
func kindOf(p publisher) string {
	if _, ok := p.(*networkingv1.Ingress); ok {
		return claimKind
	}
	return routeKind
}

// ingressSelector selects the PangolinResources made for ing.
func ingressSelector(ing *networkingv1.Ingress) labels.Selector {
	return labels.SelectorFromSet(labels.Set{LabelIngressUID: string(ing.UID)})
}

// namedPortServices are the keys of the Services whose named ports the Ingress uses.
func namedPortServices(ing *networkingv1.Ingress) sets.Set[string] {
	out := sets.New[string]()
	for _, rule := range ing.Spec.Rules {
		if rule.HTTP == nil {
			continue
		}
		for _, path := range rule.HTTP.Paths {
			if svc := path.Backend.Service; svc != nil && svc.Port.Number == 0 && svc.Port.Name != "" {
				out.Insert(ing.Namespace + "/" + svc.Name)
			}
		}
	}
	return out
}

// hostOf reads the Ingress host back from the display name "<namespace>/<ingress>/<host>".
func hostOf(res *tunnelv1alpha1.PangolinResource) string {
	return res.Spec.Name[strings.LastIndex(res.Spec.Name, "/")+1:]
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
