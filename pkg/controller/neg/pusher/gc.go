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

package pusher

import (
	"context"
	"encoding/json"
	"path"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	gceclient "github.com/multiproject/multiproject-controller-manager/pkg/gce/client"
	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
)

// ReasonNEGsCollected is the Event reason on the ProviderConfig when the sweep deleted NEGs: leaked, or awaiting
// deletion.
const ReasonNEGsCollected = "NEGsGarbageCollected"

// managedBy is the managed-by value of the ownership marker the translator writes into every NEG's description.
const managedBy = "multiproject-controller-manager"

// marker is the part of a NEG's ownership marker the sweep reads: who made it.
type marker struct {
	ClusterUID string `json:"cluster-uid"`
	Tenant     string `json:"provider-config"`
	ManagedBy  string `json:"managed-by"`
}

// ours says whether a NEG's description is the ownership marker of this cluster and tenant. The cluster is its UID,
// never the readable --cluster-name, whose default every cluster shares. A NEG marked before the UID existed (a
// legacy marker) is never ours to sweep: nothing in it tells this cluster from another of the same name, and the
// sweep deletes nothing on a guess; its Translation, which names its Service's UID, still deletes it.
func (p *Pusher) ours(description string) bool {
	var m marker
	if json.Unmarshal([]byte(description), &m) != nil {
		return false
	}
	return m.ManagedBy == managedBy && m.Tenant == p.tenant && m.ClusterUID != "" && m.ClusterUID == p.options.ClusterUID
}

// claimed are the NEGs of project that some Translation of the tenant declares, in its spec or its status, each with
// the markers it is declared with ("" for a status entry written before markers were recorded: any marker).
func (p *Pusher) claimed(project string) (map[negKey][]string, error) {
	translations, err := p.lister.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	out := map[negKey][]string{}
	for _, tr := range translations {
		for i := range tr.Spec.Resources {
			r := &tr.Spec.Resources[i]
			if neg := (negKey{project: p.gcp.ProjectID, zone: r.Zone, name: r.Name}); neg.project == project {
				out[neg] = append(out[neg], r.Description)
			}
		}
		for i := range tr.Status.Resources {
			r := &tr.Status.Resources[i]
			if neg := (negKey{project: statusID(r, p.gcp.ProjectID).project, zone: r.Zone, name: r.Name}); neg.project == project {
				out[neg] = append(out[neg], r.Description)
			}
		}
	}
	return out, nil
}

// claims says whether a NEG with description is claimed by a Translation that declares it with markers: one of them
// is its description, or unknown. A NEG declared only with other markers is not the declaring Translation's: its
// pusher neither changes nor deletes it (a name collision), so only the sweep can: a NEG awaiting deletion whose
// custom name a new Service asked for, say.
func claims(markers []string, description string) bool {
	for _, m := range markers {
		if m == "" || m == description {
			return true
		}
	}
	return false
}

