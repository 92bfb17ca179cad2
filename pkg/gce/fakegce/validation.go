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
	"encoding/hex"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	compute "google.golang.org/api/compute/v1"
)

// Network endpoint types. The fake implements the three that take IP addresses of VMs or of hosts outside GCP;
// inserting a NEG of another type is refused as not implemented.
const (
	TypeGCEVMIPPort         = "GCE_VM_IP_PORT"
	TypeGCEVMIP             = "GCE_VM_IP"
	TypeNonGCPPrivateIPPort = "NON_GCP_PRIVATE_IP_PORT"
)

// knownEndpointTypes are the values of networkEndpointType in the compute/v1 discovery document.
var knownEndpointTypes = map[string]bool{
	"GCE_VM_IP": true, "GCE_VM_IP_DEDICATED_BACKEND": true, "GCE_VM_IP_PORT": true, "GCE_VM_IP_PORTMAP": true,
	"INTERNET_FQDN_PORT": true, "INTERNET_IP_PORT": true, "NON_GCP_PRIVATE_IP_PORT": true,
	"PRIVATE_SERVICE_CONNECT": true, "SERVERLESS": true,
}

// MaxEndpointsPerCall is how many endpoints one attachNetworkEndpoints or detachNetworkEndpoints call may carry. The
// API reference does not state it; ingress-gce (MAX_NETWORK_ENDPOINTS_PER_BATCH) and the Terraform provider both
// batch at 500 because the API refuses more.
const MaxEndpointsPerCall = 500

// MaxResultsLimit is the largest maxResults a list call accepts, and its default.
const MaxResultsLimit = 500

// nameRegexp is RFC 1035 as GCE states it for resource names: 1-63 characters, a lower-case letter first, then
// letters, digits or dashes, not ending in a dash.
const nameRegexp = `[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?`

var (
	validName = regexp.MustCompile(`^` + nameRegexp + `$`)
	// validProject is the "project" path parameter pattern of the discovery document: an optional
	// "domain:" prefix, then a project ID or number.
	validProject = regexp.MustCompile(`^(?:(?:[-a-z0-9]{1,63}\.)*(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?):)?` +
		`(?:[0-9]{1,19}|(?:[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?))$`)
	// validOperation is the "operation" path parameter pattern: a name, or a numeric id.
	validOperation = regexp.MustCompile(`^(?:` + nameRegexp + `|[1-9][0-9]{0,19})$`)
	zeroUUID       = "00000000-0000-0000-0000-000000000000"
	validUUID      = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
)

func invalidName(field, value string) *apiError {
	return errInvalidField(field, value, "Must be a match of regex '(?:"+nameRegexp+")'")
}

// checkRoute validates the path parameters the way GCE does before it looks anything up.
func checkRoute(rt route) *apiError {
	if !validProject.MatchString(rt.project) {
		return errInvalidField("project", rt.project, "Must be a project ID or number.")
	}
	if rt.method == MethodAggregatedList {
		return nil
	}
	if rt.method.backendServices() {
		return checkBackendServiceRoute(rt)
	}
	if !validName.MatchString(rt.zone) {
		return invalidName("zone", rt.zone)
	}
	switch rt.method {
	case MethodGet, MethodDelete, MethodAttachEndpoints, MethodDetachEndpoints, MethodListEndpoints:
		if !validName.MatchString(rt.name) {
			return invalidName("networkEndpointGroup", rt.name)
		}
	case MethodOperationGet, MethodOperationWait:
		if !validOperation.MatchString(rt.name) {
			return errInvalidField("operation", rt.name, "Must be an operation name or id.")
		}
	}
	return nil
}

// notImplementedParameter refuses, with 400, a query parameter the real API accepts but the fake does not evaluate:
// answering as if it were absent would return wrong results silently.
func notImplementedParameter(param, value string) *apiError {
	return &apiError{http.StatusBadRequest, ReasonNotImplemented,
		fmt.Sprintf("fakegce: the parameter %s=%q is not implemented by the fake; list without it and filter in the caller", param, value)}
}

