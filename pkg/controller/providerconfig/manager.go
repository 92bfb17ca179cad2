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

package providerconfig

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
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

	"github.com/multiproject/multiproject-controller-manager/pkg/apibudget"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
	"github.com/multiproject/multiproject-controller-manager/pkg/tenancy"
	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
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
	// ReasonStopping: the controller's previous instance was told to stop but has not returned; the new one (or the
	// cleanup) starts once it has, so two instances never act at once.
	ReasonStopping = "PreviousInstanceStopping"
	// ReasonCleaningUp: the tenant no longer configures the controller (or is being deleted) and its cleanup is
	// removing what it made outside the cluster; the message says what is left.
	ReasonCleaningUp = "CleaningUp"
	// ReasonCleanupBlocked: cleanup is needed but cannot run here (the controller is disabled by --controllers, or
	// an API it needs is not served); the finalizer stays until it can, or until the operator abandons it.
	ReasonCleanupBlocked = "CleanupBlocked"
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
	// so one stuck controller cannot block the others, but it starts no new instance of that controller for the
	// tenant until the old one has returned.
	StopTimeout time.Duration
	// OnConditionChange is called with a tenant's name when one of its controllers reports a new condition, or a
	// stopped instance finally returned. The ProviderConfig controller enqueues the tenant.
	OnConditionChange func(tenant string)
}

// Manager is the ControllersManager: it runs each tenant's controllers and their cleanups. Calls for one tenant
// must not run concurrently (the ProviderConfig controller's queue guarantees it); calls for different tenants may.
type Manager struct {
	cfg ManagerConfig

	mu      sync.Mutex
	tenants map[string]*tenantControllers
	// runsParent is the Done channel of the context whose end fires every run's StopSignal (StopRunsWhenDone); nil
	// when none is bound, and each run's signal watches its parent itself.
	runsParent <-chan struct{}

	// events is one Event broadcaster for every tenant's controllers, started with the first controller and shut
	// down by StopAll: a broadcaster per controller cost three goroutines for each controller of each tenant, idle
	// or not. Each controller (neg, ...) has its own recorder (its own event source), shared by every tenant.
	// Guarded by eventsMu.
	eventsMu  sync.Mutex
	events    record.EventBroadcaster
	recorders map[string]record.EventRecorder
}

type tenantControllers struct {
	// abandoned mirrors the abandon annotation of the ProviderConfig last synced, for
	// tenant.Context.CloudResourcesAbandoned.
	abandoned atomic.Bool
	// running holds the instance of each controller that runs: the controller, or its cleanup. A slice, not a map
	// by name: a tenant runs at most one instance of each of a few controllers.
	running []*controllerRun
	// stopping holds instances told to stop that did not return within the stop timeout.
	stopping map[string]*controllerRun
	// waiting holds the manager's own condition of a configured controller that is not running.
	waiting map[string]metav1.Condition
	// copy is the last controllerCopy handed to the tenant's controllers.
	copy *mpv1alpha1.ProviderConfig
	// forgotten is set when the tenant was stopped while an instance had not returned yet; it is dropped from the
	// manager once that instance returns, unless the tenant is synced again meanwhile.
	forgotten bool
}

// runningInstance returns the instance of the controller that runs, or nil.
func (t *tenantControllers) runningInstance(controller string) *controllerRun {
	for _, run := range t.running {
		if run.controller == controller {
			return run
		}
	}
	return nil
}

// setRunning records run as the instance of its controller that runs, in place of any other.
func (t *tenantControllers) setRunning(run *controllerRun) {
	for i, r := range t.running {
		if r.controller == run.controller {
			t.running[i] = run
			return
		}
	}
	t.running = append(t.running, run)
}

