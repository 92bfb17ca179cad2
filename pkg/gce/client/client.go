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
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	compute "google.golang.org/api/compute/v1"
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

// NewRateLimiter returns the token bucket of a tenant's calls: QPS <= 0 means no limit.
func NewRateLimiter(qps float32, burst int) flowcontrol.RateLimiter {
	if qps <= 0 {
		return flowcontrol.NewFakeAlwaysRateLimiter()
	}
	return flowcontrol.NewTokenBucketRateLimiter(qps, max(burst, 1))
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

// InsertNEG creates the NEG, waits until GCE has created it, and returns the new NEG's id and selfLink as its
// operation names them (targetId, targetLink; zero values where it names none).
func (c *Client) InsertNEG(ctx context.Context, zone string, neg *compute.NetworkEndpointGroup) (NEGRef, error) {
	var ref NEGRef
	err := c.mutate(ctx, MethodInsert, zone, func(ctx context.Context, requestID string) (*compute.Operation, error) {
		op, err := c.svc.NetworkEndpointGroups.Insert(c.project, zone, neg).RequestId(requestID).Context(ctx).Do()
		if op != nil {
			ref = NEGRef{ID: op.TargetId, SelfLink: op.TargetLink}
		}
		return op, err
	})
	return ref, err
}

// NEGRef is how a backend service or a tool refers to a NEG: GCE's numeric id and its URL.
type NEGRef struct {
	ID       uint64
	SelfLink string
}

// DeleteNEG deletes the NEG, with its endpoints, and waits until GCE has deleted it.
func (c *Client) DeleteNEG(ctx context.Context, zone, name string) error {
	return c.mutate(ctx, MethodDelete, zone, func(ctx context.Context, requestID string) (*compute.Operation, error) {
		return c.svc.NetworkEndpointGroups.Delete(c.project, zone, name).RequestId(requestID).Context(ctx).Do()
	})
}

// AttachEndpoints attaches at most MaxEndpointsPerCall endpoints in one call and waits for its operation.
func (c *Client) AttachEndpoints(ctx context.Context, zone, name string, endpoints []*compute.NetworkEndpoint) error {
	if err := checkBatch(endpoints); err != nil {
		return err
	}
	req := &compute.NetworkEndpointGroupsAttachEndpointsRequest{NetworkEndpoints: endpoints}
	return c.mutate(ctx, MethodAttach, zone, func(ctx context.Context, requestID string) (*compute.Operation, error) {
		return c.svc.NetworkEndpointGroups.AttachNetworkEndpoints(c.project, zone, name, req).RequestId(requestID).Context(ctx).Do()
	})
}

// DetachEndpoints detaches at most MaxEndpointsPerCall endpoints in one call and waits for its operation.
func (c *Client) DetachEndpoints(ctx context.Context, zone, name string, endpoints []*compute.NetworkEndpoint) error {
	if err := checkBatch(endpoints); err != nil {
		return err
	}
	req := &compute.NetworkEndpointGroupsDetachEndpointsRequest{NetworkEndpoints: endpoints}
	return c.mutate(ctx, MethodDetach, zone, func(ctx context.Context, requestID string) (*compute.Operation, error) {
		return c.svc.NetworkEndpointGroups.DetachNetworkEndpoints(c.project, zone, name, req).RequestId(requestID).Context(ctx).Do()
	})
}

func checkBatch(endpoints []*compute.NetworkEndpoint) error {
	if len(endpoints) == 0 || len(endpoints) > MaxEndpointsPerCall {
		return fmt.Errorf("gce client: a batch needs 1 to %d endpoints, got %d", MaxEndpointsPerCall, len(endpoints))
	}
	return nil
}

// ListEndpoints returns every endpoint of the NEG, following pages (500 per call).
func (c *Client) ListEndpoints(ctx context.Context, zone, name string) ([]*compute.NetworkEndpoint, error) {
	items, err := c.listEndpoints(ctx, zone, name, "SKIP")
	if err != nil {
		return nil, err
	}
	out := make([]*compute.NetworkEndpoint, 0, len(items))
	for _, item := range items {
		if item.NetworkEndpoint != nil {
			out = append(out, item.NetworkEndpoint)
		}
	}
	return out, nil
}

// ListEndpointHealths returns the endpoints of a NEG with the health each backend service that uses the NEG reports
// for them (healthStatus SHOW): an endpoint's Healths is empty while the NEG is in no backend service with a health
// check.
func (c *Client) ListEndpointHealths(ctx context.Context, zone, name string) ([]*compute.NetworkEndpointWithHealthStatus, error) {
	return c.listEndpoints(ctx, zone, name, "SHOW")
}

func (c *Client) listEndpoints(ctx context.Context, zone, name, healthStatus string) ([]*compute.NetworkEndpointWithHealthStatus, error) {
	req := &compute.NetworkEndpointGroupsListEndpointsRequest{HealthStatus: healthStatus}
	call := c.svc.NetworkEndpointGroups.ListNetworkEndpoints(c.project, zone, name, req).Context(c.withTransport(ctx))
	var out []*compute.NetworkEndpointWithHealthStatus
	err := c.pages(ctx, MethodListEndpoints, func(token string) (string, error) {
		page, err := call.PageToken(token).Do()
		if err != nil {
			return "", err
		}
		out = append(out, page.Items...)
		return page.NextPageToken, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListNEGs returns every zonal NEG of the project (networkEndpointGroups.aggregatedList), following pages. Each NEG's
// Zone is GCE's zone URL.
func (c *Client) ListNEGs(ctx context.Context) ([]*compute.NetworkEndpointGroup, error) {
	call := c.svc.NetworkEndpointGroups.AggregatedList(c.project).Context(c.withTransport(ctx))
	var out []*compute.NetworkEndpointGroup
	err := c.pages(ctx, MethodAggregatedList, func(token string) (string, error) {
		page, err := call.PageToken(token).Do()
		if err != nil {
			return "", err
		}
		for _, scoped := range page.Items {
			out = append(out, scoped.NetworkEndpointGroups...)
		}
		return page.NextPageToken, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// pages reads a list page by page: fetch reads the page of token and returns the next page's token, "" after the
// last. Each page is one call from the tenant's bucket, recorded as method.
func (c *Client) pages(ctx context.Context, method string, fetch func(token string) (next string, err error)) error {
	token := ""
	for {
		if err := c.take(ctx, false); err != nil {
			return err
		}
		start := time.Now()
		next, err := fetch(token)
		c.observe(method, start, err)
		if err != nil {
			return err
		}
		if next == "" {
			return nil
		}
		token = next
	}
}