// checkQueryParameters validates the query parameters of a call.
func checkQueryParameters(m Method, q url.Values) *apiError {
	switch m {
	case MethodList, MethodAggregatedList, MethodListEndpoints:
		if f := q.Get("filter"); f != "" {
			return notImplementedParameter("filter", f)
		}
		if o := q.Get("orderBy"); o != "" && (o != "name" || m == MethodListEndpoints) {
			return notImplementedParameter("orderBy", o)
		}
		if v := q.Get("maxResults"); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 || n > MaxResultsLimit {
				return errInvalidField("maxResults", v, fmt.Sprintf("Must be an integer from 0 to %d.", MaxResultsLimit))
			}
		}
	}
	if m.Mutating() {
		if id := q.Get("requestId"); id != "" && (!validUUID.MatchString(id) || id == zeroUUID) {
			return errInvalidField("requestId", id, "Must be a valid UUID other than the zero UUID.")
		}
	}
	return nil
}

// pageSize is the page size a list call asked for; 0 or absent means the default of 500.
func pageSize(q url.Values) int {
	n, _ := strconv.Atoi(q.Get("maxResults"))
	if n <= 0 {
		return MaxResultsLimit
	}
	return n
}

// regionOf returns the region of a zone: "us-central1-a" is in "us-central1".
func regionOf(zone string) string {
	if i := strings.LastIndexByte(zone, '-'); i > 0 {
		return zone[:i]
	}
	return zone
}

// resourcePath reduces a reference given as a name, a partial path or a full URL to the path from "projects/" on.
// A bare name or a path without "projects/" is completed with the default project.
func resourcePath(ref, defaultProject string) string {
	if i := strings.Index(ref, "projects/"); i >= 0 {
		return ref[i:]
	}
	return "projects/" + defaultProject + "/" + ref
}

// normalizeNetwork turns the network of an inserted NEG into its URL. An empty network means the project's
// "default" network, as the API documents for GCE_VM_IP_PORT and NON_GCP_PRIVATE_IP_PORT.
func (p *project) normalizeNetwork(network string) (string, *apiError) {
	if network == "" {
		network = "default"
	}
	ref := network
	if !strings.Contains(ref, "/") {
		ref = "global/networks/" + ref
	}
	parts := strings.Split(resourcePath(ref, p.id), "/")
	if len(parts) != 5 || parts[2] != "global" || parts[3] != "networks" || !validProject.MatchString(parts[1]) ||
		!validName.MatchString(parts[4]) {
		return "", errInvalidField("resource.network", network, "Must be a network name or URL.")
	}
	return p.selfLink(strings.Join(parts, "/")), nil
}

// normalizeSubnetwork turns the subnetwork of an inserted NEG into its URL. The subnetwork must be in the zone's
// region; an empty one stays empty.
func (p *project) normalizeSubnetwork(subnetwork, zone string) (string, *apiError) {
	if subnetwork == "" {
		return "", nil
	}
	ref := subnetwork
	if !strings.Contains(ref, "/") {
		ref = "regions/" + regionOf(zone) + "/subnetworks/" + ref
	}
	parts := strings.Split(resourcePath(ref, p.id), "/")
	if len(parts) != 6 || parts[2] != "regions" || parts[4] != "subnetworks" || !validProject.MatchString(parts[1]) ||
		!validName.MatchString(parts[5]) {
		return "", errInvalidField("resource.subnetwork", subnetwork, "Must be a subnetwork name or URL.")
	}
	if parts[3] != regionOf(zone) {
		return "", errInvalidField("resource.subnetwork", subnetwork,
			fmt.Sprintf("The subnetwork must be in region '%s' of zone '%s'.", regionOf(zone), zone))
	}
	return p.selfLink(strings.Join(parts, "/")), nil
}

// endpointKey is the identity of an endpoint in a NEG: its IP, port and instance after defaults are applied. A detach
// must name an attached endpoint exactly.
type endpointKey struct {
	ip       netip.Addr
	port     int64
	instance string
	// ipv6 is part of the identity: a dual-stack endpoint is detached by both of its addresses.
	ipv6 netip.Addr
}

