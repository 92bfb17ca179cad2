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

package translator

import (
	"cmp"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
)

// legacyZoneLabel is the zone label of Nodes from before topology.kubernetes.io/zone (Kubernetes < 1.17); some
// clusters still carry only this one.
const legacyZoneLabel = "failure-domain.beta.kubernetes.io/zone"

// topology is what the tenant's Nodes say about zones: the zone of each Node, and the sorted set of zones, one NEG
// per zone.
type topology struct {
	nodeZones map[string]string
	zones     []string
	// mapped: the zones are GCE zones the tenant maps its Nodes' zones to (hybrid NEGs), so an endpoint is in its
	// Node's zone, never in the cluster zone its EndpointSlice copied from the Node.
	mapped bool
}

func newTopology(nodes []*corev1.Node) *topology { return newTopologyBy(nodes, nodeZone) }

// newTopologyBy is the topology of nodes, each in the NEG zone zoneOf gives it ("": none).
func newTopologyBy(nodes []*corev1.Node, zoneOf func(*corev1.Node) string) *topology {
	t := &topology{nodeZones: make(map[string]string, len(nodes))}
	for _, n := range nodes {
		zone := zoneOf(n)
		if zone == "" {
			// A Node without a zone cannot be an instance of a zonal NEG.
			continue
		}
		t.nodeZones[n.Name] = zone
		t.zones = append(t.zones, zone)
	}
	slices.Sort(t.zones)
	// A copy of the few zones: the translator keeps its topology, not the one-per-Node array they were sorted in.
	t.zones = slices.Clone(slices.Compact(t.zones))
	return t
}

// topologyAt is a topology and the Node generation (translator.nodeGeneration) it was built at.
type topologyAt struct {
	generation uint64
	*topology
}

// currentTopology returns the tenant's topology: the last one built, while no Node event that can change it came
// since; else one built from the Node cache now. A sync then reads the Nodes once per topology change, not once per
// sync. The generation is read before the cache: an event whose handler runs during the build makes the next sync
// build again, and one whose handler has not run yet enqueues the Services it concerns once it does.
func (t *Translator) currentTopology() (*topology, error) {
	generation := t.nodeGeneration.Load()
	if known := t.topology.Load(); known != nil && known.generation == generation {
		return known.topology, nil
	}
	nodes, err := t.nodeLister.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	topo := newTopologyBy(nodes, t.nodeZone)
	topo.mapped = t.hybrid != nil
	t.topology.Store(&topologyAt{generation: generation, topology: topo})
	return topo, nil
}

// zoneCounts counts the tenant's Nodes per zone, from the Node events, to tell when its set of zones changes.
type zoneCounts struct {
	mu    sync.Mutex
	nodes map[string]int
}

// add counts a Node of zone and says whether the zone is new to the tenant.
func (z *zoneCounts) add(zone string) bool {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.nodes == nil {
		z.nodes = map[string]int{}
	}
	z.nodes[zone]++
	return z.nodes[zone] == 1
}

// remove uncounts a Node of zone and says whether the tenant has no Node left there (or never counted one: the
// zones are looked at again).
func (z *zoneCounts) remove(zone string) bool {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.nodes[zone] <= 1 {
		delete(z.nodes, zone)
		return true
	}
	z.nodes[zone]--
	return false
}

func nodeZone(n *corev1.Node) string {
	if z := n.Labels[corev1.LabelTopologyZone]; z != "" {
		return z
	}
	return n.Labels[legacyZoneLabel]
}

// leftOut counts the ready endpoints of a Service port that its NEGs cannot take, each reported on the Service.
type leftOut struct {
	// outsideZones run on a Node the tenant does not see, or that has no zone: the instance of a GCE_VM_IP_PORT
	// endpoint must be a VM of the tenant's project in the NEG's zone, and one endpoint GCE refuses would hold back
	// the whole NEG.
	outsideZones int
	// ipv6Only are IPv6 addresses without an IPv4 address of the same Pod: GCE fills a missing ipAddress with the
	// VM's primary IPv4 address, the Node's, so such an endpoint would send the load balancer's traffic to the Node.
	ipv6Only int
}

