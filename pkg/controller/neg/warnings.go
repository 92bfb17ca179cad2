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

package neg

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
)

// warning is one problem with a Service that its owner must fix.
type warning struct {
	reason, message string
}

// warningMemory remembers the warnings last reported per Service, so that a resync or an endpoint change reports a
// problem once rather than on every sync, and a problem that comes back after a fix is reported again.
type warningMemory struct {
	mu sync.Mutex
	m  map[string]map[string]bool
}

// report records a Warning Event on obj for each warning that was not reported in the previous sync of key.
func (w *warningMemory) report(recorder record.EventRecorder, key string, obj runtime.Object, warnings []warning) {
	w.mu.Lock()
	defer w.mu.Unlock()
	previous := w.m[key]
	current := make(map[string]bool, len(warnings))
	for _, wn := range warnings {
		id := wn.reason + "\x00" + wn.message
		current[id] = true
		if !previous[id] {
			recorder.Event(obj, corev1.EventTypeWarning, wn.reason, wn.message)
		}
	}
	if len(current) == 0 {
		delete(w.m, key)
		return
	}
	w.m[key] = current
}

func (w *warningMemory) forget(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, key)
}
