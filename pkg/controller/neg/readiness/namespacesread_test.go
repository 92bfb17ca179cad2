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
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestNoNEGIsNoAnswerBeforeTheNamespaceIsRead: a gated Pod that no NEG Service selects is not set True while the
// informers may not hold its namespace's Services and Translations yet (a shard selector that has just grown to hold
// it); the condition waits, False, and turns True once the namespace has been read.
func TestNoNEGIsNoAnswerBeforeTheNamespaceIsRead(t *testing.T) {
	var read atomic.Bool
	h := newHarness(t, 10*time.Minute, func(h *harness) { h.r.namespacesRead = read.Load },
		gatedPod("early", "10.0.0.9", map[string]string{"app": "web"}))

	c := h.waitCondition("early", corev1.ConditionFalse, ReasonNotReady)
	if !strings.Contains(c.Message, "read the Services") {
		t.Errorf("message %q, want it to say what the Pod waits for", c.Message)
	}
	read.Store(true)
	h.waitCondition("early", corev1.ConditionTrue, ReasonReady)
}
