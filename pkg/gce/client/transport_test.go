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

package client

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/multiproject/multiproject-controller-manager/pkg/gce/fakegce"
)

const testZone = "europe-west1-b"

// countingServer serves handler on loopback and counts the TCP connections it accepts, so a test sees whether
// clients reuse pooled connections or dial their own.
type countingServer struct {
	*httptest.Server
	accepted atomic.Int64
}

func startCountingServer(t *testing.T, handler http.Handler, useTLS bool) *countingServer {
	t.Helper()
	s := &countingServer{Server: httptest.NewUnstartedServer(handler)}
	s.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			s.accepted.Add(1)
		}
	}
	if useTLS {
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s
}

// endpoint is the compute/v1 base URL of the fake behind the server.
func (s *countingServer) endpoint() string { return s.URL + fakegce.APIPrefix }

// newTenantClient builds tenant's client for project "p-<tenant>".
func newTenantClient(t *testing.T, tenant, endpoint string, credentialsJSON []byte) *Client {
	t.Helper()
	c, err := New(context.Background(), Config{
		ProviderConfig:  tenant,
		ProjectID:       "p-" + tenant,
		Endpoint:        endpoint,
		CredentialsJSON: credentialsJSON,
	})
	if err != nil {
		t.Fatalf("tenant %s: %v", tenant, err)
	}
	return c
}

// getMissingNEG makes one complete call (GCE answers 404) with the tenant's client.
func getMissingNEG(t *testing.T, c *Client) {
	t.Helper()
	if _, err := c.GetNEG(context.Background(), testZone, "missing"); !IsNotFound(err) {
		t.Fatalf("project %s: get of a missing NEG: %v, want NotFound", c.Project(), err)
	}
}

// TestTenantsShareOnePoolOfConnections: tenants calling one host one after another reuse the connection of the
// shared base transport instead of each dialing its own.
func TestTenantsShareOnePoolOfConnections(t *testing.T) {
	srv := startCountingServer(t, fakegce.New(fakegce.Options{}), false)
	const tenants = 50
	for i := range tenants {
		getMissingNEG(t, newTenantClient(t, fmt.Sprintf("pool-%d", i), srv.endpoint(), nil))
	}
	if n := srv.accepted.Load(); n > 2 {
		t.Errorf("%d tenants opened %d connections, want at most 2 (one shared pool)", tenants, n)
	}
	rt, err := tenantTransport(context.Background(), nil, true)
	if err != nil || rt != http.RoundTripper(baseTransport()) {
		t.Errorf("a plaintext tenant's transport is %T (%v), want the shared base transport itself", rt, err)
	}
	if base := baseTransport(); base.MaxIdleConnsPerHost < 100 {
		t.Errorf("the shared transport keeps %d idle connections per host, want room for many tenants' calls", base.MaxIdleConnsPerHost)
	}
}

// TestIdleTenantsHoldNoGoroutines: once calls have returned, the goroutines left behind (kept-alive connections)
// are those of the one shared pool, not a pair per tenant.
func TestIdleTenantsHoldNoGoroutines(t *testing.T) {
	srv := startCountingServer(t, fakegce.New(fakegce.Options{}), false)
	before := runtime.NumGoroutine()
	const tenants, allowed = 100, 10
	clients := make([]*Client, 0, tenants)
	for i := range tenants {
		c := newTenantClient(t, fmt.Sprintf("idle-%d", i), srv.endpoint(), nil)
		getMissingNEG(t, c)
		clients = append(clients, c)
	}
	// Goroutines of connections closed by earlier tests may still be exiting: give them a moment.
	growth := runtime.NumGoroutine() - before
	for deadline := time.Now().Add(5 * time.Second); growth > allowed && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		growth = runtime.NumGoroutine() - before
	}
	if growth > allowed {
		t.Errorf("%d idle tenants added %d goroutines, want at most %d", len(clients), growth, allowed)
	}
}

