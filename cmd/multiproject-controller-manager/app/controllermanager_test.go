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

package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/anonymous"
	"k8s.io/apiserver/pkg/authorization/path"
	apiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	componentbaseconfig "k8s.io/component-base/config"
	genericcontrollermanager "k8s.io/controller-manager/app"
	controllerhealthz "k8s.io/controller-manager/pkg/healthz"
	"k8s.io/klog/v2/ktesting"

	mpfake "github.com/multiproject/client-go/clientset/versioned/fake"

	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/config"
	"github.com/multiproject/multiproject-controller-manager/pkg/clusterid"
	"github.com/multiproject/multiproject-controller-manager/pkg/leadership"
)

func TestControllerDescriptorTableIsValid(t *testing.T) {
	// NewControllerDescriptors panics on a broken table; this keeps such a table out of a release.
	r := NewControllerDescriptors()
	for _, name := range r.KnownControllers() {
		d, _ := r.Get(name)
		f := d.Factory
		if f.New == nil || f.Section == nil || f.ConditionType == "" {
			t.Errorf("controller %s: factory needs New, Section and ConditionType", name)
		}
	}
}

func leaderElection(lease, renew, retry time.Duration) componentbaseconfig.LeaderElectionConfiguration {
	return componentbaseconfig.LeaderElectionConfiguration{
		LeaderElect:       true,
		LeaseDuration:     metav1.Duration{Duration: lease},
		RenewDeadline:     metav1.Duration{Duration: renew},
		RetryPeriod:       metav1.Duration{Duration: retry},
		ResourceLock:      "leases",
		ResourceName:      "multiproject-controller-manager",
		ResourceNamespace: "kube-system",
	}
}

func testConfig(client *fake.Clientset, le componentbaseconfig.LeaderElectionConfiguration) config.CompletedConfig {
	// Every cluster has kube-system, whose UID seeds the cluster's identity (pkg/clusterid).
	_ = client.Tracker().Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clusterid.SeedNamespace, UID: "kube-system-uid"}})
	broadcaster := record.NewBroadcaster()
	mpClient := mpfake.NewClientset()
	copyWatchedObjects(client)
	copyWatchedObjects(mpClient)
	c := &config.Config{
		LeaderElection:         le,
		ProviderConfigLabelKey: "multiproject.io/provider-config",
		ProviderConfigWorkers:  1,
		Client:                 client,
		MultiprojectClient:     mpClient,
		LeaderElectionClient:   client,
		CacheSyncTimeout:       30 * time.Second,
		EventBroadcaster:       broadcaster,
		EventRecorder:          record.NewFakeRecorder(100),
		EventSink:              &discardSink{},
	}
	return c.Complete()
}

// fakeWithTracker is what both generated fake clientsets offer.
type fakeWithTracker interface {
	Tracker() clienttesting.ObjectTracker
	PrependWatchReactor(resource string, reaction clienttesting.WatchReactionFunc)
}

// copyWatchedObjects gives every watch event of the fake its own copy of the object, as a real API server's decoder
// does. client-go's fake tracker hands a new watch the stored objects themselves when they changed after the
// informer's list (testing/fixture.go, tracker.Watch), and the shared informers' transforms (DropManagedFields) write
// the object they receive: without the copy, that write races with a Get of the same object from the tracker.
func copyWatchedObjects(c fakeWithTracker) {
	c.PrependWatchReactor("*", func(action clienttesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if a, ok := action.(clienttesting.WatchActionImpl); ok {
			opts = a.ListOptions
		}
		w, err := c.Tracker().Watch(action.GetResource(), action.GetNamespace(), opts)
		if err != nil {
			return false, nil, err
		}
		return true, watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
			if e.Object != nil {
				e.Object = e.Object.DeepCopyObject()
			}
			return e, true
		}), nil
	})
}

type discardSink struct{}

