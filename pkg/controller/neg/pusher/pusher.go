package pusher

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"
	mplisters "github.com/multiproject/client-go/listers/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	gceclient "github.com/multiproject/multiproject-controller-manager/pkg/gce/client"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
)

// ControllerName names the pusher in logs, queue names and metrics.
const ControllerName = "neg-pusher"

const (
	// defaultVerifyPeriod is how long the pusher trusts its cache of a NEG before it reads GCE again, so that a
	// change made behind its back (a NEG deleted by hand) is repaired. Reads only: a converged NEG still costs no
	// mutating call.
	defaultVerifyPeriod = 10 * time.Minute
	// defaultPermanentRetry is when a Translation that GCE refused as invalid, or that names a NEG we do not own, is
	// tried again without a change: slow, because only a person can fix it.
	defaultPermanentRetry = 5 * time.Minute
)

// Pusher is one tenant's NEG pusher.
type Pusher struct {
	tenant    string
	gcp       mpv1alpha1.GCPConfig
	options   tenant.Options
	kube      secretGetter
	client    mpclientset.Interface
	informer  cache.SharedIndexInformer
	lister    mplisters.TranslationLister
	queue     workqueue.TypedRateLimitingInterface[string]
	recorder  record.EventRecorder
	condition tenant.ConditionReporter
	workers   int

	verifyPeriod   time.Duration
	permanentRetry time.Duration

	gceMu sync.Mutex
	gce   *gceclient.Client

	cache    *negCache
	problems *problemSet
}

// New builds the pusher of the tenant c describes. It makes no call: the Compute Engine client (and the credentials
// Secret it may need) is built on the first sync and retried with backoff until it works, so a missing Secret is a
// condition on the ProviderConfig, not a failed start.
func New(c *tenant.Context) (tenant.Controller, error) {
	return newPusher(c)
}

func newPusher(c *tenant.Context) (*Pusher, error) {
	if c.ProviderConfig == nil || c.ProviderConfig.Spec.GCP == nil {
		return nil, errors.New("neg pusher: the ProviderConfig has no spec.gcp")
	}
	informer, err := c.Informers.Informer(informerset.Translations)
	if err != nil {
		return nil, fmt.Errorf("neg pusher: %w", err)
	}
	workers := c.Workers
	if workers < 1 {
		workers = 1
	}
	name := c.Name()
	p := &Pusher{
		tenant:   name,
		gcp:      *c.ProviderConfig.Spec.GCP.DeepCopy(),
		options:  c.Options,
		client:   c.MultiprojectClient,
		informer: informer,
		lister:   mplisters.NewTranslationLister(informer.GetIndexer()),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: name + "-" + ControllerName}),
		recorder:       c.EventRecorder,
		condition:      c.Condition,
		workers:        workers,
		verifyPeriod:   defaultVerifyPeriod,
		permanentRetry: defaultPermanentRetry,
		cache:          newNEGCache(),
		problems:       newProblemSet(),
	}
	if c.KubeClient != nil {
		p.kube = c.KubeClient.CoreV1()
	}
	return p, nil
}

