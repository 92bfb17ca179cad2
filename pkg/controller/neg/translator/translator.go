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

package translator

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"

	"github.com/multiproject/multiproject-controller-manager/pkg/claims"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/neg/pushed"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
)

// Translator is one tenant's Kubernetes half of the neg controller: Services, EndpointSlices, Nodes and Pods in,
// Translations and the neg-status annotation out. This file builds and runs it; handlers.go turns events into
// Service keys, and sync.go reconciles one Service: desired Translations, planTranslations (plan.go) and apply
// (apply.go).
type Translator struct {
	tenant   string
	labelKey string
	// keys are the annotations the translator reads and writes, and the readiness gate whose Pods it attaches.
	keys    negapi.Keys
	cluster clusterIdentity
	gcp     mpv1alpha1.GCPConfig
	// version is the translation version the tenant's NEG type writes (versionFor): its Translations' and
	// generated NEG names'.
	version string
	// hybrid maps the tenant's Node zones to GCE zones when its NEGs are NON_GCP_PRIVATE_IP_PORT ones; nil for
	// GCE_VM_IP_PORT (hybrid.go).
	hybrid *zoneMapping

	kube kubernetes.Interface
	mp   mpclientset.Interface

	services     cache.SharedIndexInformer
	slices       cache.SharedIndexInformer
	nodes        cache.SharedIndexInformer
	translations cache.SharedIndexInformer
	// pods decide the endpoints of Pods that wait only for the NEG readiness gate (gate.go).
	pods          cache.SharedIndexInformer
	serviceLister corelisters.ServiceLister
	sliceLister   discoverylisters.EndpointSliceLister
	// sliceIndex is where a sync reads its Service's EndpointSlices (informerset.EndpointSlicesByService).
	sliceIndex cache.Indexer
	nodeLister corelisters.NodeLister
	podLister  corelisters.PodLister

	// allTranslations is the unfiltered Translation informer: a custom NEG name is used once in the cluster, so
	// every tenant's Translations count when a name is taken over; and a Service's Translations may be labeled for
	// another tenant (made before the Service moved here, or by a former Service of its name).
	allTranslations cache.SharedIndexInformer
	// claims is the run's claims.Service, which holds custom NEG names once across tenants (and replicas).
	claims *claims.Service
	// A sync reads Translations from these, by key or by owner (informerset.TranslationsByOwner): the tenant's
	// (translations') and every tenant's (allTranslations').
	translationIndex, allTranslationIndex cache.Indexer

	workers *worker.Queue
	// concurrency is how many workers sync at once (--concurrent-neg-syncs), for the start log.
	concurrency int
	// add enqueues a Service key, the handlers' only way to the queue; tests replace it to see what they enqueue.
	add func(key string)
	// batch decides, as a sync starts, when an endpoint change is written: at once, or with the next write once the
	// one in flight ends, within --neg-endpoint-batch-period (groupcommit.go).
	batch    *groupCommit
	recorder record.EventRecorder
	// onSynced is called once the caches have synced and the workers run.
	onSynced func()
	// stop is the run's StopSignal (tenant.Context.Stop), nil when ctx's end is the signal.
	stop *worker.StopSignal

	warnings *tenant.Warnings
	// names is the translator's membership in the process's claims of custom NEG names, from Run on.
	names *claims.Member

	// pushed holds the generations the pusher has pushed and not reported in a status yet; nil until FollowPushes,
	// when the status alone says what is synced (synced).
	pushed *pushed.Generations
	// writes holds the creates, updates, deletes and status patches the caches do not show yet (ownWrites).
	writes *ownWrites
	// zones counts the tenant's Nodes per zone, from the Node events, so that a Node event enqueues every Service
	// only when the set of zones changes.
	zones zoneCounts
	// nodeGeneration counts the Node events that can change the topology (a zoned Node added or deleted, a zone
	// changed); topology is the one built from the Node cache at a generation, reused while no such event came.
	nodeGeneration atomic.Uint64
	topology       atomic.Pointer[topologyAt]
}

