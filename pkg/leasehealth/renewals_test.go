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

package leasehealth

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	testingclock "k8s.io/utils/clock/testing"
)

// TestRenewalTrackerCheck: a Lease not held is healthy however old its last renewal; a held one fails once its
// last renewal is older than the renew deadline (not at exactly the deadline); a lost one fails for good.
func TestRenewalTrackerCheck(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	renewDeadline := 10 * time.Second
	tr := NewRenewalTracker(clk, renewDeadline)
	for _, step := range []struct {
		state string
		do    func()
		want  error // errAny: any error
	}{
		{"never held", func() {}, nil},
		{"not held, an hour later", func() { clk.Step(time.Hour) }, nil},
		{"held, just renewed", func() { tr.Renewed(clk.Now()) }, nil},
		{"held, renewed exactly the renew deadline ago", func() { clk.Step(renewDeadline) }, nil},
		{"held, renewal overdue", func() { clk.Step(time.Millisecond) }, errAny},
		{"overdue, no longer held", func() { tr.SetHeld(false) }, nil},
		{"held again, renewed", func() { tr.Renewed(clk.Now()) }, nil},
		{"lost", func() { tr.SetLost() }, ErrLeaseLost},
		{"lost, renewed whatever", func() { tr.Renewed(clk.Now()) }, ErrLeaseLost},
		{"lost, no longer held", func() { tr.SetHeld(false) }, ErrLeaseLost},
	} {
		step.do()
		err := tr.Check()
		switch {
		case step.want == errAny && (err == nil || errors.Is(err, ErrLeaseLost)):
			t.Errorf("%s: Check() = %v, want an overdue renewal", step.state, err)
		case step.want != errAny && !errors.Is(err, step.want):
			t.Errorf("%s: Check() = %v, want %v", step.state, err, step.want)
		}
	}
}

var errAny = errors.New("any error")

func TestRenewalTrackerWaitOverdueFiresOnlyOnceRenewalIsOverdue(t *testing.T) {
	ctx := t.Context()
	clk := testingclock.NewFakeClock(t0)
	limit := 4500 * time.Millisecond
	tr := NewRenewalTracker(clk, limit)
	renew := func() { tr.Renewed(clk.Now()) }
	renew()

	fired := make(chan bool, 1)
	go func() { fired <- tr.WaitOverdue(ctx, limit) }()
	// armed waits until the watcher has set its timer, after a start or a wake-up.
	armed := func() {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return clk.HasWaiters(), nil
		}); err != nil {
			t.Fatal("the watcher set no timer")
		}
	}
	notFired := func(state string) {
		t.Helper()
		select {
		case <-fired:
			t.Fatalf("%s: the watcher reported an overdue renewal", state)
		default:
		}
	}

	armed()
	clk.Step(limit - time.Millisecond)
	notFired("just before the limit")
	renew()
	// Its timer fires at the first limit; the renewal moved the deadline, so it sets another.
	clk.Step(time.Millisecond)
	armed()
	notFired("renewed before the limit")
	clk.Step(limit - 2*time.Millisecond)
	armed()
	notFired("just before the limit of the second renewal")
	clk.Step(time.Millisecond)
	select {
	case got := <-fired:
		if !got {
			t.Fatal("the watcher returned false, want true (overdue)")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the watcher did not report the overdue renewal")
	}

	// A watcher whose context ends returns false.
	ctx2, cancel := context.WithCancel(ctx)
	renew()
	go func() { fired <- tr.WaitOverdue(ctx2, limit) }()
	armed()
	cancel()
	if got := <-fired; got {
		t.Fatal("the watcher returned true after its context ended")
	}
}
