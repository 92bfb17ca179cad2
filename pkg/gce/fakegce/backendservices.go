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
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	compute "google.golang.org/api/compute/v1"
)

// Backend services, global (backendServices) and regional (regionBackendServices), as compute v1 serves them, to the
// extent a NEG controller meets them: get, list, insert, patch (a JSON merge patch: a list in it, such as backends,
// replaces the whole list), update (PUT of the whole resource), delete and getHealth. Every write must carry the
// current fingerprint, else it fails with 412 conditionNotMet (insert ignores it); each write changes it. A backend
// names a NEG of the same project that exists; a NEG named by a backend cannot be deleted. Writes return an
// operation that is DONE at once (globalOperations / regionOperations get and wait answer it); the fake has no
// URL maps, forwarding rules or health check resources: healthChecks are kept as given, and a backend service with
// any is one that health checks its NEGs.

// ReasonConditionNotMet is GCE's reason for a write whose fingerprint is not the resource's current one (HTTP 412).
const ReasonConditionNotMet = "conditionNotMet"

type bsKey struct{ region, name string }

func (m Method) backendServices() bool {
	return strings.HasPrefix(string(m), "backendServices.") || strings.HasPrefix(string(m), "regionBackendServices.") ||
		strings.HasPrefix(string(m), "globalOperations.") || strings.HasPrefix(string(m), "regionOperations.")
}

// parseBackendServiceRoute matches the paths the compute/v1 client builds for backend services and the global and
// regional operations, after "projects/{project}/": "global/backendServices[/{name}[/getHealth]]",
// "regions/{region}/backendServices[/{name}[/getHealth]]", "global/operations/{op}[/wait]" and
// "regions/{region}/operations/{op}[/wait]".
func parseBackendServiceRoute(rt route, seg []string, verb string) (route, bool) {
	regional := false
	switch {
	case len(seg) >= 2 && seg[0] == "global":
		seg = seg[1:]
	case len(seg) >= 3 && seg[0] == "regions":
		regional, rt.region, seg = true, seg[1], seg[2:]
	default:
		return rt, false
	}
	pick := func(global, regionalMethod Method) Method {
		if regional {
			return regionalMethod
		}
		return global
	}
	switch {
	case seg[0] == "backendServices" && len(seg) == 1:
		switch verb {
		case http.MethodGet:
			rt.method = pick(MethodBackendServiceList, MethodRegionBackendServiceList)
		case http.MethodPost:
			rt.method = pick(MethodBackendServiceInsert, MethodRegionBackendServiceInsert)
		default:
			return rt, false
		}
	case seg[0] == "backendServices" && len(seg) == 2:
		rt.name = seg[1]
		switch verb {
		case http.MethodGet:
			rt.method = pick(MethodBackendServiceGet, MethodRegionBackendServiceGet)
		case http.MethodPatch:
			rt.method = pick(MethodBackendServicePatch, MethodRegionBackendServicePatch)
		case http.MethodPut:
			rt.method = pick(MethodBackendServiceUpdate, MethodRegionBackendServiceUpdate)
		case http.MethodDelete:
			rt.method = pick(MethodBackendServiceDelete, MethodRegionBackendServiceDelete)
		default:
			return rt, false
		}
	case seg[0] == "backendServices" && len(seg) == 3 && seg[2] == "getHealth" && verb == http.MethodPost:
		rt.name, rt.method = seg[1], pick(MethodBackendServiceGetHealth, MethodRegionBackendServiceGetHealth)
	case seg[0] == "operations" && len(seg) == 2 && verb == http.MethodGet:
		rt.name, rt.method = seg[1], pick(MethodGlobalOperationGet, MethodRegionOperationGet)
	case seg[0] == "operations" && len(seg) == 3 && seg[2] == "wait" && verb == http.MethodPost:
		rt.name, rt.method = seg[1], pick(MethodGlobalOperationWait, MethodRegionOperationWait)
	default:
		return rt, false
	}
	return rt, true
}

