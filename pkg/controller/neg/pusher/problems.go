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
	"fmt"
	"maps"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// problem is something about one Translation that a person must fix (retrying alone does not help): a name
// collision, a request GCE refuses, a NEG still in use, credentials that do not work.
type problem struct {
	reason, message string
}

// problemSet is the tenant's current problems by Translation key (sweepKey: the garbage sweep's); it decides the
// pusher's ProviderConfig condition.
type problemSet struct {
	mu sync.Mutex
	m  map[string]problem
}

func newProblemSet() *problemSet { return &problemSet{} }

// set records key's problem (nil: none) and reports whether the set changed.
func (s *problemSet) set(key string, pr *problem) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, had := s.m[key]
	if pr == nil {
		delete(s.m, key)
		return had
	}
	if s.m == nil {
		s.m = map[string]problem{}
	}
	s.m[key] = *pr
	return !had || old != *pr
}

// summary is the condition the set amounts to: True when empty, otherwise False with the reason of the first
// Translation (by key) and a count.
func (s *problemSet) summary() (metav1.ConditionStatus, string, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) == 0 {
		return metav1.ConditionTrue, ReasonPushed, "every Translation's NEGs are pushed to GCE or retried"
	}
	keys := slices.Sorted(maps.Keys(s.m))
	if keys[0] == sweepKey && len(keys) > 1 {
		// The sweep's problem (NEGs awaiting deletion) comes after the Translations': theirs hold up a Service.
		keys = append(keys[1:], sweepKey)
	}
	first := s.m[keys[0]]
	msg := "garbage sweep: " + first.message
	if keys[0] != sweepKey {
		msg = fmt.Sprintf("Translation %s: %s", keys[0], first.message)
	}
	if len(keys) > 1 {
		msg += fmt.Sprintf(" (and %d more problems)", len(keys)-1)
	}
	return metav1.ConditionFalse, first.reason, msg
}

// setProblem records key's problem and reports the tenant's condition when the set changed.
func (p *Pusher) setProblem(key string, pr *problem) {
	if !p.problems.set(key, pr) || p.condition == nil {
		return
	}
	p.condition.Report(p.problems.summary())
}

// problemOf sorts the failed outcomes of a sync: the first that only a person can fix is the Translation's problem,
// and those a retry may fix are returned as errors, for the queue's backoff.
func problemOf(outcomes []outcome) (permanent *problem, retryable []error) {
	for _, o := range outcomes {
		switch {
		case o.err == nil:
		case o.permanent:
			if permanent == nil {
				permanent = &problem{reason: o.reason, message: fmt.Sprintf("NEG %s in zone %s: %v", o.where.Name, o.where.Zone, o.err)}
			}
		default:
			retryable = append(retryable, fmt.Errorf("NEG %s in zone %s: %w", o.where.Name, o.where.Zone, o.err))
		}
	}
	return permanent, retryable
}
