package providerconfig

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"
	mpscheme "github.com/multiproject/client-go/clientset/versioned/scheme"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
	"github.com/multiproject/multiproject-controller-manager/pkg/tenancy"
)

// Scheme knows the built-in kinds and ours (ProviderConfig, Translation, Rancher Project, Pangolin kinds), so that
// Events can be recorded on any object a controller handles.
var Scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(Scheme))
	utilruntime.Must(mpscheme.AddToScheme(Scheme))
}

// Condition reasons the manager itself sets on a controller's condition.
const (
	ReasonStarting          = "Starting"
	ReasonAPINotServed      = "APINotServed"
	ReasonFailedToStart     = "FailedToStart"
	ReasonControllerDisable = "ControllerDisabled"
)

// NamedFactory is one kind of per-tenant controller enabled in this process.
type NamedFactory struct {
	Name    string
	Workers int
	tenant.Factory
}

// ManagerConfig is what a Manager needs.
type ManagerConfig struct {
	KubeClient         kubernetes.Interface
	MultiprojectClient mpclientset.Interface
	// Router hands out the tenants' filtered views of the shared informers.
	Router *tenancy.Router
	// Shared returns unfiltered shared informers, for Informers.Shared.
	Shared SharedInformerGetter
	// APIServed reports whether an API a controller requires is served and its informer synced and routed. nil
	// means every API is.
	APIServed func(schema.GroupVersionResource) bool
	// Enabled are the controllers --controllers enables, in start order.
	Enabled []NamedFactory
	// Disabled are known controllers that --controllers turns off; a tenant that configures one is told so.
	Disabled []NamedFactory
	LabelKey string
	Options  tenant.Options
	// EventSink receives the Events of every tenant's controllers.
	EventSink record.EventSink
	// StopTimeout bounds the wait for one controller to return from Run; past it the manager goes on (and logs),
	// so one stuck controller cannot block the others.
	StopTimeout time.Duration
	// OnConditionChange is called with a tenant's name when one of its controllers reports a new condition. The
	// ProviderConfig controller enqueues the tenant to write its status.
	OnConditionChange func(tenant string)
}

// Manager is the ControllersManager: it runs each tenant's controllers. Calls for one tenant must not run
// concurrently (the ProviderConfig controller's queue guarantees it); calls for different tenants may.
type Manager struct {
	cfg ManagerConfig

	mu      sync.Mutex
	tenants map[string]*tenantControllers
}

type tenantControllers struct {
	running map[string]*controllerRun
	// waiting holds the manager's own condition of a configured controller that is not running.
	waiting map[string]metav1.Condition
}

type controllerRun struct {
	factory    NamedFactory
	section    any
	tctx       *tenant.Context
	cancel     context.CancelFunc
	done       chan struct{}
	informers  *controllerInformers
	broadcast  record.EventBroadcaster
	condition  *conditionState
	generation int64
}

// NewManager returns a Manager with no tenant running.
func NewManager(cfg ManagerConfig) *Manager {
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = 30 * time.Second
	}
	if cfg.OnConditionChange == nil {
		cfg.OnConditionChange = func(string) {}
	}
	return &Manager{cfg: cfg, tenants: map[string]*tenantControllers{}}
}

// locked runs fn under the manager's lock, which guards the tenants map and every tenant's maps. Starting and
// stopping controllers happens outside it, so one slow tenant never blocks another.
func (m *Manager) locked(fn func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	fn()
}

func (m *Manager) setWaiting(t *tenantControllers, name string, c metav1.Condition) {
	m.locked(func() { t.waiting[name] = c })
}

func (m *Manager) tenant(name string) *tenantControllers {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tenants[name]
	if !ok {
		t = &tenantControllers{running: map[string]*controllerRun{}, waiting: map[string]metav1.Condition{}}
		m.tenants[name] = t
	}
	return t
}

