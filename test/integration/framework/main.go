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
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
)

// Main is the whole TestMain of an integration test package: it starts a control plane with opts, stores it in
// *controlPlane, runs the tests and stops the control plane, then exits with the tests' result.
//
// If the control plane cannot start (binaries missing and not buildable, a component failing) the package FAILS
// with the reason; integration tests never skip for want of a control plane, or a broken setup would look green.
// When tests fail, the control plane's directory with every component's log is kept and its path printed.
func Main(m *testing.M, opts Options, controlPlane **ControlPlane) {
	os.Exit(runWithControlPlane(m, opts, controlPlane))
}

func runWithControlPlane(m *testing.M, opts Options, controlPlane **ControlPlane) int {
	cp, err := StartControlPlane(context.Background(), opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: the integration control plane did not start: %v\n", err)
		return 1
	}
	*controlPlane = cp

	// A Ctrl-C or a SIGTERM would otherwise end the test binary at once; Pdeathsig would still kill the components,
	// but stopping them here also removes the temporary directory.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)
	go func() {
		sig := <-signals
		fmt.Fprintf(os.Stderr, "framework: %v: stopping the control plane\n", sig)
		_ = cp.Stop()
		os.Exit(1)
	}()

	code := m.Run()
	if opts.AfterTests != nil {
		if err := opts.AfterTests(cp, code == 0); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
			code = 1
		}
	}
	if err := cp.stop(code != 0); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: stopping the integration control plane: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
