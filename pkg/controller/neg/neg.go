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

package neg

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/neg/pushed"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/neg/pusher"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/neg/readiness"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/neg/translator"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
)

// ReasonRunning is the NEGReady condition's reason while the translator runs and the pusher reports no problem.
const ReasonRunning = "Running"

// DefaultConcurrentSyncs is the default of --concurrent-neg-syncs: the workers of each part (translator, pusher,
// readiness reflector), apart.
const DefaultConcurrentSyncs = 5

// Controller is one tenant's neg controller: the translator, the pusher and the readiness reflector, run side by
// side.
type Controller struct {
	translator *translator.Translator
	pusher     *pusher.Pusher
	readiness  *readiness.Reflector
}

// New builds the translator, the pusher and the readiness reflector of the tenant c describes. None makes an API
// call here.
func New(_ context.Context, c *tenant.Context) (tenant.Controller, error) {
	gate := &conditionGate{target: c.Condition, message: fmt.Sprintf(
		"translating the tenant's Services with annotation %s into NEGs in GCP project %s", c.Options.NEGKeys.OrDefaults().Annotation, projectOf(c))}
	t, err := translator.New(c, gate.translatorSynced)
	if err != nil {
		return nil, err
	}
	pc := *c
	pc.Condition = pusherReporter{gate}
	p, err := pusher.New(&pc)
	if err != nil {
		return nil, err
	}
	// The reflector polls GCE with the pusher's client, so its calls share the tenant's rate limiter.
	r, err := readiness.New(c, func(ctx context.Context, project string) (readiness.HealthLister, error) {
		client, err := p.GCEClient(ctx, project)
		if err != nil {
			return nil, err
		}
		return client, nil
	})
	if err != nil {
		return nil, err
	}
	// The status reports of a busy Translation wait (pusher/reports.go); meanwhile the translator and the reflector
	// learn from the pusher itself what GCE holds.
	pushes := pushed.New()
	p.ReportPushesTo(pushes)
	t.FollowPushes(pushes)
	r.FollowPushes(pushes)
	return &Controller{translator: t, pusher: p, readiness: r}, nil
}

func projectOf(c *tenant.Context) string {
	if c.ProviderConfig != nil && c.ProviderConfig.Spec.GCP != nil {
		return c.ProviderConfig.Spec.GCP.ProjectID
	}
	return ""
}

// Run runs the three parts until ctx ends and returns once all have stopped.
func (c *Controller) Run(ctx context.Context) { tenant.RunStarter(ctx, c) }

// Start starts the three parts and returns; done is called once all have stopped (tenant.Starter).
func (c *Controller) Start(ctx context.Context, done func()) {
	var running atomic.Int32
	running.Store(3)
	stopped := func() {
		if running.Add(-1) == 0 {
			done()
		}
	}
	c.translator.Start(ctx, stopped)
	c.pusher.Start(ctx, stopped)
	c.readiness.Start(ctx, stopped)
}

// conditionGate keeps one source of truth for the tenant's NEGReady condition, which the translator and the pusher
// both want to report (the readiness reflector reports none): while the pusher reports a problem (False), that is
// the condition; otherwise, once the translator has synced, the condition is True/Running. The pusher's own True ("no problems left") therefore restores Running rather than
// replacing it with a second wording of the same state.
type conditionGate struct {
	target  tenant.ConditionReporter
	message string

	mu              sync.Mutex
	translatorReady bool
	pusherProblem   bool
	problem         [2]string // reason, message
	problemStatus   metav1.ConditionStatus
}

func (g *conditionGate) translatorSynced() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.translatorReady = true
	g.reportLocked()
}

func (g *conditionGate) pusherReport(status metav1.ConditionStatus, reason, message string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pusherProblem = status != metav1.ConditionTrue
	g.problemStatus, g.problem = status, [2]string{reason, message}
	g.reportLocked()
}

func (g *conditionGate) reportLocked() {
	if g.target == nil {
		return
	}
	switch {
	case g.pusherProblem:
		g.target.Report(g.problemStatus, g.problem[0], g.problem[1])
	case g.translatorReady:
		g.target.Report(metav1.ConditionTrue, ReasonRunning, g.message)
	}
}

// pusherReporter is the ConditionReporter the pusher is given.
type pusherReporter struct{ g *conditionGate }

func (r pusherReporter) Report(status metav1.ConditionStatus, reason, message string) {
	r.g.pusherReport(status, reason, message)
}

var _ tenant.Controller = (*Controller)(nil)