func (discardSink) Create(e *corev1.Event) (*corev1.Event, error) { return e, nil }
func (discardSink) Update(e *corev1.Event) (*corev1.Event, error) { return e, nil }
func (discardSink) Patch(e *corev1.Event, _ []byte) (*corev1.Event, error) {
	return e, nil
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

func TestLeaderRunsAndReleasesTheLeaseOnShutdown(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client := fake.NewClientset()
	c := testConfig(client, leaderElection(15*time.Second, 10*time.Second, 100*time.Millisecond))

	running := make(chan struct{})
	var runFinished atomic.Bool
	done := make(chan error, 1)
	go func() {
		done <- leaderElectAndRun(ctx, c, realHealth(c), &processState{}, func(ctx context.Context) error {
			close(running)
			<-ctx.Done()
			runFinished.Store(true)
			return nil
		})
	}()
	select {
	case <-running:
	case <-time.After(30 * time.Second):
		t.Fatal("run was never called")
	}
	if holder(getLease(t, client)) == "" {
		t.Fatal("leader holds no lease")
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("graceful shutdown returned %v", err)
	}
	if !runFinished.Load() {
		t.Error("returned before run finished")
	}
	if h := holder(getLease(t, client)); h != "" {
		t.Errorf("lease still held by %q after shutdown; a standby would wait a whole lease duration", h)
	}
}

func TestRunFailureReleasesTheLeaseAndReturnsTheError(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset()
	c := testConfig(client, leaderElection(15*time.Second, 10*time.Second, 100*time.Millisecond))
	boom := errors.New("caches did not sync")
	err := leaderElectAndRun(ctx, c, realHealth(c), &processState{}, func(context.Context) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("error = %v, want %v", err, boom)
	}
	if h := holder(getLease(t, client)); h != "" {
		t.Errorf("lease still held by %q after run failed; the process must not hold it while doing nothing", h)
	}
}

func TestLostLeaseStopsRunAndIsAnError(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset()
	c := testConfig(client, leaderElection(time.Second, 500*time.Millisecond, 100*time.Millisecond))

	var leading atomic.Bool
	// Once we lead, every lease update fails, as when the API server is unreachable.
	client.PrependReactor("update", "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
		if leading.Load() {
			return true, nil, apierrors.NewServiceUnavailable("etcd is down")
		}
		return false, nil, nil
	})
	runStopped := make(chan struct{})
	err := leaderElectAndRun(ctx, c, realHealth(c), &processState{}, func(ctx context.Context) error {
		leading.Store(true)
		<-ctx.Done()
		close(runStopped)
		return nil
	})
	if !errors.Is(err, leadership.ErrLost) {
		t.Fatalf("error = %v, want %v", err, leadership.ErrLost)
	}
	select {
	case <-runStopped:
	case <-time.After(30 * time.Second):
		t.Fatal("run's context was not cancelled when the lease was lost")
	}
}

func TestStandbyDoesNotRunAndStopsCleanly(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	other := "other-replica"
	now := metav1.NewMicroTime(time.Now())
	leaseSeconds := int32(3600)
	client := fake.NewClientset(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "multiproject-controller-manager"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &other, LeaseDurationSeconds: &leaseSeconds, AcquireTime: &now, RenewTime: &now},
	})
	c := testConfig(client, leaderElection(15*time.Second, 10*time.Second, 50*time.Millisecond))

	var ran atomic.Bool
	done := make(chan error, 1)
	go func() {
		done <- leaderElectAndRun(ctx, c, realHealth(c), &processState{}, func(context.Context) error {
			ran.Store(true)
			return nil
		})
	}()
	// Wait until the standby has tried, and failed, to take the lease at least twice.
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		gets := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "get" && a.GetResource().Resource == "leases" {
				gets++
			}
		}
		return gets >= 2, nil
	}); err != nil {
		t.Fatal("standby never tried the lease")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("standby shutdown returned %v", err)
	}
	if ran.Load() {
		t.Error("a standby ran the controllers")
	}
	if h := holder(getLease(t, client)); h != other {
		t.Errorf("standby changed the lease holder to %q", h)
	}
}

