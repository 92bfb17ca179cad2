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

// Package client owns the Compute Engine client of one tenant: a compute/v1 service for the tenant's project, with
// the API address override (--gce-endpoint), credentials (a service-account JSON key or the process's default
// credentials), a client-side token bucket shared by every call of the tenant, operation waiting, and the
// classification of GCE errors by code and reason. It offers exactly the zonal NEG calls the NEG pusher makes.
//
// One Client per tenant is what keeps tenants apart: each has its own project, credentials and rate limiter, so one
// tenant's quota trouble never consumes another's budget. The HTTP transport underneath is not per tenant: every
// Client sends through one process-wide *http.Transport, with the tenant's credentials layered on top, so tenants
// share pooled connections to the API host instead of each keeping its own idle connection and TLS state.
//
// Every HTTP call is recorded, labeled with the tenant, in multiproject_gce_requests_total (by compute/v1 method
// and a bounded result, see Result) and multiproject_gce_request_duration_seconds (pkg/metrics).
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/auth/credentials"
	"github.com/google/uuid"
	compute "google.golang.org/api/compute/v1"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"
	"google.golang.org/api/option/internaloption"
	htransport "google.golang.org/api/transport/http"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/multiproject/multiproject-controller-manager/pkg/metrics"
)

// MaxEndpointsPerCall is the most endpoints GCE accepts in one attach or detach call. The API reference states no
// figure; ingress-gce and the Terraform provider both batch at 500 and the fake enforces it.
const MaxEndpointsPerCall = 500

// DefaultOperationTimeout bounds how long one call waits for its operation to finish.
const DefaultOperationTimeout = 5 * time.Minute

// Config says how to reach one tenant's project.
type Config struct {
	// ProviderConfig names the tenant, the provider_config label of the client's call metrics.
	ProviderConfig string
	// ProjectID is the GCP project every call addresses.
	ProjectID string
	// Endpoint overrides the compute/v1 base URL, e.g. "http://127.0.0.1:8086/compute/v1/" for the fake. It must
	// end in "/compute/v1/" (the client resolves "projects/..." against it). Empty means the real API.
	Endpoint string
	// CredentialsJSON is a service-account JSON key. Nil means the process's default credentials.
	CredentialsJSON []byte
	// QPS and Burst size the tenant's token bucket; every HTTP call (operation polls included) takes one token.
	// QPS <= 0 disables client-side limiting.
	QPS   float32
	Burst int
	// RateLimiter, if set, is used instead of a bucket sized by QPS and Burst, so that several clients of one
	// tenant (one per project, or rebuilt after a credentials change) share the tenant's budget.
	RateLimiter flowcontrol.RateLimiter
	// UserAgent, if set, is sent with every call (it names the replica that made it).
	UserAgent string
	// OperationTimeout bounds the wait for one operation; DefaultOperationTimeout if 0.
	OperationTimeout time.Duration
}

// Client makes one tenant's zonal NEG calls. It is safe for concurrent use.
type Client struct {
	tenant  string
	project string
	svc     *compute.Service
	// transport carries the client's calls: the shared base, with the tenant's credentials on top. svc is
	// shared with other tenants; each call takes this transport along in its context (withTransport).
	transport        http.RoundTripper
	limiter          flowcontrol.RateLimiter
	operationTimeout time.Duration

	calls    atomic.Int64
	mutating atomic.Int64
}

