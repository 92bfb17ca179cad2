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

package namespaceproject

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	rancherv3 "github.com/multiproject/api/rancher/management/v3"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"
	rancherlisters "github.com/multiproject/client-go/listers/management/v3"
)

// Reasons of the NamespaceProjectReady condition that the controller reports itself.
const (
	// ConditionReasonRunning (True): the controller assigns namespaces.
	ConditionReasonRunning = "Running"
	// ConditionReasonRancherUnreachable (False): Rancher's management cluster does not answer, or does not serve
	// Projects; nothing is assigned or moved until it does.
	ConditionReasonRancherUnreachable = "RancherUnreachable"
	// ConditionReasonRancherForbidden (False): Rancher's management cluster refuses the kubeconfig's user (401 or
	// 403); nothing is assigned or moved until it accepts it.
	ConditionReasonRancherForbidden = "RancherForbidden"
	// ConditionReasonCredentialsUnavailable (False): the kubeconfig Secret cannot be read, or holds no usable
	// kubeconfig; nothing is assigned or moved until it does.
	ConditionReasonCredentialsUnavailable = "CredentialsUnavailable"
)

// How often the kubeconfig Secret is read again: every kubeconfigRefresh while the management cluster answers, so a
// rotated kubeconfig is used within a minute, and every kubeconfigRetry while it does not, so an operator's fix is
// picked up soon. One get of one Secret per tenant; RBAC allows no watch. kubeconfigRetry also spaces the new
// connections made after outages.
const (
	defaultKubeconfigRefresh = time.Minute
	defaultKubeconfigRetry   = 10 * time.Second
)

type sourceState int

const (
	// stateConnecting: a connection's informer has not got its first list yet (at start, after the kubeconfig
	// changed, after an outage); nothing is decided and the condition is left as it was.
	stateConnecting sourceState = iota
	// stateReady: the connection's informer holds its list and no list or watch failed since; decisions are made
	// from its cache.
	stateReady
	// stateFailed: a list or watch failed, or there is no usable kubeconfig; nothing is decided.
	stateFailed
)

// sourceStatus is what the controller reports of the management cluster.
type sourceStatus struct {
	state   sourceState
	server  string
	reason  string
	message string
}

// managementCluster is the tenant's own Project informer on Rancher's management cluster, for a controller that
// runs in a downstream cluster: it reads the kubeconfig Secret, lists and watches the Projects of the tenant's
// cluster namespace there with a client of its own, tells the controller whether that cache may be decided on,
// and starts over with a new connection when the Secret's kubeconfig changes.
//
// A connection that failed is not trusted again when its informer recovers: the informer's cache is refilled only
// after its relist has been processed, and a decision made in between could use a Project deleted during the outage
// or miss one created. The informer's first success after a failure only says the cluster answers again; the
// connection is then replaced, and the new one is ready once its informer has synced (HasSynced).
type managementCluster struct {
	clusterID string
	ref       mpv1alpha1.SecretKeyReference
	secrets   corev1client.SecretsGetter
	userAgent string
	// handler receives the Project events of every connection.
	handler cache.ResourceEventHandler
	// changed is called after the status changed; the controller reports it and, once ready, decides again.
	changed   func()
	newClient func(*rest.Config) (mpclientset.Interface, error)
	refresh   time.Duration
	retry     time.Duration

	// wake tells run that a connection wants replacing.
	wake chan struct{}

	mu sync.Mutex
	// gen numbers the connections; what an older connection observes is ignored.
	gen    int
	status sourceStatus
	lister rancherlisters.ProjectNamespaceLister
	// synced: the current connection's informer has synced. replace: it failed after that, and answers again.
	synced  bool
	replace bool
}

