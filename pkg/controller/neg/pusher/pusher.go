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

package pusher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"
	mplisters "github.com/multiproject/client-go/listers/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/neg/pushed"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	gceclient "github.com/multiproject/multiproject-controller-manager/pkg/gce/client"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
)

const (
	// defaultVerifyPeriod is how long the pusher trusts its cache of a NEG before it reads GCE again, so that a
	// change made behind its back (a NEG deleted by hand) is repaired. Reads only: a converged NEG still costs no
	// mutating call.
	defaultVerifyPeriod = 10 * time.Minute
	// defaultPermanentRetry is when a Translation that GCE refused as invalid, or that names a NEG we do not own, is
	// tried again without a change: slow, because only a person can fix it.
	defaultPermanentRetry = 5 * time.Minute
	// defaultCredentialsRefresh is how old the credentials read from the tenant's Secret may get before a sync
	// reads the Secret again; a changed key rebuilds the clients, so a rotated key is used without a restart.
	defaultCredentialsRefresh = time.Minute
	// defaultGCGrace is how long a NEG the sweep found unclaimed waits before it is looked at again: far longer
	// than an informer takes to deliver the status write that declares a NEG before it is made.
	defaultGCGrace = 10 * time.Second
	// defaultDrainGrace is the drain bound when the manager gives none.
	defaultDrainGrace = 20 * time.Second
)

// Pusher is one tenant's NEG pusher.
type Pusher struct {
	// programmed holds, per Translation key, the last generation whose network programming latency was observed
	// (latency.go).
	programmed sync.Map // string → programmedAt
	tenant     string
	gcp        mpv1alpha1.GCPConfig
	options    tenant.Options
	kube       secretGetter
	client     mpclientset.Interface
	informer   cache.SharedIndexInformer
	lister     mplisters.TranslationLister
	workers    *worker.Queue
	recorder   record.EventRecorder
	condition  tenant.ConditionReporter
	// concurrency is how many workers push at once (--concurrent-neg-syncs), for the start log.
	concurrency int

	verifyPeriod   time.Duration
	permanentRetry time.Duration
	// drainGrace bounds how long the pusher goes on after it was told to stop (tenant.Context.DrainGrace): the
	// pushes under way finish and the Translations already queued are pushed, so GCE is never left ahead of what
	// the cluster records. Past it, calls are cancelled and what is left waits for the next pusher.
	drainGrace time.Duration
	// stop is the run's StopSignal (tenant.Context.Stop), nil when ctx's end is the signal.
	stop *worker.StopSignal
	// providerConfig is the tenant, for Events about the tenant as a whole (the garbage sweep).
	providerConfig *mpv1alpha1.ProviderConfig
	// gcPeriod is how often the garbage sweep runs (0: never); gcGrace how long a NEG found unclaimed waits before
	// it is looked at again and deleted.
	gcPeriod, gcGrace time.Duration
	// abandoned reports whether the operator abandoned the tenant's cloud resources (tenant.Context).
	abandoned func() bool
	// cleanupOnly makes a pusher that deletes and never creates: it runs as the neg controller's cleanup, after
	// the tenant stopped configuring spec.gcp or is being deleted.
	cleanupOnly bool

	// gceMu guards the clients (one per project the tenant's NEGs are in, all with the tenant's credentials and
	// rate limiter) and the credentials they were built with.
	gceMu              sync.Mutex
	clients            map[string]*gceclient.Client
	limiter            flowcontrol.RateLimiter
	credentials        []byte
	credentialsReadAt  time.Time
	credentialsRefresh time.Duration
	now                func() time.Time

	cache    *negCache
	problems *problemSet
	// awaiting is what the pusher knows of the NEGs that wait for the sweep (awaiting.go).
	awaiting *awaitingSet
	// namespaces is the tenant's view of Namespaces, to tell a Namespace being deleted (nil when not served).
	namespaces cache.Indexer
	// cleanupOf is the Context a cleanup was built from, under which Pending finds awaiting; nil for a pusher.
	cleanupOf *tenant.Context

	// pushed, when set (ReportPushesTo), holds the generations pushed whose status report waits (reports): the
	// translator and the readiness reflector read them. Without it every status is written at once.
	pushed  *pushed.Generations
	reports *reports

	// memberships holds, per Translation key, how many backend service memberships its status records
	// (backends.go), for the tenant's metric.
	memberships sync.Map // string → int
}

