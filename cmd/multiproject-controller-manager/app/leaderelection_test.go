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
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	apiserver "k8s.io/apiserver/pkg/server"
	apiserveroptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"

	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/config"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/providerconfig"
	"github.com/multiproject/multiproject-controller-manager/pkg/leadership"
)

// realHealth is the health check Run builds, for tests that call leaderElectAndRun directly.
func realHealth(c config.CompletedConfig) *leadership.Health {
	return newLeaderElectionHealth(c)
}

// servingConfig gives c a secure server on a loopback port with an in-memory self-signed certificate (no
// delegated authentication or authorization, as in the other unit tests) and returns the base URL and an HTTPS
// client for it.
func servingConfig(t *testing.T, c config.CompletedConfig) (string, *http.Client) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts := apiserveroptions.NewSecureServingOptions()
	opts.BindAddress = net.ParseIP("127.0.0.1")
	opts.Listener = ln
	opts.ServerCert.CertDirectory = ""
	if err := opts.MaybeDefaultWithSelfSignedCerts("localhost", nil, []net.IP{net.ParseIP("127.0.0.1")}); err != nil {
		t.Fatal(err)
	}
	var info *apiserver.SecureServingInfo
	if err := opts.ApplyTo(&info); err != nil {
		t.Fatal(err)
	}
	c.SecureServing = info
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a throwaway self-signed certificate
	}}
	t.Cleanup(client.CloseIdleConnections)
	return "https://" + ln.Addr().String(), client
}

func getStatus(ctx context.Context, client *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, nil
}

// waitLeading waits until the fake's Lease names a holder and /healthz answers 200.
func waitLeading(t *testing.T, ctx context.Context, client *fake.Clientset, httpClient *http.Client, base string, done <-chan error) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-done:
			return false, fmt.Errorf("Run returned early: %v", err)
		default:
		}
		lease, err := client.CoordinationV1().Leases("kube-system").Get(ctx, "multiproject-controller-manager", metav1.GetOptions{})
		if err != nil || holder(lease) == "" {
			return false, nil
		}
		code, err := getStatus(ctx, httpClient, base+"/healthz")
		return err == nil && code == http.StatusOK, nil
	}); err != nil {
		t.Fatalf("never led with a healthy /healthz: %v", err)
	}
}

// TestRunReturnsAtOnceWhenTheLeaseIsLostWhileServing: Run leads and serves; then every call to the API server
// hangs (the fake client blocks inside its reactor, so the controllers' calls hang too, and the elector's renewal
// never returns). /healthz fails once the renewal is overdue, and Run returns leadership.ErrLost one retry period
// later, with its server still serving and its controllers and elector stuck.
func TestRunReturnsAtOnceWhenTheLeaseIsLostWhileServing(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset()
	le := leaderElection(3*time.Second, time.Second, 400*time.Millisecond)
	c := testConfig(client, le)
	base, httpClient := servingConfig(t, c)

	var hang atomic.Bool
	unblock := make(chan struct{})
	client.PrependReactor("update", "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
		if hang.Load() {
			<-unblock
			return true, nil, apierrors.NewServiceUnavailable("the API server hung")
		}
		return false, nil, nil
	})
	t.Cleanup(func() { close(unblock) })

	done := make(chan error, 1)
	go func() { done <- Run(ctx, c, NewControllerDescriptors()) }()
	waitLeading(t, ctx, client, httpClient, base, done)

	hang.Store(true)
	hungAt := time.Now()
	// /healthz, polled until Run returns: it must fail in between.
	var unhealthyAt time.Time
	var err error
	giveUp := time.After(time.Minute)
	for returned := false; !returned; {
		select {
		case err = <-done:
			returned = true
		case <-giveUp:
			t.Fatal("Run did not return after the Lease could not be renewed")
		case <-time.After(20 * time.Millisecond):
			if code, reqErr := getStatus(ctx, httpClient, base+"/healthz"); reqErr == nil && code != http.StatusOK && unhealthyAt.IsZero() {
				unhealthyAt = time.Now()
			}
		}
	}
	returnedAt := time.Now()
	if !errors.Is(err, leadership.ErrLost) {
		t.Fatalf("Run returned %v, want %v", err, leadership.ErrLost)
	}
	t.Logf("API hung at 0; /healthz failed at %s; Run returned at %s (renew deadline %s, retry period %s): %v",
		unhealthyAt.Sub(hungAt).Round(time.Millisecond), returnedAt.Sub(hungAt).Round(time.Millisecond),
		le.RenewDeadline.Duration, le.RetryPeriod.Duration, err)
	if unhealthyAt.IsZero() {
		t.Error("/healthz never failed before Run returned")
	}
	// The last renewal was at most a retry period (plus its round trip) before the hang.
	if bound := le.RenewDeadline.Duration + le.RetryPeriod.Duration + 5*time.Second; returnedAt.Sub(hungAt) > bound {
		t.Errorf("Run returned %s after the API server hung, more than %s", returnedAt.Sub(hungAt), bound)
	}
}

// TestRunOnShutdownReleasesTheLeaseAndStopsServing: a graceful stop still waits for the controllers, releases the
// Lease and stops the secure server before Run returns nil.
func TestRunOnShutdownReleasesTheLeaseAndStopsServing(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client := fake.NewClientset()
	c := testConfig(client, leaderElection(15*time.Second, 10*time.Second, 100*time.Millisecond))
	base, httpClient := servingConfig(t, c)

	done := make(chan error, 1)
	go func() { done <- Run(ctx, c, NewControllerDescriptors()) }()
	waitLeading(t, ctx, client, httpClient, base, done)

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v after a graceful stop", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not return after a graceful stop")
	}
	if h := holder(getLease(t, client)); h != "" {
		t.Errorf("the Lease still names %q after a graceful stop", h)
	}
	httpClient.CloseIdleConnections()
	if _, err := getStatus(context.Background(), httpClient, base+"/healthz"); err == nil {
		t.Error("the secure server still answers after Run returned")
	}
}

// TestLeaseIsNotReleasedWhileAControllerStillRuns: a graceful stop whose controllers did not all return within the
// stop timeout (one is detached and still acts) leaves the Lease to expire instead of handing it to a standby, and
// says so in its error.
func TestLeaseIsNotReleasedWhileAControllerStillRuns(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client := fake.NewClientset()
	c := testConfig(client, leaderElection(15*time.Second, 10*time.Second, 100*time.Millisecond))
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- leaderElectAndRun(ctx, c, realHealth(c), &processState{}, func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			return fmt.Errorf("%w: tenants a", providerconfig.ErrControllersStillRunning)
		})
	}()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("never led")
	}
	me := holder(getLease(t, client))
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, providerconfig.ErrControllersStillRunning) {
			t.Errorf("leaderElectAndRun returned %v, want the controllers still running", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("leaderElectAndRun did not return")
	}
	if h := holder(getLease(t, client)); h != me || h == "" {
		t.Errorf("the Lease names %q after the stop, want still %q: released while a controller still runs", h, me)
	}
}