func TestRunWithoutLeaderElectionSyncsAndStops(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	client := fake.NewClientset()
	le := leaderElection(15*time.Second, 10*time.Second, 2*time.Second)
	le.LeaderElect = false
	c := testConfig(client, le)

	done := make(chan error, 1)
	go func() { done <- Run(ctx, c, NewControllerDescriptors()) }()
	// The shared informers list what they watch once they run.
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		select {
		case err := <-done:
			return false, fmt.Errorf("Run returned early: %v", err)
		default:
		}
		for _, a := range client.Actions() {
			if a.GetVerb() == "list" && a.GetResource().Resource == "services" {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("shared informers never listed services: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v after a graceful stop", err)
	}
}

func get(t *testing.T, handler http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body)
}

func TestServedEndpoints(t *testing.T) {
	client := fake.NewClientset()
	c := testConfig(client, leaderElection(15*time.Second, 10*time.Second, 2*time.Second))
	c.Debugging.EnableProfiling = true
	state := &processState{}
	healthz := controllerhealthz.NewMutableHealthzHandler(controllerhealthz.NamedPingChecker("neg"))
	mux := newServingMux(c, healthz, state)

	if code, body := get(t, mux, "/healthz"); code != http.StatusOK || body != "ok" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	if code, _ := get(t, mux, "/livez"); code != http.StatusOK {
		t.Errorf("/livez = %d", code)
	}
	// A standby is ready: it is doing its job, waiting.
	if code, _ := get(t, mux, "/readyz"); code != http.StatusOK {
		t.Errorf("standby /readyz = %d, want 200", code)
	}
	state.leading.Store(true)
	if code, body := get(t, mux, "/readyz?verbose"); code != http.StatusInternalServerError || !strings.Contains(body, "informer-sync failed") {
		t.Errorf("unsynced leader /readyz = %d %q, want 500 naming informer-sync", code, body)
	}
	state.synced.Store(true)
	if code, _ := get(t, mux, "/readyz"); code != http.StatusOK {
		t.Errorf("synced leader /readyz = %d, want 200", code)
	}
	if code, body := get(t, mux, "/metrics"); code != http.StatusOK || !strings.Contains(body, "# TYPE") {
		t.Errorf("/metrics = %d, body %.200q", code, body)
	}
	if code, _ := get(t, mux, "/debug/pprof/"); code != http.StatusOK {
		t.Errorf("/debug/pprof/ = %d with profiling on", code)
	}

	c.Debugging.EnableProfiling = false
	if code, _ := get(t, newServingMux(c, healthz, state), "/debug/pprof/"); code != http.StatusNotFound {
		t.Errorf("/debug/pprof/ = %d with profiling off, want 404", code)
	}
}

// TestHealthPathsAreOpenAndMetricsNeedAuthorization runs the mux behind the same handler chain as production, with
// an authorizer that, like delegated authorization with no grants, allows only the always-allowed paths.
func TestHealthPathsAreOpenAndMetricsNeedAuthorization(t *testing.T) {
	client := fake.NewClientset()
	c := testConfig(client, leaderElection(15*time.Second, 10*time.Second, 2*time.Second))
	pathAuthorizer, err := path.NewAuthorizer([]string{"/healthz", "/readyz", "/livez"})
	if err != nil {
		t.Fatal(err)
	}
	authn := &apiserver.AuthenticationInfo{Authenticator: authenticator.RequestFunc(anonymous.NewAuthenticator(nil).AuthenticateRequest)}
	// The path authorizer has no opinion on other paths, which the chain turns into 403, as with no RBAC grant.
	authz := &apiserver.AuthorizationInfo{Authorizer: pathAuthorizer}
	handler := genericcontrollermanager.BuildHandlerChain(newServingMux(c, controllerhealthz.NewMutableHealthzHandler(), &processState{}), authz, authn)

	for _, p := range []string{"/healthz", "/readyz", "/livez"} {
		if code, _ := get(t, handler, p); code != http.StatusOK {
			t.Errorf("anonymous %s = %d, want 200", p, code)
		}
	}
	if code, _ := get(t, handler, "/metrics"); code != http.StatusForbidden {
		t.Errorf("anonymous /metrics = %d, want 403", code)
	}
}
