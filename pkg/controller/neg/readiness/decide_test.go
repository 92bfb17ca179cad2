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
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
	corev1 "k8s.io/api/core/v1"
)

// TestDecide is one row per case the reflector tells apart.
func TestDecide(t *testing.T) {
	created := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	negA := negRef{project: "p", zone: "zone-a", name: "neg-a"}
	negB := negRef{project: "p", zone: "zone-a", name: "neg-b"}
	notReady := &corev1.PodCondition{Type: negapi.ReadinessGate, Status: corev1.ConditionFalse, Reason: ReasonNotReady}
	cases := []struct {
		name string
		in   input
		// want: status, reason, a part of the message; write, poll, timeoutIn.
		status    corev1.ConditionStatus
		reason    string
		message   string
		write     bool
		poll      bool
		timeoutIn time.Duration
	}{
		{name: "no NEG and no NEG Service selects it: ready",
			in:     input{},
			status: corev1.ConditionTrue, reason: ReasonReady, message: "not in any NEG", write: true},
		{name: "no NEG and no NEG Service selects it, but the namespace is not read yet: waits and polls",
			in:     input{unread: true},
			status: corev1.ConditionFalse, reason: ReasonNotReady, message: "read the Services", write: true, poll: true},
		{name: "healthy in a NEG while the namespace is not read yet: ready",
			in:     input{unread: true, negs: []membership{{neg: negA, attached: true, health: healthHealthy}}},
			status: corev1.ConditionTrue, reason: ReasonReady, message: "zone-a/neg-a", write: true},
		{name: "selected but not listed yet: waits for the attach, until the timeout",
			in:     input{selected: true, created: created, timeout: 10 * time.Minute, now: created.Add(time.Minute)},
			status: corev1.ConditionFalse, reason: ReasonNotReady, message: "attached", write: true, timeoutIn: 9 * time.Minute},
		{name: "selected by a frozen Service (its annotation does not parse) only: waits for the fix, until the timeout",
			in: input{selected: true, frozen: []frozenService{{name: "web", err: errors.New("bad")}}, created: created,
				timeout: 10 * time.Minute, now: created.Add(time.Minute)},
			status: corev1.ConditionFalse, reason: ReasonNotReady, message: "Service web to be fixed", write: true, timeoutIn: 9 * time.Minute},
		{name: "selected by a frozen Service and healthy in a NEG it lists: ready",
			in: input{selected: true, frozen: []frozenService{{name: "web", err: errors.New("bad")}},
				negs: []membership{{neg: negA, attached: true, health: healthHealthy}}},
			status: corev1.ConditionTrue, reason: ReasonReady, message: "zone-a/neg-a", write: true},
		{name: "listed, the pusher has not synced: waits, no poll",
			in:     input{negs: []membership{{neg: negA}}},
			status: corev1.ConditionFalse, reason: ReasonNotReady, message: "attached", write: true},
		{name: "listed and not selected (a Service removed, its Translation not yet updated): waits",
			in:     input{negs: []membership{{neg: negA}}, selected: false},
			status: corev1.ConditionFalse, reason: ReasonNotReady, write: true},
		{name: "attached where nothing health checks: ready without health check",
			in:     input{negs: []membership{{neg: negA, attached: true, health: healthNoCheck}}},
			status: corev1.ConditionTrue, reason: ReasonWithoutHealthCheck, message: "zone-a/neg-a", write: true},
		{name: "attached, the spec has the NEG join a backend service that reports no health yet: waits and polls (issue 64)",
			in:     input{negs: []membership{{neg: negA, attached: true, health: healthNoCheck, backendServices: []string{"global/web"}}}},
			status: corev1.ConditionFalse, reason: ReasonNotReady, message: "global/web", write: true, poll: true},
		{name: "attached and healthy: ready",
			in:     input{negs: []membership{{neg: negA, attached: true, health: healthHealthy}}},
			status: corev1.ConditionTrue, reason: ReasonReady, message: "Healthy in NEG zone-a/neg-a", write: true},
		{name: "attached and unhealthy: waits and polls",
			in:     input{negs: []membership{{neg: negA, attached: true, health: healthUnhealthy, states: []string{"UNHEALTHY"}}}},
			status: corev1.ConditionFalse, reason: ReasonNotReady, message: "UNHEALTHY", write: true, poll: true},
		{name: "attached, GCE does not list it yet (or the poll failed): waits and polls",
			in:     input{negs: []membership{{neg: negA, attached: true}}},
			status: corev1.ConditionFalse, reason: ReasonNotReady, message: "report", write: true, poll: true},
		{name: "healthy in one of two NEGs is enough (ingress-gce#931)",
			in: input{negs: []membership{{neg: negA, attached: true, health: healthUnhealthy},
				{neg: negB, attached: true, health: healthHealthy}}},
			status: corev1.ConditionTrue, reason: ReasonReady, message: "zone-a/neg-b", write: true},
		{name: "healthy wins over without health check",
			in: input{negs: []membership{{neg: negA, attached: true, health: healthNoCheck},
				{neg: negB, attached: true, health: healthHealthy}}},
			status: corev1.ConditionTrue, reason: ReasonReady, write: true},
		{name: "waiting, False already written: no second write",
			in:     input{current: notReady, negs: []membership{{neg: negA, attached: true, health: healthUnhealthy}}},
			status: corev1.ConditionFalse, reason: ReasonNotReady, write: false, poll: true},
		{name: "the timeout passed: True with its reason",
			in: input{current: notReady, created: created, now: created.Add(10 * time.Minute), timeout: 10 * time.Minute,
				negs: []membership{{neg: negA, attached: true, health: healthUnhealthy}}},
			status: corev1.ConditionTrue, reason: ReasonTimeout, message: "Timed out after 10m0s", write: true},
		{name: "healthy at the timeout: ready, not timed out",
			in: input{created: created, now: created.Add(time.Hour), timeout: 10 * time.Minute,
				negs: []membership{{neg: negA, attached: true, health: healthHealthy}}},
			status: corev1.ConditionTrue, reason: ReasonReady, write: true},
		{name: "timeout 0 never fires",
			in:     input{created: created, now: created.Add(24 * time.Hour), selected: true},
			status: corev1.ConditionFalse, reason: ReasonNotReady, write: true},
		{name: "True is never turned back to False",
			in: input{current: &corev1.PodCondition{Type: negapi.ReadinessGate, Status: corev1.ConditionTrue, Reason: ReasonReady},
				negs: []membership{{neg: negA, attached: true, health: healthUnhealthy}}},
			status: corev1.ConditionTrue, reason: ReasonReady, write: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := decide(tc.in)
			if v.status != tc.status || v.reason != tc.reason || v.write != tc.write || v.poll != tc.poll || v.timeoutIn != tc.timeoutIn {
				t.Errorf("decide = %+v, want status %s reason %s write %v poll %v timeoutIn %s",
					v, tc.status, tc.reason, tc.write, tc.poll, tc.timeoutIn)
			}
			if !strings.Contains(v.message, tc.message) {
				t.Errorf("message %q does not contain %q", v.message, tc.message)
			}
		})
	}
}