// Ensure makes the tenant's running controllers match pc, which is not being deleted and carries the finalizer:
// it starts the enabled controllers the spec configures, restarts those whose spec section changed, and stops
// those no longer configured. ctx is the global (leader) stop: controllers run on a context derived from it, so
// either ctx or the tenant's own stop ends them. It returns the controllers' conditions; an error means some
// controller could not be built and Ensure should be retried.
func (m *Manager) Ensure(ctx context.Context, pc *mpv1alpha1.ProviderConfig) ([]metav1.Condition, error) {
	logger := klog.FromContext(ctx).WithValues("providerConfig", pc.Name)
	t := m.tenant(pc.Name)
	var errs []string
	for _, f := range m.cfg.Enabled {
		section := f.Section(&pc.Spec)
		var run *controllerRun
		m.locked(func() { run = t.running[f.Name] })
		if run != nil && (section == nil || !apiequality.Semantic.DeepEqual(section, run.section)) {
			why := "spec section changed"
			if section == nil {
				why = "spec section removed"
			}
			logger.Info("Stopping tenant controller", "controller", f.Name, "reason", why)
			m.stopRun(ctx, pc.Name, run)
			m.locked(func() { delete(t.running, f.Name) })
			run = nil
		}
		m.locked(func() { delete(t.waiting, f.Name) })
		if section == nil || run != nil {
			continue
		}
		if missing := m.missingAPIs(f.RequiredAPIs); len(missing) > 0 {
			m.setWaiting(t, f.Name, metav1.Condition{Type: f.ConditionType, Status: metav1.ConditionFalse, Reason: ReasonAPINotServed,
				Message: fmt.Sprintf("waiting for the cluster to serve %s; the controller starts as soon as it does", strings.Join(missing, ", "))})
			continue
		}
		run, err := m.startRun(ctx, pc, f, section)
		if err != nil {
			logger.Error(err, "Could not start tenant controller", "controller", f.Name)
			m.setWaiting(t, f.Name, metav1.Condition{Type: f.ConditionType, Status: metav1.ConditionFalse, Reason: ReasonFailedToStart, Message: err.Error()})
			errs = append(errs, fmt.Sprintf("%s: %v", f.Name, err))
			continue
		}
		logger.Info("Started tenant controller", "controller", f.Name, "workers", f.Workers)
		m.locked(func() { t.running[f.Name] = run })
	}
	for _, f := range m.cfg.Disabled {
		if f.Section(&pc.Spec) != nil {
			m.setWaiting(t, f.Name, metav1.Condition{Type: f.ConditionType, Status: metav1.ConditionUnknown, Reason: ReasonControllerDisable,
				Message: fmt.Sprintf("the spec configures %s, but this manager runs with --controllers that disable it", f.Name)})
		} else {
			m.locked(func() { delete(t.waiting, f.Name) })
		}
	}
	conds := m.conditions(pc.Name)
	if len(errs) > 0 {
		return conds, fmt.Errorf("tenant %s: %s", pc.Name, strings.Join(errs, "; "))
	}
	return conds, nil
}

// Cleanup runs for a ProviderConfig being deleted. While a running controller reports pending state outside the
// cluster (Factory.Pending) every controller keeps running, and Cleanup returns what is pending. Otherwise it stops
// the tenant's controllers and returns "": the finalizer may go.
func (m *Manager) Cleanup(ctx context.Context, pc *mpv1alpha1.ProviderConfig) (string, error) {
	t := m.tenant(pc.Name)
	var pending []string
	for _, f := range m.cfg.Enabled {
		var run *controllerRun
		m.locked(func() { run = t.running[f.Name] })
		if run == nil || f.Pending == nil {
			continue
		}
		p, err := f.Pending(ctx, run.tctx)
		if err != nil {
			return "", fmt.Errorf("%s: checking what is pending: %w", f.Name, err)
		}
		if p != "" {
			pending = append(pending, f.Name+": "+p)
		}
	}
	if len(pending) > 0 {
		return strings.Join(pending, "; "), nil
	}
	m.Stop(ctx, pc.Name)
	return "", nil
}

// Stop stops every controller of the tenant and forgets it.
func (m *Manager) Stop(ctx context.Context, name string) {
	m.mu.Lock()
	t, ok := m.tenants[name]
	delete(m.tenants, name)
	m.mu.Unlock()
	if !ok {
		return
	}
	for _, run := range t.running {
		klog.FromContext(ctx).Info("Stopping tenant controller", "providerConfig", name, "controller", run.factory.Name)
		m.stopRun(ctx, name, run)
	}
}

// StopAll stops every tenant's controllers concurrently (on shutdown).
func (m *Manager) StopAll(ctx context.Context) {
	var wg sync.WaitGroup
	for _, name := range m.Tenants() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.Stop(ctx, name)
		}()
	}
	wg.Wait()
}

