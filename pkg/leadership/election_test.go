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

package leadership

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/clock"

	"github.com/multiproject/multiproject-controller-manager/pkg/leasehealth"
)

// testRole is the Role the tests' Lease is granted by, as manifests/rbac/leader-election.yaml names it.
const testRole = "multiproject-controller-manager:leader-election"

// testConfig is a campaign for kube-system/multiproject-controller-manager through client, with these timings.
func testConfig(client *fake.Clientset, lease, renew, retry time.Duration) Config {
	return Config{Client: client, Namespace: "kube-system", Name: "multiproject-controller-manager",
		Identity: "test-identity", LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry, Role: testRole}
}

// realHealth is the health check the command builds for cfg.
func realHealth(cfg Config) *Health {
	return NewHealth(clock.RealClock{}, cfg.RenewDeadline)
}

func getLease(t *testing.T, client *fake.Clientset) *coordinationv1.Lease {
	t.Helper()
	lease, err := client.CoordinationV1().Leases("kube-system").Get(context.Background(), "multiproject-controller-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get lease: %v", err)
	}
	return lease
}

func holder(lease *coordinationv1.Lease) string {
	if lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

// TestLostLeaseIsNotReleased: renewals fail while the API server still answers, so client-go's elector, giving
// up, would release the Lease before stopping the controllers. The lock refuses: the Lease keeps naming this
// process until it expires, and the standby cannot act beside controllers that still run.
func TestLostLeaseIsNotReleased(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset()
	cfg := testConfig(client, time.Second, 500*time.Millisecond, 100*time.Millisecond)
	var leading atomic.Bool
	var identity atomic.Pointer[string]
	client.PrependReactor("update", "leases", func(action clienttesting.Action) (bool, runtime.Object, error) {
		lease := action.(clienttesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		if id := holder(lease); id != "" {
			identity.Store(&id)
		}
		if leading.Load() && holder(lease) != "" {
			return true, nil, apierrors.NewServiceUnavailable("etcd is down")
		}
		return false, nil, nil
	})
	runStopped := make(chan struct{})
	health := realHealth(cfg)
	err := Run(ctx, cfg, health, func(ctx context.Context) error {
		leading.Store(true)
		<-ctx.Done()
		close(runStopped)
		return nil
	})
	if !errors.Is(err, ErrLost) {
		t.Fatalf("error = %v, want %v", err, ErrLost)
	}
	<-runStopped
	// Run does not wait for the elector; its OnStoppedLeading comes after its release attempt.
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return !health.renewals.Held(), nil
	}); err != nil {
		t.Fatal("the elector never stopped")
	}
	for _, a := range client.Actions() {
		if u, ok := a.(clienttesting.UpdateAction); ok && a.GetResource().Resource == "leases" {
			if lease := u.GetObject().(*coordinationv1.Lease); holder(lease) == "" {
				t.Errorf("a release reached the API server after the loss")
			}
		}
	}
	if h := holder(getLease(t, client)); h != *identity.Load() {
		t.Errorf("the Lease names %q after the loss, want still %q", h, *identity.Load())
	}
	if !strings.Contains(err.Error(), "Lease") {
		t.Errorf("the error %q does not say why", err)
	}
}

// TestRunExitsNamingTheRoleWhenTheLeaseIsRefused: a manager started with --leader-elect-resource-name or
// --leader-elect-resource-namespace that its Role does not follow is refused its Lease (403). client-go's elector
// would log and retry forever; Run returns, once the refusals have lasted the renew deadline, an error that says
// which Lease, which Role and RoleBinding in which namespace, and what they must grant.
func TestRunExitsNamingTheRoleWhenTheLeaseIsRefused(t *testing.T) {
	for _, verb := range []string{"get", "create"} {
		t.Run(verb, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			client := fake.NewClientset()
			cfg := testConfig(client, 3*time.Second, time.Second, 100*time.Millisecond)
			cfg.Name, cfg.Namespace = "renamed", "elsewhere"
			client.PrependReactor(verb, "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewForbidden(coordinationv1.Resource("leases"), "renamed",
					errors.New(`User "system:serviceaccount:kube-system:multiproject-controller-manager" cannot `+verb))
			})
			started := time.Now()
			done := make(chan error, 1)
			go func() {
				done <- Run(ctx, cfg, realHealth(cfg), func(context.Context) error {
					t.Error("a manager refused its Lease ran its controllers")
					return nil
				})
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("a manager refused its Lease kept retrying")
			}
			if !errors.Is(err, leasehealth.ErrLeaseRefused) || !errors.Is(err, ErrLost) {
				t.Fatalf("Run returned %v, want ErrLeaseRefused (and the process to exit)", err)
			}
			for _, want := range []string{verb + " of Lease elsewhere/renamed", "Role " + testRole,
				`namespace "elsewhere"`, `leases.coordination.k8s.io "renamed"`, "--leader-elect-resource-name",
				"leaderElection.resourceName", `cannot ` + verb} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not say %q:\n%v", want, err)
				}
			}
			if d := time.Since(started); d < cfg.RenewDeadline {
				t.Errorf("gave up after %s, before refusals lasted the renew deadline %s", d, cfg.RenewDeadline)
			}
		})
	}
}
