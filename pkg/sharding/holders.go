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

package sharding

import (
	"context"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coordinationinformers "k8s.io/client-go/informers/coordination/v1"
	"k8s.io/client-go/kubernetes"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
)

// HoldersConfig configures Holders.
type HoldersConfig struct {
	// Group and Namespace select the shard Leases, as the sharded replicas' ShardLeaseConfig does.
	Group, Namespace string
	// KubeClient lists and watches the shard Leases, and reads one before a tenant of its shard is started.
	KubeClient kubernetes.Interface
	// Self is this replica's shard when it runs sharded: a shard never yields to itself, only to another live shard
	// that status.shard names (its label names this shard).
	Self string
	// Clock defaults to the real clock.
	Clock clock.Clock
	// LeaseBounds are the timings the shard Leases can carry (NewLeaseBounds of the flags): a Lease outside them is
	// live only until the latest expiry a replica could have written. The zero value takes every Lease at its word.
	LeaseBounds LeaseBounds
}

// Holders tells a replica that runs unsharded (the elected one, which runs every tenant) which tenants a sharded
// replica may still run: those whose shard label or status.shard names a shard with a live Lease. That replica
// starts such a tenant only once the shard has released it (cleared status.shard after stopping it, or released
// its Lease on shutdown) or its Lease has expired (a shard that cannot renew stops before that), so that an
// unsharded and a sharded replica never run one tenant at once while a Deployment moves from one mode to the other.
// A shard asks it too (Self), about the other shard that status.shard may name: a label moved by hand or by a stale
// apply must not start a tenant on two shards at once.
type Holders struct {
	cfg      HoldersConfig
	clock    clock.Clock
	informer cache.SharedIndexInformer
	leases   coordinationlisters.LeaseLister

	mu sync.Mutex
	// dead is the shards whose Lease a fresh read found expired, released or gone: identities are never reused.
	dead map[string]bool
	// reads bounds the expiry of shard Leases outside the LeaseBounds.
	reads VersionReads
}

// NewHolders builds Holders and its informer on the group's shard Leases, which the caller starts (Informer).
func NewHolders(cfg HoldersConfig) *Holders {
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	selector := labels.Set{ShardGroupLabel: cfg.Group}.AsSelector().String()
	informer := coordinationinformers.NewFilteredLeaseInformer(cfg.KubeClient, cfg.Namespace, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.LabelSelector = selector })
	return &Holders{cfg: cfg, clock: clk, informer: informer, leases: coordinationlisters.NewLeaseLister(informer.GetIndexer()),
		dead: map[string]bool{}}
}

// Informer is the informer on the shard Leases. Its events say when a shard released or lost its Lease; a shard
// that dies silently is noticed at the expiry Holder returns.
func (h *Holders) Informer() cache.SharedIndexInformer { return h.informer }

// Released says whether a shard Lease event is one after which a tenant Holder kept back may be free: the Lease
// was deleted, or its holder changed (a release empties it). Renewals are not.
func Released(oldObj, newObj any) bool {
	oldLease, ok1 := oldObj.(*coordinationv1.Lease)
	newLease, ok2 := newObj.(*coordinationv1.Lease)
	if !ok1 || !ok2 {
		return true
	}
	return holderOf(oldLease) != holderOf(newLease)
}

func holderOf(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// Holder returns the live shard that may still run the tenant, and when to look again (its Lease's expiry as read),
// or "" when no shard may. The shards it considers are the tenant's shard label and status.shard. A shard counts as
// dead only once a read of its Lease from the API server (not the cache, which may lag a renewal) finds it expired,
// released or gone; that read is made once per shard. Cache and read check what the sharder's list checks: a Lease
// of the shard's name without the group label is not the shard's, and one outside the LeaseBounds is live only
// until the latest expiry a replica could have written (VersionReads.LatestExpiry).
func (h *Holders) Holder(ctx context.Context, pc *mpv1alpha1.ProviderConfig) (string, time.Time, error) {
	for _, shard := range recordedShards(pc, h.cfg.Self) {
		expiry, live, err := h.live(ctx, shard)
		if err != nil {
			return "", time.Time{}, err
		}
		if live {
			return shard, expiry, nil
		}
	}
	return "", time.Time{}, nil
}

// HeldInCache is Holder as the cache alone sees it, without a read from the API server: for reports (metrics),
// never for a decision to start a tenant.
func (h *Holders) HeldInCache(pc *mpv1alpha1.ProviderConfig) bool {
	for _, shard := range recordedShards(pc, h.cfg.Self) {
		if _, live := h.liveInCache(shard); live {
			return true
		}
	}
	return false
}

func recordedShards(pc *mpv1alpha1.ProviderConfig, self string) []string {
	var shards []string
	for _, s := range []string{pc.Labels[ShardLabel], pc.Status.Shard} {
		if s != "" && s != self && !slices.Contains(shards, s) {
			shards = append(shards, s)
		}
	}
	return shards
}

func (h *Holders) liveInCache(shard string) (time.Time, bool) {
	lease, err := h.leases.Leases(h.cfg.Namespace).Get(LeaseName(h.cfg.Group, shard))
	if err != nil || !IsShardLease(lease, h.cfg.Group, shard) {
		return time.Time{}, false
	}
	expiry, live, _ := h.liveExpiry(lease)
	return expiry, live
}

func (h *Holders) live(ctx context.Context, shard string) (time.Time, bool, error) {
	h.mu.Lock()
	dead := h.dead[shard]
	h.mu.Unlock()
	if dead {
		return time.Time{}, false, nil
	}
	if expiry, live := h.liveInCache(shard); live {
		return expiry, true, nil
	}
	lease, err := h.cfg.KubeClient.CoordinationV1().Leases(h.cfg.Namespace).Get(ctx, LeaseName(h.cfg.Group, shard), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return time.Time{}, false, err
	case !IsShardLease(lease, h.cfg.Group, shard):
		klog.FromContext(ctx).Info("The Lease named after a shard lacks the shard group's label: not the shard's, which is dead",
			"lease", klog.KObj(lease), "label", ShardGroupLabel+"="+h.cfg.Group)
	default:
		expiry, live, outOfBounds := h.liveExpiry(lease)
		if outOfBounds && live {
			klog.FromContext(ctx).Info("A shard Lease has timings no replica writes; it counts as live only until the latest expiry a replica could have written",
				"lease", klog.KObj(lease), "renewTime", lease.Spec.RenewTime, "leaseDurationSeconds", *lease.Spec.LeaseDurationSeconds, "until", expiry)
		}
		if live {
			return expiry, true, nil
		}
	}
	h.mu.Lock()
	h.dead[shard] = true
	h.mu.Unlock()
	return time.Time{}, false, nil
}

// liveExpiry is when the shard's Lease expires at the latest, if it is held now: by the shard, or (by hand) by
// anyone else, which does not prove the shard dead; and whether its timings are outside the LeaseBounds.
func (h *Holders) liveExpiry(lease *coordinationv1.Lease) (time.Time, bool, bool) {
	now := h.clock.Now()
	expiry, held, outOfBounds := h.reads.LatestExpiry(h.cfg.LeaseBounds, lease, now)
	if !held || !expiry.After(now) {
		return time.Time{}, false, outOfBounds
	}
	return expiry, true, outOfBounds
}
