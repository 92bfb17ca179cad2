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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/apibudget"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
)

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

// shutdownEvents shuts the Event broadcaster down, once no controller runs: Events recorded before are still sent.
func (m *Manager) shutdownEvents() {
	m.eventsMu.Lock()
	defer m.eventsMu.Unlock()
	if m.events != nil {
		m.events.Shutdown()
		m.events, m.recorders = nil, nil
	}
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
	tctx, informers, err := m.assemble(ctx, pc, f, &conditionState{conditionType: f.ConditionType, notify: func() {}})
	if err != nil {
		return nil, nil, nil, err
	}
	return apibudget.WithTenant(ctx, pc.Name), tctx, informers.close, nil
}

// assemble builds the tenant.Context of one controller of the tenant (or of its cleanup, or of a one-off call), on
// informers of its own, which the caller closes once done with them. The caller sets Stop.
func (m *Manager) assemble(ctx context.Context, pc *mpv1alpha1.ProviderConfig, f NamedFactory, condition *conditionState) (*tenant.Context, *controllerInformers, error) {
	views, err := m.cfg.Router.Tenant(pc.Name)
	if err != nil {
		return nil, nil, err
	}
	informers := &controllerInformers{views: views, shared: m.cfg.Shared}
	t := m.tenant(pc.Name)
	return &tenant.Context{
		CloudResourcesAbandoned: t.abandoned.Load,
		Controller:              f.Name,
		ProviderConfig:          m.controllerCopy(t, pc),
		ProviderConfigLabelKey:  m.cfg.LabelKey,
		KubeClient:              m.cfg.KubeClient,
		MultiprojectClient:      m.cfg.MultiprojectClient,
		GatewayClient:           m.cfg.GatewayClient,
		Informers:               informers,
		EventRecorder:           m.recorder(ctx, f.Name),
		Condition:               condition,
		Claims:                  m.cfg.Claims,
		NamespacesRead:          m.cfg.NamespacesRead,
		Options:                 m.cfg.Options,
		Workers:                 f.Workers,
		// Two thirds of the stop timeout: a controller that drains within it has returned before the manager
		// gives up waiting.
		DrainGrace: m.cfg.StopTimeout * 2 / 3,
	}, informers, nil
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
