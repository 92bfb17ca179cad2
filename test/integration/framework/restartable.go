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

package framework

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
)

// restartable is a component a test may kill and start again with the same flags, so its clients find it at the
// same address with the same data: kube-apiserver and etcd.
type restartable struct {
	name string

	// mu guards what a restart replaces.
	mu     sync.Mutex
	proc   *process
	binary string
	args   []string
	ready  func(context.Context) error
	starts int
}

// started records the first start's process and what a restart needs to repeat it. A start retried after a lost
// port race records its own attempt over the last one.
func (r *restartable) started(p *process, binary string, args []string, ready func(context.Context) error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.proc, r.binary, r.args, r.ready = p, binary, args, ready
	r.starts = 1
}

// current is the running (or last) process, nil before the first start.
func (r *restartable) current() *process {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc
}

// kill sends SIGKILL, as a crash or an OOM kill would (a graceful stop is no kinder to clients), and waits until
// the process is gone. Killing a stopped component does nothing.
func (r *restartable) kill() error {
	return r.current().kill()
}

// restart starts the component again after kill, with the same binary and flags, and waits until it is ready.
// Each start logs to its own file (name.log, name-2.log, ...).
func (r *restartable) restart(ctx context.Context, cp *ControlPlane) error {
	r.mu.Lock()
	select {
	case <-r.proc.exited:
	default:
		r.mu.Unlock()
		return fmt.Errorf("%s is running; stop it first", r.name)
	}
	logPath := filepath.Join(cp.dir, fmt.Sprintf("%s-%d.log", r.name, r.starts+1))
	binary, args, ready := r.binary, r.args, r.ready
	r.mu.Unlock()

	fmt.Fprintf(cp.progress, "framework: starting %s again; log %s\n", r.name, logPath)
	p, err := startProcess(cp.starter, r.name, binary, logPath, args)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.proc = p
	r.starts++
	r.mu.Unlock()
	if err := waitReady(ctx, p, ready); err != nil {
		return errors.Join(fmt.Errorf("%s started again but is not ready", r.name), err)
	}
	return nil
}