type controllerRun struct {
	// controller is the --controllers name of what runs.
	controller string
	// cleanup is true for an instance built by Factory.Cleanup.
	cleanup bool
	section any
	// cleanupContext is the Context a cleanup was built from, for Factory.Pending; nil for a controller, whose
	// Context is not kept once built (about 250 bytes per controller of every tenant).
	cleanupContext *tenant.Context
	cancel         context.CancelFunc
	// stop fires right after cancel, or when the parent context ends (worker.StopSignal): the bound context's,
	// through fireStopSignals, when stopsWithBound is set.
	stop           *worker.StopSignal
	stopsWithBound bool
	done           chan struct{}
	informers      *controllerInformers
	condition      *conditionState
	generation     int64
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

// recorder returns an EventRecorder for one controller, on the manager's broadcaster.
func (m *Manager) recorder(ctx context.Context, controller string) record.EventRecorder {
	m.eventsMu.Lock()
	defer m.eventsMu.Unlock()
	if m.events == nil {
		// The context gives the broadcaster its logger; its end must not stop it (it is one tenant's).
		m.events = record.NewBroadcaster(record.WithContext(context.WithoutCancel(ctx)))
		m.events.StartRecordingToSink(m.cfg.EventSink)
	}
	// One recorder per controller, shared by every tenant: a recorder holds nothing of a tenant's.
	if r, ok := m.recorders[controller]; ok {
		return r
	}
	if m.recorders == nil {
		m.recorders = map[string]record.EventRecorder{}
	}
	r := m.events.NewRecorder(Scheme, corev1.EventSource{Component: "multiproject-" + controller})
	m.recorders[controller] = r
	return r
}

// locked runs fn under the manager's lock, which guards the tenants map and every tenant's maps. Starting and
// stopping controllers happens outside it, so one slow tenant never blocks another.
func (m *Manager) locked(fn func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	fn()
}

func (m *Manager) setWaiting(t *tenantControllers, name string, c metav1.Condition) {
	m.locked(func() {
		if t.waiting == nil {
			t.waiting = map[string]metav1.Condition{}
		}
		t.waiting[name] = c
	})
}

func (m *Manager) tenant(name string) *tenantControllers {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tenants[name]
	if !ok {
		// stopping and waiting are made by their first entry: most tenants never have one.
		t = &tenantControllers{}
		m.tenants[name] = t
	}
	t.forgotten = false
	return t
}

// Outcome is what one Sync of a tenant came to.
type Outcome struct {
	// Conditions of the controllers the tenant configures or still cleans up, sorted by type.
	Conditions []metav1.Condition
	// Pending says, per controller, what its cleanup still waits for; empty when nothing of the tenant that a
	// cleanup must remove is left outside the cluster.
	Pending []string
	// Abandoned says, per controller, what was given up in this sync at the operator's request.
	Abandoned []string
	// Applied is the status.appliedSpec to write: Record's, less the sections whose cleanup has finished.
	Applied *mpv1alpha1.ProviderConfigSpec
	// BuiltFromSpec is true when every controller the spec configures runs, built from its current section: only
	// then has the manager observed the generation (status.observedGeneration). A controller that waits
	// (PreviousInstanceStopping, APINotServed, FailedToStart) or that this process disables (ControllerDisabled)
	// leaves it false.
	BuiltFromSpec bool
}

// Record returns the status.appliedSpec the tenant needs before its controllers start: the recorded sections, with
// the current section of every enabled controller that has a cleanup and is about to run. The caller writes it
// before calling Sync, so a section is on record before a controller makes anything from it.
func (m *Manager) Record(pc *mpv1alpha1.ProviderConfig) *mpv1alpha1.ProviderConfigSpec {
	applied := &mpv1alpha1.ProviderConfigSpec{}
	if pc.Status.AppliedSpec != nil {
		applied = pc.Status.AppliedSpec.DeepCopy()
	}
	if pc.DeletionTimestamp == nil {
		for _, f := range m.cfg.Enabled {
			if f.Cleans() && f.Section(&pc.Spec) != nil {
				f.CopySection(applied, &pc.Spec)
			}
		}
	}
	return nilIfEmpty(applied)
}

func nilIfEmpty(spec *mpv1alpha1.ProviderConfigSpec) *mpv1alpha1.ProviderConfigSpec {
	if spec == nil || apiequality.Semantic.DeepEqual(*spec, mpv1alpha1.ProviderConfigSpec{}) {
		return nil
	}
	return spec
}

// Sync makes the tenant's controllers match pc, which carries the finalizer (and whose status.appliedSpec holds
// Record's result). For each controller: the spec configures it and pc is not being deleted → it runs, restarted
// when its section changed; otherwise, if it has a cleanup and something is on record, the cleanup runs until
// nothing is left (or the operator abandons it), whether or not the controller ran before. ctx is the global
// (leader) stop: controllers run on a context derived from it, so either ctx or the tenant's own stop ends them.
// An error means some controller could not be built and Sync should be retried.
func (m *Manager) Sync(ctx context.Context, pc *mpv1alpha1.ProviderConfig) (Outcome, error) {
	t := m.tenant(pc.Name)
	t.abandoned.Store(AbandonCovers(pc))
	applied := &mpv1alpha1.ProviderConfigSpec{}
	if pc.Status.AppliedSpec != nil {
		applied = pc.Status.AppliedSpec.DeepCopy()
	}
	var out Outcome
	var errs []string
	for _, f := range m.cfg.Enabled {
		pending, abandoned, err := m.syncController(ctx, pc, t, f, true, applied)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", f.Name, err))
		}
		out.Pending = appendNamed(out.Pending, f.Name, pending)
		out.Abandoned = appendNamed(out.Abandoned, f.Name, abandoned)
	}
	for _, f := range m.cfg.Disabled {
		pending, abandoned, err := m.syncController(ctx, pc, t, f, false, applied)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", f.Name, err))
		}
		out.Pending = appendNamed(out.Pending, f.Name, pending)
		out.Abandoned = appendNamed(out.Abandoned, f.Name, abandoned)
	}
	out.Conditions = m.conditions(pc.Name)
	out.Applied = nilIfEmpty(applied)
	out.BuiltFromSpec = m.builtFromSpec(pc, t)
	if len(errs) > 0 {
		return out, fmt.Errorf("tenant %s: %s", pc.Name, strings.Join(errs, "; "))
	}
	return out, nil
}

