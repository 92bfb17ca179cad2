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

package pusher

import (
	"errors"
	"testing"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
)

func TestProblemOf(t *testing.T) {
	boom := errors.New("boom")
	failed := func(name, reason string, permanent bool) outcome {
		return outcome{where: mpv1alpha1.BackendResourceStatus{Name: name, Zone: "z"}, err: boom, reason: reason, permanent: permanent}
	}
	ok := outcome{where: mpv1alpha1.BackendResourceStatus{Name: "fine", Zone: "z"}, state: mpv1alpha1.BackendResourceStateReady}
	for _, tc := range []struct {
		name          string
		outcomes      []outcome
		wantProblem   *problem
		wantRetryable []string
	}{
		{name: "none failed", outcomes: []outcome{ok, ok}},
		{
			name:          "retryable failures are errors, no problem",
			outcomes:      []outcome{failed("a", ReasonGCEError, false), ok, failed("b", ReasonGCEError, false)},
			wantRetryable: []string{"NEG a in zone z: boom", "NEG b in zone z: boom"},
		},
		{
			name:        "the first permanent failure is the problem",
			outcomes:    []outcome{ok, failed("a", ReasonNameCollision, true), failed("b", ReasonInvalid, true)},
			wantProblem: &problem{reason: ReasonNameCollision, message: "NEG a in zone z: boom"},
		},
		{
			name:          "both kinds",
			outcomes:      []outcome{failed("a", ReasonGCEError, false), failed("b", ReasonInUse, true)},
			wantProblem:   &problem{reason: ReasonInUse, message: "NEG b in zone z: boom"},
			wantRetryable: []string{"NEG a in zone z: boom"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gotProblem, gotRetryable := problemOf(tc.outcomes)
			if (gotProblem == nil) != (tc.wantProblem == nil) || (gotProblem != nil && *gotProblem != *tc.wantProblem) {
				t.Errorf("problem = %+v, want %+v", gotProblem, tc.wantProblem)
			}
			var got []string
			for _, err := range gotRetryable {
				got = append(got, err.Error())
			}
			if len(got) != len(tc.wantRetryable) {
				t.Fatalf("retryable = %q, want %q", got, tc.wantRetryable)
			}
			for i := range got {
				if got[i] != tc.wantRetryable[i] {
					t.Errorf("retryable[%d] = %q, want %q", i, got[i], tc.wantRetryable[i])
				}
			}
			for _, err := range gotRetryable {
				if !errors.Is(err, boom) {
					t.Errorf("retryable error %v does not wrap the GCE error", err)
				}
			}
		})
	}
}
