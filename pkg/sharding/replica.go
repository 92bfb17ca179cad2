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
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	mpclientset "github.com/multiproject/client-go/clientset/versioned"

	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
)

// ErrShardLeaseLost makes the process exit non-zero at once: the sharder may already be moving this shard's
// tenants, so none of them may go on here. The error of a lost Lease wraps it and says why.
var ErrShardLeaseLost = errors.New("exiting at once")

// ReplicaConfig is what a Replica is built from: the command fills it from its config.
type ReplicaConfig struct {
	// Group is the shard group (--shard-group) and Shard this replica's shard (--shard-name) with --sharding; ""
	// runs every tenant.
	Group, Shard string
	// LeaderElect: a replica that runs every tenant does so as the elected leader, and then leaves alone the
	// tenants a live shard of the group may still run (Holders).
	LeaderElect bool
	// ShardedWatch (--sharded-watch): the namespaced informers read only this shard's tenants' namespaces, where
	// the API server honours shard selectors.
	ShardedWatch bool
	// Namespace holds the shard Leases (the leader-election namespace).
	Namespace string
	// LeaseClient writes and reads the shard Leases: the leader-election client, whose rate limit no tenant spends.
	LeaseClient kubernetes.Interface
	// Kube probes the API server for shard selectors; Client reads and writes ProviderConfigs; Metadata lists the
	// objects a tenant that moved here may have left (Leftovers).
	Kube     kubernetes.Interface
	Client   mpclientset.Interface
	Metadata metadata.Interface
	// The shard Lease's timings are the leader election's.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// CacheSyncTimeout bounds the wait for the Holders' informer, as for the shared informers.
	CacheSyncTimeout time.Duration
	// Workers is how many tenants the Drainer stops at once (--concurrent-provider-config-syncs).
	Workers int
}

// Replica is this process's part in dividing the tenants among replicas, built from the config once per process
// (NewReplica, which makes no call): with --sharding, its shard Lease, the Drainer that gives up drained tenants,
// and the Coverage of its tenants' namespaces (--sharded-watch); without, under leader election, the Holders of the group's shard Leases that the leader yields to. The command acquires the
// Lease (Acquire), decides the shard scope on the term's context (ResolveScope), builds the term's parts for the
// ProviderConfig controller (NewTerm) and starts them (Term.Start), and releases the Lease once every tenant has
// stopped (Release).
type Replica struct {
	cfg ReplicaConfig
	// lease is the shard Lease, nil unsharded; lost ends, with the reason as its cause, when it is lost.
	lease      *ShardLease
	lost       context.Context
	cancelLost context.CancelCauseFunc
	stopLease  context.CancelFunc
	leaseDone  chan struct{}
	// scope is the namespaced informers' shard selector, nil unless --sharded-watch is honoured; scopeResolved
	// says that ResolveScope has decided it.
	scopeMu       sync.Mutex
	scope         *informerset.ShardScope
	scopeResolved bool
}

// NewReplica builds the replica of cfg. It makes no call and registers nothing: the command registers the sharding
// series (Register) and ResolveScope asks the API server about shard selectors.
func NewReplica(cfg ReplicaConfig) (*Replica, error) {
	r := &Replica{cfg: cfg}
	if cfg.Shard == "" {
		return r, nil
	}
	r.lost, r.cancelLost = context.WithCancelCause(context.Background())
	lease, err := NewShardLease(ShardLeaseConfig{
		Client:        cfg.LeaseClient.CoordinationV1(),
		Namespace:     cfg.Namespace,
		Group:         cfg.Group,
		Identity:      cfg.Shard,
		LeaseDuration: cfg.LeaseDuration,
		RenewDeadline: cfg.RenewDeadline,
		RetryPeriod:   cfg.RetryPeriod,
		OnLost:        func(err error) { r.cancelLost(fmt.Errorf("%w: %w", ErrShardLeaseLost, err)) },
	})
	if err != nil {
		r.cancelLost(nil)
		return nil, fmt.Errorf("--sharding: %w", err)
	}
	r.lease = lease
	return r, nil
}

// Shard is this replica's shard, "" when it runs every tenant.
func (r *Replica) Shard() string { return r.cfg.Shard }

// ProviderConfigSelector selects the ProviderConfigs this replica's informer holds: its shard's, or every one.
func (r *Replica) ProviderConfigSelector() string {
	if r.cfg.Shard == "" {
		return ""
	}
	return labels.Set{ShardLabel: r.cfg.Shard}.AsSelector().String()
}