// New builds the translator of the tenant c describes; onSynced is called once its caches have synced and its
// workers run. It makes no API call.
func New(c *tenant.Context, onSynced func()) (*Translator, error) {
	return newWithClock(c, onSynced, nil)
}

// newWithClock is New with the clock the queue's delayed keys wait on and the group commit reads (the batch
// period's); nil is the real clock.
func newWithClock(c *tenant.Context, onSynced func(), clk clock.WithDelayedExecution) (*Translator, error) {
	if c.ProviderConfig == nil || c.ProviderConfig.Spec.GCP == nil {
		return nil, errors.New("neg: the ProviderConfig has no spec.gcp")
	}
	if c.Options.ClusterUID == "" {
		// Without it, NEG names and markers would be those another cluster with the same --cluster-name makes.
		return nil, errors.New("neg: the cluster's identity (tenant.Options.ClusterUID) is not known")
	}
	keys := c.Options.NEGKeys.OrDefaults()
	t := &Translator{
		tenant:      c.Name(),
		keys:        keys,
		labelKey:    c.ProviderConfigLabelKey,
		cluster:     clusterIdentity{name: c.Options.ClusterName, uid: c.Options.ClusterUID},
		gcp:         *c.ProviderConfig.Spec.GCP.DeepCopy(),
		version:     versionFor(c.ProviderConfig.Spec.GCP.NetworkEndpointType),
		kube:        c.KubeClient,
		mp:          c.MultiprojectClient,
		recorder:    c.EventRecorder,
		onSynced:    onSynced,
		stop:        c.Stop,
		concurrency: max(c.Workers, 1),
		warnings:    tenant.NewWarnings(c.EventRecorder),
		writes:      newOwnWrites(clock.RealClock{}),
		claims:      c.Claims,
	}
	t.hybrid = hybridZones(&t.gcp)
	var batchClock clock.PassiveClock = clock.RealClock{}
	if clk != nil {
		batchClock = clk
	}
	t.batch = newGroupCommit(c.Options.NEGEndpointBatchPeriod, batchClock)
	if err := t.useInformers(c); err != nil {
		return nil, err
	}
	cfg := worker.Config{
		Tenant:     t.tenant,
		Controller: c.Controller,
		Queue:      "translator",
		KeyName:    "service",
		Workers:    c.Workers,
		Sync:       t.syncKey,
	}
	if clk != nil {
		cfg.Retry = &worker.Retry{Clock: clk}
	}
	t.workers = worker.New(cfg)
	t.add = t.workers.Add
	return t, nil
}

// useInformers takes the tenant's views and the shared informers the translator reads, and the claim records if
// the replicas are sharded. A sync reads a Service's slices and Translations through indexes, never by listing its
// namespace, so an informer without them is refused.
func (t *Translator) useInformers(c *tenant.Context) error {
	var err error
	if t.services, err = c.Informers.Informer(informerset.Services); err != nil {
		return fmt.Errorf("neg: %w", err)
	}
	if t.slices, err = c.Informers.Informer(informerset.EndpointSlices); err != nil {
		return fmt.Errorf("neg: %w", err)
	}
	if t.nodes, err = c.Informers.Informer(informerset.Nodes); err != nil {
		return fmt.Errorf("neg: %w", err)
	}
	if t.translations, err = c.Informers.Informer(informerset.Translations); err != nil {
		return fmt.Errorf("neg: %w", err)
	}
	if t.pods, err = c.Informers.Informer(informerset.Pods); err != nil {
		return fmt.Errorf("neg: %w", err)
	}
	if t.allTranslations, err = c.Informers.Shared(informerset.Translations); err != nil {
		return fmt.Errorf("neg: %w", err)
	}
	t.serviceLister = corelisters.NewServiceLister(t.services.GetIndexer())
	t.sliceIndex = t.slices.GetIndexer()
	t.sliceLister = discoverylisters.NewEndpointSliceLister(t.sliceIndex)
	t.nodeLister = corelisters.NewNodeLister(t.nodes.GetIndexer())
	t.podLister = corelisters.NewPodLister(t.pods.GetIndexer())
	t.translationIndex, t.allTranslationIndex = t.translations.GetIndexer(), t.allTranslations.GetIndexer()
	for _, need := range []struct {
		informer cache.SharedIndexInformer
		index    string
	}{{t.slices, informerset.EndpointSlicesByService}, {t.slices, informerset.EndpointSlicesByPod}, {t.translations, informerset.TranslationsByOwner}, {t.allTranslations, informerset.TranslationsByOwner}} {
		if _, ok := need.informer.GetIndexer().GetIndexers()[need.index]; !ok {
			return fmt.Errorf("neg: the shared informer lacks the index %s (informerset.Resources installs it)", need.index)
		}
	}
	return nil
}

