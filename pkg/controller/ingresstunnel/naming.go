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

package ingresstunnel

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	tunnelv1alpha1 "github.com/multiproject/api/pangolin/tunnel/v1alpha1"
)

const (
	resourceNamePrefix = "pic-"
	// routeResourceNamePrefix starts the names of an HTTPRoute's PangolinResources (routeResourceName).
	routeResourceNamePrefix = "phr-"
	// maxResourceNameLength keeps names valid DNS labels, as the reference controller does, so they also fit in
	// label values and in the Pangolin display name's limits.
	maxResourceNameLength = validation.DNS1123LabelMaxLength
)

var notNameChars = regexp.MustCompile(`[^a-z0-9]+`)

// ResourceName is the name of the PangolinResource of one host of an Ingress: pic-<namespace>-<ingress>-<hash>,
// where hash is the first 8 hex digits of SHA-256("<namespace>/<ingress>/<host>"). It is deterministic, so it can be
// computed outside the cluster (GitOps), and it is at most 63 characters: the ingress part is shortened first, then
// the namespace, down to pic-<hash>. Characters outside [a-z0-9] become "-".
func ResourceName(namespace, ingress, host string) string {
	return resourceName(resourceNamePrefix, namespace+"/"+ingress+"/"+host, namespace, ingress)
}

// resourceName is <prefix><namespace>-<object>-<hash of hashed>, shortened as ResourceName says.
func resourceName(prefix, hashed, namespace, object string) string {
	sum := sha256.Sum256([]byte(hashed))
	hash := hex.EncodeToString(sum[:4])

	ns, ing := nameSegment(namespace), nameSegment(object)
	// Room for "<ns>-<ing>-" between the prefix and the hash.
	room := maxResourceNameLength - len(prefix) - len(hash)
	if need := len(ns) + 1 + len(ing) + 1; ns != "" && ing != "" && need > room {
		ing = shorten(ing, room-len(ns)-2)
	}
	if ing == "" && len(ns)+1 > room {
		ns = shorten(ns, room-1)
	}
	if ns == "" && len(ing)+1 > room {
		ing = shorten(ing, room-1)
	}
	var b strings.Builder
	b.WriteString(prefix)
	for _, part := range []string{ns, ing} {
		if part != "" {
			b.WriteString(part)
			b.WriteByte('-')
		}
	}
	b.WriteString(hash)
	return b.String()
}

// resourceNames names the PangolinResource of each host of one Ingress. A host that already has a PangolinResource
// controlled by the Ingress keeps that resource's name, whichever build chose it: a rename is a delete and a create,
// which the Pangolin operator turns into a new resource and a moment without the host. Other hosts get ResourceName.
type resourceNames struct {
	namespace, ingress string
	// recorded maps a host to the name of its resource, where that is not ResourceName.
	recorded map[string]string
}

// namesOf records the names of owned, the PangolinResources the Ingress controls, that this build would not give
// their hosts. Where a host has a resource of this build's name too, that one is the host's; resources being deleted
// name nothing.
func namesOf(namespace, ingress string, owned []*tunnelv1alpha1.PangolinResource) resourceNames {
	n := resourceNames{namespace: namespace, ingress: ingress, recorded: map[string]string{}}
	computed := map[string]bool{}
	for _, res := range owned {
		if res.DeletionTimestamp == nil && res.Name == ResourceName(namespace, ingress, hostOf(res)) {
			computed[hostOf(res)] = true
		}
	}
	for _, res := range owned {
		host := hostOf(res)
		if res.DeletionTimestamp != nil || computed[host] {
			continue
		}
		// Two of one host (never made by one build): the first name in order, so every sync picks the same.
		if name, ok := n.recorded[host]; !ok || res.Name < name {
			n.recorded[host] = res.Name
		}
	}
	return n
}

// of is the name of the host's PangolinResource.
func (n resourceNames) of(host string) string {
	if name, ok := n.recorded[host]; ok {
		return name
	}
	return ResourceName(n.namespace, n.ingress, host)
}

func nameSegment(s string) string {
	return strings.Trim(notNameChars.ReplaceAllString(strings.ToLower(s), "-"), "-")
}

func shorten(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) > n {
		s = s[:n]
	}
	return strings.TrimRight(s, "-")
}