func checkBackendServiceRoute(rt route) *apiError {
	if strings.HasPrefix(string(rt.method), "region") && !validName.MatchString(rt.region) {
		return invalidName("region", rt.region)
	}
	switch rt.method {
	case MethodBackendServiceList, MethodRegionBackendServiceList, MethodBackendServiceInsert, MethodRegionBackendServiceInsert:
	case MethodGlobalOperationGet, MethodGlobalOperationWait, MethodRegionOperationGet, MethodRegionOperationWait:
		if !validOperation.MatchString(rt.name) {
			return errInvalidField("operation", rt.name, "Must be an operation name or id.")
		}
	default:
		if !validName.MatchString(rt.name) {
			return invalidName("backendService", rt.name)
		}
	}
	return nil
}

func (p *project) backendServicePath(region, name string) string {
	if region == "" {
		return "projects/" + p.id + "/global/backendServices/" + name
	}
	return "projects/" + p.id + "/regions/" + region + "/backendServices/" + name
}

func (c *call) serveBackendService() (any, *apiError) {
	switch c.rt.method {
	case MethodBackendServiceGet, MethodRegionBackendServiceGet:
		return c.getBackendService()
	case MethodBackendServiceList, MethodRegionBackendServiceList:
		return c.listBackendServices()
	case MethodBackendServiceInsert, MethodRegionBackendServiceInsert:
		return c.insertBackendService()
	case MethodBackendServicePatch, MethodRegionBackendServicePatch:
		return c.writeBackendService(true)
	case MethodBackendServiceUpdate, MethodRegionBackendServiceUpdate:
		return c.writeBackendService(false)
	case MethodBackendServiceDelete, MethodRegionBackendServiceDelete:
		return c.deleteBackendService()
	case MethodBackendServiceGetHealth, MethodRegionBackendServiceGetHealth:
		return c.backendServiceHealth()
	case MethodGlobalOperationGet, MethodGlobalOperationWait, MethodRegionOperationGet, MethodRegionOperationWait:
		if o, ok := c.p.bsOps[opKey{c.rt.region, c.rt.name}]; ok {
			op := *o
			return &op, nil
		}
		scope := "global"
		if c.rt.region != "" {
			scope = "regions/" + c.rt.region
		}
		return nil, errNotFound("projects/" + c.p.id + "/" + scope + "/operations/" + c.rt.name)
	}
	return nil, errNotImplemented("method %s", c.rt.method)
}

func copyBackendService(bs *compute.BackendService) *compute.BackendService {
	b, err := json.Marshal(bs)
	if err != nil {
		panic(err)
	}
	out := &compute.BackendService{}
	if err := json.Unmarshal(b, out); err != nil {
		panic(err)
	}
	return out
}

func (c *call) getBackendService() (any, *apiError) {
	key := bsKey{c.rt.region, c.rt.name}
	bs, ok := c.p.backendServices[key]
	if !ok {
		return nil, errNotFound(c.p.backendServicePath(c.rt.region, c.rt.name))
	}
	out := copyBackendService(bs)
	// Someone else's change lands after this read: the caller's next write carries a stale fingerprint.
	if changes := c.p.afterGet[key]; len(changes) > 0 {
		next := copyBackendService(bs)
		changes[0](next)
		c.p.afterGet[key] = changes[1:]
		if aerr := c.p.storeBackendService(c.rt.region, bs, next); aerr != nil {
			panic(fmt.Sprintf("fakegce: a change injected with ChangeAfterNextGet is invalid: %v", aerr))
		}
	}
	return out, nil
}

