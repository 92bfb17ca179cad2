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
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	compute "google.golang.org/api/compute/v1"
)

// call is one admitted request, handled with the project's lock held.
type call struct {
	s     *Server
	p     *project
	rt    route
	query url.Values
	body  []byte
	now   time.Time
	// fault is an async fault to put in the operation of this mutating call, or nil.
	fault *Fault
	rec   *CallRecord
}

func (c *call) decode(v any) *apiError {
	if len(c.body) == 0 {
		return nil
	}
	if err := json.Unmarshal(c.body, v); err != nil {
		return &apiError{http.StatusBadRequest, ReasonParseError, "Invalid JSON payload received. " + err.Error()}
	}
	return nil
}

// repeatedRequest returns the operation of an earlier call with the same requestId, if any: the API ignores a
// request whose requestId it has seen and answers with the original operation, so a retried call is applied once.
func (c *call) repeatedRequest() *compute.Operation {
	id := c.query.Get("requestId")
	if id == "" {
		return nil
	}
	if o, ok := c.p.requestIDs[id]; ok {
		c.rec.Operation = o.op.Name
		return o.snapshot()
	}
	return nil
}

func (c *call) negNotFound() *apiError { return errNotFound(c.p.negPath(c.rt.zone, c.rt.name)) }

// snapshot is the NEG as GCE returns it, with its current size, copied so the response shares nothing with state.
func (n *negState) snapshot() *compute.NetworkEndpointGroup {
	neg := n.neg
	neg.Annotations = maps.Clone(n.neg.Annotations)
	neg.Size = int64(len(n.endpoints))
	return &neg
}

// sortedEndpoint is an endpoint's identity with its sort key, computed once per listing rather than per comparison.
type sortedEndpoint struct {
	sortKey string
	key     endpointKey
}

// sortedEndpoints returns the NEG's endpoints in listing order: by IP, port and instance.
func (n *negState) sortedEndpoints() []sortedEndpoint {
	out := make([]sortedEndpoint, 0, len(n.endpoints))
	for k := range n.endpoints {
		out = append(out, sortedEndpoint{k.sortKey(), k})
	}
	slices.SortFunc(out, func(a, b sortedEndpoint) int { return strings.Compare(a.sortKey, b.sortKey) })
	return out
}

func (c *call) insert() (any, *apiError) {
	var in compute.NetworkEndpointGroup
	if aerr := c.decode(&in); aerr != nil {
		return nil, aerr
	}
	if op := c.repeatedRequest(); op != nil {
		return op, nil
	}
	c.rt.name = in.Name
	c.rec.Resource = in.Name
	stored, aerr := c.p.newNEG(c.rt.zone, &in, c.now)
	if aerr != nil {
		return nil, aerr
	}
	key := negKey{c.rt.zone, in.Name}
	if _, exists := c.p.negs[key]; exists || c.p.pendingInserts[key] {
		return nil, errAlreadyExists(c.p.negPath(c.rt.zone, in.Name))
	}
	p := c.p
	initMap(&p.pendingInserts)[key] = true
	return c.startOperation("insert", stored.Id, func() *apiError {
		initMap(&p.negs)[key] = newNegState(key.zone, *stored)
		return nil
	}, func() { delete(p.pendingInserts, key) }), nil
}

