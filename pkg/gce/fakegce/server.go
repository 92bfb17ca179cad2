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

package fakegce

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	compute "google.golang.org/api/compute/v1"
	"google.golang.org/api/option"
	"k8s.io/utils/clock"
)

// APIPrefix is the path under which the compute/v1 client addresses every call when its endpoint is
// Server.Endpoint(): the client resolves "projects/..." against the endpoint it is given, so the endpoint must end
// in "/compute/v1/".
const APIPrefix = "/compute/v1/"

// DefaultSelfLinkBase is where real selfLinks point: GCE answers with www.googleapis.com URLs even when called on
// compute.googleapis.com. Callers parse selfLinks (k8s-cloud-provider finds an operation's project, zone and name in
// its selfLink); nothing follows them, so they keep the real form.
const DefaultSelfLinkBase = "https://www.googleapis.com/compute/v1/"

// Method names one API method the fake serves, as "<collection>.<method>" from the discovery document.
type Method string

// The methods the fake serves.
const (
	MethodInsert          Method = "networkEndpointGroups.insert"
	MethodGet             Method = "networkEndpointGroups.get"
	MethodList            Method = "networkEndpointGroups.list"
	MethodAggregatedList  Method = "networkEndpointGroups.aggregatedList"
	MethodDelete          Method = "networkEndpointGroups.delete"
	MethodAttachEndpoints Method = "networkEndpointGroups.attachNetworkEndpoints"
	MethodDetachEndpoints Method = "networkEndpointGroups.detachNetworkEndpoints"
	MethodListEndpoints   Method = "networkEndpointGroups.listNetworkEndpoints"
	MethodOperationGet    Method = "zoneOperations.get"
	MethodOperationWait   Method = "zoneOperations.wait"
	// Backend services, global and regional, and the operations of their writes (backendservices.go).
	MethodBackendServiceGet             Method = "backendServices.get"
	MethodBackendServiceList            Method = "backendServices.list"
	MethodBackendServiceInsert          Method = "backendServices.insert"
	MethodBackendServicePatch           Method = "backendServices.patch"
	MethodBackendServiceUpdate          Method = "backendServices.update"
	MethodBackendServiceDelete          Method = "backendServices.delete"
	MethodBackendServiceGetHealth       Method = "backendServices.getHealth"
	MethodRegionBackendServiceGet       Method = "regionBackendServices.get"
	MethodRegionBackendServiceList      Method = "regionBackendServices.list"
	MethodRegionBackendServiceInsert    Method = "regionBackendServices.insert"
	MethodRegionBackendServicePatch     Method = "regionBackendServices.patch"
	MethodRegionBackendServiceUpdate    Method = "regionBackendServices.update"
	MethodRegionBackendServiceDelete    Method = "regionBackendServices.delete"
	MethodRegionBackendServiceGetHealth Method = "regionBackendServices.getHealth"
	MethodGlobalOperationGet            Method = "globalOperations.get"
	MethodGlobalOperationWait           Method = "globalOperations.wait"
	MethodRegionOperationGet            Method = "regionOperations.get"
	MethodRegionOperationWait           Method = "regionOperations.wait"
	// AnyMethod, given to InjectFault or SetLatency, applies to every method of the project.
	AnyMethod Method = "*"
)

// Mutating reports whether the method changes state. Mutating calls return an Operation and count against the
// mutation quota; the others count against the read quota.
func (m Method) Mutating() bool {
	switch m {
	case MethodInsert, MethodDelete, MethodAttachEndpoints, MethodDetachEndpoints,
		MethodBackendServiceInsert, MethodBackendServicePatch, MethodBackendServiceUpdate, MethodBackendServiceDelete,
		MethodRegionBackendServiceInsert, MethodRegionBackendServicePatch, MethodRegionBackendServiceUpdate,
		MethodRegionBackendServiceDelete:
		return true
	}
	return false
}

