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

package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"
	mpinformers "github.com/multiproject/client-go/informers/externalversions/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/config"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/providerconfig"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/registry"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/sharding"
)

// errShardLeaseLost makes the process exit non-zero at once: the sharder may already be moving this shard's
// tenants, so none of them may go on here. It wraps the reason, which says that the shard Lease was lost and why.
var errShardLeaseLost = errors.New("exiting at once")

// sharderWorkers is how many ProviderConfigs the sharder assigns concurrently: each assignment is one patch.
const sharderWorkers = 2

// shard is one sharded run of the process: its shard Lease, and the loss of it.
type shard struct {
	lease *sharding.ShardLease
	// lost ends, with the reason as its cause, when the shard Lease is lost.
	lost context.Context
}

// newShard builds the shard Lease of c.Sharding.Shard with the leader-election timings and client: the client has
// a rate limit no tenant can spend and a request timeout of the renew deadline.
func newShard(c config.CompletedConfig) (*shard, error) {
	lost, cancelLost := context.WithCancelCause(context.Background())
	le := c.LeaderElection
	lease, err := sharding.NewShardLease(sharding.ShardLeaseConfig{
		Client:        c.LeaderElectionClient.CoordinationV1(),
		Namespace:     le.ResourceNamespace,
		Group:         c.Sharding.Group,
		Identity:      c.Sharding.Shard,
		LeaseDuration: le.LeaseDuration.Duration,
		RenewDeadline: le.RenewDeadline.Duration,
		RetryPeriod:   le.RetryPeriod.Duration,
		OnLost:        func(err error) { cancelLost(fmt.Errorf("%w: %w", errShardLeaseLost, err)) },
	})
	if err != nil {
		cancelLost(nil)
		return nil, fmt.Errorf("--sharding: %w", err)
	}
	return &shard{lease: lease, lost: lost}, nil
}

// run is the life of a sharded replica. Every replica is active: it holds its shard Lease and runs the tenants
// assigned to it, and whichever replica wins the leader election also runs the sharder. It returns:
//   - at once, with an error wrapping errShardLeaseLost or errLeaderElectionLost, when the shard Lease or the
//     sharder's leadership is lost (nothing is waited for: the process must exit before its Lease expires);
//   - after ctx ends, once every tenant has stopped and the shard Lease is released, so that the sharder moves
//     this shard's tenants at once instead of after the Lease expires;
//   - with the error of the tenants' run or the sharder's, after the same orderly stop.
func (s *shard) run(ctx context.Context, c config.CompletedConfig, descriptors *registry.Registry, state *processState, electionHealth *leaderElectionHealth) error {
	logger := klog.FromContext(ctx).WithValues("shard", c.Sharding.Shard, "shardGroup", c.Sharding.Group)
	ctx = klog.NewContext(ctx, logger)
	sharding.Register()

	// The Lease outlives ctx: it is renewed until every tenant has stopped, then released.
	leaseCtx, stopLease := context.WithCancel(context.WithoutCancel(ctx))
	defer stopLease()
	leaseDone := make(chan struct{})
	go func() {
		defer close(leaseDone)
		_ = s.lease.Run(leaseCtx)
	}()
	logger.Info("Acquiring the shard Lease", "lease", sharding.LeaseName(c.Sharding.Group, c.Sharding.Shard))
	select {
	case <-s.lease.Acquired():
	case <-s.lost.Done():
		return context.Cause(s.lost)
	case <-ctx.Done():
		return nil
	}
	// Every replica does its job: it is ready once its caches have synced.
	state.leading.Store(true)

	workCtx, cancelWork := context.WithCancel(ctx)
	defer cancelWork()
	tenantsDone := make(chan error, 1)
	go func() { tenantsDone <- runControllers(workCtx, c, descriptors, state) }()
	sharderDone := make(chan error, 1)
	go func() {
		// The sharder's term has a readiness of its own that /readyz does not look at: a sharder without synced
		// caches assigns nothing, and the shards keep running what they have.
		var sharderState processState
		sharderDone <- leaderElectAndRun(workCtx, c, electionHealth, &sharderState, func(ctx context.Context) error {
			return runSharder(ctx, c)
		})
	}()

	var tenantsErr, sharderErr error
	tenantsRunning, sharderRunning := true, true
	for tenantsRunning {
		select {
		case <-s.lost.Done():
			return context.Cause(s.lost)
		case tenantsErr = <-tenantsDone:
			tenantsRunning = false
		case sharderErr = <-sharderDone:
			sharderRunning = false
			if errors.Is(sharderErr, errLeaderElectionLost) {
				return sharderErr
			}
			if sharderErr != nil {
				logger.Error(sharderErr, "The sharder failed; stopping this replica's tenants")
			}
		}
		cancelWork()
	}
	// Every tenant has stopped: no renewal may land after the release.
	stopLease()
	<-leaseDone
	s.release(ctx, c, tenantsErr)
	if sharderRunning {
		sharderErr = <-sharderDone
	}
	return errors.Join(tenantsErr, sharderErr)
}

