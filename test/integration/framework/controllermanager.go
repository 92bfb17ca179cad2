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
	"path/filepath"
	"strings"
)

// baseControllers are the kube-controller-manager controllers every control plane with ControllerManager runs, and
// the ones probeControllers proves to work before any test starts.
var baseControllers = []string{"garbagecollector", "namespace"}

// startControllerManager starts kube-controller-manager with the base controllers and extra, as the admin (one
// identity for all its controllers), and waits until the base ones have been seen doing their job.
func (cp *ControlPlane) startControllerManager(ctx context.Context, binary string, extra []string) error {
	controllers := append(append([]string{}, baseControllers...), extra...)
	p, err := startProcess(cp.starter, "kube-controller-manager", binary, filepath.Join(cp.dir, "kube-controller-manager.log"), []string{
		"--kubeconfig=" + cp.kubeconfigPath,
		"--controllers=" + strings.Join(controllers, ","),
		"--leader-elect=false",
		// No serving port, so no port race and nothing to poll; readiness is proven by the controllers' work below.
		"--secure-port=0",
		"--use-service-account-credentials=false",
	})
	cp.controllerManager = p
	if err != nil {
		return err
	}
	fmt.Fprintf(cp.progress, "framework: waiting for kube-controller-manager's garbage collector and namespace controller (running %s)\n",
		strings.Join(controllers, ","))
	return cp.probeControllers(ctx, p)
}