// Options configures a Server. The zero value is a server whose operations complete at once, on the real clock,
// with no quota.
type Options struct {
	// Clock is the time source for operation delays, latency, quota windows and timestamps. Tests pass a
	// k8s.io/utils/clock/testing.FakeClock so that nothing sleeps. Default: the real clock.
	Clock clock.Clock
	// OperationDelay keeps every new operation RUNNING until this much clock time has passed.
	OperationDelay time.Duration
	// OperationPolls keeps every new operation RUNNING until it has been polled (zoneOperations.get or wait) this
	// many times. A wait that counts the last needed poll blocks for any remaining OperationDelay; one that does not
	// returns the RUNNING operation at once, as the real wait may ("best-effort"), so callers must loop.
	OperationPolls int
	// Quota is the per-minute rate quota of every project that has no quota of its own (see SetQuota).
	Quota Quota
	// MaxEndpointsPerNEG caps the endpoints of one NEG. Default 10000, GCE's documented limit.
	MaxEndpointsPerNEG int
	// SelfLinkBase prefixes every selfLink and URL field. Default DefaultSelfLinkBase.
	SelfLinkBase string
	// Seed seeds the random source of probabilistic faults, so that a test run is repeatable.
	Seed uint64
	// OnCall, if set, is called once per request after the response is decided, e.g. to log it.
	OnCall func(CallRecord)
}

// CallRecord describes one request the server answered.
type CallRecord struct {
	Time    time.Time
	Method  Method // empty if the request matched no method the fake serves
	Project string
	Zone    string
	// Resource is the NEG or operation name the call addressed, or the request path if it matched no method.
	Resource string
	// Endpoints is the number of network endpoints in an attach or detach request.
	Endpoints int
	Status    int
	Reason    string // the error reason, for a failed call
	// Operation is the name of the operation a mutating call returned.
	Operation string
	Duration  time.Duration
	// UserAgent is the request's User-Agent header: which client (replica) made the call.
	UserAgent string
}

// Server is a fake Compute Engine API for zonal NEGs. It is an http.Handler; Start serves it on loopback. All
// methods are safe for concurrent use.
type Server struct {
	opts  Options
	clock clock.Clock

	mu       sync.Mutex
	projects map[string]*project
	httpSrv  *httptest.Server

	// closed ends when Close is called. Calls blocked on the clock (a wait, injected latency) end with it, so that
	// Close does not hang on a wait whose fake clock nobody advances.
	closed      context.Context
	closeBlocks context.CancelFunc

	// nextID numbers resources and operations, so ids are unique across all projects as GCE's are.
	nextID atomic.Uint64
}

// New returns a server with empty state. Call Start to serve it, or use it as an http.Handler.
func New(opts Options) *Server {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.MaxEndpointsPerNEG == 0 {
		opts.MaxEndpointsPerNEG = 10000
	}
	if opts.SelfLinkBase == "" {
		opts.SelfLinkBase = DefaultSelfLinkBase
	}
	if !strings.HasSuffix(opts.SelfLinkBase, "/") {
		opts.SelfLinkBase += "/"
	}
	s := &Server{opts: opts, clock: opts.Clock, projects: map[string]*project{}}
	s.closed, s.closeBlocks = context.WithCancel(context.Background())
	// GCE ids are 19-digit numbers; starting there keeps the fake's ids the same shape.
	s.nextID.Store(1_000_000_000_000_000_000)
	return s
}

// Start serves the server on a loopback port and returns its root URL, e.g. "http://127.0.0.1:41234". It may be
// called once; Close stops it.
func (s *Server) Start() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.httpSrv != nil {
		panic("fakegce: Start called twice")
	}
	s.httpSrv = httptest.NewServer(s)
	return s.httpSrv.URL
}

// URL is the root URL of the started server, or "" before Start.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.httpSrv == nil {
		return ""
	}
	return s.httpSrv.URL
}

// Endpoint is the value to give option.WithEndpoint (and the manager's --gce-endpoint): the root URL followed by
// APIPrefix.
func (s *Server) Endpoint() string {
	u := s.URL()
	if u == "" {
		return ""
	}
	return u + APIPrefix
}

