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
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
)

// ReasonHostNotAllowed: a host of the Ingress is outside the hosts its tenant may publish
// (spec.pangolin.allowedHostnames); it gets no PangolinResource and claims nothing.
const ReasonHostNotAllowed = "HostNotAllowed"

// maxListedAllowances is how many entries of the tenant's list a HostNotAllowed message names.
const maxListedAllowances = 5

// hostAllowance is the hosts a tenant may publish: exact names, and wildcards "*.<name>" that allow every name
// below <name>, at any depth, but not <name> itself (Gateway API's listener hostnames, and DNS delegation: a
// tenant given a zone owns its whole subtree). The zero value, like an empty list, allows every host.
type hostAllowance struct {
	tenant string
	// entries are the list as the ProviderConfig gives it, for messages.
	entries  []string
	exact    sets.Set[string]
	suffixes []string // ".team-a.example.com" for "*.team-a.example.com"
}

// newHostAllowance reads the tenant's list. An entry the CRD would refuse (it was written past an older CRD) is
// taken as an exact name, which no host matches, so a malformed list allows less, never more.
func newHostAllowance(tenant string, list []mpv1alpha1.AllowedHostname) hostAllowance {
	a := hostAllowance{tenant: tenant, exact: sets.New[string]()}
	for _, e := range list {
		entry := strings.ToLower(string(e))
		a.entries = append(a.entries, entry)
		if suffix, ok := strings.CutPrefix(entry, "*"); ok && strings.HasPrefix(suffix, ".") && len(suffix) > 1 {
			a.suffixes = append(a.suffixes, suffix)
			continue
		}
		a.exact.Insert(entry)
	}
	return a
}

// restricted says whether the tenant has a list at all; without one every host is allowed.
func (a hostAllowance) restricted() bool { return len(a.entries) > 0 }

// allows says whether the tenant may publish name, a host as it is published (after the subdomain annotation).
func (a hostAllowance) allows(name string) bool {
	if !a.restricted() {
		return true
	}
	name = strings.ToLower(name)
	if a.exact.Has(name) {
		return true
	}
	for _, suffix := range a.suffixes {
		if len(name) > len(suffix) && strings.HasSuffix(name, suffix) {
			return true
		}
	}
	return false
}

// refusal is the HostNotAllowed message for a host published as name. It names the host, the tenant and what the
// tenant may publish.
func (a hostAllowance) refusal(host, name string) string {
	what := "Host " + host
	if name != host {
		what += fmt.Sprintf(" is published as %s (annotation %s), which", name, AnnotationSubdomain)
	}
	listed := a.entries
	more := ""
	if len(listed) > maxListedAllowances {
		listed, more = listed[:maxListedAllowances], fmt.Sprintf(" and %d more", len(a.entries)-maxListedAllowances)
	}
	return fmt.Sprintf("%s is not among the hosts tenant %s may publish (spec.pangolin.allowedHostnames: %s%s); "+
		"this Ingress gets no PangolinResource for it", what, a.tenant, strings.Join(listed, ", "), more)
}

// withdrawal is why a PangolinResource of a host the tenant may not publish is deleted.
func (a hostAllowance) withdrawal() string {
	return "its host is not among the hosts tenant " + a.tenant + " may publish"
}
