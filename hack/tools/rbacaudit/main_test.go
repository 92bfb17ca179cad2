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
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
)

const testManifest = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: shared
rules:
  # Informers.
  - apiGroups: [""]
    resources: ["services"]
    verbs: ["list", "watch"]
  # The finalizer check.
  # rbac-unused-ok: update: checked by an admission plugin
  - apiGroups: [""]
    resources: ["services/finalizers"]
    verbs: ["update"]
  # Events.
  - apiGroups: ["", "events.k8s.io"]
    resources: ["events"]
    verbs: ["create", "update"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: shared
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: shared}
subjects: [{kind: ServiceAccount, name: m, namespace: kube-system}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: lease
  namespace: kube-system
rules:
  # The Lease.
  - apiGroups: ["coordination.k8s.io"]
    resources: ["leases"]
    resourceNames: ["mine"]
    verbs: ["get", "update"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: lease
  namespace: kube-system
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: lease}
subjects: [{kind: ServiceAccount, name: m, namespace: kube-system}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: unbound
rules:
  - apiGroups: [""]
    resources: ["secrets"]
    verbs: ["list"]
`

// auditLine is one ResponseComplete event of the audit log.
func auditLine(user, verb, group, resource, sub, namespace, name string, code int) string {
	return `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseComplete",` +
		`"verb":"` + verb + `","user":{"username":"` + user + `"},"objectRef":{"resource":"` + resource +
		`","subresource":"` + sub + `","namespace":"` + namespace + `","name":"` + name + `","apiGroup":"` + group +
		`"},"responseStatus":{"code":` + strconv.Itoa(code) + `}}`
}

func TestAuditReport(t *testing.T) {
	const user = "system:serviceaccount:kube-system:m"
	dir := t.TempDir()
	manifest := filepath.Join(dir, "rbac.yaml")
	if err := os.WriteFile(manifest, []byte(testManifest), 0o600); err != nil {
		t.Fatal(err)
	}
	log := strings.Join([]string{
		// A streaming list: the informer's watches, and no LIST; the list grant counts as used.
		auditLine(user, "watch", "", "services", "", "", "", 200),
		auditLine(user, "watch", "", "services", "", "", "", 200),
		auditLine(user, "create", "", "events", "", "ns", "e1", 201),
		// Another Lease: refused, and it does not count as a use of the Lease rule.
		auditLine(user, "update", "coordination.k8s.io", "leases", "", "kube-system", "other", 403),
		// The Lease rule's name in another namespace is not its grant.
		auditLine(user, "get", "coordination.k8s.io", "leases", "", "default", "mine", 200),
		auditLine(user, "get", "coordination.k8s.io", "leases", "", "kube-system", "mine", 200),
		// Another user's requests are not the ServiceAccount's.
		auditLine("admin", "update", "", "events", "", "ns", "e1", 200),
		// Discovery: no objectRef.
		`{"kind":"Event","stage":"ResponseComplete","verb":"get","user":{"username":"` + user + `"},"requestURI":"/apis"}`,
	}, "\n")
	requests, err := parseAuditLog(strings.NewReader(log), user)
	if err != nil {
		t.Fatal(err)
	}
	m, err := loadManifests([]string{manifest})
	if err != nil {
		t.Fatal(err)
	}
	grants, external := m.grantsOf(user)
	rep := audit(grants, external, requests)

	names := func(us []usage) []string {
		var out []string
		for _, u := range us {
			out = append(out, u.verb+" "+ruleResources(u.grant.APIGroups, u.grant.Resources)+" "+u.grant.namespace)
		}
		return out
	}
	if got, want := names(rep.used), []string{"list services ", "watch services ", "create events, events.events.k8s.io ",
		"get leases.coordination.k8s.io kube-system"}; !slices.Equal(got, want) {
		t.Errorf("used = %q, want %q", got, want)
	}
	if got, want := names(rep.unusedOK), []string{"update services/finalizers "}; !slices.Equal(got, want) {
		t.Errorf("unused with a reason = %q, want %q", got, want)
	}
	if got, want := names(rep.unused), []string{"update events, events.events.k8s.io ", "update leases.coordination.k8s.io kube-system"}; !slices.Equal(got, want) {
		t.Errorf("unused = %q, want %q", got, want)
	}
	if rep.used[1].count != 2 {
		t.Errorf("watch services used %d times, want 2", rep.used[1].count)
	}
	if len(rep.refused) != 1 || !strings.Contains(rep.refused[0], `name="other"`) {
		t.Errorf("refused = %q, want the update of Lease other", rep.refused)
	}
	if len(rep.ungranted) != 1 || !strings.Contains(rep.ungranted[0], `ns="default"`) {
		t.Errorf("used but not granted = %q, want the get of Lease default/mine", rep.ungranted)
	}
	if got := rep.used[0].grant.comment; got != "Informers." {
		t.Errorf("the rule's comment = %q", got)
	}
	var out strings.Builder
	rep.write(&out)
	if !strings.Contains(out.String(), "update services/finalizers (ClusterRole/shared, cluster-wide) "+manifest+": checked by an admission plugin") {
		t.Errorf("the report does not give the manifest's reason:\n%s", out.String())
	}
}

// shippedGrants are the rules manifests/rbac and the sharded overlay bind to the manager's ServiceAccount.
func shippedGrants(t *testing.T) ([]grant, *manifests) {
	t.Helper()
	root := filepath.Join("..", "..", "..")
	m, err := loadManifests([]string{filepath.Join(root, "manifests", "rbac"), filepath.Join(root, "overlays", "sharded", "rbac.yaml")})
	if err != nil {
		t.Fatal(err)
	}
	grants, _ := m.grantsOf(defaultUser)
	if len(grants) == 0 {
		t.Fatal("no rule of the shipped manifests is bound to the manager's ServiceAccount")
	}
	return grants, m
}

// TestSharedRoleHoldsTheSharedInformersReads pins the choice docs/security.md describes: the shared informers start
// for every resource whatever --controllers enables, so their list and watch are in the shared ClusterRole, and no
// controller's role grants a list or a watch: unbinding a disabled controller's role cannot break the cache.
func TestSharedRoleHoldsTheSharedInformersReads(t *testing.T) {
	grants, _ := shippedGrants(t)
	shared := func(group, resource, verb string) bool {
		return slices.ContainsFunc(grants, func(g grant) bool {
			return g.role == "ClusterRole/multiproject-controller-manager" && g.namespace == "" &&
				g.allows(request{verb: verb, group: group, resource: resource}, verb)
		})
	}
	for _, r := range informerset.Resources {
		if r.Sharded {
			continue // the claim records: overlays/sharded's Role, in the claims namespace
		}
		for _, verb := range []string{"list", "watch"} {
			if !shared(r.GVR.Group, r.GVR.Resource, verb) {
				t.Errorf("the shared ClusterRole does not grant %s %s, which the shared informers need", verb, r.GVR.GroupResource())
			}
		}
	}
	for _, g := range grants {
		if !strings.HasPrefix(g.role, "ClusterRole/multiproject-controller-manager:") {
			continue
		}
		if slices.Contains(g.Verbs, "list") || slices.Contains(g.Verbs, "watch") || slices.Contains(g.Verbs, "*") {
			t.Errorf("%s (%s) grants %v on %v: a controller's reads of the shared cache belong in the shared ClusterRole",
				g.role, g.file, g.Verbs, g.Resources)
		}
	}
}

// TestEveryShippedRuleSaysWhy: docs/security.md's table takes each rule's reason from its comment.
func TestEveryShippedRuleSaysWhy(t *testing.T) {
	grants, _ := shippedGrants(t)
	for _, g := range grants {
		if g.comment == "" {
			t.Errorf("%s (%s): the rule %v %v has no comment saying why", g.role, g.file, g.Resources, g.Verbs)
		}
		for verb := range g.unusedOK {
			if !slices.Contains(g.Verbs, verb) {
				t.Errorf("%s (%s): rbac-unused-ok names %q, which the rule does not grant", g.role, g.file, verb)
			}
		}
	}
}

func TestWriteDocVerify(t *testing.T) {
	path := filepath.Join(t.TempDir(), "doc.md")
	stale := "intro\n" + beginMarker + "\n| old |\n" + endMarker + "\nafter\n"
	if err := os.WriteFile(path, []byte(stale), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := writeDoc(path, true, "| new |\n"); err == nil {
		t.Error("-verify passed a stale table")
	}
	if err := writeDoc(path, false, "| new |\n"); err != nil {
		t.Fatal(err)
	}
	if err := writeDoc(path, true, "| new |\n"); err != nil {
		t.Errorf("-verify after writing: %v", err)
	}
	data, _ := os.ReadFile(path)
	if want := "intro\n" + beginMarker + "\n| new |\n" + endMarker + "\nafter\n"; string(data) != want {
		t.Errorf("wrote %q, want %q", data, want)
	}
}