func (c *call) listBackendServices() (any, *apiError) {
	scope := "projects/" + c.p.id + "/global/backendServices"
	if c.rt.region != "" {
		scope = "projects/" + c.p.id + "/regions/" + c.rt.region + "/backendServices"
	}
	var items []*compute.BackendService
	for k, bs := range c.p.backendServices {
		if k.region == c.rt.region {
			items = append(items, bs)
		}
	}
	sort.Slice(items, func(i, j int) bool { return items[i].Name < items[j].Name })
	page, next, aerr := pageOf(items, func(bs *compute.BackendService) string { return bs.Name }, scope,
		c.query.Get("pageToken"), pageSize(c.query))
	if aerr != nil {
		return nil, aerr
	}
	out := &compute.BackendServiceList{Kind: "compute#backendServiceList", Id: scope, SelfLink: c.p.selfLink(scope),
		NextPageToken: next, Items: make([]*compute.BackendService, 0, len(page))}
	for _, bs := range page {
		out.Items = append(out.Items, copyBackendService(bs))
	}
	return out, nil
}

// decodeBackendService decodes a written backend service, with GCE's defaults for what the client left out: a
// capacityScaler that is absent (the Go client omits a 0 unless it is in ForceSendFields) becomes 1.
func (c *call) decodeBackendService() (*compute.BackendService, map[string]any, *apiError) {
	var in compute.BackendService
	if aerr := c.decode(&in); aerr != nil {
		return nil, nil, aerr
	}
	var raw map[string]any
	if aerr := c.decode(&raw); aerr != nil {
		return nil, nil, aerr
	}
	defaultCapacityScalers(&in, raw)
	return &in, raw, nil
}

func defaultCapacityScalers(bs *compute.BackendService, raw map[string]any) {
	rawBackends, _ := raw["backends"].([]any)
	for i, b := range bs.Backends {
		given := false
		if i < len(rawBackends) {
			if m, ok := rawBackends[i].(map[string]any); ok {
				_, given = m["capacityScaler"]
			}
		}
		if !given {
			b.CapacityScaler = 1
		}
	}
}

func (c *call) insertBackendService() (any, *apiError) {
	in, _, aerr := c.decodeBackendService()
	if aerr != nil {
		return nil, aerr
	}
	if in.Name == "" {
		return nil, errRequired("resource.name")
	}
	if !validName.MatchString(in.Name) {
		return nil, invalidName("resource.name", in.Name)
	}
	c.rt.name, c.rec.Resource = in.Name, in.Name
	if op, ok := c.repeatedBackendServiceRequest(); ok {
		return op, nil
	}
	key := bsKey{c.rt.region, in.Name}
	if _, exists := c.p.backendServices[key]; exists {
		return nil, errAlreadyExists(c.p.backendServicePath(c.rt.region, in.Name))
	}
	if in.LoadBalancingScheme == "" {
		in.LoadBalancingScheme = "EXTERNAL"
	}
	if in.Protocol == "" {
		in.Protocol = "HTTP"
	}
	in.Kind = "compute#backendService"
	in.Id = c.s.nextID.Add(1)
	in.SelfLink = c.p.selfLink(c.p.backendServicePath(c.rt.region, in.Name))
	in.CreationTimestamp = formatTime(c.now)
	in.Region = ""
	if c.rt.region != "" {
		in.Region = c.p.selfLink("projects/" + c.p.id + "/regions/" + c.rt.region)
	}
	if aerr := c.p.storeBackendService(c.rt.region, nil, in); aerr != nil {
		return nil, aerr
	}
	return c.backendServiceOperation("insert", in), nil
}