// release releases the shard Lease once its renewals have stopped and every tenant has stopped: the tenants go to
// the other shards at once. Not when a controller outlived the stop timeout (tenantsErr says so): it still acts
// until the process exits, so the Lease must expire; nor when the Lease is lost already.
func (s *shard) release(ctx context.Context, c config.CompletedConfig, tenantsErr error) {
	logger := klog.FromContext(ctx)
	if errors.Is(tenantsErr, providerconfig.ErrControllersStillRunning) {
		logger.Error(tenantsErr, "Not releasing the shard Lease; its tenants move when it expires")
		return
	}
	if s.lost.Err() != nil {
		return
	}
	releaseCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.LeaderElection.RenewDeadline.Duration)
	defer cancel()
	if err := s.lease.Release(releaseCtx); err != nil {
		logger.Error(err, "Could not release the shard Lease; its tenants move when it expires")
		return
	}
	logger.Info("Released the shard Lease")
}

// shardProbeTimeout bounds the start-up probe for server-side shard selectors.
const shardProbeTimeout = 30 * time.Second

// newShardScope returns the shard selector of a replica run with --sharding and --sharded-watch, where the API
// server honours shard selectors, or nil: then the replica reads every object and filters on the client, as
// without the flag. A plain LIST with a selector and limit=1 decides (informers list through WatchList streams,
// which carry no list metadata to inspect); the answer is logged and kept in multiproject_shard_server_side_watch.
func newShardScope(c config.CompletedConfig) *informerset.ShardScope {
	if !c.Sharding.Enabled || !c.Sharding.ShardedWatch {
		return nil
	}
	sharding.Register()
	logger := klog.Background().WithValues("shard", c.Sharding.Shard)
	ctx, cancel := context.WithTimeout(context.Background(), shardProbeTimeout)
	defer cancel()
	// The first selector selects nothing: the shard has no tenant before its informers have synced.
	first := sharding.NamespaceSelector(nil)
	honoured, err := informerset.ProbeShardSelector(ctx, c.Client, first)
	switch {
	case err != nil:
		logger.Error(err, "--sharded-watch: cannot tell whether the API server honours shard selectors; this replica reads every object and filters on the client")
	case !honoured:
		logger.Info("--sharded-watch: the API server ignores shard selectors (kube-apiserver needs --feature-gates=ShardedListAndWatch=true); this replica reads every object and filters on the client")
	}
	if err != nil || !honoured {
		sharding.ShardServerSideWatch.Set(0)
		return nil
	}
	logger.Info("--sharded-watch: the API server honours shard selectors; the namespaced informers read only this shard's tenants' namespaces")
	sharding.ShardServerSideWatch.Set(1)
	scope := informerset.NewShardScope(first)
	sharding.RegisterScope(scope)
	return scope
}

// newCoverage keeps scope over the namespaces of this shard's tenants; nil without a scope.
func newCoverage(c config.CompletedConfig, scope *informerset.ShardScope, informers *informerset.Tenancy) *sharding.Coverage {
	if scope == nil {
		return nil
	}
	labelKey := informers.Router.LabelKey()
	return sharding.NewCoverage(sharding.CoverageConfig{Scope: scope, Namespaces: informers.Set.Informer(informerset.Namespaces),
		ProviderConfigs: informers.Set.Informer(informerset.ProviderConfigs), LabelKey: labelKey,
		Leftovers: func(ctx context.Context, tenants []string) (map[string][]string, error) {
			return managerWrittenNamespaces(ctx, c.MultiprojectClient, labelKey, tenants)
		}})
}