// sortKey orders endpoints by IP numerically, then port, then instance, so that pages are stable.
func (k endpointKey) sortKey() string {
	b := k.ip.As16()
	if !k.ip.IsValid() {
		b = [16]byte{}
	}
	return fmt.Sprintf("%s|%05d|%s|%s", hex.EncodeToString(b[:]), k.port, k.instance, k.ipv6)
}

func (k endpointKey) String() string {
	var parts []string
	if k.ip.IsValid() {
		parts = append(parts, "ipAddress: "+k.ip.String())
	}
	if k.ipv6.IsValid() {
		parts = append(parts, "ipv6Address: "+k.ipv6.String())
	}
	if k.port != 0 {
		parts = append(parts, "port: "+strconv.FormatInt(k.port, 10))
	}
	if k.instance != "" {
		parts = append(parts, "instance: "+k.instance)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// conflictKeys are what must be unique among a NEG's endpoints: the IP and port, and the IPv6 address and port of a
// dual-stack endpoint, or for GCE_VM_IP, where an endpoint is a whole VM, the instance. An IPv4 address and port so
// hold one IPv6 address at a time: an endpoint changes form (its Service turned dual-stack) by a detach and an
// attach, as ingress-gce's dual-stack migrator does it.
func conflictKeys(negType string, k endpointKey) []string {
	if negType == TypeGCEVMIP {
		return []string{"instance:" + k.instance}
	}
	keys := []string{"ipport:" + k.ip.String() + ":" + strconv.FormatInt(k.port, 10)}
	if k.ipv6.IsValid() {
		keys = append(keys, "ipv6port:"+k.ipv6.String()+":"+strconv.FormatInt(k.port, 10))
	}
	return keys
}

// normalizeEndpoint validates one endpoint of an attach or detach request against the NEG's type and returns its
// identity and the endpoint as the NEG stores it: the instance reduced to its name, the IP and port defaulted. The
// rules are the NetworkEndpoint field descriptions of the compute/v1 discovery document. It reads better whole:
// one rule after another, in the order of those descriptions, each with the error the real API answers.
func (p *project) normalizeEndpoint(neg *compute.NetworkEndpointGroup, zone string, i int, ep *compute.NetworkEndpoint) (endpointKey, *compute.NetworkEndpoint, *apiError) {
	field := fmt.Sprintf("resource.networkEndpoints[%d]", i)
	var k endpointKey
	if ep == nil {
		return k, nil, errRequired(field)
	}
	negType := neg.NetworkEndpointType
	if ep.Fqdn != "" {
		return k, nil, errInvalidField(field+".fqdn", ep.Fqdn, "Can only be set for network endpoint groups of type NON_GCP_FQDN_PORT.")
	}
	if ep.ClientDestinationPort != 0 {
		return k, nil, errInvalidField(field+".clientDestinationPort", strconv.FormatInt(ep.ClientDestinationPort, 10),
			"Can only be set for network endpoint groups of type GCE_VM_IP_PORTMAP.")
	}

	var inst instance
	switch negType {
	case TypeGCEVMIPPort, TypeGCEVMIP:
		if ep.Instance == "" {
			return k, nil, errRequired(field + ".instance")
		}
		name, aerr := p.instanceName(field+".instance", ep.Instance, zone)
		if aerr != nil {
			return k, nil, aerr
		}
		k.instance = name
		if zoneInstances := p.registeredInstances(); zoneInstances {
			var ok bool
			if inst, ok = p.instances[zone][name]; !ok {
				return k, nil, errInvalidField(field+".instance", ep.Instance,
					fmt.Sprintf("The resource 'projects/%s/zones/%s/instances/%s' was not found", p.id, zone, name))
			}
		}
	default:
		if ep.Instance != "" {
			return k, nil, errInvalidField(field+".instance", ep.Instance,
				"Can not be set for network endpoint groups of type "+negType+".")
		}
	}

	switch {
	case ep.IpAddress != "":
		ip, err := netip.ParseAddr(ep.IpAddress)
		if err != nil || !ip.Is4() {
			return k, nil, errInvalidField(field+".ipAddress", ep.IpAddress, "Must be an IPv4 address.")
		}
		k.ip = ip
	case inst.primaryIP.IsValid():
		// The API uses the VM's primary IP when ipAddress is not given.
		k.ip = inst.primaryIP
	case negType == TypeGCEVMIPPort:
		return k, nil, &apiError{http.StatusBadRequest, ReasonNotImplemented, fmt.Sprintf(
			"fakegce: %s.ipAddress is empty; GCE would use the VM's primary IP, which the fake knows only for an "+
				"instance registered with AddInstance", field)}
	case negType == TypeNonGCPPrivateIPPort:
		return k, nil, errRequired(field + ".ipAddress")
	}
	if ep.Ipv6Address != "" {
		ip, err := netip.ParseAddr(ep.Ipv6Address)
		if err != nil || !ip.Is6() || ip.Is4In6() || ip.Zone() != "" {
			return k, nil, errInvalidField(field+".ipv6Address", ep.Ipv6Address, "Must be an IPv6 address.")
		}
		if negType != TypeGCEVMIPPort && negType != TypeGCEVMIP {
			return k, nil, errInvalidField(field+".ipv6Address", ep.Ipv6Address,
				"Can only be set for network endpoint groups of type GCE_VM_IP_PORT or GCE_VM_IP.")
		}
		k.ipv6 = ip
	}

	if negType == TypeGCEVMIP {
		if ep.Port != 0 {
			return k, nil, errInvalidField(field+".port", strconv.FormatInt(ep.Port, 10),
				"Can not be set for network endpoint groups of type GCE_VM_IP.")
		}
	} else {
		k.port = ep.Port
		if k.port == 0 {
			k.port = neg.DefaultPort
		}
		if k.port == 0 {
			return k, nil, errInvalidField(field+".port", "0",
				"Must be set when the network endpoint group has no defaultPort.")
		}
		if k.port < 1 || k.port > 65535 {
			return k, nil, errInvalidField(field+".port", strconv.FormatInt(ep.Port, 10), "Must be from 1 to 65535.")
		}
	}

	stored := &compute.NetworkEndpoint{
		Instance: k.instance,
		Port:     k.port,
	}
	if k.ip.IsValid() {
		stored.IpAddress = k.ip.String()
	}
	if k.ipv6.IsValid() {
		// Listed as GCE lists it (RFC 5952), however the request wrote it.
		stored.Ipv6Address = k.ipv6.String()
	}
	if len(ep.Annotations) > 0 {
		stored.Annotations = make(map[string]string, len(ep.Annotations))
		for a, v := range ep.Annotations {
			stored.Annotations[a] = v
		}
	}
	return k, stored, nil
}

// instanceName reduces an endpoint's instance, a name or a URL, to the name, and refuses an instance in another
// zone than the NEG's: the API requires the VM to be in the NEG's zone.
func (p *project) instanceName(field, ref, zone string) (string, *apiError) {
	if !strings.Contains(ref, "/") {
		if !validName.MatchString(ref) {
			return "", invalidName(field, ref)
		}
		return ref, nil
	}
	// A URL or partial path ends in "zones/{zone}/instances/{name}".
	parts := strings.Split(ref, "/")
	if len(parts) < 4 {
		return "", errInvalidField(field, ref, "Must be an instance name or URL.")
	}
	parts = parts[len(parts)-4:]
	if parts[0] != "zones" || parts[2] != "instances" || !validName.MatchString(parts[3]) {
		return "", errInvalidField(field, ref, "Must be an instance name or URL.")
	}
	if parts[1] != zone {
		return "", errInvalidField(field, ref,
			fmt.Sprintf("The instance must be in the zone of the network endpoint group, '%s'.", zone))
	}
	return parts[3], nil
}

// registeredInstances reports whether the project has instances registered with AddInstance, which turns on the
// check that every endpoint's instance exists in the NEG's zone.
func (p *project) registeredInstances() bool { return len(p.instances) > 0 }
