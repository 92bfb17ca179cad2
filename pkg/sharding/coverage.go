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

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/tenancy"
	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
)

// DefaultRebuildInterval is how often a replica reads again the leftovers of all its tenants and narrows its shard
// selector to what they need now, if it holds more.
const DefaultRebuildInterval = 10 * time.Minute

// DefaultRebuildSettle is how long a replica's tenants must stay the same before it narrows a selector that holds
// buckets they no longer need: tenants leave in bursts (a replica that joins drains a share of each), and one
// narrowing after the burst costs one LIST where one per departure would cost many.
const DefaultRebuildSettle = 30 * time.Second

// rebuildSlack is how many buckets, beyond an eighth of the needed ones, a selector may hold for nothing before a
// rebuild narrows it. A rebuild is one LIST of the replica's share; what it saves is every event of the namespaces
// it drops, for as long as the replica runs. So a replica reads at most an eighth more than it needs (a third more
// was common: a replica of 150 tenants keeps 100 when a third replica joins), and narrows at most once per eighth
// of its share that leaves.
const rebuildSlack = 8

// coverageKey is the one key of the Coverage's queue: every event asks for the same computation.
const coverageKey = "selector"

// CoverageConfig configures a Coverage.
type CoverageConfig struct {
	// Scope is the shard selector of this replica's namespaced informers.
	Scope *informerset.ShardScope
	// Namespaces is the informer of every Namespace, indexed by tenancy.Indexers(LabelKey).
	Namespaces cache.SharedIndexInformer
	// ProviderConfigs is this shard's informer of its own tenants (label-selected by ShardLabel).
	ProviderConfigs cache.SharedIndexInformer
	// LabelKey names a Namespace's tenant.
	LabelKey string
	// Leftovers, if set, returns, for each of the tenants, the namespaces that hold objects its controllers wrote
	// (Translations, PangolinResources: tenancy.ManagerWritten) whatever tenant the namespace belongs to now: a
	// namespace that moved to another tenant keeps them until this tenant has undone what they did, so this shard
	// must read them. Asked, from the API server, once for every tenant the shard gains, and for all of them at a
	// rebuild.
	Leftovers func(ctx context.Context, tenants []string) (map[string][]string, error)
	// RebuildInterval is DefaultRebuildInterval if 0.
	RebuildInterval time.Duration
	// Clock defaults to the real clock.
	Clock clock.WithDelayedExecution
}

// Coverage keeps a sharded replica's shard selector (informerset.ShardScope) covering the namespaces of the tenants
// assigned to it, in buckets of the namespace hash (NamespaceBucket). The selector only grows, so that a tenant
// that moves in, or a namespace that joins one of its tenants, costs one LIST of this replica's share (and nothing
// when its bucket is covered already) and never a restart of the informers. When it holds more than an eighth (plus
// rebuildSlack) beyond the buckets its tenants need, it is narrowed to those: once the tenants have stayed the same
// for DefaultRebuildSettle, and at the latest at the next RebuildInterval, which also reads every tenant's leftovers
// again.
type Coverage struct {
	cfg   CoverageConfig
	clock clock.WithDelayedExecution
	queue *worker.Queue

	mu sync.Mutex
	// covered is, per bucket the selector holds, the selector generation that first held it.
	covered     map[uint32]uint64
	lastRebuild time.Time
	// tenants is this shard's tenants as the last sync saw them, and tenantsChanged when they last changed.
	tenants        sets.Set[string]
	tenantsChanged time.Time
	// waiting is the tenants Covers turned away since the informers last listed.
	waiting sets.Set[string]
	// leftovers is, per tenant of this shard whose Leftovers were read, the namespaces they named.
	leftovers map[string]sets.Set[string]
	notified  uint64
	ignored   bool
	// onCovered is Run's: it gets the tenants that waited once the informers have listed again.
	onCovered func(tenant string)
}

// NewCoverage builds the Coverage and hooks it to the scope's LISTs; call it before the informers start.
func NewCoverage(cfg CoverageConfig) *Coverage {
	if cfg.RebuildInterval <= 0 {
		cfg.RebuildInterval = DefaultRebuildInterval
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	c := &Coverage{cfg: cfg, clock: clk, covered: map[uint32]uint64{}, waiting: sets.New[string](), lastRebuild: clk.Now(),
		tenants: sets.New[string](), leftovers: map[string]sets.Set[string]{}}
	c.queue = worker.New(worker.Config{Controller: "shard-selector", KeyName: "key", Retry: &worker.Retry{Clock: clk},
		Sync: func(ctx context.Context, _ string) (worker.Result, error) { return c.sync(ctx) }})
	cfg.Scope.OnListed(c.listed)
	return c
}

// Run keeps the selector up to date until ctx ends, and hands onCovered every tenant that Covers turned away once
// the informers have listed its namespaces (the ProviderConfig controller's Enqueue).
func (c *Coverage) Run(ctx context.Context, onCovered func(tenant string)) error {
	c.mu.Lock()
	c.onCovered = onCovered
	c.mu.Unlock()
	enqueue := func(any) { c.queue.Add(coverageKey) }
	handler := cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue}
	for _, inf := range []cache.SharedIndexInformer{c.cfg.Namespaces, c.cfg.ProviderConfigs} {
		if err := c.queue.Watch(inf, handler); err != nil {
			c.queue.Close(ctx)
			return err
		}
	}
	c.queue.Add(coverageKey)
	c.queue.Run(ctx, worker.RunOptions{})
	return nil
}