func newManagementCluster(clusterID string, ref mpv1alpha1.SecretKeyReference, secrets corev1client.SecretsGetter, userAgent string,
	handler cache.ResourceEventHandler, changed func()) *managementCluster {
	return &managementCluster{
		clusterID: clusterID,
		ref:       ref,
		secrets:   secrets,
		userAgent: userAgent,
		handler:   handler,
		changed:   changed,
		newClient: func(cfg *rest.Config) (mpclientset.Interface, error) { return mpclientset.NewForConfig(cfg) },
		refresh:   defaultKubeconfigRefresh,
		retry:     defaultKubeconfigRetry,
		wake:      make(chan struct{}, 1),
	}
}

// projects returns the lister of the cluster's Projects, and false while the management cluster cannot be read:
// its cache may then miss changes, and nothing may be decided on it.
func (m *managementCluster) projects() (rancherlisters.ProjectNamespaceLister, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lister, m.status.state == stateReady
}

func (m *managementCluster) currentStatus() sourceStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.status
}

// run keeps a connection to the management cluster until ctx ends, and returns once its informer has stopped and
// its handler is removed.
func (m *managementCluster) run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("kubeconfigSecret", m.ref.Namespace+"/"+m.ref.Name)
	ctx = klog.NewContext(ctx, logger)
	var conn *connection
	var connected time.Time
	defer func() { conn.stop() }()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.wake:
			// A recovered connection is replaced at the next tick, and connections are made at most every retry.
			timer.Reset(max(0, m.retry-time.Since(connected)))
			continue
		case <-timer.C:
		}
		data, err := m.readKubeconfig(ctx)
		var unusable unusableSecretError
		switch {
		case ctx.Err() != nil:
			return
		case err == nil && conn != nil && bytes.Equal(data, conn.kubeconfig) && !m.wantsReplacing(conn.gen):
			// Unchanged: the informer retries on its own with backoff if the cluster does not answer.
		case err == nil:
			if conn != nil {
				if bytes.Equal(data, conn.kubeconfig) {
					logger.Info("Rancher's management cluster answers again; connecting anew to read its Projects afresh")
				} else {
					logger.Info("The kubeconfig Secret changed; connecting to Rancher's management cluster anew")
				}
				conn.stop()
				conn = nil
			}
			connected = time.Now()
			if conn, err = m.connect(ctx, data); err != nil {
				m.fail(fmt.Sprintf("kubeconfig Secret %s/%s key %q: %v", m.ref.Namespace, m.ref.Name, m.ref.Key, err))
			}
		case errors.As(err, &unusable) || conn == nil:
			// The Secret is gone, unreadable or broken: its old content is no longer what the operator wants used.
			conn.stop()
			conn = nil
			m.fail(err.Error())
		default:
			// A failed read (the local API server is busy) says nothing about the kubeconfig: keep the connection.
			logger.Error(err, "Could not read the kubeconfig Secret; keeping the current connection")
		}
		wait := m.retry
		if m.currentStatus().state == stateReady {
			wait = m.refresh
		}
		timer.Reset(wait)
	}
}

// unusableSecretError says the kubeconfig Secret is missing, unreadable or empty: a definite answer, unlike a
// failed request.
type unusableSecretError struct{ error }

