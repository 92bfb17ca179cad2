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

package providerconfig

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	mpfake "github.com/multiproject/client-go/clientset/versioned/fake"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/tenancy"
)

// servesTunnels is discovery for informerset: every built-in group, and of the optional APIs only PangolinTunnels.
type servesTunnels struct{}

func (servesTunnels) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	if gv != informerset.PangolinTunnels.GroupVersion().String() {
		return nil, apierrors.NewNotFound(schema.GroupResource{}, gv)
	}
	return &metav1.APIResourceList{GroupVersion: gv, APIResources: []metav1.APIResource{{Name: informerset.PangolinTunnels.Resource}}}, nil
}

// TestControllerInformersCloseTheirInterests: the Interests a controller takes through the manager's Informers are
// the process's one Fanout's, the shared informer takes no handler of the controller's own, and when the manager
// closes the controller's informers (its stop) its Interests and keys are gone, even those it never closed itself.
func TestControllerInformersCloseTheirInterests(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tn, err := informerset.NewRouting(informerset.RoutingConfig{Config: informerset.Config{
		Client: kubefake.NewClientset(), MultiprojectClient: mpfake.NewClientset(), Discovery: servesTunnels{}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := tn.Set.Start(ctx); err != nil {
		t.Fatal(err)
	}
	routing := make(chan struct{})
	go func() {
		defer close(routing)
		tn.RouteOptionals(ctx, nil)
	}()
	defer func() {
		cancel()
		<-routing
		_ = tn.Close()
	}()
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return tn.Served(informerset.PangolinTunnels), nil
	}); err != nil {
		t.Fatal("PangolinTunnels were never served")
	}
	shared, _ := tn.Shared(informerset.PangolinTunnels)
	fanout := shared.(*tenancy.Fanout)
	handlers := tn.Set.Handlers(informerset.PangolinTunnels)

	var informers []*controllerInformers
	for _, name := range []string{"a", "b"} {
		views, err := tn.Router.Tenant(name)
		if err != nil {
			t.Fatal(err)
		}
		i := &controllerInformers{views: views, shared: tn.Shared}
		informers = append(informers, i)
		c := &tenant.Context{Informers: i}
		in, err := c.Interest(informerset.PangolinTunnels)
		if err != nil {
			t.Fatal(err)
		}
		in.Add(informerset.TunnelKey("pangolin-system", "tunnel-"+name))
		if _, err := in.AddEventHandler(cache.ResourceEventHandlerFuncs{}); err != nil {
			t.Fatal(err)
		}
		inf, err := i.Shared(informerset.PangolinTunnels)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{}); err == nil {
			t.Error("a controller added a handler of its own to the shared tunnel informer")
		}
		if got := i.registrations(); got != 1 {
			t.Errorf("tenant %s: %d registrations, want its Interest", name, got)
		}
	}
	if _, err := informers[0].Interest(informerset.Namespaces); err == nil {
		t.Error("an Interest in a resource that is not watched by key")
	}
	if got := tn.Set.Handlers(informerset.PangolinTunnels); got != handlers || got != 1 {
		t.Errorf("2 tenants: %d handlers on the shared tunnel informer, %d before, want 1", got, handlers)
	}

	informers[0].close()
	if got, keys := fanout.RegistrationCount(), fanout.KeyCount(); got != 1 || keys != 1 {
		t.Errorf("after a's stop: %d Interests, %d keys; want b's 1 and 1", got, keys)
	}
	if got := informers[0].registrations(); got != 0 {
		t.Errorf("after a's stop: %d registrations", got)
	}
	if _, err := informers[0].Interest(informerset.PangolinTunnels); err == nil {
		t.Error("closed informers handed out an Interest")
	}
	informers[1].close()
	if got, keys := fanout.RegistrationCount(), fanout.KeyCount(); got != 0 || keys != 0 {
		t.Errorf("after every stop: %d Interests, %d keys", got, keys)
	}
}
