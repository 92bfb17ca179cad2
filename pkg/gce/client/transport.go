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
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"cloud.google.com/go/auth/credentials"
	compute "google.golang.org/api/compute/v1"
	"google.golang.org/api/option"
	"google.golang.org/api/option/internaloption"
	htransport "google.golang.org/api/transport/http"
)

// tenantTransport returns the round tripper of one tenant's calls: the shared base transport, with the tenant's
// credentials on top unless the endpoint is plain HTTP.
func tenantTransport(ctx context.Context, credentialsJSON []byte, plaintext bool) (http.RoundTripper, error) {
	base := baseTransport()
	if plaintext {
		return base, nil
	}
	opts := []option.ClientOption{
		option.WithScopes(compute.ComputeScope),
		// compute.NewService enables the new auth library for its own transports; keep the same one here.
		internaloption.EnableNewAuthLibrary(),
	}
	if credentialsJSON != nil {
		// Only a service-account key: other credential types (external accounts) make the library read files
		// and URLs named in the Secret. Its token requests go over the shared base too; by default the library
		// gives every key a transport (and an idle connection) of its own.
		creds, err := credentials.NewCredentialsFromJSON(credentials.ServiceAccount, credentialsJSON, &credentials.DetectOptions{
			Scopes: []string{compute.ComputeScope},
			Client: &http.Client{Transport: base, Timeout: tokenRequestTimeout},
		})
		if err != nil {
			return nil, err
		}
		opts = append(opts, option.WithAuthCredentials(creds))
	}
	return htransport.NewTransport(ctx, base, opts...)
}

// A compute.Service holds a struct for each of Compute Engine's resources, about 2 KB, of which a client uses two;
// one per tenant was a twelfth of an idle tenant's heap. Every client of one endpoint and User-Agent shares one
// Service, whose HTTP client sends each call through the transport the call's context names: what differs
// between tenants, their credentials, rides on every call and never on the Service.
var services = struct {
	sync.Mutex
	byKey map[serviceKey]*compute.Service
}{byKey: map[serviceKey]*compute.Service{}}

type serviceKey struct{ endpoint, userAgent string }

// sharedService returns the Service of endpoint ("" for the real API) and userAgent, made on first use.
func sharedService(ctx context.Context, endpoint, userAgent string) (*compute.Service, error) {
	services.Lock()
	defer services.Unlock()
	key := serviceKey{endpoint: endpoint, userAgent: userAgent}
	if svc, ok := services.byKey[key]; ok {
		return svc, nil
	}
	opts := []option.ClientOption{option.WithHTTPClient(&http.Client{Transport: callTransport{}})}
	if endpoint != "" {
		opts = append(opts, option.WithEndpoint(endpoint))
	}
	// Not the request's ctx: the Service outlives it. With WithHTTPClient, NewService makes no call.
	svc, err := compute.NewService(context.WithoutCancel(ctx), opts...)
	if err != nil {
		return nil, err
	}
	// With WithHTTPClient the library ignores option.WithUserAgent; the Service appends this to its own
	// User-Agent on every call.
	svc.UserAgent = userAgent
	services.byKey[key] = svc
	return svc, nil
}

// transportKey is the context key of the transport a call goes through.
type transportKey struct{}

// withTransport returns ctx carrying the client's transport, for a call made with it.
func (c *Client) withTransport(ctx context.Context) context.Context {
	return context.WithValue(ctx, transportKey{}, c.transport)
}

// callTransport sends a request through the transport its context names. A request without one fails: it would
// otherwise go out without the tenant's credentials.
type callTransport struct{}

func (callTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rt, ok := req.Context().Value(transportKey{}).(http.RoundTripper)
	if !ok || rt == nil {
		if req.Body != nil {
			_ = req.Body.Close() // a RoundTripper closes the body, also on error
		}
		return nil, errors.New("gce client: a call without its tenant's transport")
	}
	return rt.RoundTrip(req)
}

// tokenRequestTimeout bounds one request for a tenant's access token.
const tokenRequestTimeout = 30 * time.Second

// baseTransport is the one transport under every tenant's client, built on first use. Per-tenant transports cost
// each idle tenant a kept-alive connection (two goroutines) plus TLS state; a shared pool keeps that per API host.
// A variable so that a test can substitute a transport that trusts its TLS server.
var baseTransport = sync.OnceValue(newBaseTransport)

func newBaseTransport() *http.Transport {
	var t *http.Transport
	if dt, ok := http.DefaultTransport.(*http.Transport); ok {
		t = dt.Clone()
	} else {
		t = &http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true, TLSHandshakeTimeout: 10 * time.Second}
	}
	// Many tenants' concurrent calls go to one host: the default of 2 idle connections per host would close and
	// redial most of them after every burst.
	t.MaxIdleConns = 100
	t.MaxIdleConnsPerHost = 100
	// An idle pool does not hold connections (two goroutines each) for long.
	t.IdleConnTimeout = 90 * time.Second
	// One HTTP/2 connection carries every tenant's calls: ping it when quiet so a dead one is noticed in seconds
	// rather than at the next call (the library's own transports did the same, at 31s).
	t.HTTP2 = &http.HTTP2Config{SendPingTimeout: 31 * time.Second}
	return t
}

// checkServiceAccountKey rejects what is not a service-account JSON key, with a message that names no secret
// material.
func checkServiceAccountKey(data []byte) error {
	var key struct {
		Type        string `json:"type"`
		ClientEmail string `json:"client_email"`
		PrivateKey  string `json:"private_key"`
	}
	if err := json.Unmarshal(data, &key); err != nil {
		return errors.New("gce client: the credentials are not JSON")
	}
	if key.Type != "service_account" {
		return fmt.Errorf("gce client: the credentials are of type %q, want a service-account key (\"service_account\")", key.Type)
	}
	if key.ClientEmail == "" || key.PrivateKey == "" {
		return errors.New("gce client: the service-account key has no client_email or private_key")
	}
	return nil
}