// syncKey is sync as the workers run it. Waiting for the cache to show the translator's own writes is not a
// failure, and gets no backoff: every write the translator waits for (a Translation created, or updated in its
// spec, labels or owner reference; a Service patched) makes an event its handlers pass on, which brings the key back
// as soon as the cache shows it. The requeue is for a write the cache never shows, forgotten by then.
func (t *Translator) syncKey(ctx context.Context, key string) (worker.Result, error) {
	if wait := t.batch.begin(key, func() bool { return t.writeInFlight(key) }); wait > 0 {
		// An endpoint change while the Service's write is in flight: it comes back with the write's end, or then.
		// Nothing was synced, so nothing is counted.
		return worker.Result{RequeueAfter: wait, Postponed: true}, nil
	}
	err := t.sync(ctx, key)
	t.batch.synced(key, err == nil)
	if errors.Is(err, errCacheLagging) {
		klog.FromContext(ctx).V(4).Info("Waiting for the informer cache to show the translator's own writes")
		return worker.Result{RequeueAfter: lagRecheck}, nil
	}
	return worker.Result{}, err
}

// lagRecheck is when a sync that waits for the cache to show the translator's own writes looks again if no event
// brought it back: once what it waits for is forgotten.
const lagRecheck = ownWriteTimeout + time.Second

// FollowPushes makes the translator read, with the Translations' status, the generations the pusher has pushed
// and not reported yet, and hear of each as it is pushed, as of a status update. Call it before Start.
func (t *Translator) FollowPushes(g *pushed.Generations) {
	t.pushed = g
	g.OnPushed(t.onPushed)
}

// Run translates until ctx ends. On return its handlers are removed, its workers are gone and its NEG name claims
// are released.
func (t *Translator) Run(ctx context.Context) {
	stopped := make(chan struct{})
	t.Start(ctx, func() { close(stopped) })
	<-stopped
}

// Start sets the translator up and returns; done is called once it has stopped after ctx ended.
func (t *Translator) Start(ctx context.Context, done func()) {
	logger := klog.FromContext(ctx)
	// Joined before the Service handler is added, which claims the tenant's NEG names from its initial list on.
	names, err := t.joinClaims()
	if err != nil {
		logger.Error(err, "Could not join the process's NEG name claims")
		done()
		return
	}
	t.names = names
	// Left after the workers' handlers are gone: the tenant's names are released once, and no late Service event
	// claims them again.
	stop := func() {
		names.Leave()
		logger.Info("Stopped NEG translator")
		done()
	}

	for _, w := range []struct {
		kind     string
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}{
		{"Service", t.services, serviceEvents{t}},
		{"EndpointSlice", t.slices, sliceEvents{t}},
		{"Node", t.nodes, nodeEvents{t}},
		{"Translation", t.translations, translationEvents{t}},
		{"Pod", t.pods, podEvents{t}},
	} {
		if err := t.workers.Watch(w.informer, w.handler); err != nil {
			logger.Error(err, "Could not watch", "kind", w.kind)
			t.workers.Close(ctx)
			stop()
			return
		}
	}
	t.workers.WaitFor(names.HasSynced)

	logger.Info("Starting NEG translator", "workers", t.concurrency, "cluster", t.cluster)
	t.workers.Start(ctx, worker.RunOptions{Started: t.onSynced, Stop: t.stop}, stop)
}
