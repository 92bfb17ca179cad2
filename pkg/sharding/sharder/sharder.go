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
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coordinationinformers "k8s.io/client-go/informers/coordination/v1"
	"k8s.io/client-go/kubernetes"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"
	mpinformers "github.com/multiproject/client-go/informers/externalversions/multiproject/v1alpha1"
	mplisters "github.com/multiproject/client-go/listers/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/sharding"
	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
)

// Reasons of the sharder's Events on a ProviderConfig.
const (
	EventShardAssigned   = "ShardAssigned"
	EventShardDraining   = "ShardDraining"
	EventShardReassigned = "ShardReassigned"
	// EventShardReleasePending: the tenant lost its shard label, but the shard its status names is live and may
	// still run it; it is assigned again once that shard has released it.
	EventShardReleasePending = "ShardReleasePending"
	// EventShardLeaseOutOfBounds (Warning): the Lease of the shard that the tenant's label names has timings no
	// replica writes (LeaseBounds); the sharder takes it as live only until the latest expiry a replica could have
	// written, and then moves the tenant unless the Lease was written again.
	EventShardLeaseOutOfBounds = "ShardLeaseOutOfBounds"
)

// sharderWorkers is how many ProviderConfigs the sharder assigns concurrently: each assignment is one patch.
const sharderWorkers = 2

// Config configures the Sharder.
type Config struct {
	// Group and Namespace select the shard Leases (ShardLeaseConfig's).
	Group, Namespace string
	// KubeClient reads the shard Leases; Client patches ProviderConfigs.
	KubeClient kubernetes.Interface
	Client     mpclientset.Interface
	// ProviderConfigs is an informer on every ProviderConfig (not label-selected), with at least names, labels and
	// status.shard. The caller starts it.
	ProviderConfigs cache.SharedIndexInformer
	// Recorder records the Events of every move on the ProviderConfig.
	Recorder record.EventRecorder
	// Clock defaults to the real clock. It also runs the timers of the sharder's queue: its retries and delayed looks.
	Clock clock.WithDelayedExecution
	// LeaseBounds are the timings the replicas' shard Leases can carry (NewLeaseBounds of their flags); a Lease
	// outside them is ignored. The zero value ignores none.
	LeaseBounds sharding.LeaseBounds
}

// Sharder assigns every ProviderConfig to a live shard. Run it only on the replica that holds the leader-election
// Lease: it assumes it is the only writer of assignments (its compare-and-swap patches keep a second one from
// causing harm, but two would fight).
type Sharder struct {
	cfg           Config
	clock         clock.WithDelayedExecution
	leaseInformer cache.SharedIndexInformer
	leases        coordinationlisters.LeaseLister
	pcs           mplisters.ProviderConfigLister
	queue         *worker.Queue
	leasesChanged chan struct{}
	// planner keeps the Plan of every tenant that Decide's want comes from.
	planner planner

	mu sync.Mutex
	// live is the set of live shards the last full evaluation saw.
	live []string
	// gauged is the shards that have a ShardTenants series.
	gauged map[string]bool
	// dead is the shards whose Lease a fresh read found expired: identities are never reused, so they stay dead.
	dead map[string]bool
	// waiting is, per ProviderConfig, the live shard whose release the sharder last said (in an Event) it waits for.
	waiting map[string]string
	// reads bounds the expiry of the shard Leases confirmDead reads outside the LeaseBounds.
	reads sharding.VersionReads
}

// New builds the Sharder and its informer on the group's shard Leases.
func New(cfg Config) *Sharder {
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	selector := labels.Set{sharding.ShardGroupLabel: cfg.Group}.AsSelector().String()
	leaseInformer := coordinationinformers.NewFilteredLeaseInformer(cfg.KubeClient, cfg.Namespace, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.LabelSelector = selector })
	s := &Sharder{
		cfg:           cfg,
		clock:         clk,
		leaseInformer: leaseInformer,
		leases:        coordinationlisters.NewLeaseLister(leaseInformer.GetIndexer()),
		pcs:           mplisters.NewProviderConfigLister(cfg.ProviderConfigs.GetIndexer()),
		leasesChanged: make(chan struct{}, 1),
		gauged:        map[string]bool{},
		dead:          map[string]bool{},
		waiting:       map[string]string{},
	}
	// A failed sync is retried with the runtime's backoff (client-go's controller rate limiter) on the sharder's
	// clock; errStaleLabels is an ErrWaiting, which the runtime logs at V(4) only.
	s.queue = worker.New(worker.Config{Controller: "sharder", KeyName: "providerConfig", Retry: &worker.Retry{Clock: clk},
		Sync: func(ctx context.Context, name string) (worker.Result, error) {
			return worker.Result{}, s.sync(ctx, name)
		}})
	return s
}