// warnings are the Warnings on the Service for what port's NEGs leave out. No count in a message: it would make
// every endpoint change a new Event.
func (l leftOut) warnings(port int32) []tenant.Warning {
	var out []tenant.Warning
	if l.outsideZones > 0 {
		out = append(out, tenant.Warning{Reason: ReasonEndpointsSkipped, Message: fmt.Sprintf(
			"Some ready endpoints of port %d run on Nodes this tenant does not have, or that have no zone; "+
				"they are left out of the NEGs", port)})
	}
	if l.ipv6Only > 0 {
		out = append(out, tenant.Warning{Reason: ReasonIPv6EndpointsNotServed, Message: fmt.Sprintf(
			"Some ready endpoints of port %d have an IPv6 address and no IPv4 address of the same Pod; a NEG "+
				"endpoint needs the Pod's IPv4 address beside its IPv6 one, so they are left out of the NEGs", port)})
	}
	return out
}

// endpointsByZone returns the ready endpoints of one Service port, grouped by zone and sorted, from the Service's
// EndpointSlices. The port is the EndpointSlice port with the Service port's name and protocol (the EndpointSlice
// controller names slice ports after Service ports), so a named targetPort resolves to each Pod's own number.
//
// An endpoint counts only if ready says it is ready (Translator.endpointReady: also one whose Pod waits only for the
// NEG readiness gate) and runs on a Node the tenant sees in one of its zones. A dual-stack Service has an IPv4 and
// an IPv6 slice: the two addresses of one Pod (the endpoints' targetRef) and port make one endpoint carrying both;
// an IPv4 address alone is an endpoint, an IPv6 address alone is left out (leftOut.ipv6Only). While the Service has
// an IPv6 slice, a Pod that waits for the gate and has an IPv6 address counts only once both families list it: the
// EndpointSlice controller writes the two slices in separate calls, in either order, and an IPv4-only endpoint would
// let the Pod turn Ready, then be detached to take its IPv6 address while Ready. A Pod without an IPv6 address is
// never in an IPv6 slice: its IPv4 address is its endpoint at once, or it would turn Ready only at the gate's
// timeout, outside its NEG.
func endpointsByZone(endpointSlices []*discoveryv1.EndpointSlice, port *corev1.ServicePort, topo *topology,
	ready readiness) (byZone map[string][]mpv1alpha1.NetworkEndpoint, left leftOut) {
	ipv4, ipv6, dualStack, left := readyEndpoints(endpointSlices, port, topo, ready)
	byZone = map[string][]mpv1alpha1.NetworkEndpoint{}
	seen := map[mpv1alpha1.NetworkEndpoint]bool{}
	joined := map[podPort]bool{}
	for _, ne := range ipv4 {
		key := podPort{pod: ne.Pod, port: ne.Port}
		if v6, ok := ipv6[key]; ok && ne.Pod != "" && v6.Instance == ne.Instance {
			ne.Ipv6Address = v6.Ipv6Address
			joined[key] = true
		} else if dualStack && ne.awaitsIPv6 {
			continue
		}
		if seen[ne.NetworkEndpoint] {
			// The same Pod in two slices while the EndpointSlice controller moves it.
			continue
		}
		seen[ne.NetworkEndpoint] = true
		byZone[ne.zone] = append(byZone[ne.zone], ne.NetworkEndpoint)
	}
	for key := range ipv6 {
		if !joined[key] {
			left.ipv6Only++
		}
	}
	for _, eps := range byZone {
		slices.SortFunc(eps, compareEndpoints)
	}
	return byZone, left
}