// TestEachTenantsTokenOverTheSharedTransport: with service-account keys and an https endpoint, both tenants'
// clients share one compute.Service, every call carries its own tenant's token, and both tenants' calls, and their
// token requests, travel over one connection each of the shared base transport.
func TestEachTenantsTokenOverTheSharedTransport(t *testing.T) {
	tokens := startTokenServer(t)
	var mu sync.Mutex
	authByProject := map[string][]string{}
	fake := fakegce.New(fakegce.Options{})
	api := startCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		project := strings.Split(strings.TrimPrefix(r.URL.Path, fakegce.APIPrefix+"projects/"), "/")[0]
		mu.Lock()
		authByProject[project] = append(authByProject[project], r.Header.Get("Authorization"))
		mu.Unlock()
		fake.ServeHTTP(w, r)
	}), true)
	useBaseTransportTrusting(t, api.Certificate())

	key := newServiceAccountKeyPEM(t)
	clients := map[string]*Client{}
	for _, tenant := range []string{"a", "b"} {
		clients[tenant] = newTenantClient(t, tenant, api.endpoint(), serviceAccountJSON(t, key, tenant, tokens.URL+"/token/"+tenant))
	}
	if clients["a"].svc != clients["b"].svc {
		t.Error("two tenants' clients of one endpoint have a compute.Service each, want one shared")
	}
	for range 2 {
		for _, tenant := range []string{"a", "b"} {
			getMissingNEG(t, clients[tenant])
		}
	}

	mu.Lock()
	defer mu.Unlock()
	for _, tenant := range []string{"a", "b"} {
		got := authByProject["p-"+tenant]
		if len(got) != 2 || got[0] != "Bearer tok-"+tenant || got[1] != "Bearer tok-"+tenant {
			t.Errorf("tenant %s's calls carried Authorization %q, want \"Bearer tok-%s\" on both", tenant, got, tenant)
		}
	}
	if n := api.accepted.Load(); n != 1 {
		t.Errorf("two tenants opened %d TLS connections, want 1 (the shared transport's)", n)
	}
	if n := tokens.calls.Load(); n != 2 {
		t.Errorf("%d token requests, want 2 (one per tenant, then cached)", n)
	}
	if n := tokens.accepted.Load(); n != 1 {
		t.Errorf("two tenants' token requests opened %d connections, want 1 (the shared transport's)", n)
	}
}

// TestPlainHTTPEndpointGetsNoCredentials: a tenant with a valid key but an http:// endpoint sends no token, and
// never asks for one.
func TestPlainHTTPEndpointGetsNoCredentials(t *testing.T) {
	tokens := startTokenServer(t)
	var mu sync.Mutex
	var auth []string
	fake := fakegce.New(fakegce.Options{})
	api := startCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		fake.ServeHTTP(w, r)
	}), false)
	key := serviceAccountJSON(t, newServiceAccountKeyPEM(t), "plain", tokens.URL+"/token/plain")
	getMissingNEG(t, newTenantClient(t, "plain", api.endpoint(), key))
	mu.Lock()
	defer mu.Unlock()
	if len(auth) != 1 || auth[0] != "" {
		t.Errorf("Authorization headers %q, want one call without one", auth)
	}
	if n := tokens.calls.Load(); n != 0 {
		t.Errorf("%d token requests over a plaintext endpoint, want 0", n)
	}
}

// tokenServer is an OAuth2 token endpoint: /token/<tenant> answers with the access token "tok-<tenant>".
type tokenServer struct {
	*httptest.Server
	calls    atomic.Int64
	accepted atomic.Int64 // TCP connections
}

func startTokenServer(t *testing.T) *tokenServer {
	t.Helper()
	s := &tokenServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.calls.Add(1)
		if err := r.ParseForm(); err != nil || r.PostForm.Get("assertion") == "" {
			http.Error(w, "want a JWT bearer assertion", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"access_token": "tok-" + strings.TrimPrefix(r.URL.Path, "/token/"),
			"token_type":   "Bearer",
			"expires_in":   3600,
		})
	}))
	s.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			s.accepted.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// useBaseTransportTrusting makes New build clients over a base transport, configured as in production, that also
// trusts cert, for the rest of the test.
func useBaseTransportTrusting(t *testing.T, cert *x509.Certificate) {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	base := newBaseTransport()
	base.TLSClientConfig = &tls.Config{RootCAs: roots}
	saved := baseTransport
	baseTransport = func() *http.Transport { return base }
	t.Cleanup(func() {
		baseTransport = saved
		base.CloseIdleConnections()
	})
}

func newServiceAccountKeyPEM(t *testing.T) []byte {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// serviceAccountJSON is a service-account key of tenant's project whose tokens come from tokenURL.
func serviceAccountJSON(t *testing.T, keyPEM []byte, tenant, tokenURL string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]string{
		"type":           "service_account",
		"project_id":     "p-" + tenant,
		"private_key_id": "key-" + tenant,
		"private_key":    string(keyPEM),
		"client_email":   "neg@p-" + tenant + ".iam.gserviceaccount.com",
		"client_id":      "1",
		"token_uri":      tokenURL,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCallWithoutItsTenantsTransportFails: the shared Service's HTTP client refuses a request whose context names
// no tenant transport, rather than sending it without credentials, and closes its body as a RoundTripper must.
func TestCallWithoutItsTenantsTransportFails(t *testing.T) {
	body := &closeRecorder{Reader: strings.NewReader("{}")}
	req, err := http.NewRequest(http.MethodPost, "https://compute.googleapis.com/compute/v1/projects/p/zones/z/networkEndpointGroups", body)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := (callTransport{}).RoundTrip(req); err == nil {
		_ = resp.Body.Close()
		t.Fatal("a request without a tenant transport was sent")
	}
	if !body.closed {
		t.Error("the refused request's body was not closed")
	}
}

type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error {
	c.closed = true
	return nil
}
