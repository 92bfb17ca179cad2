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

// Command controlplane runs the integration tests' control plane (etcd, kube-apiserver, kube-controller-manager
// with the garbage collector and namespace controllers, and the project's CRDs, RBAC and admission policy) until it
// gets SIGINT or SIGTERM, then stops it. hack/local-up.sh runs it, so a local cluster is started exactly as the
// tests start theirs.
//
// It writes the admin kubeconfig to --kubeconfig only once everything is ready, so a script can wait for the file.
// Its working files go to a new directory under $TMPDIR, removed on exit.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "where to write the admin kubeconfig once the control plane is ready (required)")
	controllerManager := flag.Bool("controller-manager", true, "also run kube-controller-manager (garbagecollector, namespace)")
	installManifests := flag.Bool("install-project-manifests", true, "apply manifests/crds, manifests/rbac and manifests/admission once ready")
	var extraManifestDirs []string
	flag.Func("apply", "a further directory of manifests to apply once ready, e.g. test/fixtures/crds (repeatable)",
		func(dir string) error {
			extraManifestDirs = append(extraManifestDirs, dir)
			return nil
		})
	flag.Parse()
	if *kubeconfig == "" || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*kubeconfig, framework.Options{
		ControllerManager:       *controllerManager,
		InstallProjectManifests: *installManifests,
		ExtraManifestDirs:       extraManifestDirs,
	}); err != nil {
		fmt.Fprintf(os.Stderr, "controlplane: %v\n", err)
		os.Exit(1)
	}
}

func run(kubeconfig string, opts framework.Options) (err error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	cp, err := framework.StartControlPlane(ctx, opts)
	if err != nil {
		return err
	}
	defer func() {
		if stopErr := cp.Stop(); stopErr != nil && err == nil {
			err = stopErr
		}
	}()

	// Write under a temporary name and rename, so whoever waits for the file never reads half of it.
	partial := kubeconfig + ".partial"
	if err := framework.WriteKubeconfig(partial, cp.AdminConfig()); err != nil {
		return err
	}
	if err := os.Rename(partial, kubeconfig); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "controlplane: ready; admin kubeconfig %s; stop with SIGINT or SIGTERM\n", kubeconfig)

	if err := cp.Wait(ctx); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "controlplane: stopping\n")
	return nil
}