// startCoverage makes the ProviderConfig controller start a tenant only once the shard's informers have read its
// namespaces, and keeps the shard selector over them on wg until ctx ends. Nothing without a Coverage.
func startCoverage(ctx context.Context, wg *sync.WaitGroup, coverage *sharding.Coverage, pcController *providerconfig.Controller) {
	if coverage == nil {
		return
	}
	pcController.WaitForCoverage(coverage)
	wg.Go(func() {
		if err := coverage.Run(ctx, pcController.Enqueue); err != nil && ctx.Err() == nil {
			klog.FromContext(ctx).Error(err, "The shard selector's coverage stopped")
		}
	})
}

// leftoverBatch is how many tenants one label-selected LIST asks for: the selector stays a few KB.
const leftoverBatch = 100

// managerWrittenNamespaces returns, per tenant, the namespaces that hold Translations or PangolinResources labeled
// with it (the objects its controllers wrote), read from the API server with label-selected LISTs. A resource the
// cluster does not serve holds none.
func managerWrittenNamespaces(ctx context.Context, client mpclientset.Interface, labelKey string, tenants []string) (map[string][]string, error) {
	out := map[string][]string{}
	add := func(items []metav1.Object) {
		for _, m := range items {
			if tenant := m.GetLabels()[labelKey]; tenant != "" && !slices.Contains(out[tenant], m.GetNamespace()) {
				out[tenant] = append(out[tenant], m.GetNamespace())
			}
		}
	}
	for batch := range slices.Chunk(tenants, leftoverBatch) {
		req, err := labels.NewRequirement(labelKey, selection.In, batch)
		if err != nil {
			return nil, err
		}
		opts := metav1.ListOptions{LabelSelector: labels.NewSelector().Add(*req).String()}
		translations, err := client.MultiprojectV1alpha1().Translations(metav1.NamespaceAll).List(ctx, opts)
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("listing the Translations of this shard's tenants: %w", err)
		}
		if err == nil {
			for i := range translations.Items {
				add([]metav1.Object{&translations.Items[i]})
			}
		}
		resources, err := client.TunnelV1alpha1().PangolinResources(metav1.NamespaceAll).List(ctx, opts)
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("listing the PangolinResources of this shard's tenants: %w", err)
		}
		if err == nil {
			for i := range resources.Items {
				add([]metav1.Object{&resources.Items[i]})
			}
		}
	}
	return out, nil
}

// runSharder runs the sharder on the elected replica until ctx ends, on an informer of every ProviderConfig of its
// own (a shard's shared informer holds only that shard's tenants).
func runSharder(ctx context.Context, c config.CompletedConfig) error {
	pcs := mpinformers.NewProviderConfigInformer(c.MultiprojectClient, 0, cache.Indexers{})
	// The sharder reads names, labels and status.shard only (and a UID to record Events on).
	if err := pcs.SetTransform(func(obj any) (any, error) {
		if pc, ok := obj.(*mpv1alpha1.ProviderConfig); ok {
			return &mpv1alpha1.ProviderConfig{TypeMeta: pc.TypeMeta, ObjectMeta: metav1.ObjectMeta{
				Name: pc.Name, UID: pc.UID, ResourceVersion: pc.ResourceVersion, Labels: pc.Labels},
				Status: mpv1alpha1.ProviderConfigStatus{Shard: pc.Status.Shard}}, nil
		}
		return obj, nil
	}); err != nil {
		return err
	}
	go pcs.Run(ctx.Done())
	s := sharding.NewSharder(sharding.SharderConfig{
		Group:           c.Sharding.Group,
		Namespace:       c.LeaderElection.ResourceNamespace,
		KubeClient:      c.LeaderElectionClient,
		Client:          c.MultiprojectClient,
		ProviderConfigs: pcs,
		Recorder:        c.EventRecorder,
		// Every replica writes its shard Lease with these flags (newShard).
		LeaseBounds: sharding.NewLeaseBounds(c.LeaderElection.LeaseDuration.Duration, c.LeaderElection.RenewDeadline.Duration),
	})
	return s.Run(ctx, sharderWorkers)
}