// New builds the pusher of the tenant c describes. It makes no call: the Compute Engine client (and the credentials
// Secret it may need) is built on the first sync and retried with backoff until it works, so a missing Secret is a
// condition on the ProviderConfig, not a failed start.
func New(c *tenant.Context) (*Pusher, error) {
	return newPusher(c)
}

// NewCleanup builds a pusher that only deletes: it deletes the NEGs of every Translation being deleted and then
// removes its finalizer, and leaves live Translations alone (the neg controller's cleanup deletes them). c's
// spec.gcp is the section the tenant last ran with.
func NewCleanup(c *tenant.Context) (tenant.Controller, error) {
	p, err := newPusher(c)
	if err != nil {
		return nil, err
	}
	p.cleanupOnly = true
	if p.gcPeriod > 0 {
		// The cleanup sweeps too, and the tenant's finalizer waits for every NEG carrying its marker: a NEG left
		// to the sweep is listed by no Translation.
		p.awaiting.track = true
		p.cleanupOf = c
		cleanups.Store(c, p.awaiting)
	}
	return p, nil
}

// ReportPushesTo makes the pusher hold a status write that only reports what a sync pushed (a new generation, new
// endpoint counts) while the Translation keeps changing, and record the generation in g meanwhile, for the readers
// in the process (reports.go). Call it before Start.
func (p *Pusher) ReportPushesTo(g *pushed.Generations) { p.pushed = g }

func newPusher(c *tenant.Context) (*Pusher, error) {
	if c.ProviderConfig == nil || c.ProviderConfig.Spec.GCP == nil {
		return nil, errors.New("neg pusher: the ProviderConfig has no spec.gcp")
	}
	informer, err := c.Informers.Informer(informerset.Translations)
	if err != nil {
		return nil, fmt.Errorf("neg pusher: %w", err)
	}
	p := &Pusher{
		tenant:             c.Name(),
		gcp:                *c.ProviderConfig.Spec.GCP.DeepCopy(),
		options:            c.Options,
		client:             c.MultiprojectClient,
		informer:           informer,
		lister:             mplisters.NewTranslationLister(informer.GetIndexer()),
		recorder:           c.EventRecorder,
		condition:          c.Condition,
		concurrency:        max(c.Workers, 1),
		verifyPeriod:       defaultVerifyPeriod,
		permanentRetry:     defaultPermanentRetry,
		drainGrace:         c.DrainGrace,
		stop:               c.Stop,
		providerConfig:     c.ProviderConfig,
		abandoned:          c.CloudResourcesAbandoned,
		gcPeriod:           c.Options.NEGGCPeriod,
		gcGrace:            defaultGCGrace,
		limiter:            gceclient.NewRateLimiter(c.Options.GCEQPS, c.Options.GCEBurst),
		credentialsRefresh: defaultCredentialsRefresh,
		now:                time.Now,
		cache:              newNEGCache(),
		problems:           newProblemSet(),
		awaiting:           &awaitingSet{},
	}
	p.reports = newReports(func() time.Time { return p.now() })
	if namespaces, err := c.Informers.Informer(informerset.Namespaces); err == nil {
		p.namespaces = namespaces.GetIndexer()
	}
	p.workers = worker.New(worker.Config{
		Tenant:     p.tenant,
		Controller: c.Controller,
		Queue:      "pusher",
		KeyName:    "translation",
		Workers:    c.Workers,
		Sync:       p.sync,
	})
	if p.drainGrace <= 0 {
		p.drainGrace = defaultDrainGrace
	}
	if c.KubeClient != nil {
		p.kube = c.KubeClient.CoreV1()
	}
	return p, nil
}

