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
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// TestRunStopSignalsFireWhenTheBoundContextEnds: a run started from a context derived from the one the manager is
// bound to gets a signal that the bound context's end fires (no StopAll needed); a run started from an unrelated
// context gets one that watches that context itself; once unbound, runs watch their own context again.
func TestRunStopSignalsFireWhenTheBoundContextEnds(t *testing.T) {
	m := NewManager(ManagerConfig{})
	parent, cancel := context.WithCancel(context.Background())
	undo := m.StopRunsWhenDone(parent)
	defer undo()

	syncCtx := klog.NewContext(parent, klog.Background()) // a sync's context: values over the bound one
	bound, isBound := m.stopSignal(syncCtx)
	other, cancelOther := context.WithCancel(context.Background())
	own, ownBound := m.stopSignal(other)
	if !isBound || ownBound {
		t.Fatalf("bound: %v for a context derived from the bound one, %v for an unrelated one; want true, false", isBound, ownBound)
	}
	m.tenant("a").setRunning(&controllerRun{controller: "x", stop: bound, stopsWithBound: true})
	m.tenant("b").setRunning(&controllerRun{controller: "x", stop: own})

	fired := func(what string, s interface{ Fired() bool }) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return s.Fired(), nil
		}); err != nil {
			t.Fatalf("%s: the signal did not fire", what)
		}
	}
	cancel()
	fired("the bound context ended", bound)
	if own.Fired() {
		t.Error("the end of the bound context fired the signal of a run started from an unrelated context")
	}
	cancelOther()
	fired("the unrelated context ended", own)

	undo()
	again, cancelAgain := context.WithCancel(context.Background())
	defer cancelAgain()
	unbound, _ := m.stopSignal(klog.NewContext(again, klog.Background()))
	cancelAgain()
	fired("unbound, the run's own context ended", unbound)
}
