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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/apibudget"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
)

// tenantControllers is the manager's registry of one tenant: what runs, what is still stopping, and the conditions
// of what waits.
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

// controllerRun is one running instance of a controller, or of its cleanup, for one tenant.
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
	// optionalServed says whether the Factory's OptionalAPIs were all served when the controller was built.
	optionalServed bool
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

// optionalServed says whether every OptionalAPI of f is served: the controller reads them together or not at all,
// so it is restarted once, when the last of them is served.
func (m *Manager) optionalServed(f NamedFactory) bool {
	for _, gvr := range f.OptionalAPIs {
		if m.cfg.APIServed != nil && !m.cfg.APIServed(gvr) {
			return false
		}
	}
	return true
}

// missingAPIs lists the APIs f needs for spec that are not served.
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

// startRun builds the controller (or its cleanup) on a Context of its own and runs it.
func (m *Manager) startRun(ctx context.Context, pc *mpv1alpha1.ProviderConfig, f NamedFactory, section any, cleanup bool) (*controllerRun, error) {
	// The name, not pc: the run outlives this call, and pc (the status patch's answer) must not live as long.
	name := pc.Name
	condition := &conditionState{conditionType: f.ConditionType, notify: func() { m.cfg.OnConditionChange(name) }}
	tctx, informers, err := m.assemble(ctx, pc, f, condition)
	if err != nil {
		return nil, err
	}
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
		informers: informers, condition: condition, optionalServed: m.optionalServed(f)}
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
			// returns.
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
	m.shutdownEvents()
	var running []string
	for _, name := range m.Tenants() {
		if !m.Quiet(name) {
			running = append(running, name)
		}
	}
	return running
}

// Quiet reports whether no controller instance of the tenant runs any more, including one detached after the stop
// timeout that has not returned yet.
func (m *Manager) Quiet(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tenants[name]
	return !ok || (len(t.running) == 0 && len(t.stopping) == 0)
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