// Run watches Translations and pushes them to GCE until ctx ends. On return its handler is removed, its queue shut
// down and its workers gone.
func (p *Pusher) Run(ctx context.Context) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx).WithValues("controller", ControllerName)
	ctx = klog.NewContext(ctx, logger)

	registration, err := p.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    p.enqueue,
		UpdateFunc: p.onUpdate,
		DeleteFunc: p.onDelete,
	})
	if err != nil {
		logger.Error(err, "Could not watch Translations")
		p.queue.ShutDown()
		return
	}
	// Workers push on a context the stop does not cancel until drainGrace after it; the deferred queue shutdown
	// lets them empty the queue and then return.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	stopDraining := context.AfterFunc(ctx, func() { time.AfterFunc(drainGrace, cancelWork) })
	var workers sync.WaitGroup
	defer func() {
		p.queue.ShutDown()
		workers.Wait()
		stopDraining()
		cancelWork()
		if err := p.informer.RemoveEventHandler(registration); err != nil {
			logger.Error(err, "Could not remove the Translation handler")
		}
		metrics.ForgetController(p.tenant, ControllerName)
	}()

	logger.Info("Starting NEG pusher", "project", p.gcp.ProjectID, "workers", p.workers)
	if !cache.WaitForCacheSync(ctx.Done(), p.informer.HasSynced, registration.HasSynced) {
		return
	}
	for range p.workers {
		workers.Go(func() { wait.UntilWithContext(ctx, func(context.Context) { p.runWorker(workCtx) }, time.Second) })
	}
	<-ctx.Done()
	logger.Info("Stopping NEG pusher: finishing the pushes under way and those queued", "grace", drainGrace)
}

func (p *Pusher) enqueue(obj any) {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	p.queue.Add(key)
}

// onUpdate skips the updates the pusher's own status writes cause: only the spec (generation), the deletion mark
// and the finalizers matter. Periodic re-checks come from the queue (verifyPeriod), not from informer resyncs.
func (p *Pusher) onUpdate(oldObj, newObj any) {
	oldTr, ok1 := oldObj.(*mpv1alpha1.Translation)
	newTr, ok2 := newObj.(*mpv1alpha1.Translation)
	if ok1 && ok2 && oldTr.Generation == newTr.Generation &&
		oldTr.DeletionTimestamp.Equal(newTr.DeletionTimestamp) &&
		equalStrings(oldTr.Finalizers, newTr.Finalizers) {
		return
	}
	p.enqueue(newObj)
}

func (p *Pusher) onDelete(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	// The sync of a key whose Translation is gone drops what the pusher kept for it.
	p.queue.Add(key)
}

func (p *Pusher) runWorker(ctx context.Context) {
	for p.processNextWorkItem(ctx) {
	}
}

// drainGrace bounds how long the pusher goes on after it was told to stop: the pushes under way finish and the
// Translations already queued are pushed, so GCE is never left ahead of what the cluster records. It matches the
// manager's default --controller-shutdown-timeout; past it, calls are cancelled and what is left waits for the next
// pusher, which lists every Translation again.
var drainGrace = 30 * time.Second

func (p *Pusher) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := p.queue.Get()
	if shutdown {
		return false
	}
	defer p.queue.Done(key)

	logger := klog.FromContext(ctx).WithValues("translation", key)
	result, err := p.sync(klog.NewContext(ctx, logger), key)
	metrics.ObserveSync(p.tenant, ControllerName, err, p.queue.Len())
	switch {
	case err != nil:
		logger.V(2).Info("Sync failed; retrying with backoff", "err", err)
		p.queue.AddRateLimited(key)
	default:
		p.queue.Forget(key)
		if result.requeueAfter > 0 {
			p.queue.AddAfter(key, result.requeueAfter)
		}
	}
	return true
}

// gceClient returns the tenant's Compute Engine client, building it on first use. A failure is not kept: the next
// sync tries again (the Secret may have been created meanwhile).
func (p *Pusher) gceClient(ctx context.Context) (*gceclient.Client, error) {
	p.gceMu.Lock()
	defer p.gceMu.Unlock()
	if p.gce != nil {
		return p.gce, nil
	}
	cfg := gceclient.Config{
		ProjectID: p.gcp.ProjectID,
		Endpoint:  p.options.GCEEndpoint,
		QPS:       p.options.GCEQPS,
		Burst:     p.options.GCEBurst,
	}
	if ref := p.gcp.CredentialsSecretRef; ref != nil {
		data, err := p.readCredentials(ctx, ref)
		if err != nil {
			return nil, err
		}
		cfg.CredentialsJSON = data
	}
	c, err := gceclient.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	p.gce = c
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

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

var _ tenant.Controller = (*Pusher)(nil)