// Scope is the namespaced informers' shard selector that ResolveScope decided, nil when they read every namespace.
func (r *Replica) Scope() *informerset.ShardScope {
	r.scopeMu.Lock()
	defer r.scopeMu.Unlock()
	return r.scope
}

// ResolveScope decides, once per process, the namespaced informers' shard selector (Scope): with --sharding and
// --sharded-watch it asks the API server, on ctx, whether it honours shard selectors (shardProbeTimeout), which
// decides whether the informers read only this shard's namespaces; otherwise there is none. A probe cut short by
// the end of ctx decides nothing.
func (r *Replica) ResolveScope(ctx context.Context) *informerset.ShardScope {
	r.scopeMu.Lock()
	defer r.scopeMu.Unlock()
	if r.scopeResolved || r.cfg.Shard == "" || !r.cfg.ShardedWatch {
		return r.scope
	}
	scope := probeScope(ctx, r.cfg)
	if ctx.Err() != nil {
		return nil
	}
	r.scope, r.scopeResolved = scope, true
	return scope
}

// Lease is the shard Lease, a health check that fails once it is lost or goes unrenewed; nil unsharded.
func (r *Replica) Lease() *ShardLease { return r.lease }

// Lost is closed when the shard Lease is lost; LostCause then says why (it wraps ErrShardLeaseLost).
func (r *Replica) Lost() <-chan struct{} {
	if r.lost == nil {
		return nil
	}
	return r.lost.Done()
}

// LostCause is why the shard Lease was lost, nil while it is held.
func (r *Replica) LostCause() error {
	if r.lost == nil {
		return nil
	}
	return context.Cause(r.lost)
}

// Acquire starts renewing the shard Lease, on a context of its own that outlives ctx (the Lease is renewed until
// Release), and waits until it is held. It returns the loss (wrapping ErrShardLeaseLost) if the Lease is lost
// first, nil once it is held or ctx has ended.
func (r *Replica) Acquire(ctx context.Context) error {
	leaseCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	r.stopLease, r.leaseDone = stop, make(chan struct{})
	go func() {
		defer close(r.leaseDone)
		_ = r.lease.Run(leaseCtx)
	}()
	klog.FromContext(ctx).Info("Acquiring the shard Lease", "lease", LeaseName(r.cfg.Group, r.cfg.Shard))
	select {
	case <-r.lease.Acquired():
		return nil
	case <-r.lost.Done():
		return r.LostCause()
	case <-ctx.Done():
		return nil
	}
}

// StopRenewing stops renewing the shard Lease without waiting, for a process that exits at once (the Lease was
// lost, or the sharder's leadership). Idempotent; nothing unsharded.
func (r *Replica) StopRenewing() {
	if r.stopLease != nil {
		r.stopLease()
	}
}

// Release stops renewing the shard Lease and releases it, so that the sharder moves this shard's tenants at once
// instead of after the Lease expires. Call it once every tenant has stopped; stillRunning (a controller outlived
// the stop timeout and still acts until the process exits) keeps it, to expire. A lost Lease is not released.
func (r *Replica) Release(ctx context.Context, stillRunning error) {
	if r.stopLease == nil {
		return
	}
	// No renewal may land after the release.
	r.stopLease()
	<-r.leaseDone
	logger := klog.FromContext(ctx)
	if stillRunning != nil {
		logger.Error(stillRunning, "Not releasing the shard Lease; its tenants move when it expires")
		return
	}
	if r.LostCause() != nil {
		return
	}
	releaseCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.RenewDeadline)
	defer cancel()
	if err := r.lease.Release(releaseCtx); err != nil {
		logger.Error(err, "Could not release the shard Lease; its tenants move when it expires")
		return
	}
	logger.Info("Released the shard Lease")
}

// TenantController is what the replica asks of the controller that runs the tenants (the ProviderConfig
// controller).
type TenantController interface {
	Enqueue(name string)
	EnqueueAll()
	// StopUnowned stops a tenant this replica no longer owns, under the same per-tenant lock as a start.
	StopUnowned(ctx context.Context, name string) error
}

// TermInformers are the informers of one term that the replica's parts read: ProviderConfigs is the very informer
// the ProviderConfig controller decides from; Namespaces is every Namespace, indexed by tenancy.Indexers(LabelKey).
type TermInformers struct {
	ProviderConfigs, Namespaces cache.SharedIndexInformer
	LabelKey                    string
}

