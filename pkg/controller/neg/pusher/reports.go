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
	"context"
	"slices"
	"sync"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
)

const (
	// reportQuiet is how long a Translation's generations must stop coming before the status reports the last
	// one, and how long after a status write the next report waits: a Service changing about every second writes
	// one status per burst, one changing every ten seconds one per change (its report is not held back).
	reportQuiet = 2 * time.Second
	// reportMaxDelay bounds how long a report waits while the Translation keeps changing.
	reportMaxDelay = 10 * time.Second
)

// reports decides when a status that only reports is written (onlyReports): the first after a quiet spell at
// once, later ones once the Translation is quiet for reportQuiet, within reportMaxDelay. Until then the generation
// pushed is in the pushed.Generations the translator and the readiness reflector read. A status that says anything
// else (a NEG made, a state, an error, a membership) is written at once, and carries the report with it.
type reports struct {
	// quiet and maxDelay are reportQuiet and reportMaxDelay (tests shorten or lengthen them).
	quiet, maxDelay time.Duration
	now             func() time.Time

	mu    sync.Mutex
	byKey map[string]*reportState
	// swept is when wrote last dropped the entries of Translations quiet since their last write.
	swept time.Time
}

// reportState is what is known of one Translation's reports. An entry lives from a status write until, past
// reportQuiet with nothing held, a later write of any Translation or the Translation's own sync drops it.
type reportState struct {
	uid types.UID
	// written is when this pusher last wrote the Translation's status.
	written time.Time
	// first is when the oldest report not written was held (zero: none is); last when its latest generation was
	// pushed, of generation.
	first, last time.Time
	generation  int64
}

func newReports(now func() time.Time) *reports {
	// byKey is made by the first status write: a tenant whose Translations never change holds none.
	return &reports{quiet: reportQuiet, maxDelay: reportMaxDelay, now: now}
}

// hold says how long the report of tr's generation, just pushed, waits: 0 to write it now.
func (r *reports) hold(key string, tr *mpv1alpha1.Translation) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	st := r.byKey[key]
	if st == nil || st.uid != tr.UID {
		// Nothing written by this pusher lately: the report is the first of a burst, at once.
		return 0
	}
	if st.first.IsZero() {
		if now.Sub(st.written) >= r.quiet {
			return 0
		}
		st.first = now
	}
	if st.generation != tr.Generation {
		st.last, st.generation = now, tr.Generation
	}
	due := st.last.Add(r.quiet)
	if bound := st.first.Add(r.maxDelay); bound.Before(due) {
		due = bound
	}
	if !now.Before(due) {
		return 0
	}
	return due.Sub(now)
}

// wrote records a status write of the Translation: it carried every report held.
func (r *reports) wrote(key string, uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byKey == nil {
		r.byKey = map[string]*reportState{}
	}
	now := r.now()
	r.byKey[key] = &reportState{uid: uid, written: now}
	if now.Sub(r.swept) >= r.quiet {
		// Most Translations written once are not synced again before the verify period: the entries of those
		// quiet since go here, at most once per quiet time, not only at their next sync.
		r.swept = now
		for k, st := range r.byKey {
			if st.first.IsZero() && now.Sub(st.written) >= r.quiet {
				delete(r.byKey, k)
			}
		}
	}
}

// idle drops what is known of a Translation whose sync had nothing to write, once its last write is older than
// reportQuiet and nothing is held: its next report is the first of a burst again.
func (r *reports) idle(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st := r.byKey[key]; st != nil && st.first.IsZero() && r.now().Sub(st.written) >= r.quiet {
		delete(r.byKey, key)
	}
}

// forget drops what is known of a Translation that is gone.
func (r *reports) forget(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.byKey, key)
}

// len is how many Translations the reports know of.
func (r *reports) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byKey)
}