// newNEG validates a NEG to insert and returns it as GCE stores it: type defaulted, network and subnetwork as URLs,
// output-only fields (id, selfLink, zone, creationTimestamp) set, and output-only fields of the request ignored.
func (p *project) newNEG(zone string, in *compute.NetworkEndpointGroup, now time.Time) (*compute.NetworkEndpointGroup, *apiError) {
	if in.Name == "" {
		return nil, errRequired("resource.name")
	}
	if !validName.MatchString(in.Name) {
		return nil, invalidName("resource.name", in.Name)
	}
	negType := in.NetworkEndpointType
	if negType == "" {
		negType = TypeGCEVMIPPort
	}
	switch {
	case negType == TypeGCEVMIPPort || negType == TypeGCEVMIP || negType == TypeNonGCPPrivateIPPort:
	case knownEndpointTypes[negType]:
		return nil, &apiError{http.StatusBadRequest, ReasonNotImplemented,
			fmt.Sprintf("fakegce: NEGs of type %s are not implemented by the fake", negType)}
	default:
		return nil, errInvalidField("resource.networkEndpointType", negType, "Must be a network endpoint type.")
	}
	if port := in.DefaultPort; port != 0 {
		if negType == TypeGCEVMIP {
			return nil, errInvalidField("resource.defaultPort", fmt.Sprint(port),
				"Can not be set for network endpoint groups of type GCE_VM_IP.")
		}
		if port < 1 || port > 65535 {
			return nil, errInvalidField("resource.defaultPort", fmt.Sprint(port), "Must be from 1 to 65535.")
		}
	}
	network, aerr := p.normalizeNetwork(in.Network)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := refuseHybridSubnetwork(negType, in); aerr != nil {
		return nil, aerr
	}
	subnetwork, aerr := p.normalizeSubnetwork(in.Subnetwork, zone)
	if aerr != nil {
		return nil, aerr
	}
	return &compute.NetworkEndpointGroup{
		Kind:                "compute#networkEndpointGroup",
		Id:                  p.s.nextID.Add(1),
		Name:                in.Name,
		Description:         in.Description,
		NetworkEndpointType: negType,
		DefaultPort:         in.DefaultPort,
		Network:             network,
		Subnetwork:          subnetwork,
		Annotations:         maps.Clone(in.Annotations),
		Zone:                p.selfLink("projects/" + p.id + "/zones/" + zone),
		SelfLink:            p.selfLink(p.negPath(zone, in.Name)),
		CreationTimestamp:   formatTime(now),
	}, nil
}

func newNegState(zone string, neg compute.NetworkEndpointGroup) *negState {
	return &negState{zone: zone, neg: neg, endpoints: map[endpointKey]*compute.NetworkEndpoint{}, byConflict: map[string]endpointKey{}}
}

func (c *call) get() (any, *apiError) {
	n, ok := c.p.negs[negKey{c.rt.zone, c.rt.name}]
	if !ok {
		return nil, c.negNotFound()
	}
	return n.snapshot(), nil
}

// sortedNEGs returns the project's NEGs, of one zone or (zone "") of all, ordered by zone and then by name, the
// API's default order.
func (p *project) sortedNEGs(zone string) []*negState {
	var out []*negState
	for k, n := range p.negs {
		if zone == "" || k.zone == zone {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return negSortKey(out[i]) < negSortKey(out[j]) })
	return out
}

func negSortKey(n *negState) string { return n.zone + "/" + n.neg.Name }

func (c *call) list() (any, *apiError) {
	scope := "projects/" + c.p.id + "/zones/" + c.rt.zone + "/networkEndpointGroups"
	page, next, aerr := pageOf(c.p.sortedNEGs(c.rt.zone), negSortKey, scope, c.query.Get("pageToken"), pageSize(c.query))
	if aerr != nil {
		return nil, aerr
	}
	out := &compute.NetworkEndpointGroupList{
		Kind:          "compute#networkEndpointGroupList",
		Id:            scope,
		SelfLink:      c.p.selfLink(scope),
		NextPageToken: next,
		Items:         make([]*compute.NetworkEndpointGroup, 0, len(page)),
	}
	for _, n := range page {
		out.Items = append(out.Items, n.snapshot())
	}
	return out, nil
}

func (c *call) aggregatedList() (any, *apiError) {
	scope := "projects/" + c.p.id + "/aggregated/networkEndpointGroups"
	page, next, aerr := pageOf(c.p.sortedNEGs(""), negSortKey, scope, c.query.Get("pageToken"), pageSize(c.query))
	if aerr != nil {
		return nil, aerr
	}
	out := &compute.NetworkEndpointGroupAggregatedList{
		Kind:          "compute#networkEndpointGroupAggregatedList",
		Id:            scope,
		SelfLink:      c.p.selfLink(scope),
		NextPageToken: next,
		Items:         map[string]compute.NetworkEndpointGroupsScopedList{},
	}
	for _, n := range page {
		zone := "zones/" + n.zone
		scoped := out.Items[zone]
		scoped.NetworkEndpointGroups = append(scoped.NetworkEndpointGroups, n.snapshot())
		out.Items[zone] = scoped
	}
	return out, nil
}

