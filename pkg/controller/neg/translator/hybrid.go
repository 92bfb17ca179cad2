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
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
)

// hybridTranslationVersion is the translation version of a tenant whose NEGs are NON_GCP_PRIVATE_IP_PORT (hybrid)
// ones: neg-h1-<service>-<port>, declaring NEGs named mph1-…. A version of its own, beside translationVersion, gives
// the two types different Translation and NEG names, so that a tenant switching type gets new NEGs beside the old
// ones, which its old Translations delete once the new ones are synced (pendingSuccessor), as for a version bump.
// It is also what a build that knows only GCE_VM_IP_PORT (bf30f57) does with them after a rollback: "h1" is no
// version it can order, so it takes the Translation for a newer build's and leaves it and its NEGs alone (no
// successor of its own, no instance written into them: docs/upgrade.md).
const hybridTranslationVersion = "h1"

// knownLayouts maps each family of translation versions this build writes (the version's letters) to its number:
// v for GCE_VM_IP_PORT NEGs, h for hybrid ones.
var knownLayouts = map[string]int{"v": 1, "h": 1}

// versionFor is the translation version of a tenant whose NEGs are of type negType (empty: GCE_VM_IP_PORT).
func versionFor(negType mpv1alpha1.NetworkEndpointType) string {
	if negType == mpv1alpha1.NetworkEndpointTypeNonGCPPrivateIPPort {
		return hybridTranslationVersion
	}
	return translationVersion
}

// newerLayout says whether a translation version is one a newer build wrote: of a family this build does not
// write, or of a number beyond this build's in its family. Such a Translation is left alone (planInput.newerInUse).
// A Translation of the other family this build writes (the tenant switched type) is not newer: it is replaced.
func newerLayout(version string) bool {
	i := strings.IndexFunc(version, func(r rune) bool { return r >= '0' && r <= '9' })
	if i <= 0 {
		return true
	}
	known, ok := knownLayouts[version[:i]]
	n, err := strconv.Atoi(version[i:])
	if !ok || err != nil || strconv.Itoa(n) != version[i:] {
		return true
	}
	return n > known
}

// zoneMapping turns the zone of a tenant's Node (topology.kubernetes.io/zone) into the GCE zone of its hybrid
// NEGs: spec.gcp.zoneMapping, else spec.gcp.defaultNEGZone, which also takes the Nodes without a zone. "" means
// none: the Node's endpoints are left out (leftOut.outsideZones).
type zoneMapping struct {
	mapping     map[string]mpv1alpha1.GCEZone
	defaultZone mpv1alpha1.GCEZone
}

func (m *zoneMapping) gceZone(clusterZone string) string {
	if zone, ok := m.mapping[clusterZone]; ok && clusterZone != "" && zone != "" {
		return string(zone)
	}
	return string(m.defaultZone)
}

// hybridZones is the tenant's zone mapping when its NEGs are hybrid ones, nil otherwise: a GCE_VM_IP_PORT NEG is in
// the zone of its Nodes, which are its instances.
func hybridZones(gcp *mpv1alpha1.GCPConfig) *zoneMapping {
	if gcp.NetworkEndpointType != mpv1alpha1.NetworkEndpointTypeNonGCPPrivateIPPort {
		return nil
	}
	return &zoneMapping{mapping: gcp.ZoneMapping, defaultZone: gcp.DefaultNEGZone}
}

// nodeZone is the GCE zone of the NEGs that hold the endpoints on a Node: its own zone, or for hybrid NEGs the zone
// the tenant maps it to. The Node handlers count Nodes by it, so the tenant's zones are GCE zones either way.
func (t *Translator) nodeZone(n *corev1.Node) string {
	if t.hybrid == nil {
		return nodeZone(n)
	}
	return t.hybrid.gceZone(nodeZone(n))
}

// negParameters are the parameters of one NEG of the tenant holding endpoints. A hybrid NEG takes no subnetwork,
// and its endpoints are an IPv4 address and a port: no instance, and no IPv6 address (GCE refuses both there), so a
// dual-stack Pod joins by its IPv4 address, and an IPv6-only one is left out with a Warning (leftOut.ipv6Only). The
// Pod stays, for the readiness gate. A GCE_VM_IP_PORT NEG leaves the type empty, as every earlier build wrote it.
func (t *Translator) negParameters(endpoints []mpv1alpha1.NetworkEndpoint) *mpv1alpha1.NetworkEndpointGroupParameters {
	params := &mpv1alpha1.NetworkEndpointGroupParameters{Network: t.gcp.Network, Subnetwork: t.gcp.Subnetwork, Endpoints: endpoints}
	if t.hybrid != nil {
		params.NetworkEndpointType = mpv1alpha1.NetworkEndpointTypeNonGCPPrivateIPPort
		params.Subnetwork = ""
		params.Endpoints = hybridEndpoints(endpoints)
	}
	return params
}

// hybridEndpoints are endpoints as a hybrid NEG holds them: address and port (and the Pod), sorted, each address
// and port once (GCE knows a hybrid endpoint by them alone).
func hybridEndpoints(endpoints []mpv1alpha1.NetworkEndpoint) []mpv1alpha1.NetworkEndpoint {
	if len(endpoints) == 0 {
		return endpoints
	}
	out := make([]mpv1alpha1.NetworkEndpoint, 0, len(endpoints))
	for _, ep := range endpoints {
		ep.Instance, ep.Ipv6Address = "", ""
		out = append(out, ep)
	}
	slices.SortFunc(out, compareEndpoints)
	return slices.CompactFunc(out, func(a, b mpv1alpha1.NetworkEndpoint) bool {
		return a.IPAddress == b.IPAddress && a.Port == b.Port
	})
}