// Covers reports whether this replica's informers have listed every namespace of tenant with a selector that holds
// it, so that the tenant's controllers may start on what they read; if not, the tenant is handed to OnCovered once
// they have. Where the API server ignores the selector, every object is received, and every tenant is covered.
func (c *Coverage) Covers(tenant string) bool {
	if c.cfg.Scope.Ignored() {
		return true
	}
	namespaces, err := tenancy.TenantNamespaces(c.cfg.Namespaces.GetIndexer(), c.cfg.LabelKey, tenant)
	if err != nil {
		return false
	}
	listed := c.cfg.Scope.Listed()
	c.mu.Lock()
	defer c.mu.Unlock()
	leftovers, read := c.leftovers[tenant]
	if c.cfg.Leftovers == nil {
		read = true
	}
	if !read {
		c.waiting.Insert(tenant)
		c.queue.Add(coverageKey)
		return false
	}
	for _, ns := range append(namespaces, leftovers.UnsortedList()...) {
		if gen, ok := c.covered[NamespaceBucket(ns)]; !ok || gen > listed {
			c.waiting.Insert(tenant)
			c.queue.Add(coverageKey)
			return false
		}
	}
	return true
}

// needed is the buckets of the namespaces of this shard's tenants and of their leftovers (c.mu held).
func (c *Coverage) needed(tenants []string) sets.Set[uint32] {
	out := sets.New[uint32]()
	for _, tenant := range tenants {
		namespaces, err := tenancy.TenantNamespaces(c.cfg.Namespaces.GetIndexer(), c.cfg.LabelKey, tenant)
		if err != nil {
			continue
		}
		for _, ns := range append(namespaces, c.leftovers[tenant].UnsortedList()...) {
			out.Insert(NamespaceBucket(ns))
		}
	}
	return out
}

// compare returns the buckets this shard's tenants need, those of them the selector lacks, and how many it holds
// that none needs (c.mu held).
func (c *Coverage) compare(tenants []string) (needed sets.Set[uint32], missing []uint32, unneeded int) {
	needed = c.needed(tenants)
	for b := range needed {
		if _, ok := c.covered[b]; !ok {
			missing = append(missing, b)
		}
	}
	return needed, missing, len(c.covered) - (needed.Len() - len(missing))
}

// leftoversToRead forgets the leftovers of the tenants this shard lost and returns the tenants whose leftovers must
// be read: those it gained, or all of them for a rebuild (c.mu held).
func (c *Coverage) leftoversToRead(tenants []string, all bool) []string {
	current := sets.New(tenants...)
	for tenant := range c.leftovers {
		if !current.Has(tenant) {
			delete(c.leftovers, tenant)
		}
	}
	if c.cfg.Leftovers == nil {
		return nil
	}
	var ask []string
	for _, tenant := range tenants {
		if _, read := c.leftovers[tenant]; all || !read {
			ask = append(ask, tenant)
		}
	}
	return ask
}

// readLeftovers reads the leftovers of ask from the API server, with c.mu not held (Covers goes on answering
// meanwhile), and records them.
func (c *Coverage) readLeftovers(ctx context.Context, ask []string) error {
	if len(ask) == 0 {
		return nil
	}
	found, err := c.cfg.Leftovers(ctx, ask)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, tenant := range ask {
		c.leftovers[tenant] = sets.New(found[tenant]...)
	}
	return nil
}

// coverageInput is what the selector's decision reads: the clock, the rebuild schedule and what the buckets are.
type coverageInput struct {
	now, lastRebuild, tenantsChanged time.Time
	interval                         time.Duration
	// periodic: a whole RebuildInterval has passed since the last rebuild (the leftovers were read again).
	periodic bool
	needed   sets.Set[uint32]
	missing  []uint32
	unneeded int
}

// coverageDecision is what sync does to the selector.
type coverageDecision struct {
	// rebuild narrows the selector to the needed buckets; otherwise it grows by missing, if any.
	rebuild bool
	// wide: the selector holds more unneeded buckets than rebuildSlack allows.
	wide bool
	// markRebuilt: the schedule restarts now (a periodic look that found nothing to narrow, or a rebuild).
	markRebuilt bool
	// next is when sync comes back.
	next time.Duration
}

