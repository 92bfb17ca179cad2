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

package leadership

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestLeaderElectionHealthStates(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	renewDeadline := 10 * time.Second
	h := NewHealth(clk, renewDeadline)
	if h.Name() != "leader-election" {
		t.Errorf("Name() = %q", h.Name())
	}
	check := func(state string, wantErr bool) {
		t.Helper()
		if err := h.Check(nil); (err != nil) != wantErr {
			t.Errorf("%s: Check() = %v, want an error: %t", state, err, wantErr)
		}
	}

	check("standby", false)
	// A standby never renews: however long ago anything happened, it is healthy.
	clk.Step(time.Hour)
	check("standby an hour later", false)

	h.renewed()
	h.setLeading(true)
	check("leading, just acquired", false)
	clk.Step(renewDeadline)
	check("leading, last renewal exactly the renew deadline ago", false)
	clk.Step(time.Millisecond)
	check("leading, renewal overdue", true)
	h.renewed()
	check("leading, renewed again", false)

	clk.Step(renewDeadline / 2)
	h.setLost()
	check("lost", true)
	h.setLeading(false)
	check("lost, no longer leading", true)
	h.renewed()
	check("lost, whatever renewed", true)
}
