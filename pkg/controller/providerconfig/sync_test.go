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
	"testing"
	"time"
)

// TestRequeue: only a cleanup that waits for something no event announces brings the tenant back on a timer.
func TestRequeue(t *testing.T) {
	for _, tc := range []struct {
		name string
		out  Outcome
		want time.Duration
	}{
		{"nothing pending", Outcome{}, 0},
		{"something abandoned, nothing pending", Outcome{Abandoned: []string{"neg: 2 NEGs"}}, 0},
		{"a cleanup pending", Outcome{Pending: []string{"neg: 2 NEGs"}}, PendingRecheckInterval},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := requeue(tc.out); got != tc.want {
				t.Errorf("requeue = %v, want %v", got, tc.want)
			}
		})
	}
}