// Run runs the sharder of cfg until ctx ends (the command runs it on the elected replica), on an informer of
// every ProviderConfig of its own (a shard's shared informer holds only that shard's tenants); cfg.ProviderConfigs
// is not read.
func Run(ctx context.Context, cfg Config) error {
	pcs := mpinformers.NewProviderConfigInformer(cfg.Client, 0, cache.Indexers{})
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
	cfg.ProviderConfigs = pcs
	return New(cfg).Run(ctx, sharderWorkers)
}

// Run runs the Lease informer, the Lease watch and workers until ctx ends, and then returns nil once the workers
// have returned, also when ctx ends before the caches have synced: that is a stop, such as SIGTERM just after this
// replica was elected, and not a failure that should make the process exit non-zero. It fails only when it cannot
// watch the ProviderConfig informer (stopped already).
func (s *Sharder) Run(ctx context.Context, workers int) error {
	enqueue := func(obj any) {
		if pc, ok := obj.(*mpv1alpha1.ProviderConfig); ok {
			s.planner.observe(pc.Name, pc.Labels, false)
			s.queue.Add(pc.Name)
		}
	}
	if err := s.queue.Watch(s.cfg.ProviderConfigs, cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		// A deleted tenant changes the even share and the capacity, so the plan is computed again: the sync of the
		// deleted key does that, and looks again at every tenant whose place changed.
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			if pc, ok := obj.(*mpv1alpha1.ProviderConfig); ok {
				s.planner.observe(pc.Name, nil, true)
				s.queue.Add(pc.Name)
			}
		},
	}); err != nil {
		s.queue.Close(ctx)
		return err
	}
	signal := func() {
		select {
		case s.leasesChanged <- struct{}{}:
		default:
		}
	}
	if err := s.queue.Watch(s.leaseInformer, cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { signal() },
		UpdateFunc: func(any, any) { signal() },
		DeleteFunc: func(any) { signal() },
	}); err != nil {
		s.queue.Close(ctx)
		return err
	}
	go s.leaseInformer.Run(ctx.Done())
	s.queue.Run(ctx, worker.RunOptions{Workers: workers, Started: func() {
		klog.FromContext(ctx).Info("Sharder started", "group", s.cfg.Group, "namespace", s.cfg.Namespace)
		go s.watchLeases(ctx)
	}})
	return nil
}

// watchLeases re-evaluates every ProviderConfig when the set of live shards changes. It looks again on every Lease
// event and at the earliest expiry of a live Lease, so a shard that dies silently is noticed when its Lease
// expires, without waiting for an event.
func (s *Sharder) watchLeases(ctx context.Context) {
	for {
		next := s.evaluateLeases(ctx)
		var expiry <-chan time.Time
		var timer clock.Timer
		if !next.IsZero() {
			timer = s.clock.NewTimer(next.Sub(s.clock.Now()))
			expiry = timer.C()
		}
		select {
		case <-ctx.Done():
		case <-s.leasesChanged:
		case <-expiry:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// evaluateLeases enqueues every ProviderConfig when the live shards changed, refreshes ShardTenants, and returns
// the earliest expiry of a live Lease (zero when none is live).
func (s *Sharder) evaluateLeases(ctx context.Context) time.Time {
	now := s.clock.Now()
	leases, outOfBounds, err := s.shardLeases()
	if err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Listing shard Leases")
		return time.Time{}
	}
	ShardLeasesOutOfBounds.Set(float64(outOfBounds))
	live := sharding.LiveShards(leases, now)
	var next time.Time
	for _, l := range leases {
		if expiry, ok := sharding.LeaseExpiry(l); ok && expiry.After(now) && (next.IsZero() || expiry.Before(next)) {
			next = expiry
		}
	}
	s.mu.Lock()
	changed := !slices.Equal(live, s.live)
	s.live = live
	s.mu.Unlock()
	pcs, err := s.pcs.List(labels.Everything())
	if err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Listing ProviderConfigs")
		return next
	}
	if changed {
		klog.FromContext(ctx).Info("Live shards changed; re-evaluating every ProviderConfig", "shards", live)
		for _, pc := range pcs {
			s.queue.Add(pc.Name)
		}
	}
	s.observeTenants(live, pcs)
	s.collectDeadLeases(ctx, leases, pcs, now)
	return next
}

// collectDeadLeases deletes the Lease of every shard that is dead (expired or released) and that no ProviderConfig
// names any more: shard names are never reused, so without this each restart of a replica would leave a Lease
// behind for good. The delete is conditional on the resourceVersion the cache saw expired, so a Lease renewed
// since (a shard that was only slow) is never deleted; and a shard whose Lease is gone exits at its next renewal.
func (s *Sharder) collectDeadLeases(ctx context.Context, leases []*coordinationv1.Lease, pcs []*mpv1alpha1.ProviderConfig, now time.Time) {
	named := make(map[string]bool, len(leases))
	for _, pc := range pcs {
		named[pc.Labels[sharding.ShardLabel]] = true
	}
	prefix := s.cfg.Group + "-"
	for _, l := range leases {
		if expiry, held := sharding.LeaseExpiry(l); held && expiry.After(now) {
			continue
		}
		shard, ok := strings.CutPrefix(l.Name, prefix)
		if !ok || named[shard] {
			continue
		}
		err := s.cfg.KubeClient.CoordinationV1().Leases(l.Namespace).Delete(ctx, l.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &l.UID, ResourceVersion: &l.ResourceVersion}})
		switch {
		case err == nil:
			klog.FromContext(ctx).Info("Deleted the Lease of a dead shard that owns no tenant", "lease", l.Name)
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			// Gone already, or renewed since the cache saw it: the next evaluation looks again.
		default:
			utilruntime.HandleErrorWithContext(ctx, err, "Deleting the Lease of a dead shard", "lease", l.Name)
		}
	}
}