// Run watches Translations and pushes them to GCE until ctx ends, then drains: the pushes under way finish and the
// Translations already queued are pushed, for up to drainGrace, so GCE is never left ahead of what the cluster
// records. On return its handler is removed, and its workers and its garbage sweep are gone.
func (p *Pusher) Run(ctx context.Context) { tenant.RunStarter(ctx, p) }

// Start sets the pusher up and returns; done is called once it has stopped after ctx ended and drained
// (tenant.Starter).
func (p *Pusher) Start(ctx context.Context, done func()) {
	logger := klog.FromContext(ctx)
	if err := p.workers.Watch(p.informer, translationEvents{p}); err != nil {
		logger.Error(err, "Could not watch Translations")
		p.workers.Close(ctx)
		if p.cleanupOf != nil {
			cleanups.CompareAndDelete(p.cleanupOf, p.awaiting)
		}
		done()
		return
	}
	// Workers push on a context the stop does not cancel until drainGrace after it; past it, calls are cancelled and
	// what is left waits for the next pusher.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	stopDraining := worker.AfterStop(ctx, p.stop, func() {
		logger.Info("Stopping NEG pusher: finishing the pushes under way and those queued", "grace", p.drainGrace)
		time.AfterFunc(p.drainGrace, cancelWork)
	})

	// The sweep runs beside the workers, on ctx, from a timer (no goroutine between sweeps); the stop waits for a
	// sweep under way.
	stopSweep := func() {}
	startSweep := func() {
		if p.gcPeriod > 0 {
			stopSweep = p.startSweeps(ctx)
		}
	}
	logger.Info("Starting NEG pusher", "project", p.gcp.ProjectID, "workers", p.concurrency, "cleanupOnly", p.cleanupOnly)
	p.workers.Start(ctx, worker.RunOptions{WorkContext: workCtx, Started: startSweep, Stop: p.stop}, func() {
		stopSweep()
		stopDraining()
		cancelWork()
		if p.cleanupOf != nil {
			cleanups.CompareAndDelete(p.cleanupOf, p.awaiting)
		}
		// The next pusher of the tenant, or its cleanup, counts again from its first sweep.
		metrics.NEGsAwaitingDeletion.Delete(p.tenant)
		metrics.NEGBackendServiceMemberships.Delete(p.tenant)
		done()
	})
}

// startSweeps sweeps now and then every gcPeriod after the previous sweep ended, as wait.Until would, but on a
// timer rather than a goroutine of its own. The returned stop cancels the next sweep and waits for one under way.
func (p *Pusher) startSweeps(ctx context.Context) (stop func()) {
	var (
		mu       sync.Mutex
		stopped  bool
		timer    *time.Timer
		underway sync.WaitGroup
	)
	var sweep func()
	sweep = func() {
		mu.Lock()
		if stopped || ctx.Err() != nil {
			mu.Unlock()
			return
		}
		underway.Add(1)
		mu.Unlock()
		defer underway.Done()
		p.sweep(ctx)
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			timer = time.AfterFunc(p.gcPeriod, sweep)
		}
	}
	go sweep()
	return func() {
		mu.Lock()
		stopped = true
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		underway.Wait()
	}
}

// translationEvents is the pusher's Translation handler. A single pointer, which an interface holds without an
// allocation: a ResourceEventHandlerFuncs of method values costs about 80 bytes per tenant.
type translationEvents struct{ p *Pusher }

func (e translationEvents) OnAdd(obj any, _ bool)       { e.p.workers.AddObject(obj) }
func (e translationEvents) OnUpdate(oldObj, newObj any) { e.p.onUpdate(oldObj, newObj) }

// OnDelete enqueues the key: the sync of a key whose Translation is gone drops what the pusher kept for it.
func (e translationEvents) OnDelete(obj any) { e.p.workers.AddObject(obj) }

