//go:build integration

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

package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
)

// Helpers shared by the bad-input and isolation tests: Events, conditions and the manager's log.

// events lists the Events of reason recorded on the object kind namespace/name (namespace "" for a cluster-scoped
// object, whose Events are in the default namespace). The count of each is its series count (at least 1).
func events(ctx context.Context, t testing.TB, kind, namespace, name, reason string) []corev1.Event {
	t.Helper()
	sel := fields.Set{"involvedObject.kind": kind, "involvedObject.name": name}
	if reason != "" {
		sel["reason"] = reason
	}
	in := namespace
	if in == "" {
		in = metav1.NamespaceDefault
	}
	list, err := controlPlane.AdminClient().CoreV1().Events(in).List(ctx, metav1.ListOptions{FieldSelector: sel.String()})
	if err != nil {
		t.Fatalf("listing Events of %s %s/%s: %v", kind, namespace, name, err)
	}
	return list.Items
}

// eventCount sums the counts of the Events events returns.
func eventCount(evs []corev1.Event) int {
	n := 0
	for _, ev := range evs {
		n += int(max(ev.Count, 1))
	}
	return n
}

// waitEvent polls until the object has a Warning Event of reason whose message contains every one of contains,
// and returns the matching Events.
func waitEvent(ctx context.Context, t testing.TB, kind, namespace, name, reason string, contains ...string) []corev1.Event {
	t.Helper()
	var matched []corev1.Event
	var seen []string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, convergeTimeout, true, func(context.Context) (bool, error) {
		matched, seen = nil, nil
		for _, ev := range events(ctx, t, kind, namespace, name, reason) {
			seen = append(seen, ev.Message)
			if ev.Type != corev1.EventTypeWarning {
				continue
			}
			ok := true
			for _, c := range contains {
				ok = ok && strings.Contains(ev.Message, c)
			}
			if ok {
				matched = append(matched, ev)
			}
		}
		return len(matched) > 0, nil
	})
	if err != nil {
		t.Fatalf("no Warning %s on %s %s/%s mentioning %q within %s; its %s Events: %q", reason, kind, namespace, name,
			contains, convergeTimeout, reason, seen)
	}
	return matched
}

// condition returns the ProviderConfig's condition of type typ, nil when it has none.
func condition(pc *mpv1alpha1.ProviderConfig, typ string) *metav1.Condition {
	if pc == nil {
		return nil
	}
	return meta.FindStatusCondition(pc.Status.Conditions, typ)
}

// logLines returns the lines of the manager's log that contain s.
func (m *manager) logLines(s string) []string {
	data, err := os.ReadFile(m.logPath)
	if err != nil {
		m.t.Fatalf("reading manager %s's log: %v", m.name, err)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

// errorLines keeps the klog error-level lines ("E0102 15:04:05.000000 ...") of lines.
func errorLines(lines []string) []string {
	var out []string
	for _, l := range lines {
		if strings.HasPrefix(l, "E") {
			out = append(out, l)
		}
	}
	return out
}

func conditionString(c *metav1.Condition) string {
	if c == nil {
		return "<none>"
	}
	return fmt.Sprintf("%s %s %q", c.Status, c.Reason, c.Message)
}
