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

	"k8s.io/client-go/metadata"
	"k8s.io/klog/v2"

	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/config"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/providerconfig"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/registry"
	"github.com/multiproject/multiproject-controller-manager/pkg/leadership"
	"github.com/multiproject/multiproject-controller-manager/pkg/sharding"
	"github.com/multiproject/multiproject-controller-manager/pkg/sharding/sharder"
)

// NewReplica builds this process's sharding.Replica from the config: with --sharding its shard Lease (with the
// leader-election timings and client: a rate limit no tenant can spend and a request timeout of the renew
// deadline), and with --sharded-watch the metadata client of the leftovers. It makes no call: the probe of the API
// server's shard selectors is the term's (CreateControllerContext).
func NewReplica(c config.CompletedConfig) (*sharding.Replica, error) {
	le := c.LeaderElection
	cfg := sharding.ReplicaConfig{
		Group:            c.Sharding.Group,
		LeaderElect:      le.LeaderElect,
		ShardedWatch:     c.Sharding.ShardedWatch,
		Namespace:        le.ResourceNamespace,
		LeaseClient:      c.LeaderElectionClient,
		Kube:             c.Client,
		Client:           c.MultiprojectClient,
		LeaseDuration:    le.LeaseDuration.Duration,
		RenewDeadline:    le.RenewDeadline.Duration,
		RetryPeriod:      le.RetryPeriod.Duration,
		CacheSyncTimeout: c.CacheSyncTimeout,
		Workers:          c.ProviderConfigWorkers,
	}
	if c.Sharding.Enabled {
		cfg.Shard = c.Sharding.Shard
	}
	if cfg.Shard != "" && cfg.ShardedWatch && c.Kubeconfig != nil {
		var err error
		if cfg.Metadata, err = metadata.NewForConfig(c.Kubeconfig); err != nil {
			return nil, err
		}
	}
	return sharding.NewReplica(cfg)
}

// newSharderConfig is the sharder of c's shard group, which every replica of the group may run once elected: it
// reads the group's shard Leases with the leader-election client and bounds them by the leader-election timings,
// with which every replica writes its own.
func newSharderConfig(c config.CompletedConfig) sharder.Config {
	le := c.LeaderElection
	return sharder.Config{
		Group:       c.Sharding.Group,
		Namespace:   le.ResourceNamespace,
		KubeClient:  c.LeaderElectionClient,
		Client:      c.MultiprojectClient,
		Recorder:    c.EventRecorder,
		LeaseBounds: sharding.NewLeaseBounds(le.LeaseDuration.Duration, le.RenewDeadline.Duration),
	}
}

// runSharded is the life of a sharded replica. Every replica is active: it holds its shard Lease and runs the
// tenants assigned to it, and whichever replica wins the leader election also runs the sharder. It returns:
//   - at once, with an error wrapping sharding.ErrShardLeaseLost or leadership.ErrLost, when the shard Lease or
//     the sharder's leadership is lost (nothing is waited for: the process must exit before its Lease expires);
//   - after ctx ends, once every tenant has stopped and the shard Lease is released, so that the sharder moves
//     this shard's tenants at once instead of after the Lease expires;
//   - with the error of the tenants' run or the sharder's, after the same orderly stop.
func runSharded(ctx context.Context, c config.CompletedConfig, replica *sharding.Replica, descriptors *registry.Descriptors,
	state *processState, electionHealth *leadership.Health) error {
	logger := klog.FromContext(ctx).WithValues("shard", c.Sharding.Shard, "shardGroup", c.Sharding.Group)
	ctx = klog.NewContext(ctx, logger)
	defer replica.StopRenewing()
	if err := replica.Acquire(ctx); err != nil || ctx.Err() != nil {
		return err
	}
	// Every replica does its job: it is ready once its caches have synced.
	state.leading.Store(true)

	workCtx, cancelWork := context.WithCancel(ctx)
	defer cancelWork()
	tenantsDone := make(chan error, 1)
	go func() { tenantsDone <- runControllers(workCtx, c, replica, descriptors, state) }()
	sharderDone := make(chan error, 1)
	go func() {
		// The sharder's term has a readiness of its own that /readyz does not look at: a sharder without synced
		// caches assigns nothing, and the shards keep running what they have.
		var sharderState processState
		sharderDone <- leaderElectAndRun(workCtx, c, electionHealth, &sharderState, func(ctx context.Context) error {
			return sharder.Run(ctx, newSharderConfig(c))
		})
	}()

	var tenantsErr, sharderErr error
	tenantsRunning, sharderRunning := true, true
	for tenantsRunning {
		select {
		case <-replica.Lost():
			return replica.LostCause()
		case tenantsErr = <-tenantsDone:
			tenantsRunning = false
		case sharderErr = <-sharderDone:
			sharderRunning = false
			if errors.Is(sharderErr, leadership.ErrLost) {
				return sharderErr
			}
			if sharderErr != nil {
				logger.Error(sharderErr, "The sharder failed; stopping this replica's tenants")
			}
		}
		cancelWork()
	}
	// A controller that outlived the stop timeout still acts until the process exits: its Lease must expire.
	var stillRunning error
	if errors.Is(tenantsErr, providerconfig.ErrControllersStillRunning) {
		stillRunning = tenantsErr
	}
	replica.Release(ctx, stillRunning)
	if sharderRunning {
		sharderErr = <-sharderDone
	}
	return errors.Join(tenantsErr, sharderErr)
}