// writeBackendService answers patch (a JSON merge patch onto the stored resource) and update (the whole resource).
// Both need the current fingerprint.
func (c *call) writeBackendService(merge bool) (any, *apiError) {
	if op, ok := c.repeatedBackendServiceRequest(); ok {
		return op, nil
	}
	key := bsKey{c.rt.region, c.rt.name}
	cur, ok := c.p.backendServices[key]
	if !ok {
		return nil, errNotFound(c.p.backendServicePath(c.rt.region, c.rt.name))
	}
	in, raw, aerr := c.decodeBackendService()
	if aerr != nil {
		return nil, aerr
	}
	if in.Fingerprint != cur.Fingerprint {
		return nil, &apiError{http.StatusPreconditionFailed, ReasonConditionNotMet, fmt.Sprintf(
			"Invalid fingerprint: the resource '%s' has changed since it was read; get it again and retry.",
			c.p.backendServicePath(c.rt.region, c.rt.name))}
	}
	next := in
	if merge {
		var base map[string]any
		b, _ := json.Marshal(cur)
		_ = json.Unmarshal(b, &base)
		merged, _ := json.Marshal(mergePatch(base, raw))
		next = &compute.BackendService{}
		if err := json.Unmarshal(merged, next); err != nil {
			return nil, &apiError{http.StatusBadRequest, ReasonParseError, "Invalid JSON payload received. " + err.Error()}
		}
		if _, replaced := raw["backends"]; replaced {
			next.Backends = in.Backends
		}
	}
	if next.Name != "" && next.Name != cur.Name {
		return nil, errInvalidField("resource.name", next.Name, "The name of a resource cannot be changed.")
	}
	// Output-only fields stay as they are.
	next.Name, next.Kind, next.Id, next.SelfLink, next.CreationTimestamp, next.Region =
		cur.Name, cur.Kind, cur.Id, cur.SelfLink, cur.CreationTimestamp, cur.Region
	if next.LoadBalancingScheme == "" {
		next.LoadBalancingScheme = cur.LoadBalancingScheme
	}
	if next.Protocol == "" {
		next.Protocol = "HTTP"
	}
	if aerr := c.p.storeBackendService(c.rt.region, cur, next); aerr != nil {
		return nil, aerr
	}
	opType := "update"
	if merge {
		opType = "patch"
	}
	return c.backendServiceOperation(opType, next), nil
}

// mergePatch applies an RFC 7386 JSON merge patch: objects merge, null removes, anything else replaces.
func mergePatch(base, patch map[string]any) map[string]any {
	if base == nil {
		base = map[string]any{}
	}
	for k, v := range patch {
		switch pv := v.(type) {
		case nil:
			delete(base, k)
		case map[string]any:
			bv, _ := base[k].(map[string]any)
			base[k] = mergePatch(bv, pv)
		default:
			base[k] = v
		}
	}
	return base
}

func (c *call) deleteBackendService() (any, *apiError) {
	if op, ok := c.repeatedBackendServiceRequest(); ok {
		return op, nil
	}
	key := bsKey{c.rt.region, c.rt.name}
	cur, ok := c.p.backendServices[key]
	if !ok {
		return nil, errNotFound(c.p.backendServicePath(c.rt.region, c.rt.name))
	}
	c.p.unlinkBackends(cur)
	delete(c.p.backendServices, key)
	return c.backendServiceOperation("delete", cur), nil
}

func (c *call) repeatedBackendServiceRequest() (*compute.Operation, bool) {
	id := c.query.Get("requestId")
	if id == "" {
		return nil, false
	}
	for _, o := range c.p.bsOps {
		if o.ClientOperationId == id {
			op := *o
			return &op, true
		}
	}
	return nil, false
}

// backendServiceOperation records a DONE operation of a backend service write.
func (c *call) backendServiceOperation(opType string, bs *compute.BackendService) *compute.Operation {
	id := c.s.nextID.Add(1)
	name := fmt.Sprintf("operation-%d-%016x", c.now.UnixMilli(), id)
	ts := formatTime(c.now)
	scope := "projects/" + c.p.id + "/global"
	op := &compute.Operation{
		Kind: "compute#operation", Id: id, Name: name, OperationType: opType, Status: "DONE", Progress: 100,
		InsertTime: ts, StartTime: ts, EndTime: ts, CreationTimestamp: ts, User: "fakegce",
		TargetLink: bs.SelfLink, TargetId: bs.Id, ClientOperationId: c.query.Get("requestId"),
	}
	if c.rt.region != "" {
		scope = "projects/" + c.p.id + "/regions/" + c.rt.region
		op.Region = c.p.selfLink(scope)
	}
	op.SelfLink = c.p.selfLink(scope + "/operations/" + name)
	initMap(&c.p.bsOps)[opKey{c.rt.region, name}] = op
	c.rec.Operation = name
	out := *op
	return &out
}
