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

// Command rbacaudit compares the RBAC the manifests grant the manager's ServiceAccount with what it used, and keeps
// docs/security.md's table of those grants generated from the manifests.
//
// With -audit-log it reads kube-apiserver's audit log (test/fixtures/audit/policy.yaml: the ServiceAccount's
// requests at Metadata level) and reports every granted verb of every rule bound to the ServiceAccount as used (with
// how many requests), unused with the reason its manifest gives (a "# rbac-unused-ok: <verbs>: <why>" line in the
// rule's comment), or unused without one; it exits 1 if any is unused without a reason. test/e2e runs it after the
// whole package ran:
//
//	go run ./hack/tools/rbacaudit -audit-log audit.log manifests/rbac overlays/sharded/rbac.yaml
//
// With -doc it writes the table between the GENERATED markers of that Markdown file, or with -verify fails if the
// file differs from what it would write (hack/verify-rbac-docs.sh):
//
//	go run ./hack/tools/rbacaudit -doc docs/security.md [-verify] manifests/rbac
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

const defaultUser = "system:serviceaccount:kube-system:multiproject-controller-manager"

func main() {
	user := flag.String("user", defaultUser, "the ServiceAccount's user name")
	auditLog := flag.String("audit-log", "", "kube-apiserver's audit log (JSON lines) to compare the grants with")
	doc := flag.String("doc", "", "a Markdown file whose generated RBAC table to write")
	verify := flag.Bool("verify", false, "with -doc: fail if the file is not up to date instead of writing it")
	flag.Parse()
	if err := run(*user, *auditLog, *doc, *verify, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "rbacaudit:", err)
		os.Exit(1)
	}
}

func run(user, auditLog, doc string, verify bool, paths []string) error {
	if len(paths) == 0 || (auditLog == "") == (doc == "") {
		return fmt.Errorf("usage: rbacaudit (-audit-log FILE | -doc FILE [-verify]) MANIFEST_PATH...")
	}
	m, err := loadManifests(paths)
	if err != nil {
		return err
	}
	grants, external := m.grantsOf(user)
	if doc != "" {
		return writeDoc(doc, verify, table(grants, external))
	}
	requests, err := readAuditLog(auditLog, user)
	if err != nil {
		return err
	}
	rep := audit(grants, external, requests)
	rep.write(os.Stdout)
	if len(rep.unused) > 0 {
		return fmt.Errorf("%d granted verbs were never used and their manifests do not say why", len(rep.unused))
	}
	return nil
}

const (
	beginMarker = "<!-- BEGIN GENERATED: rbac table (hack/verify-rbac-docs.sh) -->"
	endMarker   = "<!-- END GENERATED: rbac table -->"
)

// table renders one row per rule bound to the ServiceAccount; the "for" column is the rule's comment.
func table(grants []grant, external []string) string {
	var b strings.Builder
	b.WriteString("| API | verbs | where | file | for (the rule's comment) |\n|---|---|---|---|---|\n")
	for _, g := range grants {
		where := "cluster-wide"
		if g.namespace != "" {
			where = "`" + g.namespace + "`"
		}
		if len(g.ResourceNames) > 0 {
			where += ", only `" + strings.Join(g.ResourceNames, "`, `") + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | `%s` | %s |\n", ruleResources(g.APIGroups, g.Resources),
			strings.Join(g.Verbs, ", "), where, filepath.Base(g.file), escape(g.comment))
	}
	for _, e := range external {
		fmt.Fprintf(&b, "| the built-in role of %s | | | | defined by Kubernetes |\n", escape(e))
	}
	return b.String()
}

func escape(s string) string { return strings.ReplaceAll(s, "|", "\\|") }

func writeDoc(path string, verify bool, generated string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	begin := bytes.Index(data, []byte(beginMarker))
	end := bytes.Index(data, []byte(endMarker))
	if begin < 0 || end < begin {
		return fmt.Errorf("%s: no %q ... %q region", path, beginMarker, endMarker)
	}
	var out bytes.Buffer
	out.Write(data[:begin+len(beginMarker)])
	out.WriteString("\n" + generated)
	out.Write(data[end:])
	if bytes.Equal(out.Bytes(), data) {
		return nil
	}
	if verify {
		return fmt.Errorf("%s: the RBAC table differs from the manifests; run hack/update-rbac-docs.sh", path)
	}
	return os.WriteFile(path, out.Bytes(), 0o644)
}
