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
	"errors"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	testingclock "k8s.io/utils/clock/testing"
)

// t0 is the tests' start on a fake clock.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestRefusalTracker(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	tr := &RefusalTracker{Clock: clk, Limit: 10 * time.Second}
	forbidden := apierrors.NewForbidden(coordinationv1.Resource("leases"), "x", errors.New("no"))
	steps := []struct {
		after time.Duration
		err   error
		want  bool
	}{
		{0, forbidden, false},
		{9 * time.Second, forbidden, false},
		{time.Second, nil, false}, // a success ends the run of refusals
		{time.Second, forbidden, false},
		{5 * time.Second, apierrors.NewNotFound(coordinationv1.Resource("leases"), "x"), false}, // another error leaves it
		{4 * time.Second, forbidden, false},
		{time.Second, forbidden, true},
	}
	for i, s := range steps {
		clk.Step(s.after)
		if got := tr.Observe(s.err); got != s.want {
			t.Errorf("step %d (%v after %s): Observe = %t, want %t", i, s.err, s.after, got, s.want)
		}
	}
}
