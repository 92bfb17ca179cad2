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
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	mpclientset "github.com/multiproject/client-go/clientset/versioned"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
)

// EnvOptions vary what NewEnv builds.
type EnvOptions struct {
	// Logger is what the test's context logs with; unset, a ktesting logger of the test at its default verbosity.
	// A benchmark passes a quieter one: a testing logger keeps every line in the benchmark's output.
	Logger klog.Logger
	// AdminQPS and AdminBurst limit the admin clients; 0 keeps client-go's defaults.
	AdminQPS   float32
	AdminBurst int
	// QPS and Burst limit the test's own clients of the manager's identity (Env.Kube and Env.MP), e.g. as the
	// manager's --kube-api-qps and --kube-api-burst; 0 keeps client-go's defaults.
	QPS   float32
	Burst int
	// GCE, if set, starts a fake GCE with these options for the test.
	GCE *fakegce.Options
}

// Env is what every integration test starts from: a context that ends with the test and logs to it, clients of an
// administrator for the fixtures, the manager's clients (the ServiceAccount of manifests/rbac, so that RBAC applies
// as to the binary), and a fake GCE if asked for.
type Env struct {
	cp  *ControlPlane
	Ctx context.Context
	// AdminKube and Admin are system:masters: RBAC never denies them.
	AdminKube kubernetes.Interface
	Admin     mpclientset.Interface
	// Kube and MP act as the manager's ServiceAccount, for a test that does what the manager would (a baseline)
	// or checks what its RBAC allows; the manager (StartManager) builds its own clients, as the binary does.
	Kube kubernetes.Interface
	MP   mpclientset.Interface
	// GCE is nil unless EnvOptions.GCE was set; it closes when the test ends.
	GCE *fakegce.Server
}

// NewEnv builds a test's Env on the control plane; everything it starts stops when the test ends.
func (cp *ControlPlane) NewEnv(t testing.TB, opts EnvOptions) *Env {
	t.Helper()
	logger := opts.Logger
	if logger.GetSink() == nil {
		logger, _ = ktesting.NewTestContext(t)
	}
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	t.Cleanup(cancel)
	e := &Env{cp: cp, Ctx: ctx}
	admin := cp.AdminConfig()
	if opts.AdminQPS > 0 {
		admin.QPS, admin.Burst = opts.AdminQPS, opts.AdminBurst
	}
	e.AdminKube, e.Admin = newClients(t, admin)
	manager, err := cp.ManagerConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if opts.QPS > 0 {
		manager.QPS, manager.Burst = opts.QPS, opts.Burst
	}
	e.Kube, e.MP = newClients(t, manager)
	if opts.GCE != nil {
		e.GCE = fakegce.New(*opts.GCE)
		e.GCE.Start()
		t.Cleanup(e.GCE.Close)
	}
	return e
}

func newClients(t testing.TB, cfg *rest.Config) (kubernetes.Interface, mpclientset.Interface) {
	t.Helper()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mp, err := mpclientset.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return kube, mp
}