// readyEndpoints reads the ready endpoints of one Service port in the tenant's zones from the Service's IPv4 and
// IPv6 slices, the IPv6 ones by Pod and port (endpointsByZone); dualStack says whether an IPv6 slice has the port.
func readyEndpoints(endpointSlices []*discoveryv1.EndpointSlice, port *corev1.ServicePort, topo *topology,
	ready readiness) (ipv4 []zonedEndpoint, ipv6 map[podPort]zonedEndpoint, dualStack bool, left leftOut) {
	inZones := map[string]bool{}
	for _, z := range topo.zones {
		inZones[z] = true
	}
	protocol := port.Protocol
	if protocol == "" {
		protocol = corev1.ProtocolTCP
	}
	ipv6 = map[podPort]zonedEndpoint{}
	for _, slice := range endpointSlices {
		family := slice.AddressType
		if family != discoveryv1.AddressTypeIPv4 && family != discoveryv1.AddressTypeIPv6 {
			continue
		}
		number, ok := slicePort(slice, port.Name, protocol)
		if !ok {
			continue
		}
		dualStack = dualStack || family == discoveryv1.AddressTypeIPv6
		for i := range slice.Endpoints {
			ep := &slice.Endpoints[i]
			if len(ep.Addresses) == 0 {
				continue
			}
			counts, awaitsIPv6 := ready(slice.Namespace, ep)
			if !counts {
				continue
			}
			node := ptr.Deref(ep.NodeName, "")
			nodeZone, visible := topo.nodeZones[node]
			zone := ptr.Deref(ep.Zone, "")
			if zone == "" || topo.mapped {
				zone = nodeZone
			}
			if !visible || !inZones[zone] {
				left.outsideZones++
				continue
			}
			ne := zonedEndpoint{zone: zone, awaitsIPv6: awaitsIPv6, NetworkEndpoint: mpv1alpha1.NetworkEndpoint{
				Instance: node, Port: number, Pod: podName(slice.Namespace, ep)}}
			if family == discoveryv1.AddressTypeIPv4 {
				ne.IPAddress = ep.Addresses[0]
				ipv4 = append(ipv4, ne)
				continue
			}
			ne.Ipv6Address = ep.Addresses[0]
			if ne.Pod == "" {
				// Nothing to join it with.
				left.ipv6Only++
				continue
			}
			// A Pod in two IPv6 slices while the EndpointSlice controller moves it: the same address twice.
			ipv6[podPort{pod: ne.Pod, port: number}] = ne
		}
	}
	return ipv4, ipv6, dualStack, left
}

// zonedEndpoint is an endpoint and the zone of its NEG; awaitsIPv6: it counts only because its Pod waits for the NEG
// readiness gate (the slice says not ready), and that Pod has an IPv6 address a dual-stack Service's IPv6 slice lists.
type zonedEndpoint struct {
	zone       string
	awaitsIPv6 bool
	mpv1alpha1.NetworkEndpoint
}

// readiness says whether an endpoint counts and, if only through the NEG readiness gate, whether its Pod has an
// IPv6 address (Translator.endpointReady).
type readiness func(namespace string, ep *discoveryv1.Endpoint) (counts, awaitsIPv6 bool)

// podPort joins a Pod's IPv4 and IPv6 endpoints of one port.
type podPort struct {
	pod  string
	port int32
}

// podName is the name of the Pod an endpoint of a slice of namespace is for, or "" when its targetRef names none
// there (a Service without a selector may list any address).
func podName(namespace string, ep *discoveryv1.Endpoint) string {
	ref := ep.TargetRef
	if ref == nil || ref.Kind != "Pod" || (ref.Namespace != "" && ref.Namespace != namespace) {
		return ""
	}
	return ref.Name
}

func slicePort(slice *discoveryv1.EndpointSlice, name string, protocol corev1.Protocol) (int32, bool) {
	for _, p := range slice.Ports {
		if ptr.Deref(p.Name, "") == name && ptr.Deref(p.Protocol, corev1.ProtocolTCP) == protocol && p.Port != nil &&
			*p.Port >= 1 && *p.Port <= 65535 {
			return *p.Port, true
		}
	}
	return 0, false
}

func compareEndpoints(a, b mpv1alpha1.NetworkEndpoint) int {
	return cmp.Or(cmp.Compare(a.Instance, b.Instance), cmp.Compare(a.IPAddress, b.IPAddress), cmp.Compare(a.Port, b.Port),
		cmp.Compare(a.Ipv6Address, b.Ipv6Address), cmp.Compare(a.Pod, b.Pod))
}