// onUpdate skips the updates the pusher's own status writes cause: only the spec (generation), the deletion mark
// and the finalizers matter. Periodic re-checks come from the queue (verifyPeriod), not from informer resyncs.
func (p *Pusher) onUpdate(oldObj, newObj any) {
	oldTr, ok1 := oldObj.(*mpv1alpha1.Translation)
	newTr, ok2 := newObj.(*mpv1alpha1.Translation)
	if ok1 && ok2 && oldTr.Generation == newTr.Generation &&
		oldTr.DeletionTimestamp.Equal(newTr.DeletionTimestamp) &&
		slices.Equal(oldTr.Finalizers, newTr.Finalizers) {
		return
	}
	p.workers.AddObject(newObj)
}

// GCEClient returns the tenant's Compute Engine client for a project, the pusher's own: the NEG readiness
// reflector polls endpoint health with it, so its calls take their tokens from the tenant's rate limiter
// (--gce-qps) and share the pusher's credentials.
func (p *Pusher) GCEClient(ctx context.Context, project string) (*gceclient.Client, error) {
	return p.gceClient(ctx, project)
}

// gceClient returns the tenant's Compute Engine client for a project, building it on first use. The credentials
// Secret is read again once the key in use is older than credentialsRefresh, and a changed key rebuilds every
// client, so a rotated key is picked up without a restart. A failure is not kept: the next sync tries again (the
// Secret may have been created meanwhile).
func (p *Pusher) gceClient(ctx context.Context, project string) (*gceclient.Client, error) {
	p.gceMu.Lock()
	defer p.gceMu.Unlock()
	if ref := p.gcp.CredentialsSecretRef; ref != nil && (p.credentials == nil || p.now().Sub(p.credentialsReadAt) >= p.credentialsRefresh) {
		data, err := p.readCredentials(ctx, ref)
		if err != nil {
			return nil, err
		}
		p.credentialsReadAt = p.now()
		if !bytes.Equal(data, p.credentials) {
			if p.credentials != nil {
				klog.FromContext(ctx).Info("The credentials Secret changed; rebuilding the GCE clients", "secret", ref.Namespace+"/"+ref.Name)
			}
			p.credentials = data
			clear(p.clients)
		}
	}
	if c := p.clients[project]; c != nil {
		return c, nil
	}
	c, err := gceclient.New(ctx, gceclient.Config{
		ProviderConfig:  p.tenant,
		ProjectID:       project,
		Endpoint:        p.options.GCEEndpoint,
		CredentialsJSON: p.credentials,
		RateLimiter:     p.limiter,
		UserAgent:       p.options.GCEUserAgent,
	})
	if err != nil {
		return nil, err
	}
	if p.clients == nil {
		p.clients = map[string]*gceclient.Client{}
	}
	p.clients[project] = c
	return c, nil
}

func (p *Pusher) readCredentials(ctx context.Context, ref *mpv1alpha1.SecretKeyReference) ([]byte, error) {
	if p.kube == nil {
		return nil, errors.New("no Kubernetes client to read the credentials Secret with")
	}
	secret, err := p.kube.Secrets(ref.Namespace).Get(ctx, ref.Name, getOptions)
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("credentials Secret %s/%s does not exist", ref.Namespace, ref.Name)
	case apierrors.IsForbidden(err):
		return nil, fmt.Errorf("not allowed to read credentials Secret %s/%s (see manifests/rbac/neg-pusher.yaml): %w", ref.Namespace, ref.Name, err)
	case err != nil:
		return nil, fmt.Errorf("reading credentials Secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	data, ok := secret.Data[ref.Key]
	if !ok || len(data) == 0 {
		return nil, fmt.Errorf("credentials Secret %s/%s has no key %q", ref.Namespace, ref.Name, ref.Key)
	}
	return data, nil
}

var _ tenant.Controller = (*Pusher)(nil)