// builtFromSpec reports whether every controller pc's spec configures runs (not its cleanup) and was built from
// the spec's section.
func (m *Manager) builtFromSpec(pc *mpv1alpha1.ProviderConfig, t *tenantControllers) bool {
	for _, f := range m.cfg.Disabled {
		if f.Section(&pc.Spec) != nil {
			return false
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range m.cfg.Enabled {
		section := f.Section(&pc.Spec)
		if section == nil {
			continue
		}
		run := t.runningInstance(f.Name)
		if run == nil || run.cleanup || !apiequality.Semantic.DeepEqual(section, run.section) {
			return false
		}
	}
	return true
}

func appendNamed(list []string, name, what string) []string {
	if what == "" {
		return list
	}
	return append(list, name+": "+what)
}

// syncController brings one controller of the tenant in line. It returns what its cleanup still waits for and
// what was abandoned; a section whose cleanup finished is cleared from applied.
func (m *Manager) syncController(ctx context.Context, pc *mpv1alpha1.ProviderConfig, t *tenantControllers, f NamedFactory, enabled bool, applied *mpv1alpha1.ProviderConfigSpec) (pending, abandoned string, err error) {
	logger := klog.FromContext(ctx).WithValues("providerConfig", pc.Name, "controller", f.Name)
	deleting := pc.DeletionTimestamp != nil
	section := f.Section(&pc.Spec)
	var run *controllerRun
	m.locked(func() { run = t.runningInstance(f.Name) })

	if section != nil && !deleting {
		if !enabled {
			m.setWaiting(t, f.Name, metav1.Condition{Type: f.ConditionType, Status: metav1.ConditionUnknown, Reason: ReasonControllerDisable,
				Message: fmt.Sprintf("the spec configures %s, but this manager runs with --controllers that disable it", f.Name)})
			return "", "", nil
		}
		if run != nil && (run.cleanup || !apiequality.Semantic.DeepEqual(section, run.section)) {
			why := "spec section changed"
			if run.cleanup {
				why = "the spec configures it again"
			}
			logger.Info("Stopping tenant controller", "reason", why, "cleanup", run.cleanup)
			m.stopRun(ctx, pc.Name, t, run)
			run = nil
		}
		if run != nil {
			return "", "", nil
		}
		_, err := m.start(ctx, pc, t, f, section, false)
		return "", "", err
	}

	// The tenant no longer configures the controller, or is being deleted.
	if run != nil && !run.cleanup {
		why := "spec section removed"
		if deleting {
			why = "ProviderConfig deleted"
		}
		logger.Info("Stopping tenant controller", "reason", why)
		m.stopRun(ctx, pc.Name, t, run)
		run = nil
	}
	cleanupPC := m.cleanupTarget(pc, f)
	if cleanupPC == nil {
		// Nothing on record that a cleanup would need: the controller never ran for this tenant, or has none.
		m.locked(func() { delete(t.waiting, f.Name) })
		return "", "", nil
	}
	done := func() {
		if run != nil {
			m.stopRun(ctx, pc.Name, t, run)
		}
		f.CopySection(applied, &mpv1alpha1.ProviderConfigSpec{})
		m.locked(func() { delete(t.waiting, f.Name) })
	}

	// Only what is outside the cluster can be abandoned: a controller without Abandon (its cleanup removes
	// objects in the cluster, which can always be removed) cleans up to the end whatever the annotation says.
	if f.Abandon != nil && AbandonCovers(pc) {
		if run != nil {
			m.stopRun(ctx, pc.Name, t, run)
			run = nil
		}
		what, err := m.abandon(ctx, cleanupPC, f)
		if err != nil {
			return "", "", err
		}
		logger.Info("Cleanup abandoned at the operator's request", "abandoned", what)
		done()
		return "", what, nil
	}

	if run == nil {
		blocked := ""
		switch missing := m.missingAPIs(f, &cleanupPC.Spec); {
		case !enabled:
			blocked = "this manager runs with --controllers that disable " + f.Name
		case len(missing) > 0:
			blocked = "the cluster does not serve " + strings.Join(missing, ", ")
		}
		if blocked != "" {
			left, err := m.look(ctx, cleanupPC, f)
			if err != nil {
				left = "cannot tell what is left (" + err.Error() + ")"
			}
			if left == "" {
				done()
				return "", "", nil
			}
			msg := fmt.Sprintf("cleanup cannot run: %s; left: %s; %s", blocked, left, abandonHint(pc, f))
			m.setWaiting(t, f.Name, metav1.Condition{Type: f.ConditionType, Status: metav1.ConditionFalse, Reason: ReasonCleanupBlocked, Message: msg})
			return msg, "", nil
		}
		var err error
		if run, err = m.start(ctx, cleanupPC, t, f, f.Section(&cleanupPC.Spec), true); err != nil || run == nil {
			what := "waiting for the cleanup to start"
			if err != nil {
				what = "the cleanup could not start: " + err.Error()
			}
			return what, "", err
		}
	}
	left, err := f.Pending(ctx, run.cleanupContext)
	if err != nil {
		return "checking what is left: " + err.Error(), "", err
	}
	if left == "" {
		logger.Info("Tenant controller cleaned up")
		done()
		return "", "", nil
	}
	run.condition.cleaningUp(left)
	if f.Abandon == nil && AbandonCovers(pc) {
		return left + " (in the cluster: the abandon annotation does not cover it)", "", nil
	}
	return left, "", nil
}

// AbandonCovers reports whether the abandon annotation covers pc's current generation: it is set, and the
// decision the manager recorded when it first saw it (status.abandon) is of this generation. An annotation left in
// place from an earlier deletion or migration covers nothing of a later one.
func AbandonCovers(pc *mpv1alpha1.ProviderConfig) bool {
	return pc.Annotations[mpv1alpha1.AbandonCloudResourcesAnnotation] == "true" &&
		pc.Status.Abandon != nil && pc.Status.Abandon.Generation == pc.Generation
}

// abandonHint tells the operator of a blocked cleanup what the way out is.
func abandonHint(pc *mpv1alpha1.ProviderConfig, f NamedFactory) string {
	switch {
	case f.Abandon == nil:
		return fmt.Sprintf("what is left is in the cluster and is not abandoned by annotation %s: run the manager with %s enabled, or delete it by hand",
			mpv1alpha1.AbandonCloudResourcesAnnotation, f.Name)
	case pc.Annotations[mpv1alpha1.AbandonCloudResourcesAnnotation] == "true" && pc.Status.Abandon != nil && pc.Status.Abandon.Generation != pc.Generation:
		return fmt.Sprintf("annotation %s=true was given for generation %d and does not cover generation %d: remove it, wait for status.abandon to go, and set it again to abandon this",
			mpv1alpha1.AbandonCloudResourcesAnnotation, pc.Status.Abandon.Generation, pc.Generation)
	default:
		return fmt.Sprintf("set annotation %s=true to abandon it", mpv1alpha1.AbandonCloudResourcesAnnotation)
	}
}

// cleanupTarget returns the ProviderConfig a cleanup of f works from: pc, with f's section taken from
// status.appliedSpec when the spec no longer has it; nil when f has no cleanup or nothing is on record.
func (m *Manager) cleanupTarget(pc *mpv1alpha1.ProviderConfig, f NamedFactory) *mpv1alpha1.ProviderConfig {
	if !f.Cleans() {
		return nil
	}
	if pc.Status.AppliedSpec == nil || f.Section(pc.Status.AppliedSpec) == nil {
		// Never recorded: the controller never started for this tenant (or ran before records were kept; a
		// deleting tenant whose spec still has the section is cleaned up from the spec).
		if pc.DeletionTimestamp == nil || f.Section(&pc.Spec) == nil {
			return nil
		}
		return pc
	}
	target := pc.DeepCopy()
	if f.Section(&target.Spec) == nil {
		f.CopySection(&target.Spec, pc.Status.AppliedSpec)
	}
	return target
}

// look asks f's Pending what is left, through a Context built only for that.
func (m *Manager) look(ctx context.Context, pc *mpv1alpha1.ProviderConfig, f NamedFactory) (string, error) {
	ctx, tctx, release, err := m.newContext(ctx, pc, f)
	if err != nil {
		return "", err
	}
	defer release()
	return f.Pending(ctx, tctx)
}

// abandon calls f.Abandon through a Context built only for that.
func (m *Manager) abandon(ctx context.Context, pc *mpv1alpha1.ProviderConfig, f NamedFactory) (string, error) {
	if f.Abandon == nil {
		return "", nil
	}
	ctx, tctx, release, err := m.newContext(ctx, pc, f)
	if err != nil {
		return "", err
	}
	defer release()
	return f.Abandon(ctx, tctx)
}

// newContext builds a Context for a one-off call, with its own informers, released by the returned function, and
// the ctx to make the call with: its API requests are charged to the tenant's client-side budget (apibudget).
func (m *Manager) newContext(ctx context.Context, pc *mpv1alpha1.ProviderConfig, f NamedFactory) (context.Context, *tenant.Context, func(), error) {
	views, err := m.cfg.Router.Tenant(pc.Name)
	if err != nil {
		return nil, nil, nil, err
	}
	informers := &controllerInformers{views: views, shared: m.cfg.Shared}
	tctx := m.context(pc, f, informers, m.recorder(ctx, f.Name), &conditionState{conditionType: f.ConditionType, notify: func() {}})
	return apibudget.WithTenant(ctx, pc.Name), tctx, informers.close, nil
}

func (m *Manager) context(pc *mpv1alpha1.ProviderConfig, f NamedFactory, informers *controllerInformers, recorder record.EventRecorder, condition *conditionState) *tenant.Context {
	t := m.tenant(pc.Name)
	return &tenant.Context{
		CloudResourcesAbandoned: t.abandoned.Load,
		Controller:              f.Name,
		ProviderConfig:          m.controllerCopy(t, pc),
		ProviderConfigLabelKey:  m.cfg.LabelKey,
		KubeClient:              m.cfg.KubeClient,
		MultiprojectClient:      m.cfg.MultiprojectClient,
		Informers:               informers,
		EventRecorder:           recorder,
		Condition:               condition,
		Options:                 m.cfg.Options,
		Workers:                 f.Workers,
		// Two thirds of the stop timeout: a controller that drains within it has returned before the manager
		// gives up waiting.
		DrainGrace: m.cfg.StopTimeout * 2 / 3,
	}
}

// controllerCopy returns the tenant's controllerCopy of pc, made once for all the controllers a sync starts: they
// only read it (tenant.Context).
func (m *Manager) controllerCopy(t *tenantControllers, pc *mpv1alpha1.ProviderConfig) *mpv1alpha1.ProviderConfig {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c := t.copy; c == nil || c.UID != pc.UID || c.ResourceVersion != pc.ResourceVersion || c.ResourceVersion == "" {
		t.copy = controllerCopy(pc)
	}
	return t.copy
}

// controllerCopy is the copy of pc a controller keeps while it runs: its metadata and spec, without managedFields,
// kubectl's last-applied annotation and the status, which no controller reads (the manager reports conditions,
// and the applied spec is the manager's record). pc may be the API server's answer to a status write, so it can
// carry all three: kept in a copy per controller, they cost an idle tenant about 6 KB.
func controllerCopy(pc *mpv1alpha1.ProviderConfig) *mpv1alpha1.ProviderConfig {
	out := &mpv1alpha1.ProviderConfig{TypeMeta: pc.TypeMeta}
	pc.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	pc.Spec.DeepCopyInto(&out.Spec)
	out.ManagedFields = nil
	informerset.DropLastApplied(out)
	return out
}

// start starts the controller (or, with cleanup, its cleanup) unless an earlier instance is still stopping or a
// required API is missing; it records the manager's condition when it does not start. It returns the new run, or
// nil when it did not start.
func (m *Manager) start(ctx context.Context, pc *mpv1alpha1.ProviderConfig, t *tenantControllers, f NamedFactory, section any, cleanup bool) (*controllerRun, error) {
	logger := klog.FromContext(ctx).WithValues("providerConfig", pc.Name, "controller", f.Name)
	m.locked(func() { delete(t.waiting, f.Name) })
	var stopping bool
	m.locked(func() { _, stopping = t.stopping[f.Name] })
	if stopping {
		m.setWaiting(t, f.Name, metav1.Condition{Type: f.ConditionType, Status: metav1.ConditionUnknown, Reason: ReasonStopping,
			Message: "the previous instance of the controller has not returned yet; the next one starts once it has, never beside it"})
		return nil, nil
	}
	if missing := m.missingAPIs(f, &pc.Spec); len(missing) > 0 {
		m.setWaiting(t, f.Name, metav1.Condition{Type: f.ConditionType, Status: metav1.ConditionFalse, Reason: ReasonAPINotServed,
			Message: fmt.Sprintf("waiting for the cluster to serve %s; the controller starts as soon as it does", strings.Join(missing, ", "))})
		return nil, nil
	}
	run, err := m.startRun(ctx, pc, f, section, cleanup)
	if err != nil {
		logger.Error(err, "Could not start tenant controller", "cleanup", cleanup)
		m.setWaiting(t, f.Name, metav1.Condition{Type: f.ConditionType, Status: metav1.ConditionFalse, Reason: ReasonFailedToStart, Message: err.Error()})
		return nil, err
	}
	logger.Info("Started tenant controller", "workers", f.Workers, "cleanup", cleanup)
	m.locked(func() { t.setRunning(run) })
	return run, nil
}

// Stop stops every controller of the tenant and forgets it.
func (m *Manager) Stop(ctx context.Context, name string) {
	m.mu.Lock()
	t, ok := m.tenants[name]
	delete(m.tenants, name)
	var runs []*controllerRun
	if ok {
		runs = slices.Clone(t.running)
	}
	m.mu.Unlock()
	if !ok {
		return
	}
	for _, run := range runs {
		klog.FromContext(ctx).Info("Stopping tenant controller", "providerConfig", name, "controller", run.controller)
		m.stopRun(ctx, name, t, run)
	}
	m.locked(func() {
		if len(t.stopping) == 0 {
			return
		}
		// An instance that has not returned still counts: a ProviderConfig re-created under the same name must
		// not start another beside it. The tenant is forgotten once the last one returns.
		t.forgotten = true
		clear(t.waiting)
		if _, exists := m.tenants[name]; !exists {
			m.tenants[name] = t
		}
	})
}

// Quiet reports whether no controller instance of the tenant runs any more, including one detached after the stop
// timeout that has not returned yet.
func (m *Manager) Quiet(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tenants[name]
	return !ok || (len(t.running) == 0 && len(t.stopping) == 0)
}

// StopAll stops every tenant's controllers concurrently (on shutdown), then the Event broadcaster. It returns the
// tenants with a controller that did not return within the stop timeout and still runs, detached.
func (m *Manager) StopAll(ctx context.Context) []string {
	var wg sync.WaitGroup
	for _, name := range m.Tenants() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.Stop(ctx, name)
		}()
	}
	wg.Wait()
	m.eventsMu.Lock()
	if m.events != nil {
		m.events.Shutdown()
		m.events, m.recorders = nil, nil
	}
	m.eventsMu.Unlock()
	var running []string
	for _, name := range m.Tenants() {
		if !m.Quiet(name) {
			running = append(running, name)
		}
	}
	return running
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
	for _, run := range t.running {
		out = append(out, run.controller)
	}
	sort.Strings(out)
	return out
}

