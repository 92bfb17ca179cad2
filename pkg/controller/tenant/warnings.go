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

package tenant

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/record"
)

// Warning is one problem with a user's object that its owner must fix.
type Warning struct {
	Reason, Message string
}

// Warnings records Warning Events on users' objects once until they change: a problem that persists across syncs
// (resyncs, endpoint changes) is reported once, a problem that comes back after a fix is reported again.
type Warnings struct {
	recorder record.EventRecorder

	mu   sync.Mutex
	last map[string]sets.Set[Warning]
}

// NewWarnings returns a Warnings that records through recorder.
func NewWarnings(recorder record.EventRecorder) *Warnings {
	return &Warnings{recorder: recorder}
}

// Report states the warnings obj (whose queue key is key) has now: each one not reported by the previous Report
// of key becomes a Warning Event. Report with none clears the memory of key, so every sync that reaches a verdict
// should call it.
func (w *Warnings) Report(key string, obj runtime.Object, warnings ...Warning) {
	w.mu.Lock()
	defer w.mu.Unlock()
	previous := w.last[key]
	current := sets.New[Warning]()
	for _, wn := range warnings {
		if !previous.Has(wn) && !current.Has(wn) {
			w.recorder.Event(obj, corev1.EventTypeWarning, wn.Reason, wn.Message)
		}
		current.Insert(wn)
	}
	if current.Len() == 0 {
		delete(w.last, key)
		return
	}
	if w.last == nil {
		w.last = map[string]sets.Set[Warning]{}
	}
	w.last[key] = current
}

// Forget drops what was reported for key (its object is gone or left the tenant).
func (w *Warnings) Forget(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.last, key)
}
