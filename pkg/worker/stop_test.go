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
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// waitCount waits until n reaches want, and fails if it goes past it or does not get there.
func waitCount(t *testing.T, n *atomic.Int32, want int32) {
	t.Helper()
	_ = wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return n.Load() >= want, nil
	})
	if got := n.Load(); got != want {
		t.Fatalf("ran %d times, want %d", got, want)
	}
}

// TestStopSignalFiresOnceOnFireOrParentEnd: Fire runs every function registered, once, however often it is
// called; one registered after it runs at once; a function stopped before runs never; the parent's end fires a
// signal that was not fired, and not one that was.
func TestStopSignalFiresOnceOnFireOrParentEnd(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ran, kept atomic.Int32
	s := NewStopSignal(parent)
	s.OnStop(func() { ran.Add(1) })
	stopKept := s.OnStop(func() { kept.Add(1) })
	if !stopKept() {
		t.Fatal("stopping a function before the signal fired reported it had run")
	}
	if s.Fired() {
		t.Fatal("fired before Fire")
	}
	s.Fire()
	s.Fire()
	waitCount(t, &ran, 1)
	s.OnStop(func() { ran.Add(1) })
	waitCount(t, &ran, 2)
	cancel() // the parent's end after Fire: the signal was unregistered, nothing runs again
	s.Fire()
	waitCount(t, &ran, 2)
	if kept.Load() != 0 {
		t.Error("a stopped function ran")
	}

	parent2, cancel2 := context.WithCancel(context.Background())
	var byParent atomic.Int32
	s2 := NewStopSignal(parent2)
	s2.OnStop(func() { byParent.Add(1) })
	cancel2()
	waitCount(t, &byParent, 1)
	if !s2.Fired() {
		t.Error("the parent's end did not fire the signal")
	}

	// A signal made from a context that has already ended has fired.
	var late atomic.Int32
	s3 := NewStopSignal(parent2)
	s3.OnStop(func() { late.Add(1) })
	waitCount(t, &late, 1)
}

// TestWorkersStopOnTheRunsStopSignal: workers given a StopSignal stop when it fires, their context still live, and
// call done once.
func TestWorkersStopOnTheRunsStopSignal(t *testing.T) {
	stop := NewStopSignal(context.Background())
	w := New(Config{Controller: "stop-signal-test", Sync: func(context.Context, string) (Result, error) { return Result{}, nil }})
	var done atomic.Int32
	started := make(chan struct{})
	w.Start(context.Background(), RunOptions{Stop: stop, Started: func() { close(started) }}, func() { done.Add(1) })
	<-started
	stop.Fire()
	waitCount(t, &done, 1)
	w.Add("after-stop")
	if w.Len() != 0 {
		t.Error("stopped workers took a key")
	}
}