func (c *call) delete() (any, *apiError) {
	if op := c.repeatedRequest(); op != nil {
		return op, nil
	}
	key := negKey{c.rt.zone, c.rt.name}
	n, ok := c.p.negs[key]
	if !ok {
		return nil, c.negNotFound()
	}
	path := c.p.negPath(c.rt.zone, c.rt.name)
	if users := n.users(); len(users) > 0 {
		return nil, errInUse(path, users)
	}
	p := c.p
	return c.startOperation("delete", n.neg.Id, func() *apiError {
		// The NEG may have changed while the operation was pending: check again when it completes.
		cur, ok := p.negs[key]
		if !ok || cur != n {
			return errNotFound(path)
		}
		if users := cur.users(); len(users) > 0 {
			return errInUse(path, users)
		}
		delete(p.negs, key)
		return nil
	}, nil), nil
}

// endpointChange is a validated attach or detach request: the identities and stored forms of its endpoints.
type endpointChange struct {
	keys   []endpointKey
	stored []*compute.NetworkEndpoint
}

// parseEndpointChange decodes and validates the endpoints of an attach or detach request against the NEG.
func (c *call) parseEndpointChange(n *negState) (*endpointChange, *apiError) {
	var req struct {
		NetworkEndpoints []*compute.NetworkEndpoint `json:"networkEndpoints"`
	}
	if aerr := c.decode(&req); aerr != nil {
		return nil, aerr
	}
	c.rec.Endpoints = len(req.NetworkEndpoints)
	if len(req.NetworkEndpoints) == 0 {
		return nil, errRequired("resource.networkEndpoints")
	}
	if len(req.NetworkEndpoints) > MaxEndpointsPerCall {
		return nil, errInvalidField("resource.networkEndpoints", fmt.Sprintf("%d endpoints", len(req.NetworkEndpoints)),
			fmt.Sprintf("At most %d network endpoints can be attached or detached in one request.", MaxEndpointsPerCall))
	}
	ch := &endpointChange{}
	seen := map[string]int{}
	for i, ep := range req.NetworkEndpoints {
		k, stored, aerr := c.p.normalizeEndpoint(&n.neg, c.rt.zone, i, ep)
		if aerr != nil {
			return nil, aerr
		}
		for _, ck := range conflictKeys(n.neg.NetworkEndpointType, k) {
			if j, dup := seen[ck]; dup {
				return nil, errInvalidField(fmt.Sprintf("resource.networkEndpoints[%d]", i), k.String(),
					fmt.Sprintf("Duplicate of resource.networkEndpoints[%d] in the same request.", j))
			}
			seen[ck] = i
		}
		ch.keys = append(ch.keys, k)
		ch.stored = append(ch.stored, stored)
	}
	return ch, nil
}

// checkAttach refuses an attach that names an endpoint the NEG already has, or that would take the NEG past its
// endpoint limit. It runs when the call arrives and again when its operation completes.
func (c *call) checkAttach(n *negState, ch *endpointChange) *apiError {
	for i, k := range ch.keys {
		for _, ck := range conflictKeys(n.neg.NetworkEndpointType, k) {
			if held, ok := n.byConflict[ck]; ok {
				return errInvalidField(fmt.Sprintf("resource.networkEndpoints[%d]", i), k.String(), fmt.Sprintf(
					"The network endpoint %s is already attached to the network endpoint group '%s'.", held, n.neg.Name))
			}
		}
	}
	if limit := c.s.opts.MaxEndpointsPerNEG; len(n.endpoints)+len(ch.keys) > limit {
		return &apiError{http.StatusForbidden, ReasonQuotaExceeded, fmt.Sprintf(
			"Quota 'NETWORK_ENDPOINTS_PER_NETWORK_ENDPOINT_GROUP' exceeded. Limit: %d.0 in network endpoint group '%s'.",
			limit, n.neg.Name)}
	}
	return nil
}

// checkDetach refuses a detach that names an endpoint the NEG does not have.
func checkDetach(n *negState, ch *endpointChange) *apiError {
	for i, k := range ch.keys {
		if _, ok := n.endpoints[k]; !ok {
			return errInvalidField(fmt.Sprintf("resource.networkEndpoints[%d]", i), k.String(), fmt.Sprintf(
				"The network endpoint is not attached to the network endpoint group '%s'.", n.neg.Name))
		}
	}
	return nil
}

func (c *call) attach() (any, *apiError) {
	return c.changeEndpoints("attachNetworkEndpoints", c.checkAttach, func(n *negState, ch *endpointChange) {
		for i, k := range ch.keys {
			n.endpoints[k] = ch.stored[i]
			for _, ck := range conflictKeys(n.neg.NetworkEndpointType, k) {
				n.byConflict[ck] = k
			}
		}
	})
}

