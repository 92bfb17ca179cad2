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

package readiness

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/neg/pushed"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
)

const (
	// pollRound is how long a NEG's health list serves every Pod that waits in it, and the first retry of a Pod
	// that waits on GCE's health report.
	pollRound = time.Second
	// maxPollBackoff bounds the retries of a Pod that waits on its health: health checks take seconds to a minute.
	maxPollBackoff = 30 * time.Second
)

// Reflector is one tenant's NEG readiness reflector.
type Reflector struct {
	tenant  string
	project string
	// keys are the annotation the reflector reads and the condition it sets.
	keys    negapi.Keys
	timeout time.Duration
	kube    kubernetes.Interface

	pods, services, translations cache.SharedIndexInformer
	podLister                    corelisters.PodLister

	workers  *worker.Queue
	recorder record.EventRecorder
	// warnings records a waiting Pod's Warnings once until they change (frozenWarnings).
	warnings *tenant.Warnings
	polls    *polls
	now      func() time.Time
	// namespacesRead is tenant.Context.NamespacesRead: nil, or whether the informers hold every namespace they read.
	namespacesRead func() bool

	// pushed holds the generations the pusher has pushed and not reported in a status yet (nil: the status alone
	// says what is synced): a Pod is attached as soon as GCE holds it.
	pushed *pushed.Generations

	// waiting holds, by namespace and name, the Pods whose condition is not True yet, and when the reflector first
	// saw each one attached: the Translation and Service events of a namespace look at its waiting Pods again, and
	// the metrics count them.
	mu      sync.Mutex
	waiting map[string]map[string]*waitState
	// count is how many Pods waiting holds.
	count int
}

type waitState struct {
	// attachedAt is when a sync first found the endpoint attached (zero: not yet).
	attachedAt time.Time
}

// New builds the reflector of the tenant c describes; clients gives it the tenant's GCE client for a project (the
// pusher's). It makes no API call.
func New(c *tenant.Context, clients ClientFunc) (*Reflector, error) {
	if c.ProviderConfig == nil || c.ProviderConfig.Spec.GCP == nil {
		return nil, errors.New("neg readiness: the ProviderConfig has no spec.gcp")
	}
	keys := c.Options.NEGKeys.OrDefaults()
	r := &Reflector{
		tenant:   c.Name(),
		keys:     keys,
		project:  c.ProviderConfig.Spec.GCP.ProjectID,
		timeout:  c.Options.NEGReadinessTimeout,
		kube:     c.KubeClient,
		recorder: c.EventRecorder,
		warnings: tenant.NewWarnings(c.EventRecorder),
		now:      time.Now,

		namespacesRead: c.NamespacesRead,
	}
	r.polls = &polls{clients: clients, round: pollRound, now: func() time.Time { return r.now() }}
	var err error
	if r.pods, err = c.Informers.Informer(informerset.Pods); err != nil {
		return nil, fmt.Errorf("neg readiness: %w", err)
	}
	if r.services, err = c.Informers.Informer(informerset.Services); err != nil {
		return nil, fmt.Errorf("neg readiness: %w", err)
	}
	if r.translations, err = c.Informers.Informer(informerset.Translations); err != nil {
		return nil, fmt.Errorf("neg readiness: %w", err)
	}
	r.podLister = corelisters.NewPodLister(r.pods.GetIndexer())
	r.workers = worker.New(worker.Config{
		Tenant:     r.tenant,
		Controller: c.Controller,
		Queue:      "readiness",
		KeyName:    "pod",
		Workers:    c.Workers,
		Sync:       r.sync,
		Retry:      &worker.Retry{RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](pollRound, maxPollBackoff)},
	})
	return r, nil
}

// FollowPushes makes the reflector read, with the Translations' status, the generations the pusher has pushed and
// not reported yet, and look again at the waiting Pods of a Translation's namespace when one is pushed, as on a
// status update. Call it before Start.
func (r *Reflector) FollowPushes(g *pushed.Generations) {
	r.pushed = g
	g.OnPushed(func(tr *mpv1alpha1.Translation) { r.enqueueNamespace(tr) })
}

// Run runs the reflector until ctx ends.
func (r *Reflector) Run(ctx context.Context) { tenant.RunStarter(ctx, r) }

