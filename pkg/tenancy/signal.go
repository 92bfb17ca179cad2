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

import "sync"

// signal is a one-time event whose channel is made only when someone waits on it. Every tenant has a
// registration per handler, each with two such events, and almost none is ever waited on once the tenant runs:
// as channels made up front they cost about 2 KB per tenant.
type signal struct {
	mu    sync.Mutex
	fired bool
	ch    chan struct{}
}

// closedChannel is what every fired signal hands out.
var closedChannel = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// done returns a channel closed once the signal has fired.
func (s *signal) done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fired {
		return closedChannel
	}
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// fire fires the signal; only the first call does anything.
func (s *signal) fire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fired {
		return
	}
	s.fired = true
	if s.ch != nil {
		close(s.ch)
		// Its waiters hold it; done hands out closedChannel from now on. Kept, it cost every registration a
		// channel for as long as it lives, once the workers wait on channels rather than poll HasSynced.
		s.ch = nil
	}
}

// hasFired says whether the signal has fired.
func (s *signal) hasFired() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fired
}
