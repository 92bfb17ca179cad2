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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"
	mplisters "github.com/multiproject/client-go/listers/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
)

// DrainerConfig configures a shard's Drainer.
type DrainerConfig struct {
	// Shard is this replica's shard name (ShardLease.Shard).
	Shard  string
	Client mpclientset.Interface
	// ProviderConfigs must be the very informer from which the replica decides which tenants to run (Owns), so
	// that once the Drainer has seen a drain no later read of the replica starts the tenant again: a cache never
	// goes back to an older state. Label-selected on ShardLabel=Shard, it holds only this shard's tenants.
	ProviderConfigs cache.SharedIndexInformer
	// Stop stops the tenant's controllers and returns once they have all returned. It must be idempotent (a
	// failed acknowledgement calls it again) and must exclude a concurrent start of the same tenant that decided
	// on an older read, for example by taking the same per-tenant lock as the start and reading Owns under it.
	Stop func(ctx context.Context, tenant string) error
	// Clock defaults to the real clock. It also runs the timers of the drainer's queue: its retries.
	Clock clock.WithDelayedExecution
}

// Drainer is the shard side of a move: for a ProviderConfig labeled with this shard and DrainLabel=true it calls
// Stop, clears status.shard (Release), then acknowledges by removing both labels, after which the sharder may
// assign the tenant elsewhere.
type Drainer struct {
	cfg   DrainerConfig
	clock clock.WithDelayedExecution
	pcs   mplisters.ProviderConfigLister
	queue *worker.Queue
}

// NewDrainer builds a Drainer.
func NewDrainer(cfg DrainerConfig) *Drainer {
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	d := &Drainer{
		cfg:   cfg,
		clock: clk,
		pcs:   mplisters.NewProviderConfigLister(cfg.ProviderConfigs.GetIndexer()),
	}
	// A failed drain is retried with the runtime's backoff (client-go's controller rate limiter) on the drainer's clock.
	d.queue = worker.New(worker.Config{Controller: "shard-drainer", KeyName: "providerConfig", Retry: &worker.Retry{Clock: clk},
		Sync: func(ctx context.Context, name string) (worker.Result, error) {
			return worker.Result{}, d.Sync(ctx, name)
		}})
	return d
}

// Run handles drains until ctx ends, and then returns nil once the workers have returned, also when ctx ends before
// the informer has synced. It fails only when it cannot watch the informer (stopped already). The caller starts
// the informer.
func (d *Drainer) Run(ctx context.Context, workers int) error {
	enqueue := func(obj any) {
		if pc, ok := obj.(*mpv1alpha1.ProviderConfig); ok && draining(d.cfg.Shard, pc.Labels) {
			d.queue.Add(pc.Name)
		}
	}
	if err := d.queue.Watch(d.cfg.ProviderConfigs, cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		d.queue.Close(ctx)
		return err
	}
	d.queue.Run(ctx, worker.RunOptions{Workers: workers})
	return nil
}

// Sync stops a draining tenant and acknowledges the drain, once; Run's workers call it for every tenant the informer
// says is draining. The sharder's tests call it to interleave both halves of a move step by step.
func (d *Drainer) Sync(ctx context.Context, name string) error {
	pc, err := d.pcs.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !draining(d.cfg.Shard, pc.Labels) {
		return nil
	}
	start := d.clock.Now()
	if err := d.cfg.Stop(ctx, name); err != nil {
		return fmt.Errorf("stopping the tenant before acknowledging its drain: %w", err)
	}
	// The status goes first: once the labels are gone, only the status tells the sharder that this shard may
	// still run the tenant, and it must say no before the sharder looks.
	if err := Release(ctx, d.cfg.Client, name, d.cfg.Shard); errors.Is(err, ErrStillOwned) {
		return nil
	} else if err != nil {
		return fmt.Errorf("clearing status.shard before acknowledging the drain: %w", err)
	}
	patch, err := LabelPatch(pc.Labels, nil, ShardLabel, DrainLabel)
	if err != nil {
		return err
	}
	_, err = d.cfg.Client.MultiprojectV1alpha1().ProviderConfigs().Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{})
	if err != nil {
		// The labels may have changed since the cache saw them, most often because an earlier attempt of ours
		// already acknowledged: read them as stored before retrying.
		fresh, getErr := d.cfg.Client.MultiprojectV1alpha1().ProviderConfigs().Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(getErr):
			return nil
		case getErr == nil && !draining(d.cfg.Shard, fresh.Labels):
			return nil
		}
		return fmt.Errorf("acknowledging the drain: %w", err)
	}
	ShardDrainDuration.Observe(d.clock.Since(start).Seconds())
	klog.FromContext(ctx).V(2).Info("Drained ProviderConfig", "shard", d.cfg.Shard)
	return nil
}
