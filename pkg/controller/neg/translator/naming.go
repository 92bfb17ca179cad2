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
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// translationVersion is part of every Translation name and of every generated NEG name. Bump it only for a change
// of the Translation layout that the pusher cannot apply in place (a NEG renamed, say): the new version's
// Translations then declare new NEGs (the version is in their names), and a Translation of an older version is
// deleted once its successor is synced, so the pusher deletes the old NEGs after the new ones exist. A Translation of
// a newer version (met after a rollback) is left alone, with no successor of this version (planInput.newerInUse):
// the path moves only forward. It is "v" and a number; the number is the digit in the NEG name prefix (v1: mp1).
const translationVersion = "v1"

// translationPrefix starts the names of the Translations this controller writes, whatever their version, so that
// Translations another controller might make for the same Service are never mistaken for stale ones of ours.
const translationPrefix = "neg-"

// translationName is the name of the Translation of one Service port: neg-v1-<service>-<port>. A Service name is a
// DNS label (at most 63 characters), so the name stays far below the 253 allowed.
func translationName(service string, port int32) string {
	return versionedTranslationName(translationVersion, service, port)
}

// versionedTranslationName is the name of the Translation of one Service port in a translation version:
// neg-<version>-<service>-<port>.
func versionedTranslationName(version, service string, port int32) string {
	return translationPrefix + version + "-" + service + "-" + strconv.Itoa(int(port))
}

// parseTranslationName splits a Translation name of ours, neg-<version>-<service>-<port>, whatever its version. The
// version has no hyphen and the port is the last part, so a Service name with hyphens is recovered whole. It tells a
// Translation of another version which port's successor it waits for, and names the Service of a Translation that
// lost its owner reference (the Service was deleted with --cascade=orphan).
func parseTranslationName(name string) (version, service string, port int32, ok bool) {
	rest, found := strings.CutPrefix(name, translationPrefix)
	if !found {
		return "", "", 0, false
	}
	version, rest, found = strings.Cut(rest, "-")
	if !found || version == "" {
		return "", "", 0, false
	}
	i := strings.LastIndexByte(rest, '-')
	if i <= 0 {
		return "", "", 0, false
	}
	n, err := strconv.ParseInt(rest[i+1:], 10, 32)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(int(n)) != rest[i+1:] {
		return "", "", 0, false
	}
	return version, rest[:i], int32(n), true
}

// negNamePrefix starts the generated NEG names of a translation version: mp and the version's number (v1: mp1). The
// prefix is never shortened, so two versions never share a NEG name: a version bump declares new NEGs instead of
// adopting the ones the stale Translation is about to delete.
func negNamePrefix(version string) string {
	return "mp" + sanitize(strings.TrimPrefix(version, "v"))
}

// maxNEGNameLength is GCE's limit on resource names.
const maxNEGNameLength = 63

// clusterIdentity names this cluster in the cloud: the readable --cluster-name, and the UID that two clusters never
// share (pkg/clusterid). Before the UID existed, NEGs were named and marked by the readable name alone; the zero
// uid is that legacy identity, kept only for NEGs made then (see legacyIdentity).
type clusterIdentity struct{ name, uid string }

// legacy is the identity this cluster's NEGs had before the UID entered their names and markers.
func (c clusterIdentity) legacy() clusterIdentity { return clusterIdentity{name: c.name} }

// negName is the GCE name of the NEGs (one per zone, all with the same name) of one Service port of one tenant in
// one cluster, for a translation version: mp1-<cluster>-<namespace>-<service>-<port>-<hash>, where the readable parts
// are shortened evenly to fit 63 characters and the hash (of the cluster UID and of all the readable parts,
// unshortened) keeps shortened names apart. Two clusters (the UID differs even where --cluster-name is the same
// default), or two tenants sharing a GCP project, therefore never pick the same name for different Service ports, and
// two translation versions never pick the same name (the prefix differs). The hash input does not include the
// version, and the legacy identity (no UID) hashes what it always did, so the names of NEGs made before either entered
// the name are unchanged.
func negName(version string, cluster clusterIdentity, tenant, namespace, service string, port int32) string {
	parts := []string{cluster.name, tenant, namespace, service, strconv.Itoa(int(port))}
	if cluster.uid != "" {
		parts = append([]string{cluster.uid}, parts...)
	}
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	hash := hex.EncodeToString(sum[:])[:10]
	portStr := strconv.Itoa(int(port))
	prefix := negNamePrefix(version)
	// Fixed parts: prefix, port, hash and the five hyphens between the six parts.
	budget := maxNEGNameLength - len(prefix) - len(portStr) - len(hash) - 5
	fields := trimEvenly([]string{sanitize(cluster.name), namespace, service}, budget)
	return strings.Join([]string{prefix, fields[0], fields[1], fields[2], portStr, hash}, "-")
}

// sanitize reduces a free-form string (the --cluster-name) to the characters a GCE name allows.
func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	return b.String()
}

// trimEvenly shortens the fields, longest first, until their total length is at most budget, so that no one
// field loses everything while another keeps its full length.
func trimEvenly(fields []string, budget int) []string {
	out := slices.Clone(fields)
	total := 0
	for _, f := range out {
		total += len(f)
	}
	for total > budget {
		longest := 0
		for i := range out {
			if len(out[i]) > len(out[longest]) {
				longest = i
			}
		}
		out[longest] = out[longest][:len(out[longest])-1]
		total--
	}
	return out
}

// negDescription is the ownership marker written to every NEG: the pusher changes or deletes a NEG only when its
// description is exactly this. It names the cluster (its readable name and its UID, which the garbage sweep compares),
// tenant and Service port (the UID makes a re-created Service
// with the same name a different owner, so a NEG left behind by the old one is not silently adopted), in
// ingress-gce's JSON style so that people reading the GCE console recognise it. It does not name the translation
// version: the NEG name does, and the NEGs made before the version entered the name keep their marker.
func negDescription(cluster clusterIdentity, tenant, namespace, service string, uid string, port int32) string {
	b, _ := json.Marshal(negDescriptionFields{
		Cluster: cluster.name, ClusterUID: cluster.uid, Tenant: tenant, Namespace: namespace, Service: service, UID: uid, Port: strconv.Itoa(int(port)),
		ManagedBy: managedBy,
	})
	return string(b)
}

// managedBy is the marker's managed-by field.
const managedBy = "multiproject-controller-manager"

type negDescriptionFields struct {
	Cluster string `json:"cluster-name"`
	// ClusterUID is absent from the markers of NEGs made before the cluster's UID existed.
	ClusterUID string `json:"cluster-uid,omitempty"`
	Tenant     string `json:"provider-config"`
	Namespace  string `json:"namespace"`
	Service    string `json:"service-name"`
	UID        string `json:"service-uid"`
	Port       string `json:"port"`
	ManagedBy  string `json:"managed-by"`
}