// New builds the tenant's client. It makes no call.
//
// Credentials are never sent over plain HTTP: an http:// Endpoint (the fake on loopback) gets no authentication,
// though a CredentialsJSON given with it is still checked, so a broken Secret shows the same way in a local run as
// in production.
func New(ctx context.Context, cfg Config) (*Client, error) {
	if cfg.ProjectID == "" {
		return nil, errors.New("gce client: a project ID is required")
	}
	if cfg.CredentialsJSON != nil {
		if err := checkServiceAccountKey(cfg.CredentialsJSON); err != nil {
			return nil, err
		}
	}
	endpoint, plaintext := "", false
	if cfg.Endpoint != "" {
		u, err := url.Parse(cfg.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("gce client: endpoint %q is not an http(s) URL", cfg.Endpoint)
		}
		if !strings.HasSuffix(u.Path, "/compute/v1/") {
			return nil, fmt.Errorf("gce client: endpoint %q must end in /compute/v1/", cfg.Endpoint)
		}
		endpoint, plaintext = cfg.Endpoint, u.Scheme == "http"
	}
	rt, err := tenantTransport(ctx, cfg.CredentialsJSON, plaintext)
	if err != nil {
		return nil, fmt.Errorf("gce client: %w", err)
	}
	svc, err := sharedService(ctx, endpoint, cfg.UserAgent)
	if err != nil {
		return nil, fmt.Errorf("gce client: %w", err)
	}
	c := &Client{tenant: cfg.ProviderConfig, project: cfg.ProjectID, svc: svc, transport: rt, operationTimeout: cfg.OperationTimeout}
	if c.operationTimeout <= 0 {
		c.operationTimeout = DefaultOperationTimeout
	}
	c.limiter = cfg.RateLimiter
	if c.limiter == nil {
		c.limiter = NewRateLimiter(cfg.QPS, cfg.Burst)
	}
	return c, nil
}

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

