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

// runSharded is the life of a sharded replica (sharding.Replica.Run): while it holds its shard Lease it runs its
// tenants' controllers and campaigns for the sharder's leader election. It is ready once its caches have synced.
func runSharded(ctx context.Context, c config.CompletedConfig, replica *sharding.Replica, descriptors *registry.Descriptors,
	state *processState, electionHealth *leadership.Health) error {
	return replica.Run(ctx, sharding.Work{
		// Every replica does its job: it is ready once its caches have synced.
		Acquired: func() { state.leading.Store(true) },
		Tenants: func(ctx context.Context) error {
			return runControllers(ctx, c, replica, descriptors, state)
		},
		Sharder: func(ctx context.Context) error {
			// The sharder's term has a readiness of its own that /readyz does not look at: a sharder without synced
			// caches assigns nothing, and the shards keep running what they have.
			var sharderState processState
			return leaderElectAndRun(ctx, c, electionHealth, &sharderState, func(ctx context.Context) error {
				return sharder.Run(ctx, newSharderConfig(c))
			})
		},
		SharderLost:  func(err error) bool { return errors.Is(err, leadership.ErrLost) },
		StillRunning: func(err error) bool { return errors.Is(err, providerconfig.ErrControllersStillRunning) },
	})
}