// AllRunning returns the names of the running controllers of every tenant that has one, for the metrics.
func (m *Manager) AllRunning() map[string][]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string][]string, len(m.tenants))
	for name, t := range m.tenants {
		for _, run := range t.running {
			out[name] = append(out[name], run.controller)
		}
	}
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

func (m *Manager) missingAPIs(f NamedFactory, spec *mpv1alpha1.ProviderConfigSpec) []string {
	if m.cfg.APIServed == nil || f.RequiredAPIs == nil {
		return nil
	}
	var missing []string
	for _, gvr := range f.RequiredAPIs(spec) {
		if !m.cfg.APIServed(gvr) {
			missing = append(missing, gvr.GroupResource().String()+"/"+gvr.Version)
		}
	}
	return missing
}

func (m *Manager) startRun(ctx context.Context, pc *mpv1alpha1.ProviderConfig, f NamedFactory, section any, cleanup bool) (*controllerRun, error) {
	views, err := m.cfg.Router.Tenant(pc.Name)
	if err != nil {
		return nil, err
	}
	informers := &controllerInformers{views: views, shared: m.cfg.Shared}
	// The name, not pc: the run outlives this call, and pc (the status patch's answer) must not live as long.
	name := pc.Name
	condition := &conditionState{conditionType: f.ConditionType, notify: func() { m.cfg.OnConditionChange(name) }}
	tctx := m.context(pc, f, informers, m.recorder(ctx, f.Name), condition)
	// The tenant in runCtx charges every API request of the controller to the tenant's client-side budget.
	runCtx, cancel := context.WithCancel(klog.NewContext(apibudget.WithTenant(ctx, pc.Name), klog.FromContext(ctx).WithValues("providerConfig", pc.Name, "controller", f.Name)))
	// The controller's parts stop on the run's StopSignal, not on runCtx: a context with children keeps a map of
	// them (worker.StopSignal).
	stop, stopsWithBound := m.stopSignal(ctx)
	tctx.Stop = stop
	build := f.New
	if cleanup {
		build = f.Cleanup
	}
	controller, err := build(runCtx, tctx)
	if err != nil {
		cancel()
		stop.Fire()
		informers.close()
		return nil, err
	}
	run := &controllerRun{controller: f.Name, cleanup: cleanup, section: section, cancel: cancel, stop: stop, stopsWithBound: stopsWithBound, done: make(chan struct{}),
		informers: informers, condition: condition, generation: pc.Generation}
	if cleanup {
		run.cleanupContext = tctx
	}
	if starter, ok := controller.(tenant.Starter); ok {
		// No goroutine waits on an idle controller: it calls back once it has stopped.
		starter.Start(runCtx, func() { close(run.done) })
		return run, nil
	}
	go func() {
		defer close(run.done)
		defer utilruntime.HandleCrashWithContext(runCtx)
		controller.Run(runCtx)
	}()
	return run, nil
}