// Close ends calls blocked on the clock, with 503, then stops a started server and closes its client connections.
func (s *Server) Close() {
	s.closeBlocks()
	s.mu.Lock()
	srv := s.httpSrv
	s.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// ComputeService returns a real compute/v1 client that talks to the started server without authentication.
func (s *Server) ComputeService(ctx context.Context) (*compute.Service, error) {
	s.mu.Lock()
	srv := s.httpSrv
	s.mu.Unlock()
	if srv == nil {
		panic("fakegce: ComputeService called before Start")
	}
	return compute.NewService(ctx,
		option.WithEndpoint(srv.URL+APIPrefix),
		option.WithoutAuthentication(),
		option.WithHTTPClient(srv.Client()))
}

// route is a request matched to a method: which method, and the path parameters it addressed.
type route struct {
	method  Method
	project string
	zone    string
	// name is the NEG name or, for zoneOperations, the operation name or id.
	name string
	// region is the region of a regional backend service or operation.
	region string
}

// parseRoute matches a request to a method by HTTP verb and path, the way the compute/v1 client builds them:
// BasePath + "projects/{project}/zones/{zone}/networkEndpointGroups[/{neg}[/verb]]" and
// BasePath + "projects/{project}/zones/{zone}/operations/{operation}[/wait]".
func parseRoute(r *http.Request) (route, *apiError) {
	path := r.URL.EscapedPath()
	if !strings.HasPrefix(path, APIPrefix) {
		return route{}, errNotImplemented("no method at %s %s: the client endpoint must end in %q "+
			"(option.WithEndpoint(<server URL>%s))", r.Method, path, APIPrefix, APIPrefix)
	}
	raw := strings.Split(strings.TrimPrefix(path, APIPrefix), "/")
	seg := make([]string, len(raw))
	for i, s := range raw {
		u, err := url.PathUnescape(s)
		if err != nil {
			return route{}, errInvalidField("path", path, "The path is not validly escaped.")
		}
		seg[i] = u
	}
	unknown := func() (route, *apiError) {
		return route{}, errNotImplemented("no method at %s %s", r.Method, path)
	}
	if len(seg) < 4 || seg[0] != "projects" || seg[1] == "" {
		return unknown()
	}
	rt := route{project: seg[1]}
	if rt, ok := parseBackendServiceRoute(rt, seg[2:], r.Method); ok {
		return rt, nil
	}
	if seg[2] == "aggregated" && len(seg) == 4 && seg[3] == "networkEndpointGroups" && r.Method == http.MethodGet {
		rt.method = MethodAggregatedList
		return rt, nil
	}
	if seg[2] != "zones" || len(seg) < 5 || seg[3] == "" {
		return unknown()
	}
	rt.zone = seg[3]
	rest := seg[4:]
	switch {
	case rest[0] == "networkEndpointGroups" && len(rest) == 1:
		switch r.Method {
		case http.MethodGet:
			rt.method = MethodList
		case http.MethodPost:
			rt.method = MethodInsert
		default:
			return unknown()
		}
	case rest[0] == "networkEndpointGroups" && len(rest) == 2:
		rt.name = rest[1]
		switch r.Method {
		case http.MethodGet:
			rt.method = MethodGet
		case http.MethodDelete:
			rt.method = MethodDelete
		default:
			return unknown()
		}
	case rest[0] == "networkEndpointGroups" && len(rest) == 3 && r.Method == http.MethodPost:
		rt.name = rest[1]
		switch rest[2] {
		case "attachNetworkEndpoints":
			rt.method = MethodAttachEndpoints
		case "detachNetworkEndpoints":
			rt.method = MethodDetachEndpoints
		case "listNetworkEndpoints":
			rt.method = MethodListEndpoints
		default:
			return unknown()
		}
	case rest[0] == "operations" && len(rest) == 2 && r.Method == http.MethodGet:
		rt.name, rt.method = rest[1], MethodOperationGet
	case rest[0] == "operations" && len(rest) == 3 && rest[2] == "wait" && r.Method == http.MethodPost:
		rt.name, rt.method = rest[1], MethodOperationWait
	default:
		return unknown()
	}
	return rt, nil
}

// maxRequestBody bounds what the fake reads of a request body: 500 endpoints are about 60 KiB of JSON.
const maxRequestBody = 8 << 20

// ServeHTTP answers one compute/v1 request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	started := time.Now()
	rec := CallRecord{Time: s.clock.Now(), UserAgent: r.UserAgent()}
	resp, aerr := s.serve(r, &rec)
	// Count the error before answering: a test that asserts on Errors right after its call returns must see it.
	if aerr != nil && rec.Method != "" && s.existingProject(rec.Project) != nil {
		p := s.project(rec.Project)
		p.mu.Lock()
		initMap(&p.errors)[rec.Method]++
		p.mu.Unlock()
	}
	if aerr != nil {
		rec.Status, rec.Reason = aerr.code, aerr.reason
		writeJSON(w, aerr.code, aerr.body())
	} else {
		rec.Status = http.StatusOK
		writeJSON(w, http.StatusOK, resp)
	}
	rec.Duration = time.Since(started)
	if s.opts.OnCall != nil {
		s.opts.OnCall(rec)
	}
}