// observeTenants sets ShardTenants for the live shards, drops the series of shards that are gone, and counts the
// tenants labeled with a shard that is not live in ShardTenantsWithoutLease.
func (s *Sharder) observeTenants(live []string, pcs []*mpv1alpha1.ProviderConfig) {
	counts := make(map[string]int, len(live))
	for _, shard := range live {
		counts[shard] = 0
	}
	withoutLease := 0
	for _, pc := range pcs {
		if shard := pc.Labels[sharding.ShardLabel]; slices.Contains(live, shard) {
			counts[shard]++
		} else if shard != "" {
			withoutLease++
		}
	}
	ShardTenantsWithoutLease.Set(float64(withoutLease))
	s.mu.Lock()
	defer s.mu.Unlock()
	for shard := range s.gauged {
		if _, ok := counts[shard]; !ok {
			ShardTenants.DeleteLabelValues(shard)
			delete(s.gauged, shard)
		}
	}
	for shard, n := range counts {
		ShardTenants.WithLabelValues(shard).Set(float64(n))
		s.gauged[shard] = true
	}
}

// sync carries out Decide for one ProviderConfig: one compare-and-swap patch of its labels, then an Event.
func (s *Sharder) sync(ctx context.Context, name string) error {
	pc, d, want, err := s.decide(ctx, name)
	if err != nil || pc == nil {
		return err
	}
	s.noteWaiting(pc, d)
	patch, err := s.movePatch(ctx, pc, d)
	if err != nil || patch == nil {
		return err
	}
	if _, err := s.cfg.Client.MultiprojectV1alpha1().ProviderConfigs().Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		if failedTest(err) {
			// The labels changed since our cache saw them; the update event brings the key back too.
			err = fmt.Errorf("%w: %w", errStaleLabels, err)
		}
		return fmt.Errorf("%s %s: %w", d.Action, d.Shard, err)
	}
	s.recordMove(ctx, pc, d, want)
	return nil
}

// decide reads the ProviderConfig and decides what to do about it, and returns the shard the plan gives it; the
// ProviderConfig is nil when it is gone.
func (s *Sharder) decide(ctx context.Context, name string) (*mpv1alpha1.ProviderConfig, Decision, string, error) {
	leases, _, err := s.shardLeases()
	if err != nil {
		return nil, Decision{}, "", err
	}
	live := sharding.LiveShards(leases, s.clock.Now())
	want, changed, err := s.planner.want(name, live, func() ([]*mpv1alpha1.ProviderConfig, error) {
		return s.pcs.List(labels.Everything())
	})
	if err != nil {
		return nil, Decision{}, "", err
	}
	for _, other := range changed {
		s.queue.Add(other)
	}
	pc, err := s.pcs.Get(name)
	if apierrors.IsNotFound(err) {
		s.mu.Lock()
		delete(s.waiting, name)
		s.mu.Unlock()
		return nil, Decision{}, "", nil
	}
	if err != nil {
		return nil, Decision{}, "", err
	}
	d := Decide(pc.Labels, pc.Status.Shard, live, want)
	if pc.Labels[sharding.ShardLabel] == "" && (d.Action == Assign || d.Action == ReassignNow) {
		// Without a label, only the status says whether a shard may still run the tenant, and our cache may not
		// have seen a shard record itself there yet: decide on the object as stored. Nothing can record itself
		// afterwards, because a shard records itself only while labeled with it (a write conditional on the
		// resourceVersion it read), and the label patch fails if a label appeared.
		pc, err = s.cfg.Client.MultiprojectV1alpha1().ProviderConfigs().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, Decision{}, "", nil
		}
		if err != nil {
			return nil, Decision{}, "", err
		}
		d = Decide(pc.Labels, pc.Status.Shard, live, want)
	}
	return pc, d, want, nil
}