// NewRateLimiter returns the token bucket of a tenant's calls: QPS <= 0 means no limit.
func NewRateLimiter(qps float32, burst int) flowcontrol.RateLimiter {
	if qps <= 0 {
		return flowcontrol.NewFakeAlwaysRateLimiter()
	}
	return flowcontrol.NewTokenBucketRateLimiter(qps, max(burst, 1))
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

// Project is the project the client addresses.
func (c *Client) Project() string { return c.project }

// Calls and MutatingCalls count the HTTP calls made so far (operation polls included in Calls).
func (c *Client) Calls() int64 { return c.calls.Load() }

// MutatingCalls counts insert, delete, attach and detach calls.
func (c *Client) MutatingCalls() int64 { return c.mutating.Load() }

// take waits for a token of the tenant's bucket; ctx ending aborts the wait.
func (c *Client) take(ctx context.Context, mutating bool) error {
	if err := c.limiter.Wait(ctx); err != nil {
		return err
	}
	c.calls.Add(1)
	if mutating {
		c.mutating.Add(1)
	}
	return nil
}

// observe records one HTTP call in the tenant's GCE call metrics.
func (c *Client) observe(method string, start time.Time, err error) {
	metrics.ObserveGCERequest(c.tenant, method, Result(err), time.Since(start))
}

// observeOperation records a call that returns an operation. An operation that comes back DONE with an error is a
// failure of the call as the caller sees it (operationError), though its HTTP status was 200: counting it as a
// success would hide every asynchronous failure from the error ratio.
func (c *Client) observeOperation(method string, start time.Time, op *compute.Operation, err error) {
	if err == nil && op != nil && op.Status == "DONE" {
		err = operationError(op)
	}
	c.observe(method, start, err)
}

// GetNEG returns the zonal NEG, or an error for which IsNotFound is true.
func (c *Client) GetNEG(ctx context.Context, zone, name string) (*compute.NetworkEndpointGroup, error) {
	if err := c.take(ctx, false); err != nil {
		return nil, err
	}
	start := time.Now()
	neg, err := c.svc.NetworkEndpointGroups.Get(c.project, zone, name).Context(c.withTransport(ctx)).Do()
	c.observe(MethodGet, start, err)
	return neg, err
}

// InsertNEG creates the NEG and waits until GCE has created it.
func (c *Client) InsertNEG(ctx context.Context, zone string, neg *compute.NetworkEndpointGroup) error {
	if err := c.take(ctx, true); err != nil {
		return err
	}
	start := time.Now()
	op, err := c.svc.NetworkEndpointGroups.Insert(c.project, zone, neg).RequestId(uuid.NewString()).Context(c.withTransport(ctx)).Do()
	c.observeOperation(MethodInsert, start, op, err)
	if err != nil {
		return err
	}
	return c.wait(ctx, zone, op)
}

// DeleteNEG deletes the NEG, with its endpoints, and waits until GCE has deleted it.
func (c *Client) DeleteNEG(ctx context.Context, zone, name string) error {
	if err := c.take(ctx, true); err != nil {
		return err
	}
	start := time.Now()
	op, err := c.svc.NetworkEndpointGroups.Delete(c.project, zone, name).RequestId(uuid.NewString()).Context(c.withTransport(ctx)).Do()
	c.observeOperation(MethodDelete, start, op, err)
	if err != nil {
		return err
	}
	return c.wait(ctx, zone, op)
}

// AttachEndpoints attaches at most MaxEndpointsPerCall endpoints in one call and waits for its operation.
func (c *Client) AttachEndpoints(ctx context.Context, zone, name string, endpoints []*compute.NetworkEndpoint) error {
	if err := checkBatch(endpoints); err != nil {
		return err
	}
	if err := c.take(ctx, true); err != nil {
		return err
	}
	req := &compute.NetworkEndpointGroupsAttachEndpointsRequest{NetworkEndpoints: endpoints}
	start := time.Now()
	op, err := c.svc.NetworkEndpointGroups.AttachNetworkEndpoints(c.project, zone, name, req).
		RequestId(uuid.NewString()).Context(c.withTransport(ctx)).Do()
	c.observeOperation(MethodAttach, start, op, err)
	if err != nil {
		return err
	}
	return c.wait(ctx, zone, op)
}

// DetachEndpoints detaches at most MaxEndpointsPerCall endpoints in one call and waits for its operation.
func (c *Client) DetachEndpoints(ctx context.Context, zone, name string, endpoints []*compute.NetworkEndpoint) error {
	if err := checkBatch(endpoints); err != nil {
		return err
	}
	if err := c.take(ctx, true); err != nil {
		return err
	}
	req := &compute.NetworkEndpointGroupsDetachEndpointsRequest{NetworkEndpoints: endpoints}
	start := time.Now()
	op, err := c.svc.NetworkEndpointGroups.DetachNetworkEndpoints(c.project, zone, name, req).
		RequestId(uuid.NewString()).Context(c.withTransport(ctx)).Do()
	c.observeOperation(MethodDetach, start, op, err)
	if err != nil {
		return err
	}
	return c.wait(ctx, zone, op)
}

func checkBatch(endpoints []*compute.NetworkEndpoint) error {
	if len(endpoints) == 0 || len(endpoints) > MaxEndpointsPerCall {
		return fmt.Errorf("gce client: a batch needs 1 to %d endpoints, got %d", MaxEndpointsPerCall, len(endpoints))
	}
	return nil
}

// ListEndpoints returns every endpoint of the NEG, following pages (500 per call).
func (c *Client) ListEndpoints(ctx context.Context, zone, name string) ([]*compute.NetworkEndpoint, error) {
	req := &compute.NetworkEndpointGroupsListEndpointsRequest{HealthStatus: "SKIP"}
	call := c.svc.NetworkEndpointGroups.ListNetworkEndpoints(c.project, zone, name, req).Context(c.withTransport(ctx))
	var out []*compute.NetworkEndpoint
	token := ""
	for {
		if err := c.take(ctx, false); err != nil {
			return nil, err
		}
		start := time.Now()
		page, err := call.PageToken(token).Do()
		c.observe(MethodListEndpoints, start, err)
		if err != nil {
			return nil, err
		}
		for _, item := range page.Items {
			if item.NetworkEndpoint != nil {
				out = append(out, item.NetworkEndpoint)
			}
		}
		if page.NextPageToken == "" {
			return out, nil
		}
		token = page.NextPageToken
	}
}

// ListNEGs returns every zonal NEG of the project (networkEndpointGroups.aggregatedList), following pages. Each NEG's
// Zone is GCE's zone URL.
func (c *Client) ListNEGs(ctx context.Context) ([]*compute.NetworkEndpointGroup, error) {
	call := c.svc.NetworkEndpointGroups.AggregatedList(c.project).Context(c.withTransport(ctx))
	var out []*compute.NetworkEndpointGroup
	token := ""
	for {
		if err := c.take(ctx, false); err != nil {
			return nil, err
		}
		start := time.Now()
		page, err := call.PageToken(token).Do()
		c.observe(MethodAggregatedList, start, err)
		if err != nil {
			return nil, err
		}
		for _, scoped := range page.Items {
			out = append(out, scoped.NetworkEndpointGroups...)
		}
		if page.NextPageToken == "" {
			return out, nil
		}
		token = page.NextPageToken
	}
}

// OperationWaitError says that a call was accepted but waiting for its operation failed (a rate limit, a timeout):
// the change may still happen. Callers keep Operation and call WaitOperation before acting on the resource again.
type OperationWaitError struct {
	Zone, Operation string
	Err             error
}

func (e *OperationWaitError) Error() string {
	return fmt.Sprintf("waiting for operation %s: %v", e.Operation, e.Err)
}

func (e *OperationWaitError) Unwrap() error { return e.Err }

// WaitOperation waits for an operation a call returned earlier, by name, until it is DONE, and returns its error.
func (c *Client) WaitOperation(ctx context.Context, zone, name string) error {
	return c.wait(ctx, zone, &compute.Operation{Name: name, Status: "RUNNING"})
}

// wait polls the zonal operation with zoneOperations.wait until it is DONE. The wait method is best-effort (it may
// return a RUNNING operation early), hence the loop; each round is one call from the tenant's bucket. A DONE
// operation that failed becomes a *googleapi.Error with the operation's HTTP status, so callers classify it like a
// synchronous error.
func (c *Client) wait(ctx context.Context, zone string, op *compute.Operation) error {
	ctx, cancel := context.WithTimeout(ctx, c.operationTimeout)
	defer cancel()
	for op.Status != "DONE" {
		if err := c.take(ctx, false); err != nil {
			return &OperationWaitError{Zone: zone, Operation: op.Name, Err: err}
		}
		start := time.Now()
		next, err := c.svc.ZoneOperations.Wait(c.project, zone, op.Name).Context(c.withTransport(ctx)).Do()
		c.observeOperation(MethodOperationWait, start, next, err)
		if err != nil {
			return &OperationWaitError{Zone: zone, Operation: op.Name, Err: err}
		}
		op = next
	}
	return operationError(op)
}

func operationError(op *compute.Operation) error {
	if op.Error == nil || len(op.Error.Errors) == 0 {
		return nil
	}
	first := op.Error.Errors[0]
	code := int(op.HttpErrorStatusCode)
	if code == 0 {
		code = http.StatusInternalServerError
	}
	return &googleapi.Error{
		Code:    code,
		Message: fmt.Sprintf("operation %s failed: %s - %s", op.Name, first.Code, first.Message),
		Errors:  []googleapi.ErrorItem{{Reason: operationReason(first.Code, code), Message: first.Message}},
	}
}

// operationReason maps an operation error code to the reason the same failure has as a synchronous error, so that
// IsNotFound and the others see through operations.
func operationReason(code string, status int) string {
	switch code {
	case "RESOURCE_NOT_FOUND":
		return ReasonNotFound
	case "RESOURCE_ALREADY_EXISTS":
		return ReasonAlreadyExists
	case "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE":
		return ReasonInUse
	}
	if status == http.StatusTooManyRequests {
		return ReasonRateLimitExceeded
	}
	return strings.ToLower(code)
}
