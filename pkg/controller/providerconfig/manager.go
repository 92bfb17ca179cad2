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
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	gatewayclientset "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gatewayscheme "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/scheme"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"
	mpscheme "github.com/multiproject/client-go/clientset/versioned/scheme"

	"github.com/multiproject/multiproject-controller-manager/pkg/claims"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/tenancy"
)

// Scheme knows the built-in kinds, ours (ProviderConfig, Translation, Rancher Project, Pangolin kinds) and Gateway
// API's, so that Events can be recorded on any object a controller handles: a recorder drops an Event on a kind its
// scheme does not know.
var Scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(Scheme))
	utilruntime.Must(mpscheme.AddToScheme(Scheme))
	utilruntime.Must(gatewayscheme.AddToScheme(Scheme))
}

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
	// GatewayClient is handed to every controller (tenant.Context.GatewayClient); nil: Gateway API is not read.
	GatewayClient gatewayclientset.Interface
	// Router hands out the tenants' filtered views of the shared informers.
	Router *tenancy.Router
	// Shared returns unfiltered shared informers, for Informers.Shared.
	Shared SharedInformerGetter
	// Claims is the run's claims.Service, handed to every controller (tenant.Context.Claims).
	Claims *claims.Service
	// NamespacesRead, if set, is handed to every controller (tenant.Context.NamespacesRead).
	NamespacesRead func() bool
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

// known returns every known controller: the enabled ones, in start order, then the disabled ones.
func (m *Manager) known() []NamedFactory {
	return slices.Concat(m.cfg.Enabled, m.cfg.Disabled)
}

// locked runs fn under the manager's lock, which guards the tenants map and every tenant's maps. Starting and
// stopping controllers happens outside it, so one slow tenant never blocks another.
func (m *Manager) locked(fn func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	fn()
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
	applied := appliedCopy(pc)
	if pc.DeletionTimestamp == nil {
		for _, f := range m.cfg.Enabled {
			if f.Cleans() && f.Section(&pc.Spec) != nil {
				f.CopySection(applied, &pc.Spec)
			}
		}
	}
	return nilIfEmpty(applied)
}

// appliedCopy returns a copy of pc's status.appliedSpec to change, empty when there is none.
func appliedCopy(pc *mpv1alpha1.ProviderConfig) *mpv1alpha1.ProviderConfigSpec {
	if pc.Status.AppliedSpec == nil {
		return &mpv1alpha1.ProviderConfigSpec{}
	}
	return pc.Status.AppliedSpec.DeepCopy()
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
	applied := appliedCopy(pc)
	var out Outcome
	var errs []string
	for i, f := range m.known() {
		enabled := i < len(m.cfg.Enabled) // known lists the enabled first
		pending, abandoned, err := m.syncController(ctx, pc, t, f, enabled, applied)
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