// Start watches the tenant's Pods, Services and Translations and returns; done is called once it has stopped, its
// handlers removed and its series gone (tenant.Starter).
func (r *Reflector) Start(ctx context.Context, done func()) {
	for _, w := range []struct {
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}{{r.pods, podEvents{r}}, {r.services, namespaceEvents{r}}, {r.translations, namespaceEvents{r}}} {
		if err := r.workers.Watch(w.informer, w.handler); err != nil {
			klog.FromContext(ctx).Error(err, "Could not start the NEG readiness reflector")
			r.workers.Close(ctx)
			done()
			return
		}
	}
	r.workers.Start(ctx, worker.RunOptions{}, func() {
		r.mu.Lock()
		r.waiting, r.count = nil, 0
		r.mu.Unlock()
		metrics.NEGReadinessPodsWaiting.Delete(r.tenant)
		done()
	})
}

// gated reports whether the Pod declares the gate and its condition is not True yet: the only Pods the reflector
// looks at.
func (r *Reflector) gated(pod *corev1.Pod) bool {
	if !r.keys.DeclaresGate(pod) {
		return false
	}
	c := r.keys.Condition(pod)
	return c == nil || c.Status != corev1.ConditionTrue
}

// podEvents enqueues the Pods that declare the gate and wait for it; a deleted one too, so that its sync forgets it.
type podEvents struct{ r *Reflector }

func (e podEvents) OnAdd(obj any, _ bool) {
	if pod, ok := obj.(*corev1.Pod); ok && e.r.gated(pod) {
		e.r.workers.AddObject(pod)
	}
}

func (e podEvents) OnUpdate(oldObj, newObj any) {
	if worker.IsResync(oldObj, newObj) {
		return
	}
	if pod, ok := newObj.(*corev1.Pod); ok && e.r.gated(pod) {
		e.r.workers.AddObject(pod)
	}
}

func (e podEvents) OnDelete(obj any) {
	if pod, ok := worker.LastState(obj).(*corev1.Pod); ok && e.r.isWaiting(pod.Namespace, pod.Name) {
		e.r.workers.AddObject(pod)
	}
}

// namespaceEvents looks again at the waiting Pods of the namespace of a Service or a Translation that changed: the
// pusher's attach shows in a Translation's status, and a Service may start or stop selecting a Pod.
type namespaceEvents struct{ r *Reflector }

func (e namespaceEvents) OnAdd(obj any, _ bool) { e.r.enqueueNamespace(obj) }
func (e namespaceEvents) OnUpdate(oldObj, newObj any) {
	if !worker.IsResync(oldObj, newObj) {
		e.r.enqueueNamespace(newObj)
	}
}
func (e namespaceEvents) OnDelete(obj any) { e.r.enqueueNamespace(worker.LastState(obj)) }

func (r *Reflector) enqueueNamespace(obj any) {
	o, ok := obj.(interface{ GetNamespace() string })
	if !ok {
		return
	}
	ns := o.GetNamespace()
	r.mu.Lock()
	names := make([]string, 0, len(r.waiting[ns]))
	for name := range r.waiting[ns] {
		names = append(names, name)
	}
	r.mu.Unlock()
	for _, name := range names {
		r.workers.Add(ns + "/" + name)
	}
}

func (r *Reflector) isWaiting(ns, name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.waiting[ns][name]
	return ok
}

// wait records that the Pod waits, and whether it is attached now; it returns the wait's state.
func (r *Reflector) wait(ns, name string, attached bool) waitState {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.waiting == nil {
		r.waiting = map[string]map[string]*waitState{}
	}
	if r.waiting[ns] == nil {
		r.waiting[ns] = map[string]*waitState{}
	}
	w := r.waiting[ns][name]
	if w == nil {
		w = &waitState{}
		r.waiting[ns][name] = w
		r.count++
		metrics.NEGReadinessPodsWaiting.Set(float64(r.count), r.tenant)
	}
	if attached && w.attachedAt.IsZero() {
		w.attachedAt = r.now()
	}
	return *w
}

// forget drops a Pod that no longer waits (ready, gone, or no longer declaring the gate) and returns its state.
func (r *Reflector) forget(ns, name string) waitState {
	r.warnings.Forget(ns + "/" + name)
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.waiting[ns][name]
	if w == nil {
		return waitState{}
	}
	delete(r.waiting[ns], name)
	if len(r.waiting[ns]) == 0 {
		delete(r.waiting, ns)
	}
	r.count--
	metrics.NEGReadinessPodsWaiting.Set(float64(r.count), r.tenant)
	return *w
}

var _ tenant.Starter = (*Reflector)(nil)