// serve routes the request, applies the project's latency, quota and faults, and runs the method.
func (s *Server) serve(r *http.Request, rec *CallRecord) (any, *apiError) {
	rt, aerr := parseRoute(r)
	if aerr != nil {
		rec.Resource = r.URL.Path
		return nil, aerr
	}
	rec.Method, rec.Project, rec.Zone, rec.Resource = rt.method, rt.project, rt.zone, rt.name

	var body []byte
	if r.Method == http.MethodPost || r.Method == http.MethodPatch || r.Method == http.MethodPut {
		b, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody))
		if err != nil {
			return nil, &apiError{http.StatusBadRequest, ReasonParseError, "fakegce: reading the request body: " + err.Error()}
		}
		body = b
	}
	// An invalid project ID is refused before any state is kept for it; other invalid path parameters are refused
	// after the call is counted, like any failed call of the project.
	if !validProject.MatchString(rt.project) {
		return nil, errInvalidField("project", rt.project, "Must be a project ID or number.")
	}
	// Blocking on the clock ends when the client gives up or the server closes.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(s.closed, cancel)()

	p := s.project(rt.project)
	if delay := p.countCall(s.clock.Now(), rt.method, rt.zone); delay > 0 {
		if err := sleepCtx(ctx, s.clock, delay); err != nil {
			return nil, &apiError{http.StatusServiceUnavailable, ReasonBackendError, "fakegce: request ended during injected latency: client gone or server closed"}
		}
	}
	if aerr := checkRoute(rt); aerr != nil {
		return nil, aerr
	}
	if aerr := checkQueryParameters(rt.method, r.URL.Query()); aerr != nil {
		return nil, aerr
	}

	if rt.method == MethodOperationWait {
		return s.waitOperation(ctx, p, rt)
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	now := s.clock.Now()
	p.completeDue(now)
	fault, aerr := p.admit(now, rt.method, requestedHealthStatus(rt.method, body))
	if aerr != nil {
		return nil, aerr
	}
	call := &call{s: s, p: p, rt: rt, query: r.URL.Query(), body: body, now: now, fault: fault, rec: rec}
	switch rt.method {
	case MethodInsert:
		return call.insert()
	case MethodGet:
		return call.get()
	case MethodList:
		return call.list()
	case MethodAggregatedList:
		return call.aggregatedList()
	case MethodDelete:
		return call.delete()
	case MethodAttachEndpoints:
		return call.attach()
	case MethodDetachEndpoints:
		return call.detach()
	case MethodListEndpoints:
		return call.listEndpoints()
	case MethodOperationGet:
		return call.getOperation()
	}
	if rt.method.backendServices() {
		return call.serveBackendService()
	}
	return nil, errNotImplemented("method %s", rt.method)
}

// requestedHealthStatus is the healthStatus of a listNetworkEndpoints request, SKIP when absent as the API defaults it,
// so that a fault can target the health lists alone. A body that does not parse gives "SKIP"; the method refuses it
// afterwards. Other methods have none ("").
func requestedHealthStatus(m Method, body []byte) string {
	if m != MethodListEndpoints {
		return ""
	}
	var req struct {
		HealthStatus string `json:"healthStatus"`
	}
	if json.Unmarshal(body, &req) != nil || req.HealthStatus == "" {
		return "SKIP"
	}
	return req.HealthStatus
}

// project returns the state of a project, creating it on first use: in the fake every project exists.
func (s *Server) project(id string) *project {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.projects[id]
	if !ok {
		p = newProject(s, id)
		s.projects[id] = p
	}
	return p
}

// existingProject returns a project's state, or nil if nothing has touched the project yet. Read-only helpers use it
// so that asking about a project does not create one.
func (s *Server) existingProject(id string) *project {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.projects[id]
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal((&apiError{status, ReasonBackendError, "fakegce: encoding the response: " + err.Error()}).body())
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// sleepCtx waits d on the clock, or until ctx ends. It stops its timer so a fake clock keeps no stale waiter.
func sleepCtx(ctx context.Context, c clock.Clock, d time.Duration) error {
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
