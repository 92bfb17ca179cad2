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

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// request is one kind of request the subject made, as the audit log records it.
type request struct {
	verb, group, resource, namespace, name string // resource includes "/subresource"
	refused                                bool   // answered 403
}

// readAuditLog returns the resource requests of user in the audit log (one JSON event per line), counted.
func readAuditLog(path, user string) (map[request]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseAuditLog(f, user)
}

func parseAuditLog(r io.Reader, user string) (map[request]int, error) {
	out := map[request]int{}
	scanner := bufio.NewScanner(r)
	scanner.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for line := 1; scanner.Scan(); line++ {
		if len(strings.TrimSpace(scanner.Text())) == 0 {
			continue
		}
		var ev auditv1.Event
		if err := json.Unmarshal(scanner.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("audit log line %d: %w", line, err)
		}
		// Non-resource requests (discovery, /version) are every authenticated user's.
		if ev.User.Username != user || ev.ObjectRef == nil || ev.ObjectRef.Resource == "" {
			continue
		}
		if ev.Stage != auditv1.StageResponseComplete && ev.Stage != auditv1.StagePanic {
			continue
		}
		resource := ev.ObjectRef.Resource
		if ev.ObjectRef.Subresource != "" {
			resource += "/" + ev.ObjectRef.Subresource
		}
		req := request{verb: ev.Verb, group: ev.ObjectRef.APIGroup, resource: resource,
			namespace: ev.ObjectRef.Namespace, name: ev.ObjectRef.Name}
		req.refused = ev.ResponseStatus != nil && ev.ResponseStatus.Code == 403
		out[req]++
	}
	return out, scanner.Err()
}

// allows says whether the grant lets the request through, as the RBAC authorizer decides.
func (g grant) allows(req request, verb string) bool {
	if g.namespace != "" && g.namespace != req.namespace {
		return false
	}
	if !matches(g.APIGroups, req.group) || !matches(g.Resources, req.resource) || !matches(g.Verbs, verb) {
		return false
	}
	// A create's name is in its body, which RBAC does not see: resourceNames never allow a create.
	if len(g.ResourceNames) > 0 {
		return verb != "create" && slices.Contains(g.ResourceNames, req.name)
	}
	return true
}

func matches(granted []string, want string) bool {
	return slices.Contains(granted, want) || slices.Contains(granted, "*")
}

// uses says whether a request with verb requested uses the granted verb. An informer lists, then watches; a client
// that streams the list (client-go's WatchListClient, on by default) gets it through the watch alone, and falls back
// to a LIST against an API server without streaming lists: so a watch uses the list grant too.
func uses(requested, granted string) bool {
	return requested == granted || (requested == "watch" && granted == "list")
}

// usage is one granted verb of one rule, and what the log says of it.
type usage struct {
	grant grant
	verb  string
	count int
}

func (u usage) String() string {
	where := "cluster-wide"
	if u.grant.namespace != "" {
		where = "namespace " + u.grant.namespace
	}
	names := ""
	if len(u.grant.ResourceNames) > 0 {
		names = " names " + strings.Join(u.grant.ResourceNames, ",")
	}
	return fmt.Sprintf("%s %s (%s, %s%s) %s", u.verb, ruleResources(u.grant.PolicyRule.APIGroups, u.grant.Resources),
		u.grant.role, where, names, u.grant.file)
}

func ruleResources(groups, resources []string) string {
	var out []string
	for _, g := range groups {
		for _, r := range resources {
			// kubectl's spelling: resource.group/subresource.
			name, sub, _ := strings.Cut(r, "/")
			if g != "" {
				name += "." + g
			}
			if sub != "" {
				name += "/" + sub
			}
			out = append(out, name)
		}
	}
	return strings.Join(out, ", ")
}

// report compares what is granted with what was requested.
type report struct {
	used, unusedOK, unused []usage
	refused, ungranted     []string
	external               []string
	requests               int
}

func audit(grants []grant, external []string, requests map[request]int) report {
	rep := report{external: external}
	covered := map[request]bool{}
	for _, g := range grants {
		for _, verb := range g.Verbs {
			u := usage{grant: g, verb: verb}
			for req, n := range requests {
				if !req.refused && uses(req.verb, verb) && g.allows(req, verb) {
					u.count += n
					covered[req] = true
				}
			}
			switch _, ok := g.unusedOK[verb]; {
			case u.count > 0:
				rep.used = append(rep.used, u)
			case ok:
				rep.unusedOK = append(rep.unusedOK, u)
			default:
				rep.unused = append(rep.unused, u)
			}
		}
	}
	for req, n := range requests {
		rep.requests += n
		line := fmt.Sprintf("%s %s ns=%q name=%q: %d", req.verb, ruleResources([]string{req.group}, []string{req.resource}), req.namespace, req.name, n)
		switch {
		case req.refused:
			rep.refused = append(rep.refused, line)
		case !covered[req]:
			rep.ungranted = append(rep.ungranted, line)
		}
	}
	sort.Strings(rep.refused)
	sort.Strings(rep.ungranted)
	return rep
}

func (rep report) write(w io.Writer) {
	fmt.Fprintf(w, "RBAC audit: %d requests; %d granted verbs used, %d unused with a reason, %d unused without one\n",
		rep.requests, len(rep.used), len(rep.unusedOK), len(rep.unused))
	fmt.Fprintln(w, "granted and used (requests):")
	for _, u := range rep.used {
		fmt.Fprintf(w, "  %s: %d\n", u, u.count)
	}
	fmt.Fprintln(w, "granted, unused, the manifest says why (rbac-unused-ok):")
	for _, u := range rep.unusedOK {
		fmt.Fprintf(w, "  %s: %s\n", u, u.grant.unusedOK[u.verb])
	}
	fmt.Fprintln(w, "granted, UNUSED, no reason (remove the grant or say why with rbac-unused-ok):")
	for _, u := range rep.unused {
		fmt.Fprintf(w, "  %s\n", u)
	}
	fmt.Fprintln(w, "used, allowed by roles these files do not define:")
	for _, l := range rep.ungranted {
		fmt.Fprintf(w, "  %s\n", l)
	}
	for _, e := range rep.external {
		fmt.Fprintf(w, "  (bound: %s)\n", e)
	}
	// A 403 is RBAC's refusal or an admission plugin's (a terminating namespace, an admission policy), or a
	// kube-apiserver that serves before its authorizer has loaded the roles.
	fmt.Fprintln(w, "refused (403: RBAC, or admission, or an API server still starting):")
	for _, l := range rep.refused {
		fmt.Fprintf(w, "  %s\n", l)
	}
}