// StopRunsWhenDone fires the StopSignal of every run, present and future, once ctx ends: one registration on ctx
// for all the runs the manager starts from contexts derived from it, where each run's signal would otherwise
// register its own (about 0.2 KiB per run). The ProviderConfig controller binds its own context for as long as it
// runs; the returned function undoes it.
func (m *Manager) StopRunsWhenDone(ctx context.Context) (undo func()) {
	m.mu.Lock()
	m.runsParent = ctx.Done()
	m.mu.Unlock()
	unregister := context.AfterFunc(ctx, m.fireStopSignals)
	return func() {
		unregister()
		m.mu.Lock()
		m.runsParent = nil
		m.mu.Unlock()
	}
}

// fireStopSignals fires the StopSignal of every run started from the bound context. A run started as this runs
// may be missed; its context has ended all the same, and StopAll, which follows the end of the bound context, fires
// it.
func (m *Manager) fireStopSignals() {
	m.mu.Lock()
	var signals []*worker.StopSignal
	for _, t := range m.tenants {
		for _, run := range t.running {
			if run.stopsWithBound {
				signals = append(signals, run.stop)
			}
		}
	}
	m.mu.Unlock()
	for _, s := range signals {
		s.Fire()
	}
}

// stopSignal returns the StopSignal of a run started from ctx, fired by stopRun, and by the bound context's end
// (fireStopSignals) when ctx derives from it, which it reports, or else by ctx's own.
func (m *Manager) stopSignal(ctx context.Context) (*worker.StopSignal, bool) {
	m.mu.Lock()
	bound := m.runsParent != nil && ctx.Done() == m.runsParent
	m.mu.Unlock()
	if !bound {
		return worker.NewStopSignal(ctx), false
	}
	s := &worker.StopSignal{}
	if ctx.Err() != nil {
		s.Fire()
	}
	return s, true
}