// sweep deletes the NEGs of the tenant's project that carry the tenant's ownership marker and that no Translation
// claims: left by a Translation whose deletion found them in use by a backend service (awaiting deletion,
// awaiting.go), or leaked by a finalizer stripped by hand, a Translation force-deleted, or a crash before anything
// was recorded. A NEG found unclaimed is looked at again after gcGrace, with the Translations as the cache then has
// them, so one whose Translation the informer has not delivered yet is never taken. A NEG without our marker is
// never touched. Before its delete a NEG leaves the backend services the tenant allows
// (leaveAllowedBackendServices). A NEG GCE will not delete yet is reported and tried again at the next sweep. Every
// call takes a token of the tenant's bucket.
func (p *Pusher) sweep(ctx context.Context) {
	logger := klog.FromContext(ctx)
	project := p.gcp.ProjectID
	gce, err := p.gceClient(ctx, project)
	if err != nil {
		logger.V(2).Info("NEG sweep skipped: no GCE client", "err", err)
		return
	}
	start := p.awaiting.listStart()
	negs, err := gce.ListNEGs(ctx)
	if err != nil {
		logger.V(2).Info("NEG sweep skipped: listing NEGs failed", "err", err)
		return
	}
	claimed, err := p.claimed(project)
	if err != nil {
		return
	}
	var marked, candidates []negKey
	for _, n := range negs {
		neg := negKey{project: project, zone: path.Base(n.Zone), name: n.Name}
		if !p.ours(n.Description) {
			continue
		}
		marked = append(marked, neg)
		if !claims(claimed[neg], n.Description) {
			candidates = append(candidates, neg)
		}
	}
	p.awaiting.listedMarked(start, marked)
	if len(candidates) == 0 {
		p.reportSwept(ctx, start, nil, "")
		return
	}
	select {
	case <-ctx.Done():
		return
	case <-time.After(p.gcGrace):
	}
	var collected, awaited []string
	refused := map[negKey]string{}
	reason := ReasonGCEError
	for _, neg := range candidates {
		wasHeld := p.awaiting.wasHeld(neg)
		deleted, err := p.collect(ctx, gce, neg)
		switch {
		case err != nil:
			refused[neg] = whyHeld(err)
			if gceclient.Classify(err) == gceclient.ClassInUse {
				reason = ReasonInUse
			}
		case !deleted:
		case wasHeld:
			awaited = append(awaited, neg.zone+"/"+neg.name)
		default:
			collected = append(collected, neg.zone+"/"+neg.name)
		}
	}
	p.reportSwept(ctx, start, refused, reason)
	if len(awaited) > 0 {
		slices.Sort(awaited)
		logger.Info("Deleted NEGs that awaited deletion", "project", project, "negs", awaited)
		if p.providerConfig != nil {
			p.recorder.Eventf(p.providerConfig, corev1.EventTypeNormal, ReasonNEGsCollected,
				"Deleted %d NEGs of project %s that awaited deletion (their Translations were released while a backend service used them): %s",
				len(awaited), project, strings.Join(awaited, ", "))
		}
	}
	if len(collected) == 0 {
		return
	}
	slices.Sort(collected)
	metrics.NEGsCollected.Add(float64(len(collected)), p.tenant)
	logger.Info("Deleted NEGs no Translation claims", "project", project, "negs", collected)
	if p.providerConfig != nil {
		p.recorder.Eventf(p.providerConfig, corev1.EventTypeNormal, ReasonNEGsCollected,
			"Deleted %d NEGs of project %s that carry this tenant's ownership marker but that no Translation claims: %s",
			len(collected), project, strings.Join(collected, ", "))
	}
}

// collect deletes one unclaimed NEG, under its cache entry's lock so that no worker acts on it meanwhile, after
// checking again that it still carries our marker and that nothing claims it. It reports whether it deleted the
// NEG, and why GCE would not (a NEG still in use, a failed call): the NEG is then still there.
func (p *Pusher) collect(ctx context.Context, gce *gceclient.Client, neg negKey) (deleted bool, err error) {
	e := p.cache.lock(sweepKey, neg)
	defer func() {
		p.cache.forget(sweepKey, neg)
		p.cache.unlock(neg, e)
	}()
	n, err := gce.GetNEG(ctx, neg.zone, neg.name)
	if gceclient.IsNotFound(err) {
		p.awaiting.deleted(neg)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !p.ours(n.Description) {
		return false, nil
	}
	if claimed, err := p.claimed(neg.project); err != nil || claims(claimed[neg], n.Description) {
		return false, nil
	}
	// Whatever the delete's outcome, a worker that waited for the entry reads GCE again.
	e.invalidate()
	if err := p.leaveAllowedBackendServices(ctx, gce, neg); err != nil {
		return false, err
	}
	err = gce.DeleteNEG(ctx, neg.zone, neg.name)
	switch gceclient.Classify(err) {
	case gceclient.ClassNone:
		p.awaiting.deleted(neg)
		return true, nil
	case gceclient.ClassNotFound:
		p.awaiting.deleted(neg)
		return false, nil
	default:
		klog.FromContext(ctx).V(2).Info("Could not delete an unclaimed NEG; the next sweep tries again", "zone", neg.zone, "neg", neg.name, "err", err)
		return false, err
	}
}

// sweepKey stands for a Translation's key when the sweep locks a cache entry: no Translation has it.
const sweepKey = "\x00sweep"