func (c *call) detach() (any, *apiError) {
	return c.changeEndpoints("detachNetworkEndpoints", checkDetach, func(n *negState, ch *endpointChange) {
		for _, k := range ch.keys {
			delete(n.endpoints, k)
			for _, ck := range conflictKeys(n.neg.NetworkEndpointType, k) {
				delete(n.byConflict, ck)
			}
			// A detached endpoint's health is forgotten: attached again, it starts from the NEG's default.
			delete(n.health, k)
		}
	})
}

// changeEndpoints runs an attach or detach: validate the request against the NEG now, and apply it when its
// operation completes, after checking again, because other operations may have changed the NEG meanwhile.
func (c *call) changeEndpoints(opType string, check func(*negState, *endpointChange) *apiError,
	apply func(*negState, *endpointChange)) (any, *apiError) {
	if op := c.repeatedRequest(); op != nil {
		return op, nil
	}
	key := negKey{c.rt.zone, c.rt.name}
	n, ok := c.p.negs[key]
	if !ok {
		return nil, c.negNotFound()
	}
	ch, aerr := c.parseEndpointChange(n)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := check(n, ch); aerr != nil {
		return nil, aerr
	}
	p, path := c.p, c.p.negPath(c.rt.zone, c.rt.name)
	return c.startOperation(opType, n.neg.Id, func() *apiError {
		cur, ok := p.negs[key]
		if !ok || cur != n {
			return errNotFound(path)
		}
		if aerr := check(n, ch); aerr != nil {
			return aerr
		}
		apply(n, ch)
		return nil
	}, nil), nil
}

func (c *call) listEndpoints() (any, *apiError) {
	var req compute.NetworkEndpointGroupsListEndpointsRequest
	if aerr := c.decode(&req); aerr != nil {
		return nil, aerr
	}
	switch req.HealthStatus {
	case "", "SHOW", "SKIP":
	default:
		return nil, errInvalidField("resource.healthStatus", req.HealthStatus, "Must be SHOW or SKIP.")
	}
	n, ok := c.p.negs[negKey{c.rt.zone, c.rt.name}]
	if !ok {
		return nil, c.negNotFound()
	}
	scope := c.p.negPath(c.rt.zone, c.rt.name) + "/listNetworkEndpoints"
	page, next, aerr := pageOf(n.sortedEndpoints(), func(k sortedEndpoint) string { return k.sortKey }, scope,
		c.query.Get("pageToken"), pageSize(c.query))
	if aerr != nil {
		return nil, aerr
	}
	out := &compute.NetworkEndpointGroupsListNetworkEndpoints{
		Kind:          "compute#networkEndpointGroupsListNetworkEndpoints",
		Id:            scope,
		NextPageToken: next,
		Items:         make([]*compute.NetworkEndpointWithHealthStatus, 0, len(page)),
	}
	for _, k := range page {
		ep := *n.endpoints[k.key]
		ep.Annotations = maps.Clone(ep.Annotations)
		item := &compute.NetworkEndpointWithHealthStatus{NetworkEndpoint: &ep}
		if req.HealthStatus == "SHOW" {
			item.Healths = n.healths(k.key)
		}
		out.Items = append(out.Items, item)
	}
	return out, nil
}

// pageToken is what nextPageToken encodes: the list it belongs to and the sort key of the last item returned, so the
// next page starts after that item even if items were added or removed in between.
type pageToken struct {
	Scope string `json:"s"`
	After string `json:"a"`
}

// pageOf returns the page of items (sorted by key) that follows token, and the token for the page after it ("" if
// this page is the last).
func pageOf[T any](items []T, key func(T) string, scope, token string, size int) ([]T, string, *apiError) {
	start := 0
	if token != "" {
		raw, err := base64.RawURLEncoding.DecodeString(token)
		var pt pageToken
		if err == nil {
			err = json.Unmarshal(raw, &pt)
		}
		if err != nil || pt.Scope != scope {
			return nil, "", errInvalidField("pageToken", token, "The page token is not valid for this list.")
		}
		start = sort.Search(len(items), func(i int) bool { return key(items[i]) > pt.After })
	}
	end := min(start+size, len(items))
	page := items[start:end]
	if end == len(items) {
		return page, "", nil
	}
	raw, _ := json.Marshal(pageToken{Scope: scope, After: key(page[len(page)-1])})
	return page, base64.RawURLEncoding.EncodeToString(raw), nil
}