// Term is the replica's part in one term of the ProviderConfig controller: what the controller is built with
// (Holders and Coverage, which it heeds) and what runs beside it once started (Start). NewTerm makes no call.
type Term struct {
	// Holders are the group's live shards that may still run a tenant, which the controller yields to (unsharded
	// under leader election, and sharded); nil otherwise.
	Holders *Holders
	// Coverage says whether this shard's informers have read a tenant's namespaces, which the controller waits for
	// before a tenant starts (--sharded-watch, honoured: ResolveScope decided a scope); nil otherwise.
	Coverage *Coverage

	replica   *Replica
	informers TermInformers
}

// NewTerm builds the replica's parts of a term on its informers; nothing runs until Start.
func (r *Replica) NewTerm(informers TermInformers) *Term {
	t := &Term{replica: r, informers: informers}
	if r.cfg.Shard == "" && !r.cfg.LeaderElect {
		return t
	}
	// A shard, too, leaves alone a tenant whose status.shard names another live shard: a label changed by hand or
	// by a stale apply must not start it here while that shard still runs it.
	t.Holders = NewHolders(HoldersConfig{Group: r.cfg.Group, Namespace: r.cfg.Namespace, KubeClient: r.cfg.LeaseClient,
		Self: r.cfg.Shard, LeaseBounds: NewLeaseBounds(r.cfg.LeaseDuration, r.cfg.RenewDeadline)})
	if scope := r.Scope(); scope != nil {
		written := ManagerWritten()
		t.Coverage = NewCoverage(CoverageConfig{Scope: scope, Namespaces: informers.Namespaces,
			ProviderConfigs: informers.ProviderConfigs, LabelKey: informers.LabelKey,
			Leftovers: func(ctx context.Context, tenants []string) (map[string][]string, error) {
				return Leftovers(ctx, r.cfg.Metadata, written, informers.LabelKey, tenants)
			}})
	}
	return t
}

// Start runs the term's parts beside the tenant controller built with them, on wg until ctx ends: the Holders'
// informer, synced before Start returns, whose released or deleted shard Leases enqueue every tenant; sharded, also
// the Coverage and the Drainer. Call it before the tenant controller runs.
func (t *Term) Start(ctx context.Context, wg *sync.WaitGroup, tenants TenantController) error {
	if t.Holders == nil {
		return nil
	}
	if err := t.startHolders(ctx, tenants); err != nil || t.replica.cfg.Shard == "" {
		return err
	}
	if t.Coverage != nil {
		wg.Go(func() {
			if err := t.Coverage.Run(ctx, tenants.Enqueue); err != nil && ctx.Err() == nil {
				klog.FromContext(ctx).Error(err, "The shard selector's coverage stopped")
			}
		})
	}
	// The Drainer reads the informer the controller decides from, and stops a tenant under the same per-tenant
	// lock as the controller's sync (StopUnowned), so a drained tenant never starts again here.
	drainer := NewDrainer(DrainerConfig{Shard: t.replica.cfg.Shard, Client: t.replica.cfg.Client,
		ProviderConfigs: t.informers.ProviderConfigs, Stop: tenants.StopUnowned})
	wg.Go(func() {
		if err := drainer.Run(ctx, t.replica.cfg.Workers); err != nil && ctx.Err() == nil {
			klog.FromContext(ctx).Error(err, "The shard's drainer stopped")
		}
	})
	return nil
}

// startHolders starts the informer on the group's shard Leases and waits for it as long as for the shared
// informers. Sharded replicas of the group may still run tenants (a Deployment moving from sharded to unsharded has
// both kinds for a while, and the leader Lease they share keeps only the sharder away): the leader leaves theirs
// alone until they are released or their Lease expires.
func (t *Term) startHolders(ctx context.Context, tenants TenantController) error {
	cfg := t.replica.cfg
	go t.Holders.Informer().RunWithContext(ctx)
	syncCtx, cancel := context.WithTimeout(ctx, cfg.CacheSyncTimeout)
	defer cancel()
	if !cache.WaitForNamedCacheSyncWithContext(syncCtx, t.Holders.Informer().HasSynced) {
		return fmt.Errorf("the informer on the shard Leases of group %s did not sync within %s (can this replica list Leases in %s?)",
			cfg.Group, cfg.CacheSyncTimeout, cfg.Namespace)
	}
	_, err := t.Holders.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			if Released(oldObj, newObj) {
				tenants.EnqueueAll()
			}
		},
		DeleteFunc: func(any) { tenants.EnqueueAll() },
	})
	return err
}

