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

package sharder

import (
	"context"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	"github.com/multiproject/multiproject-controller-manager/pkg/sharding"
)

// shardLeases lists the group's shard Leases from the informer: labeled with the group and named after their
// holder, so that no other Lease (one labeled by hand, or one a watch delivered unfiltered) counts as a shard, and
// with timings a replica could have written (LeaseBounds). It also counts the group's Leases left out for their
// timings alone.
func (s *Sharder) shardLeases() ([]*coordinationv1.Lease, int, error) {
	all, err := s.leases.List(labels.SelectorFromSet(labels.Set{sharding.ShardGroupLabel: s.cfg.Group}))
	if err != nil {
		return nil, 0, err
	}
	now := s.clock.Now()
	outOfBounds := 0
	return slices.DeleteFunc(all, func(l *coordinationv1.Lease) bool {
		shard, ok := strings.CutPrefix(l.Name, s.cfg.Group+"-")
		if !ok || (l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" && *l.Spec.HolderIdentity != shard) {
			return true
		}
		if !s.cfg.LeaseBounds.Admits(l, now) {
			outOfBounds++
			return true
		}
		return false
	}), outOfBounds, nil
}

func (s *Sharder) liveShards() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live
}

// confirmDead reads the shard's Lease from the API server before its tenants move without a handshake: a Lease
// cache that lags (a slow watch) must not make a live shard look dead. The read applies the checks of the list
// (shardLeases): a Lease of that name without the group label is not the shard's, and says nothing; one outside
// the LeaseBounds is live until the latest expiry a replica could have written (VersionReads.LatestExpiry), and
// says so on pc with a Warning Event. A Lease held by another holder than the shard counts as the shard's until it
// expires: the shard exits at its next renewal, not at once. It returns when to look again if the shard may be
// live.
func (s *Sharder) confirmDead(ctx context.Context, pc *mpv1alpha1.ProviderConfig, shard string) (bool, time.Time, error) {
	s.mu.Lock()
	known := s.dead[shard]
	s.mu.Unlock()
	if known {
		return true, time.Time{}, nil
	}
	name := sharding.LeaseName(s.cfg.Group, shard)
	lease, err := s.cfg.KubeClient.CoordinationV1().Leases(s.cfg.Namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		s.reads.Forget(s.cfg.Namespace, name)
	case err != nil:
		return false, time.Time{}, err
	case !sharding.IsShardLease(lease, s.cfg.Group, shard):
		s.reads.Forget(s.cfg.Namespace, name)
		klog.FromContext(ctx).Info("The Lease named after a shard lacks the shard group's label: not the shard's, which is dead",
			"lease", klog.KObj(lease), "label", sharding.ShardGroupLabel+"="+s.cfg.Group)
	default:
		now := s.clock.Now()
		expiry, held, outOfBounds := s.reads.LatestExpiry(s.cfg.LeaseBounds, lease, now)
		live := held && expiry.After(now)
		if outOfBounds && live {
			s.cfg.Recorder.Eventf(pc, corev1.EventTypeWarning, EventShardLeaseOutOfBounds,
				"The Lease %s/%s of shard %s has timings no replica writes (renewTime %s, leaseDurationSeconds %d; a replica writes at most %s, renewed at most %s ahead of the sharder's clock): the tenant stays until %s, and moves then unless the Lease is written again (docs/sharding.md)",
				lease.Namespace, lease.Name, shard, lease.Spec.RenewTime.UTC().Format(time.RFC3339), *lease.Spec.LeaseDurationSeconds,
				s.cfg.LeaseBounds.MaxDuration, s.cfg.LeaseBounds.MaxSkew, expiry.UTC().Format(time.RFC3339))
		}
		// Held and unexpired, by the shard or (by hand) by anyone else: not provably dead yet.
		if live {
			return false, expiry, nil
		}
	}
	s.mu.Lock()
	s.dead[shard] = true
	s.mu.Unlock()
	return true, time.Time{}, nil
}
