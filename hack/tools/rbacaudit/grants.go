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
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	rbacv1 "k8s.io/api/rbac/v1"
)

// unusedOK is the marker a rule's comment carries for verbs no test requests but a code path needs:
//
//	# rbac-unused-ok: update: why (the code path)
var unusedOK = regexp.MustCompile(`(?m)^\s*rbac-unused-ok:\s*([a-z*,\s-]+?):\s*(\S.*)$`)

// rule is one rule of a Role or ClusterRole, with what its comment says.
type rule struct {
	rbacv1.PolicyRule
	role string // Kind/name
	file string // as given on the command line
	// comment is the rule's head comment, marker lines left out.
	comment string
	// unusedOK maps a verb to why it may go unused in the tests.
	unusedOK map[string]string
}

// grant is a rule bound to the subject: where it applies ("" = cluster-wide).
type grant struct {
	*rule
	namespace string
	binding   string
}

// manifests is what the files hold: the rules by role, and the subject's bindings.
type manifests struct {
	roles    map[string][]*rule // key: Kind/[namespace/]name
	order    []string
	bindings []binding
}

type binding struct {
	kind, name, namespace string // kind: ClusterRoleBinding or RoleBinding
	roleRef               rbacv1.RoleRef
	subjects              []rbacv1.Subject
	file                  string
}

// loadManifests reads every YAML file among paths (a directory: its *.yaml files, kustomizations aside).
func loadManifests(paths []string) (*manifests, error) {
	m := &manifests{roles: map[string][]*rule{}}
	for _, p := range paths {
		files, err := yamlFiles(p)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			if err := m.loadFile(f); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
		}
	}
	return m, nil
}

func yamlFiles(p string) ([]string, error) {
	info, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{p}, nil
	}
	files, err := filepath.Glob(filepath.Join(p, "*.yaml"))
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(files, func(f string) bool { return filepath.Base(f) == "kustomization.yaml" }), nil
}

func (m *manifests) loadFile(file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if len(doc.Content) == 0 {
			continue
		}
		if err := m.loadDoc(file, doc.Content[0]); err != nil {
			return err
		}
	}
}

// object is the part of an RBAC object this tool reads.
type object struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Rules    []rbacv1.PolicyRule `json:"rules"`
	RoleRef  rbacv1.RoleRef      `json:"roleRef"`
	Subjects []rbacv1.Subject    `json:"subjects"`
}

func (m *manifests) loadDoc(file string, node *yaml.Node) error {
	var generic any
	if err := node.Decode(&generic); err != nil {
		return err
	}
	raw, err := json.Marshal(generic)
	if err != nil {
		return err
	}
	var obj object
	if err := json.Unmarshal(raw, &obj); err != nil {
		return err
	}
	switch obj.Kind {
	case "Role", "ClusterRole":
		key := roleKey(obj.Kind, obj.Metadata.Namespace, obj.Metadata.Name)
		comments := ruleComments(node)
		for i, r := range obj.Rules {
			rl := &rule{PolicyRule: r, role: obj.Kind + "/" + obj.Metadata.Name, file: file, unusedOK: map[string]string{}}
			if i < len(comments) {
				rl.comment, rl.unusedOK = parseComment(comments[i])
			}
			m.roles[key] = append(m.roles[key], rl)
		}
		m.order = append(m.order, key)
	case "RoleBinding", "ClusterRoleBinding":
		m.bindings = append(m.bindings, binding{kind: obj.Kind, name: obj.Metadata.Name, namespace: obj.Metadata.Namespace,
			roleRef: obj.RoleRef, subjects: obj.Subjects, file: file})
	}
	return nil
}

func roleKey(kind, namespace, name string) string {
	if kind == "ClusterRole" {
		return kind + "/" + name
	}
	return kind + "/" + namespace + "/" + name
}

// ruleComments returns the head comment of each item of the document's rules.
func ruleComments(doc *yaml.Node) []string {
	for i := 0; i+1 < len(doc.Content); i += 2 {
		if doc.Content[i].Value != "rules" {
			continue
		}
		var out []string
		for _, item := range doc.Content[i+1].Content {
			out = append(out, item.HeadComment)
		}
		return out
	}
	return nil
}

// parseComment strips the comment markers and splits off the rbac-unused-ok lines.
func parseComment(c string) (string, map[string]string) {
	ok := map[string]string{}
	var text []string
	for _, line := range strings.Split(c, "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "#"))
		if sm := unusedOK.FindStringSubmatch(line); sm != nil {
			for _, v := range strings.Split(sm[1], ",") {
				ok[strings.TrimSpace(v)] = sm[2]
			}
			continue
		}
		if line != "" {
			text = append(text, line)
		}
	}
	return strings.Join(text, " "), ok
}

// grantsOf returns every rule bound to the ServiceAccount user (system:serviceaccount:<ns>:<name>), and the roles
// bound to it that the files do not define (built-in ones such as system:auth-delegator).
func (m *manifests) grantsOf(user string) ([]grant, []string) {
	var grants []grant
	var external []string
	for _, b := range m.bindings {
		if !slices.ContainsFunc(b.subjects, func(s rbacv1.Subject) bool { return subjectUser(s) == user }) {
			continue
		}
		namespace := ""
		if b.kind == "RoleBinding" {
			namespace = b.namespace
		}
		rules, ok := m.roles[roleKey(b.roleRef.Kind, b.namespace, b.roleRef.Name)]
		if !ok {
			external = append(external, fmt.Sprintf("%s %s -> %s %s", b.kind, b.name, b.roleRef.Kind, b.roleRef.Name))
			continue
		}
		for _, r := range rules {
			grants = append(grants, grant{rule: r, namespace: namespace, binding: b.kind + "/" + b.name})
		}
	}
	return grants, external
}

func subjectUser(s rbacv1.Subject) string {
	if s.Kind != "ServiceAccount" {
		return s.Name
	}
	return "system:serviceaccount:" + s.Namespace + ":" + s.Name
}