// report writes the status a sync amounts to, unless the Translation has it already, or it only reports a
// generation the spec has left (superseded), or it only reports what went well while the Translation keeps changing
// (reports.hold). In that last case only, the generation pushed is recorded for the process (pushed.Generations)
// and report returns how long the status write waits: the sync comes back then.
func (s *negSync) report(ctx context.Context, status mpv1alpha1.TranslationStatus) (time.Duration, error) {
	switch {
	case apiequality.Semantic.DeepEqual(s.tr.Status, status):
		s.p.reports.idle(s.key)
		return 0, nil
	case s.superseded(status):
		return 0, nil
	case s.p.pushed != nil && onlyReports(s.tr.Status, status):
		if wait := s.p.reports.hold(s.key, s.tr); wait > 0 {
			s.p.pushed.Pushed(s.tr)
			return wait, nil
		}
	}
	return 0, s.sendStatus(ctx, status)
}

// superseded says whether status only reports a generation the spec has already left: every resource done (Synced
// True) while the cache holds the same Translation at a newer generation, whose event has enqueued it again. The
// newer generation's sync writes the status a moment later; written now, it would be one more write of the
// Translation per change, bound to a version that no longer is (a 409 conflict, retried) or overwritten at once.
// A status that says something is wrong is written whatever the spec does.
func (s *negSync) superseded(status mpv1alpha1.TranslationStatus) bool {
	if c := meta.FindStatusCondition(status.Conditions, mpv1alpha1.TranslationConditionSynced); c == nil || c.Status != metav1.ConditionTrue {
		return false
	}
	if !recordsNothingNew(status.Resources, s.tr.Status.Resources) {
		return false
	}
	cached, err := s.p.lister.Translations(s.tr.Namespace).Get(s.tr.Name)
	return err == nil && cached.UID == s.tr.UID && cached.DeletionTimestamp == nil && cached.Generation > s.tr.Generation
}

// recordsNothingNew reports whether every resource of a status carries the GCE id, self link and backend service
// memberships the Translation already records: what only this sync learned (a NEG it created, a backend it joined)
// must be written even when a newer generation follows, since the later sync may not learn it again and the sweep
// and a later build detach exactly the recorded memberships.
func recordsNothingNew(next, recorded []mpv1alpha1.BackendResourceStatus) bool {
	type facts struct {
		id, selfLink string
		backends     []string
	}
	known := make(map[string]facts, len(recorded))
	for _, r := range recorded {
		known[r.Project+"/"+r.Zone+"/"+r.Name] = facts{r.ID, r.SelfLink, r.BackendServices}
	}
	for _, r := range next {
		k, ok := known[r.Project+"/"+r.Zone+"/"+r.Name]
		if !ok || k.id != r.ID || k.selfLink != r.SelfLink || !slices.Equal(k.backends, r.BackendServices) {
			return false
		}
	}
	return true
}

// onlyReports says whether next, summarized, differs from the recorded status only in what reports a sync that
// went well: the generation observed (the status's and the Synced condition's), the Synced message and the
// endpoint counts, with Synced True before and after. Every entry keeps its identity, state, lifecycle, GCE id,
// memberships and (empty) error.
func onlyReports(recorded, next mpv1alpha1.TranslationStatus) bool {
	was := meta.FindStatusCondition(recorded.Conditions, mpv1alpha1.TranslationConditionSynced)
	is := meta.FindStatusCondition(next.Conditions, mpv1alpha1.TranslationConditionSynced)
	if was == nil || is == nil || was.Status != metav1.ConditionTrue || is.Status != metav1.ConditionTrue || was.Reason != is.Reason {
		return false
	}
	a, b := withoutReport(recorded), withoutReport(next)
	return apiequality.Semantic.DeepEqual(a, b)
}

// withoutReport is a copy of status, to compare and not to keep (its entries share their slices with status's), with
// what only reports cleared. It runs on every sync that pushed a new generation: no deep copy.
func withoutReport(status mpv1alpha1.TranslationStatus) mpv1alpha1.TranslationStatus {
	out := status
	out.ObservedGeneration, out.EndpointCount = 0, 0
	out.Resources = slices.Clone(status.Resources)
	for i := range out.Resources {
		out.Resources[i].EndpointCount = 0
	}
	out.Conditions = slices.Clone(status.Conditions)
	for i := range out.Conditions {
		if out.Conditions[i].Type == mpv1alpha1.TranslationConditionSynced {
			out.Conditions[i].ObservedGeneration, out.Conditions[i].Message = 0, ""
		}
	}
	return out
}