// movePatch is the label patch that carries out d, or nil when d writes nothing now. A dead shard's tenant moves
// without a handshake only once a fresh read of the shard's Lease confirms that it is dead.
func (s *Sharder) movePatch(ctx context.Context, pc *mpv1alpha1.ProviderConfig, d Decision) ([]byte, error) {
	switch d.Action {
	case ReassignNow:
		dead, retryAt, err := s.confirmDead(ctx, pc, d.From)
		if err != nil {
			return nil, err
		}
		if !dead {
			// Our Lease cache is behind: the shard renewed. Look again when the Lease we just read expires.
			s.queue.AddAfter(pc.Name, retryAt.Sub(s.clock.Now()))
			return nil, nil
		}
		return sharding.LabelPatch(pc.Labels, map[string]string{sharding.ShardLabel: d.Shard}, sharding.DrainLabel)
	case Assign:
		return sharding.LabelPatch(pc.Labels, map[string]string{sharding.ShardLabel: d.Shard}, sharding.DrainLabel)
	case Drain:
		return sharding.LabelPatch(pc.Labels, map[string]string{sharding.DrainLabel: "true"})
	}
	// Nothing, WaitForRelease.
	return nil, nil
}

// recordMove counts, records and logs the move step a patch carried out.
func (s *Sharder) recordMove(ctx context.Context, pc *mpv1alpha1.ProviderConfig, d Decision, want string) {
	logger := klog.FromContext(ctx)
	switch d.Action {
	case Assign:
		ShardMoves.WithLabelValues(ReasonAssigned).Inc()
		s.cfg.Recorder.Eventf(pc, corev1.EventTypeNormal, EventShardAssigned, "Assigned to shard %s", d.Shard)
		logger.V(2).Info("Assigned ProviderConfig", "shard", d.Shard)
	case Drain:
		ShardMoves.WithLabelValues(ReasonDrain).Inc()
		s.cfg.Recorder.Eventf(pc, corev1.EventTypeNormal, EventShardDraining,
			"Shard %s is asked to stop the tenant; it moves to shard %s once it has", d.Shard, want)
		logger.V(2).Info("Draining ProviderConfig", "shard", d.Shard)
	case ReassignNow:
		ShardMoves.WithLabelValues(ReasonShardDead).Inc()
		s.cfg.Recorder.Eventf(pc, corev1.EventTypeNormal, EventShardReassigned,
			"Shard %s is dead (its Lease expired or was released); reassigned to shard %s", d.From, d.Shard)
		logger.Info("Reassigned ProviderConfig of a dead shard", "from", d.From, "shard", d.Shard)
	}
}

// noteWaiting records an Event when the sharder starts waiting for a live shard to release a tenant that lost its
// label, once per wait (the tenant's status changes while it waits, and each change brings it back here).
func (s *Sharder) noteWaiting(pc *mpv1alpha1.ProviderConfig, d Decision) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d.Action != WaitForRelease {
		delete(s.waiting, pc.Name)
		return
	}
	if s.waiting[pc.Name] == d.Shard {
		return
	}
	s.waiting[pc.Name] = d.Shard
	s.cfg.Recorder.Eventf(pc, corev1.EventTypeNormal, EventShardReleasePending,
		"The label %s is missing, but shard %s (status.shard) is live and may still run the tenant; it is assigned again once that shard has stopped it and cleared status.shard, or its Lease ends",
		sharding.ShardLabel, d.Shard)
}

// errStaleLabels marks a label patch whose test failed: the labels were not as the cache had them. It is expected
// after our own write, before the informer has delivered it (the compare-and-swap did its job), so it is a wait,
// retried and logged quietly, not a failure.
var errStaleLabels = fmt.Errorf("labels changed since read: %w", worker.ErrWaiting)

// failedTest says whether a JSON patch was refused because one of its test operations failed, which the API server
// answers with 422 Unprocessable Entity.
func failedTest(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status) && status.Status().Code == http.StatusUnprocessableEntity
}