func (m *managementCluster) readKubeconfig(ctx context.Context) ([]byte, error) {
	ref := m.ref
	secret, err := m.secrets.Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, unusableSecretError{fmt.Errorf("kubeconfig Secret %s/%s does not exist", ref.Namespace, ref.Name)}
	case apierrors.IsForbidden(err):
		return nil, unusableSecretError{fmt.Errorf("not allowed to read kubeconfig Secret %s/%s (see manifests/rbac/namespace-project.yaml): %w",
			ref.Namespace, ref.Name, err)}
	case err != nil:
		return nil, fmt.Errorf("reading kubeconfig Secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	data := secret.Data[ref.Key]
	if len(data) == 0 {
		return nil, unusableSecretError{fmt.Errorf("kubeconfig Secret %s/%s has no key %q", ref.Namespace, ref.Name, ref.Key)}
	}
	return data, nil
}

// wantsReplacing reports whether connection gen failed after it had synced and answers again.
func (m *managementCluster) wantsReplacing(gen int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gen == gen && m.replace
}

// connection is one informer on the management cluster, built from one kubeconfig.
type connection struct {
	gen          int
	kubeconfig   []byte
	informer     cache.SharedIndexInformer
	registration cache.ResourceEventHandlerRegistration
	cancel       context.CancelFunc
	done         chan struct{}
}

// stop removes the handler, stops the informer and waits for it; a nil connection is a no-op.
func (c *connection) stop() {
	if c == nil {
		return
	}
	_ = c.informer.RemoveEventHandler(c.registration)
	c.cancel()
	<-c.done
}

// connect starts an informer on the Projects of the cluster's namespace in the management cluster the kubeconfig
// names. Until the informer has synced nothing is decided.
func (m *managementCluster) connect(ctx context.Context, kubeconfig []byte) (*connection, error) {
	cfg, err := managementClusterConfig(kubeconfig, m.userAgent)
	if err != nil {
		return nil, err
	}
	client, err := m.newClient(cfg)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.gen++
	gen := m.gen
	m.mu.Unlock()

	informer := cache.NewSharedIndexInformerWithOptions(m.listWatch(gen, client), &rancherv3.Project{}, cache.SharedIndexInformerOptions{
		Indexers:          cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		ObjectDescription: "Projects of Rancher's management cluster",
	})
	// Failures are reported in the condition, once per change; the default handler would log every retry.
	if err := informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, _ *cache.Reflector, err error) {
		klog.FromContext(ctx).V(4).Info("Listing or watching Projects of Rancher's management cluster failed", "err", err)
	}); err != nil {
		return nil, err
	}
	registration, err := informer.AddEventHandler(m.handler)
	if err != nil {
		return nil, err
	}

	m.mu.Lock()
	if m.gen == gen {
		m.lister = rancherlisters.NewProjectLister(informer.GetIndexer()).Projects(m.clusterID)
		// The condition keeps saying what it said (a failure, or Starting) until this connection is ready or fails.
		m.status.state, m.status.server = stateConnecting, cfg.Host
		m.synced, m.replace = false, false
	}
	m.mu.Unlock()

	informerCtx, cancel := context.WithCancel(ctx)
	c := &connection{gen: gen, kubeconfig: kubeconfig, informer: informer, registration: registration, cancel: cancel, done: make(chan struct{})}
	var informers sync.WaitGroup
	informers.Go(func() { informer.RunWithContext(informerCtx) })
	informers.Go(func() {
		if cache.WaitForCacheSync(informerCtx.Done(), informer.HasSynced) {
			m.informerSynced(informerCtx, gen)
		}
	})
	go func() {
		informers.Wait()
		close(c.done)
	}()
	klog.FromContext(ctx).Info("Connecting to Rancher's management cluster", "server", cfg.Host, "rancherCluster", m.clusterID)
	return c, nil
}

// listWatch lists and watches the cluster's Projects through client and records every outcome in the status of
// connection gen.
func (m *managementCluster) listWatch(gen int, client mpclientset.Interface) cache.ListerWatcher {
	projects := client.ManagementV3().Projects(m.clusterID)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
			list, err := projects.List(ctx, options)
			m.observe(ctx, gen, err)
			if err != nil {
				return nil, err
			}
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
			w, err := projects.Watch(ctx, options)
			if err != nil {
				m.observe(ctx, gen, err)
				return nil, err
			}
			if options.SendInitialEvents == nil || !*options.SendInitialEvents {
				m.observe(ctx, gen, nil)
				return w, nil
			}
			// A streamed list: it has succeeded once the bookmark that ends the initial events came.
			return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
				if e.Type == watch.Bookmark && initialEventsEnd(e.Object) {
					m.observe(ctx, gen, nil)
				}
				return e, true
			}), nil
		},
	}
	// Keeps a fake clientset's opt-out of streamed lists (unit tests); real clients stream.
	return cache.ToListWatcherWithWatchListSemantics(lw, client)
}