// shardProbeTimeout bounds the start-up probe for server-side shard selectors.
const shardProbeTimeout = 30 * time.Second

// probeScope returns the shard selector of a replica run with --sharded-watch where the API server honours shard
// selectors, or nil: then the replica reads every object and filters on the client, as without the flag. A plain
// LIST with a selector and limit=1 decides (informers list through WatchList streams, which carry no list metadata
// to inspect); the answer is logged and kept in multiproject_shard_server_side_watch.
func probeScope(ctx context.Context, cfg ReplicaConfig) *informerset.ShardScope {
	logger := klog.FromContext(ctx).WithValues("shard", cfg.Shard)
	ctx, cancel := context.WithTimeout(ctx, shardProbeTimeout)
	defer cancel()
	// The first selector selects nothing: the shard has no tenant before its informers have synced.
	first := NamespaceSelector(nil)
	honoured, err := informerset.ProbeShardSelector(ctx, cfg.Kube, first)
	switch {
	case err != nil:
		logger.Error(err, "--sharded-watch: cannot tell whether the API server honours shard selectors; this replica reads every object and filters on the client")
	case !honoured:
		logger.Info("--sharded-watch: the API server ignores shard selectors (kube-apiserver needs --feature-gates=ShardedListAndWatch=true); this replica reads every object and filters on the client")
	}
	if err != nil || !honoured {
		ShardServerSideWatch.Set(0)
		return nil
	}
	logger.Info("--sharded-watch: the API server honours shard selectors; the namespaced informers read only this shard's tenants' namespaces")
	ShardServerSideWatch.Set(1)
	scope := informerset.NewShardScope(first)
	RegisterScope(scope)
	return scope
}

// Work is what a sharded replica runs while it holds its shard Lease (Replica.Run).
type Work struct {
	// Tenants runs this shard's tenants until ctx ends.
	Tenants func(ctx context.Context) error
	// Sharder campaigns for the leader election and runs the sharder while elected, until ctx ends.
	Sharder func(ctx context.Context) error
	// SharderLost says whether Sharder's error means that its leadership was lost: the process must then exit at
	// once, as after a lost shard Lease.
	SharderLost func(err error) bool
	// StillRunning says whether Tenants' error means that a controller outlived the stop timeout and still acts
	// until the process exits: the shard Lease is then left to expire rather than released.
	StillRunning func(err error) bool
	// Acquired, if set, is called once the shard Lease is held, before Tenants and Sharder start.
	Acquired func()
}

// Run is the life of a sharded replica. Every replica is active: it holds its shard Lease and runs the tenants
// assigned to it, and whichever replica wins the leader election also runs the sharder. It returns:
//   - at once, with an error wrapping ErrShardLeaseLost, or the Sharder's error for which SharderLost says true,
//     when the shard Lease or the sharder's leadership is lost (nothing is waited for: the process must exit before
//     its Lease expires);
//   - after ctx ends, once Tenants and Sharder have returned and the shard Lease is released, so that the sharder
//     moves this shard's tenants at once instead of after the Lease expires;
//   - with the error of Tenants or Sharder, after the same orderly stop.
func (r *Replica) Run(ctx context.Context, work Work) error {
	logger := klog.FromContext(ctx).WithValues("shard", r.cfg.Shard, "shardGroup", r.cfg.Group)
	ctx = klog.NewContext(ctx, logger)
	defer r.StopRenewing()
	if err := r.Acquire(ctx); err != nil || ctx.Err() != nil {
		return err
	}
	if work.Acquired != nil {
		work.Acquired()
	}

	workCtx, cancelWork := context.WithCancel(ctx)
	defer cancelWork()
	tenantsDone := make(chan error, 1)
	go func() { tenantsDone <- work.Tenants(workCtx) }()
	sharderDone := make(chan error, 1)
	go func() { sharderDone <- work.Sharder(workCtx) }()

	var tenantsErr, sharderErr error
	tenantsRunning, sharderRunning := true, true
	for tenantsRunning {
		select {
		case <-r.Lost():
			return r.LostCause()
		case tenantsErr = <-tenantsDone:
			tenantsRunning = false
		case sharderErr = <-sharderDone:
			sharderRunning = false
			if sharderErr != nil && work.SharderLost(sharderErr) {
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
	if tenantsErr != nil && work.StillRunning(tenantsErr) {
		stillRunning = tenantsErr
	}
	r.Release(ctx, stillRunning)
	if sharderRunning {
		sharderErr = <-sharderDone
	}
	return errors.Join(tenantsErr, sharderErr)
}