// stopRun ends one controller: cancel its context (the tenant's own stop), wait for Run to return, then remove its
// handlers and drop its metric series. An instance that does not return within the stop timeout is detached (no
// longer waited for), but kept in the tenant's stopping set, with its handlers, until it does: no other instance
// of that controller starts for the tenant before, so two never act at once, and what it still does is still fed.
func (m *Manager) stopRun(ctx context.Context, tenantName string, t *tenantControllers, run *controllerRun) {
	m.locked(func() {
		t.running = slices.DeleteFunc(t.running, func(r *controllerRun) bool { return r == run })
	})
	run.cancel()
	run.stop.Fire()
	timer := time.NewTimer(m.cfg.StopTimeout)
	defer timer.Stop()
	select {
	case <-run.done:
	case <-timer.C:
		klog.FromContext(ctx).Error(nil, "Tenant controller did not stop in time; detaching it, and starting no new instance until it returns",
			"providerConfig", tenantName, "controller", run.controller, "timeout", m.cfg.StopTimeout)
		m.locked(func() {
			if t.stopping == nil {
				t.stopping = map[string]*controllerRun{}
			}
			t.stopping[run.controller] = run
		})
		go func() {
			<-run.done
			// Only now: a detached instance still acts, so what it registered keeps receiving events until it
			// returns. A claims registry it carries (claims.Member) moves to another member when the instance
			// leaves it on its way out; removed earlier, the registry would see no holding until then.
			run.informers.close()
			metrics.ForgetController(tenantName, run.controller)
			m.locked(func() {
				if t.stopping[run.controller] == run {
					delete(t.stopping, run.controller)
				}
				if t.forgotten && len(t.stopping) == 0 && m.tenants[tenantName] == t {
					delete(m.tenants, tenantName)
				}
			})
			klog.FromContext(ctx).Info("Detached tenant controller returned", "providerConfig", tenantName, "controller", run.controller)
			m.cfg.OnConditionChange(tenantName)
		}()
		return
	}
	run.informers.close()
	metrics.ForgetController(tenantName, run.controller)
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

// conditionState is a running controller's ConditionReporter. For a cleanup it also holds what is left, which the
// manager sets; the condition is then CleaningUp (or the cleanup's own False report, which names the obstacle),
// with what is left in the message.
type conditionState struct {
	conditionType string
	notify        func()

	mu       sync.Mutex
	reported bool
	status   metav1.ConditionStatus
	reason   string
	message  string
	cleanup  bool
	left     string
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

// cleaningUp records what a cleanup still has to remove.
func (c *conditionState) cleaningUp(left string) {
	c.mu.Lock()
	if c.cleanup && c.left == left {
		c.mu.Unlock()
		return
	}
	c.cleanup, c.left = true, left
	c.mu.Unlock()
	c.notify()
}

func (c *conditionState) get() metav1.Condition {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cleanup {
		cond := metav1.Condition{Type: c.conditionType, Status: metav1.ConditionFalse, Reason: ReasonCleaningUp,
			Message: "removing what the controller made: " + c.left}
		if c.reported && c.status == metav1.ConditionFalse {
			cond.Reason = c.reason
			cond.Message += "; " + c.message
		}
		return cond
	}
	if !c.reported {
		return metav1.Condition{Type: c.conditionType, Status: metav1.ConditionUnknown, Reason: ReasonStarting,
			Message: "the controller is starting and has not reported yet"}
	}
	return metav1.Condition{Type: c.conditionType, Status: c.status, Reason: c.reason, Message: c.message}
}
