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

package worker

import (
	"context"
	"sync"
)

// StopSignal fires once, when a controller run is over: its context was cancelled by the run's owner, or its
// parent context ended. The parts of a controller register what must happen then (stop the workers, start
// draining) with OnStop, as they would with context.AfterFunc on the run's context. The difference is the cost:
// every AfterFunc on a context makes it keep a map of its children, which was about 0.4 KiB per controller of every
// tenant; a StopSignal is one registration on the parent context for the whole run, and a slice.
type StopSignal struct {
	mu    sync.Mutex
	fired bool
	funcs []*stopFunc
	// unregister removes the signal from the parent context once it has fired.
	unregister func() bool
}

// The zero StopSignal fires only when Fire is called; its owner fires it when the run's parent context ends, if it
// must (as the manager does for all its runs at once).

// NewStopSignal returns a signal that fires when parent ends, or when Fire is called, whichever comes first. The
// run's owner calls Fire right after it cancels the run's context (a child of parent).
func NewStopSignal(parent context.Context) *StopSignal {
	s := &StopSignal{}
	unregister := context.AfterFunc(parent, s.Fire)
	s.mu.Lock()
	s.unregister = unregister
	fired := s.fired
	s.mu.Unlock()
	if fired {
		unregister()
	}
	return s
}

// OnStop runs f on a goroutine of its own once the signal fires, at once if it has. The returned function keeps f
// from running and reports whether it did so, as context.AfterFunc's does.
func (s *StopSignal) OnStop(f func()) (stop func() bool) {
	e := &stopFunc{f: f}
	s.mu.Lock()
	fired := s.fired
	if !fired {
		s.funcs = append(s.funcs, e)
	}
	s.mu.Unlock()
	if fired {
		go e.run()
	}
	return e.stop
}

// Fire runs every function registered, each on a goroutine of its own. Only the first call does anything.
func (s *StopSignal) Fire() {
	s.mu.Lock()
	if s.fired {
		s.mu.Unlock()
		return
	}
	s.fired = true
	funcs, unregister := s.funcs, s.unregister
	s.funcs = nil
	s.mu.Unlock()
	if unregister != nil {
		unregister()
	}
	for _, e := range funcs {
		go e.run()
	}
}

// Fired reports whether the signal has fired.
func (s *StopSignal) Fired() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fired
}

type stopFunc struct {
	once sync.Once
	f    func()
}

func (e *stopFunc) run() { e.once.Do(e.f) }

func (e *stopFunc) stop() bool {
	stopped := false
	e.once.Do(func() { stopped = true })
	return stopped
}

// AfterStop runs f once the run is over: when stop fires, or, without a StopSignal (a controller run by a test or
// by Run), when ctx ends. The returned function keeps f from running, as context.AfterFunc's does.
func AfterStop(ctx context.Context, stop *StopSignal, f func()) func() bool {
	if stop != nil {
		return stop.OnStop(f)
	}
	return context.AfterFunc(ctx, f)
}
