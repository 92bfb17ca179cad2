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
	"sort"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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

func (m *Manager) setWaiting(t *tenantControllers, name string, c metav1.Condition) {
	m.locked(func() {
		if t.waiting == nil {
			t.waiting = map[string]metav1.Condition{}
		}
		t.waiting[name] = c
	})
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
	for _, f := range m.known() {
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
