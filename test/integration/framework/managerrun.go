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
	"net/http"
	"path/filepath"
	"sync"
	"testing"

	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	mpclientset "github.com/multiproject/client-go/clientset/versioned"

	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app"
	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/config"
	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/names"
	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/options"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/registry"
)

// ManagerProcess describes a manager run in process: its controllers and what the test sets instead of flags.
type ManagerProcess struct {
	// Descriptors are the controllers the process knows (app.NewControllerDescriptors for the binary's).
	Descriptors *registry.Descriptors
	// Flags changes the command's defaulted options, as flags would, after the framework's own: the manifests'
	// ServiceAccount's kubeconfig, no leader election, no serving port.
	Flags func(*options.Options)
	// Wrap, if set, wraps the transport of the manager's two shared clients (the controllers', the informers',
	// the Events'), e.g. APICalls.Wrap to count their requests.
	Wrap func(http.RoundTripper) http.RoundTripper
	// RateLimiter, if set, builds those two clients again, each with a new limiter of its own instead of the
	// binary's budget, for a test that measures how long requests wait in it.
	RateLimiter func() flowcontrol.RateLimiter
}

// ManagerProcessConfig builds the manager's configuration the way the binary does (app.NewOptions, then
// Options.Config), as the ServiceAccount of manifests/rbac.
func (cp *ControlPlane) ManagerProcessConfig(t testing.TB, ctx context.Context, p ManagerProcess) config.CompletedConfig {
	t.Helper()
	restConfig, err := cp.ManagerConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "manager.kubeconfig")
	if err := WriteKubeconfig(kubeconfig, restConfig); err != nil {
		t.Fatal(err)
	}
	o := app.NewOptions(p.Descriptors)
	o.Kubeconfig = kubeconfig
	o.LeaderElection.LeaderElect = false
	o.SecureServing.BindPort = 0
	if p.Flags != nil {
		p.Flags(o)
	}
	c, err := o.Config()
	if err != nil {
		t.Fatalf("framework: the manager's options: %v", err)
	}
	if p.RateLimiter != nil {
		limitClients(t, c, p.RateLimiter)
	}
	if p.Wrap != nil {
		wrapClients(p.Wrap, c.Client, c.MultiprojectClient)
	}
	return c.Complete()
}

// limitClients builds the two shared clients of c again as Options.Config does, each with a limiter of newLimiter.
func limitClients(t testing.TB, c *config.Config, newLimiter func() flowcontrol.RateLimiter) {
	t.Helper()
	kubeConfig, crdConfig := rest.CopyConfig(c.Kubeconfig), rest.CopyConfig(c.Kubeconfig)
	kubeConfig.RateLimiter, crdConfig.RateLimiter = newLimiter(), newLimiter()
	// Custom resources have no protobuf encoding.
	crdConfig.ContentType, crdConfig.AcceptContentTypes = "application/json", "application/json"
	var err error
	if c.Client, err = kubernetes.NewForConfig(rest.AddUserAgent(kubeConfig, names.ComponentName)); err != nil {
		t.Fatal(err)
	}
	if c.MultiprojectClient, err = mpclientset.NewForConfig(rest.AddUserAgent(crdConfig, names.ComponentName)); err != nil {
		t.Fatal(err)
	}
	c.EventSink = &typedcorev1.EventSinkImpl{Interface: c.Client.CoreV1().Events("")}
}

// wrapClients puts wrap around the transport of each clientset: every API group client of a clientset, and its
// discovery client, send through the one HTTP client it was built with.
func wrapClients(wrap func(http.RoundTripper) http.RoundTripper, kube kubernetes.Interface, mp mpclientset.Interface) {
	for _, rc := range []rest.Interface{kube.CoreV1().RESTClient(), mp.MultiprojectV1alpha1().RESTClient()} {
		client := rc.(*rest.RESTClient).Client
		client.Transport = wrap(client.Transport)
	}
}

// RunManager runs the manager in process on c with descriptors (app.Run, as the command does after its flags),
// until the returned stop is called or the test ends. stop waits for Run to return and fails the test on its error.
func RunManager(t testing.TB, ctx context.Context, c config.CompletedConfig, descriptors *registry.Descriptors) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, c, descriptors) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("framework: the manager returned %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
