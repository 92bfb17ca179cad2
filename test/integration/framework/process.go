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
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// stopGracePeriod is how long a component gets to exit after SIGTERM before its process group is killed.
// kube-apiserver drains requests on SIGTERM; a few seconds is plenty on loopback with no clients left.
const stopGracePeriod = 10 * time.Second

// processStarter starts every child process from one goroutine locked to one OS thread.
//
// Why: the parent-death signal (Pdeathsig, set in process_linux.go) fires when the *thread* that forked the child
// exits, not when the process does (golang/go#27505). The Go runtime ends a thread when a goroutine locked to it
// exits, so a child forked from an arbitrary thread could be killed in the middle of a test by unrelated code. A
// thread that this package owns and keeps until the control plane stops avoids that. When its goroutine finally
// exits, still locked on purpose, the runtime ends the thread (unless it is the main thread, which it never ends),
// and the kernel kills any child that somehow survived stop; in any case every child dies with the test binary.
type processStarter struct {
	requests chan startRequest
}

type startRequest struct {
	cmd    *exec.Cmd
	result chan error
}

func newProcessStarter() *processStarter {
	s := &processStarter{requests: make(chan startRequest)}
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: see the type's comment.
		for req := range s.requests {
			req.result <- req.cmd.Start()
		}
	}()
	return s
}

func (s *processStarter) start(cmd *exec.Cmd) error {
	result := make(chan error, 1)
	s.requests <- startRequest{cmd: cmd, result: result}
	return <-result
}

// close ends the starter's thread; call it only after every process it started has been stopped.
func (s *processStarter) close() { close(s.requests) }

// process is one running control-plane component, in a process group of its own so that stopping it also stops
// anything it spawned, and so that a Ctrl-C sent to the test's terminal does not reach it before the framework
// can stop it in order.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed once the process has exited and been reaped
	waitErr error         // valid after exited is closed
}

func startProcess(starter *processStarter, name, binary, logPath string, args []string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = childProcAttr()
	if err := starter.start(cmd); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		_ = logFile.Close()
		close(p.exited)
	}()
	return p, nil
}

// exitedEarly reports why the process is no longer running, or nil while it runs. Readiness polls call it so that a
// component that dies at startup (a port taken, a bad flag) fails fast with its log instead of at the timeout.
func (p *process) exitedEarly() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s exited during startup (%v); last lines of %s:\n%s", p.name, p.waitErr, p.logPath, p.logTail(40))
	default:
		return nil
	}
}

// stop sends SIGTERM to the process group, waits for the process to exit, and kills the group if it does not exit
// within stopGracePeriod. It always returns after the process has been reaped.
func (p *process) stop() error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	pgid := p.cmd.Process.Pid // Setpgid makes the child the leader of a group with its own pid
	if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stopping %s: %w", p.name, err)
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(stopGracePeriod):
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("killing %s: %w", p.name, err)
	}
	<-p.exited
	return fmt.Errorf("%s did not exit within %s of SIGTERM and was killed", p.name, stopGracePeriod)
}

// kill sends SIGKILL to the process group and waits until the process is reaped.
func (p *process) kill() error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("killing %s: %w", p.name, err)
	}
	<-p.exited
	return nil
}

func (p *process) logTail(lines int) string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// logContains reports whether the process's log holds s; startup uses it to recognise a lost port race.
func (p *process) logContains(s string) bool {
	data, err := os.ReadFile(p.logPath)
	return err == nil && strings.Contains(string(data), s)
}
