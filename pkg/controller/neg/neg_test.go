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
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant/tenanttest"
)

func TestNewBuildsBothHalves(t *testing.T) {
	h := newHarness(t)
	c, err := New(h.ctx, h.tctx)
	if err != nil {
		t.Fatal(err)
	}
	if ctl := c.(*Controller); ctl.translator == nil || ctl.pusher == nil {
		t.Errorf("controller = %+v", ctl)
	}
	noGCP := *h.tctx
	noGCP.ProviderConfig = &mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
	if _, err := New(h.ctx, &noGCP); err == nil {
		t.Error("New without spec.gcp succeeded")
	}
	missing := *h.tctx
	missing.Informers = tenanttest.Informers{}
	if _, err := New(h.ctx, &missing); err == nil {
		t.Error("New without informers succeeded")
	}
}

// TestConditionGate: True/Running once the translator has synced; a problem the pusher reports wins, including
// over a later translator report; the pusher's "no problems" restores Running.
func TestConditionGate(t *testing.T) {
	conditions := &tenanttest.Conditions{}
	g := &conditionGate{target: conditions, message: "running"}
	p := pusherReporter{g}

	p.Report(metav1.ConditionTrue, "NEGsPushed", "fine")
	if _, ok := conditions.Last(); ok {
		t.Error("reported True before the translator synced")
	}
	g.translatorSynced()
	expect(t, conditions, tenanttest.Condition{Status: metav1.ConditionTrue, Reason: ReasonRunning, Message: "running"})
	p.Report(metav1.ConditionFalse, "NEGNameCollision", "NEG x is foreign")
	expect(t, conditions, tenanttest.Condition{Status: metav1.ConditionFalse, Reason: "NEGNameCollision", Message: "NEG x is foreign"})
	g.translatorSynced()
	expect(t, conditions, tenanttest.Condition{Status: metav1.ConditionFalse, Reason: "NEGNameCollision", Message: "NEG x is foreign"})
	p.Report(metav1.ConditionTrue, "NEGsPushed", "fine")
	expect(t, conditions, tenanttest.Condition{Status: metav1.ConditionTrue, Reason: ReasonRunning, Message: "running"})

	var _ tenant.ConditionReporter = p
}

func expect(t *testing.T, c *tenanttest.Conditions, want tenanttest.Condition) {
	t.Helper()
	if got, ok := c.Last(); !ok || got != want {
		t.Errorf("condition = %+v, want %+v", got, want)
	}
}