// Tenants lists the tenants the manager knows, sorted.
func (m *Manager) Tenants() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.tenants))
	for name := range m.tenants {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Running lists the controllers running for a tenant, sorted.
func (m *Manager) Running(name string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tenants[name]
	if !ok {
		return nil
	}
	out := make([]string, 0, len(t.running))
	for c := range t.running {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// Registrations counts the informer handlers held by every running controller, for leak tests.
func (m *Manager) Registrations() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, t := range m.tenants {
		for _, run := range t.running {
			n += run.informers.registrations()
		}
	}
	return n
}

func (m *Manager) missingAPIs(required []schema.GroupVersionResource) []string {
	if m.cfg.APIServed == nil {
		return nil
	}
	var missing []string
	for _, gvr := range required {
		if !m.cfg.APIServed(gvr) {
			missing = append(missing, gvr.GroupResource().String()+"/"+gvr.Version)
		}
	}
	return missing
}

func (m *Manager) startRun(ctx context.Context, pc *mpv1alpha1.ProviderConfig, f NamedFactory, section any) (*controllerRun, error) {
	views, err := m.cfg.Router.Tenant(pc.Name)
	if err != nil {
		return nil, err
	}
	informers := &controllerInformers{views: views, shared: m.cfg.Shared}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(m.cfg.EventSink)
	condition := &conditionState{conditionType: f.ConditionType, notify: func() { m.cfg.OnConditionChange(pc.Name) }}
	tctx := &tenant.Context{
		ProviderConfig:         pc.DeepCopy(),
		ProviderConfigLabelKey: m.cfg.LabelKey,
		KubeClient:             m.cfg.KubeClient,
		MultiprojectClient:     m.cfg.MultiprojectClient,
		Informers:              informers,
		EventRecorder:          broadcaster.NewRecorder(Scheme, corev1.EventSource{Component: "multiproject-" + f.Name}),
		Condition:              condition,
		Options:                m.cfg.Options,
		Workers:                f.Workers,
	}
	runCtx, cancel := context.WithCancel(klog.NewContext(ctx, klog.FromContext(ctx).WithValues("providerConfig", pc.Name, "controller", f.Name)))
	controller, err := f.New(runCtx, tctx)
	if err != nil {
		cancel()
		informers.close()
		broadcaster.Shutdown()
		return nil, err
	}
	run := &controllerRun{factory: f, section: section, tctx: tctx, cancel: cancel, done: make(chan struct{}),
		informers: informers, broadcast: broadcaster, condition: condition, generation: pc.Generation}
	metrics.ControllersRunning.WithLabelValues(pc.Name, f.Name).Set(1)
	go func() {
		defer close(run.done)
		defer utilruntime.HandleCrashWithContext(runCtx)
		controller.Run(runCtx)
	}()
	return run, nil
}

// stopRun ends one controller: cancel its context (the tenant's own stop), wait for Run to return, then remove its
// handlers, stop its event broadcaster and drop its metric series.
func (m *Manager) stopRun(ctx context.Context, tenantName string, run *controllerRun) {
	run.cancel()
	timer := time.NewTimer(m.cfg.StopTimeout)
	select {
	case <-run.done:
	case <-timer.C:
		klog.FromContext(ctx).Error(nil, "Tenant controller did not stop in time; detaching it anyway",
			"providerConfig", tenantName, "controller", run.factory.Name, "timeout", m.cfg.StopTimeout)
	}
	timer.Stop()
	run.informers.close()
	run.broadcast.Shutdown()
	metrics.ForgetController(tenantName, run.factory.Name)
}

// conditions returns the conditions of every configured controller of the tenant, sorted by type.
func (m *Manager) conditions(name string) []metav1.Condition {
	t := m.tenant(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []metav1.Condition
	for _, run := range t.running {
		out = append(out, run.condition.get())
	}
	for _, c := range t.waiting {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}

// ConditionTypes are the condition types of every known controller, so the status writer can remove the condition
// of a controller the spec no longer configures.
func (m *Manager) ConditionTypes() []string {
	var out []string
	for _, f := range append(append([]NamedFactory{}, m.cfg.Enabled...), m.cfg.Disabled...) {
		out = append(out, f.ConditionType)
	}
	return out
}

// conditionState is a running controller's ConditionReporter.
type conditionState struct {
	conditionType string
	notify        func()

	mu       sync.Mutex
	reported bool
	status   metav1.ConditionStatus
	reason   string
	message  string
}

func (c *conditionState) Report(status metav1.ConditionStatus, reason, message string) {
	c.mu.Lock()
	if c.reported && c.status == status && c.reason == reason && c.message == message {
		c.mu.Unlock()
		return
	}
	c.reported, c.status, c.reason, c.message = true, status, reason, message
	c.mu.Unlock()
	c.notify()
}

func (c *conditionState) get() metav1.Condition {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.reported {
		return metav1.Condition{Type: c.conditionType, Status: metav1.ConditionUnknown, Reason: ReasonStarting,
			Message: "the controller is starting and has not reported yet"}
	}
	return metav1.Condition{Type: c.conditionType, Status: c.status, Reason: c.reason, Message: c.message}
}
