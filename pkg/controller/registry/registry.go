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

// Package registry owns the catalogue of per-tenant controllers: their descriptors (name, aliases, whether they
// are disabled by default, default worker count, constructor) and kube-controller-manager's `--controllers`
// semantics for choosing which of them a process runs.
package registry

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	cmapp "k8s.io/controller-manager/app"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
)

// Descriptor describes one kind of per-tenant controller to the command: its names, defaults and Factory.
type Descriptor struct {
	// Name is the canonical name used by --controllers and in --concurrent-<name>-syncs.
	Name string
	// Aliases are former or short names still accepted by --controllers. Renaming a controller must keep the old
	// name here, as kube-controller-manager's change policy requires.
	Aliases []string
	// DisabledByDefault keeps the controller off under `*`; only an explicit name enables it.
	DisabledByDefault bool
	// DefaultConcurrentSyncs is the default worker count of --concurrent-<name>-syncs.
	DefaultConcurrentSyncs int
	// Factory is what the manager needs to run the controller for a tenant.
	Factory tenant.Factory
}

// Descriptors is an immutable set of descriptors: the per-tenant controllers a binary can run.
type Descriptors struct {
	byName  map[string]*Descriptor
	aliases map[string]string
}

// New validates the descriptors and returns a registry. A programming mistake in the descriptor table (empty name,
// duplicate name or alias, alias equal to a name, no constructor) is an error, so the table itself is unit tested.
func New(descriptors ...*Descriptor) (*Descriptors, error) {
	r := &Descriptors{byName: map[string]*Descriptor{}, aliases: map[string]string{}}
	for _, d := range descriptors {
		switch {
		case d == nil:
			return nil, fmt.Errorf("nil controller descriptor")
		case d.Name == "" || d.Name == "*" || strings.HasPrefix(d.Name, "-"):
			return nil, fmt.Errorf("invalid controller name %q", d.Name)
		case d.Factory.New == nil:
			return nil, fmt.Errorf("controller %q has no constructor", d.Name)
		case d.DefaultConcurrentSyncs < 1:
			return nil, fmt.Errorf("controller %q: default concurrent syncs must be at least 1", d.Name)
		}
		if _, dup := r.byName[d.Name]; dup {
			return nil, fmt.Errorf("controller %q registered twice", d.Name)
		}
		if owner, dup := r.aliases[d.Name]; dup {
			return nil, fmt.Errorf("controller name %q is already an alias of %q", d.Name, owner)
		}
		r.byName[d.Name] = d
	}
	for _, d := range descriptors {
		for _, alias := range d.Aliases {
			if _, clash := r.byName[alias]; clash {
				return nil, fmt.Errorf("alias %q of controller %q is the name of a controller", alias, d.Name)
			}
			if owner, dup := r.aliases[alias]; dup {
				return nil, fmt.Errorf("alias %q of controller %q is already an alias of %q", alias, d.Name, owner)
			}
			r.aliases[alias] = d.Name
		}
	}
	return r, nil
}

// KnownControllers returns the canonical names, sorted.
func (r *Descriptors) KnownControllers() []string {
	return slices.Sorted(maps.Keys(r.byName))
}

// DisabledByDefault returns the names of the controllers that `*` does not enable, sorted.
func (r *Descriptors) DisabledByDefault() []string {
	var names []string
	for name, d := range r.byName {
		if d.DisabledByDefault {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// Aliases returns alias → canonical name.
func (r *Descriptors) Aliases() map[string]string {
	return maps.Clone(r.aliases)
}

// Get returns the descriptor of a canonical name.
func (r *Descriptors) Get(name string) (*Descriptor, bool) {
	d, ok := r.byName[name]
	return d, ok
}

// Canonicalize validates a --controllers list and rewrites aliases to canonical names, keeping `*` and `-`
// prefixes. An unknown name is an error that lists the valid names.
func (r *Descriptors) Canonicalize(controllers []string) ([]string, error) {
	out := make([]string, 0, len(controllers))
	var unknown []string
	for _, entry := range controllers {
		entry = strings.TrimSpace(entry)
		if entry == "*" {
			out = append(out, entry)
			continue
		}
		name, disable := strings.CutPrefix(entry, "-")
		if canonical, ok := r.aliases[name]; ok {
			name = canonical
		}
		if _, ok := r.byName[name]; !ok {
			unknown = append(unknown, fmt.Sprintf("%q", entry))
			continue
		}
		if disable {
			name = "-" + name
		}
		out = append(out, name)
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("unknown controller(s) %s in --controllers; valid names are %s (and '*' for all enabled by default, '-name' to disable one)",
			strings.Join(unknown, ", "), strings.Join(r.KnownControllers(), ", "))
	}
	return out, nil
}

// Enabled returns the descriptors that a canonical --controllers list enables, in name order, with
// kube-controller-manager's semantics: the first explicit `name` or `-name` wins; otherwise `*` enables every
// controller that is not disabled by default; with neither, the controller is off.
func (r *Descriptors) Enabled(canonicalControllers []string) []*Descriptor {
	disabled := sets.NewString(r.DisabledByDefault()...)
	var out []*Descriptor
	for _, name := range r.KnownControllers() {
		if cmapp.IsControllerEnabled(name, disabled, canonicalControllers) {
			out = append(out, r.byName[name])
		}
	}
	return out
}