// decideCoverage is the pure decision of sync: narrow the selector when it is wide and either a whole interval has
// passed or the tenants have stayed the same for DefaultRebuildSettle; come back when the next rebuild would be.
func decideCoverage(in coverageInput) coverageDecision {
	d := coverageDecision{wide: in.unneeded > in.needed.Len()/8+rebuildSlack}
	settle := DefaultRebuildSettle - in.now.Sub(in.tenantsChanged)
	d.rebuild = d.wide && (in.periodic || settle <= 0)
	d.next = in.interval
	switch {
	case d.rebuild:
		d.markRebuilt = true
	case in.periodic:
		// Nothing to narrow: look again in a whole interval.
		d.markRebuilt = true
	default:
		d.next = in.interval - in.now.Sub(in.lastRebuild)
		if d.wide && settle > 0 {
			d.next = min(d.next, settle)
		}
	}
	d.next = max(d.next, time.Second)
	return d
}

// sync grows the selector by the buckets it lacks, or narrows it when a rebuild is due (decideCoverage); it comes
// back when the next rebuild would be. The leftovers LISTs run without c.mu.
func (c *Coverage) sync(ctx context.Context) (worker.Result, error) {
	if c.cfg.Scope.Ignored() {
		// A server that ignores the selector sends everything whatever it says.
		return worker.Result{RequeueAfter: c.cfg.RebuildInterval}, nil
	}
	tenants := c.cfg.ProviderConfigs.GetStore().ListKeys()
	now := c.clock.Now()
	c.mu.Lock()
	if current := sets.New(tenants...); !current.Equal(c.tenants) {
		c.tenants, c.tenantsChanged = current, now
	}
	periodic := now.Sub(c.lastRebuild) >= c.cfg.RebuildInterval
	ask := c.leftoversToRead(tenants, periodic)
	c.mu.Unlock()
	if err := c.readLeftovers(ctx, ask); err != nil {
		return worker.Result{}, err
	}
	d, in := c.decide(now, tenants, periodic)
	if d.rebuild && !periodic {
		// A rebuild reads every tenant's leftovers again, whatever made it due: one of this shard's tenants whose
		// namespace moved to a tenant of another shard still needs it until it has undone what it wrote there.
		c.mu.Lock()
		ask = c.leftoversToRead(tenants, true)
		c.mu.Unlock()
		if err := c.readLeftovers(ctx, ask); err != nil {
			return worker.Result{}, err
		}
		_, in = c.decide(now, tenants, periodic)
	}
	c.apply(ctx, now, d, in)
	return worker.Result{RequeueAfter: d.next}, nil
}

// decide compares the selector with what the tenants need and decides.
func (c *Coverage) decide(now time.Time, tenants []string, periodic bool) (coverageDecision, coverageInput) {
	c.mu.Lock()
	defer c.mu.Unlock()
	in := coverageInput{now: now, lastRebuild: c.lastRebuild, tenantsChanged: c.tenantsChanged, interval: c.cfg.RebuildInterval,
		periodic: periodic}
	in.needed, in.missing, in.unneeded = c.compare(tenants)
	return decideCoverage(in), in
}

// apply acts on d: the selector is set (no API call: the informers list again on their own) and the metrics.
func (c *Coverage) apply(ctx context.Context, now time.Time, d coverageDecision, in coverageInput) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d.markRebuilt {
		c.lastRebuild = now
	}
	if len(in.missing) == 0 && !d.rebuild {
		return
	}
	reason := "grow"
	if d.rebuild {
		reason = "rebuild"
		for b := range c.covered {
			if !in.needed.Has(b) {
				delete(c.covered, b)
			}
		}
	}
	buckets := make([]uint32, 0, len(c.covered)+len(in.missing))
	for b := range c.covered {
		buckets = append(buckets, b)
	}
	buckets = append(buckets, in.missing...)
	slices.Sort(buckets)
	gen := c.cfg.Scope.Set(NamespaceSelector(buckets))
	for _, b := range in.missing {
		c.covered[b] = gen
	}
	ShardSelectorChanges.WithLabelValues(reason).Inc()
	ShardSelectorBuckets.Set(float64(len(c.covered)))
	klog.FromContext(ctx).V(2).Info("Shard selector changed; the namespaced informers list again", "reason", reason,
		"buckets", len(c.covered), "added", len(in.missing), "unneeded", in.unneeded, "generation", gen)
}

// listed hands the tenants that waited to OnCovered once the informers have listed with a newer selector, and
// reports a server that ignores the selector.
func (c *Coverage) listed() {
	listed, ignored := c.cfg.Scope.Listed(), c.cfg.Scope.Ignored()
	c.mu.Lock()
	if ignored && !c.ignored {
		c.ignored = true
		ShardServerSideWatch.Set(0)
	}
	if listed <= c.notified && !ignored {
		c.mu.Unlock()
		return
	}
	c.notified = listed
	waiting, onCovered := c.waiting, c.onCovered
	c.waiting = sets.New[string]()
	c.mu.Unlock()
	if onCovered == nil {
		return
	}
	for tenant := range waiting {
		onCovered(tenant)
	}
}
