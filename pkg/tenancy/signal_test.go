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

package tenancy

import "testing"

// TestSignal: a channel asked for before the signal fires is closed by it, one asked for after is closed already,
// and firing twice is harmless.
func TestSignal(t *testing.T) {
	var s signal
	before := s.done()
	select {
	case <-before:
		t.Fatal("the channel is closed before the signal fired")
	default:
	}
	if s.hasFired() {
		t.Fatal("hasFired before fire")
	}
	s.fire()
	s.fire()
	for name, ch := range map[string]<-chan struct{}{"asked before": before, "asked after": s.done()} {
		select {
		case <-ch:
		default:
			t.Errorf("the channel %s the signal fired is open", name)
		}
	}
	if !s.hasFired() {
		t.Error("hasFired is false after fire")
	}
}

// A fired signal keeps no channel of its own: every registration's synced signal is asked for its channel before
// it fires (the workers wait on it), and a tenant keeps its registrations for as long as it runs.
func TestAFiredSignalKeepsNoChannel(t *testing.T) {
	var s signal
	before := s.done()
	s.fire()
	<-before
	if s.ch != nil {
		t.Error("the fired signal still holds the channel it handed out")
	}
	if s.done() != closedChannel {
		t.Error("a fired signal hands out a channel of its own")
	}
}