func initialEventsEnd(obj runtime.Object) bool {
	m, err := meta.Accessor(obj)
	return err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true"
}

// observe records the outcome of a list or watch of connection gen (the informer's own retries after an expired
// resourceVersion, and a stop, are not outcomes). A failure is reported at once. A success after a failure says the
// cluster answers again: before the informer synced, its first list is on the way; after, the connection is
// replaced (see managementCluster).
func (m *managementCluster) observe(ctx context.Context, gen int, err error) {
	if err != nil && (ctx.Err() != nil || apierrors.IsResourceExpired(err) || apierrors.IsGone(err)) {
		return
	}
	m.mu.Lock()
	if gen != m.gen {
		m.mu.Unlock()
		return
	}
	prev := m.status
	next := prev
	wake := false
	switch {
	case err != nil:
		next.state = stateFailed
		next.reason, next.message = m.classify(prev.server, err)
		if prev.state == stateFailed && prev.reason == next.reason {
			// Keep the first message of a failure: retries alternate list and watch, whose errors name either.
			next.message = prev.message
		}
	case prev.state == stateFailed && !m.synced:
		next.state = stateConnecting
	case prev.state == stateFailed:
		wake = !m.replace
		m.replace = true
	}
	m.status = next
	m.mu.Unlock()
	if wake {
		select {
		case m.wake <- struct{}{}:
		default:
		}
	}
	if next.state == stateFailed && next != prev {
		klog.FromContext(ctx).Info("Cannot read Projects from Rancher's management cluster; no namespace is assigned or moved meanwhile",
			"server", next.server, "reason", next.reason, "err", err)
		m.changed()
	}
}

// informerSynced makes connection gen ready unless it failed meanwhile.
func (m *managementCluster) informerSynced(ctx context.Context, gen int) {
	m.mu.Lock()
	if gen != m.gen {
		m.mu.Unlock()
		return
	}
	m.synced = true
	ready := m.status.state == stateConnecting
	if ready {
		m.status = sourceStatus{state: stateReady, server: m.status.server}
	}
	server := m.status.server
	m.mu.Unlock()
	if ready {
		klog.FromContext(ctx).Info("Reading Projects from Rancher's management cluster", "server", server, "rancherCluster", m.clusterID)
		m.changed()
	}
}

// fail records that there is no usable kubeconfig, and drops the connection's cache.
func (m *managementCluster) fail(message string) {
	next := sourceStatus{state: stateFailed, reason: ConditionReasonCredentialsUnavailable,
		message: message + "; no namespace is assigned or moved until it can be used"}
	m.mu.Lock()
	m.gen++ // whatever an older connection still observes is stale
	prev := m.status
	m.status = next
	m.lister = nil
	m.synced, m.replace = false, false
	m.mu.Unlock()
	if next != prev {
		m.changed()
	}
}

// classify turns a failed list or watch into a condition reason and message.
func (m *managementCluster) classify(server string, err error) (string, string) {
	const meanwhile = "; no namespace is assigned or moved until it does"
	switch {
	case apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err):
		return ConditionReasonRancherForbidden, fmt.Sprintf("Rancher's management cluster %s refuses the kubeconfig of Secret %s/%s: %v; "+
			"it needs get, list and watch on projects.management.cattle.io in namespace %s (docs/namespace-project.md)%s",
			server, m.ref.Namespace, m.ref.Name, err, m.clusterID, meanwhile)
	case apierrors.IsNotFound(err):
		return ConditionReasonRancherUnreachable, fmt.Sprintf("Rancher's management cluster %s does not serve projects.management.cattle.io/v3: %v%s",
			server, err, meanwhile)
	}
	// A url.Error names the request's URL, which differs between list and watch; the cause is what matters.
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		err = urlErr.Err
	}
	return ConditionReasonRancherUnreachable, fmt.Sprintf("cannot reach Rancher's management cluster %s: %v%s", server, err, meanwhile)
}
