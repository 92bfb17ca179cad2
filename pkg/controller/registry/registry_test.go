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

package registry

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
)

// testFactory is a Factory that builds nothing; its ConditionType tells which one a lookup returned.
func testFactory(tag string) tenant.Factory {
	return tenant.Factory{ConditionType: tag, New: func(context.Context, *tenant.Context) (tenant.Controller, error) { return nil, nil }}
}

func descriptors() []*Descriptor {
	ctor := testFactory("built")
	return []*Descriptor{
		{Name: "alpha", Aliases: []string{"a"}, DefaultConcurrentSyncs: 1, Factory: ctor},
		{Name: "beta", DefaultConcurrentSyncs: 2, Factory: ctor},
		{Name: "gamma", Aliases: []string{"g", "old-gamma"}, DisabledByDefault: true, DefaultConcurrentSyncs: 1, Factory: ctor},
	}
}

func names(ds []*Descriptor) []string {
	out := []string{}
	for _, d := range ds {
		out = append(out, d.Name)
	}
	return out
}

func TestNewRejectsBrokenDescriptorTables(t *testing.T) {
	ctor := testFactory("")
	cases := map[string]struct {
		descriptors []*Descriptor
		wantErr     string
	}{
		"nil descriptor":   {[]*Descriptor{nil}, "nil controller descriptor"},
		"empty name":       {[]*Descriptor{{DefaultConcurrentSyncs: 1, Factory: ctor}}, "invalid controller name"},
		"star name":        {[]*Descriptor{{Name: "*", DefaultConcurrentSyncs: 1, Factory: ctor}}, "invalid controller name"},
		"dash name":        {[]*Descriptor{{Name: "-x", DefaultConcurrentSyncs: 1, Factory: ctor}}, "invalid controller name"},
		"no constructor":   {[]*Descriptor{{Name: "x", DefaultConcurrentSyncs: 1}}, "has no constructor"},
		"no workers":       {[]*Descriptor{{Name: "x", Factory: ctor}}, "at least 1"},
		"duplicate name":   {[]*Descriptor{{Name: "x", DefaultConcurrentSyncs: 1, Factory: ctor}, {Name: "x", DefaultConcurrentSyncs: 1, Factory: ctor}}, "registered twice"},
		"alias is a name":  {[]*Descriptor{{Name: "x", Aliases: []string{"y"}, DefaultConcurrentSyncs: 1, Factory: ctor}, {Name: "y", DefaultConcurrentSyncs: 1, Factory: ctor}}, "is the name of a controller"},
		"duplicate alias":  {[]*Descriptor{{Name: "x", Aliases: []string{"z"}, DefaultConcurrentSyncs: 1, Factory: ctor}, {Name: "y", Aliases: []string{"z"}, DefaultConcurrentSyncs: 1, Factory: ctor}}, "already an alias"},
		"valid table":      {descriptors(), ""},
		"empty table okay": {nil, ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := New(tc.descriptors...)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestListings(t *testing.T) {
	r, err := New(descriptors()...)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"alpha", "beta", "gamma"}, r.KnownControllers()); diff != "" {
		t.Errorf("KnownControllers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"gamma"}, r.DisabledByDefault()); diff != "" {
		t.Errorf("DisabledByDefault (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"a": "alpha", "g": "gamma", "old-gamma": "gamma"}, r.Aliases()); diff != "" {
		t.Errorf("Aliases (-want +got):\n%s", diff)
	}
	if d, ok := r.Get("beta"); !ok || d.DefaultConcurrentSyncs != 2 || d.Factory.ConditionType != "built" {
		t.Errorf("Get(beta) = %+v, %v", d, ok)
	}
	if _, ok := r.Get("a"); ok {
		t.Errorf("Get must take canonical names only, found alias a")
	}
}

// TestControllersFlagSemantics pins kube-controller-manager's --controllers semantics.
func TestControllersFlagSemantics(t *testing.T) {
	r, err := New(descriptors()...)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		flag        []string
		wantEnabled []string
		wantErr     string
	}{
		{flag: []string{"*"}, wantEnabled: []string{"alpha", "beta"}},
		{flag: []string{}, wantEnabled: []string{}},
		{flag: []string{"beta"}, wantEnabled: []string{"beta"}},
		{flag: []string{"*", "gamma"}, wantEnabled: []string{"alpha", "beta", "gamma"}},
		{flag: []string{"*", "-alpha"}, wantEnabled: []string{"beta"}},
		{flag: []string{"-alpha", "*"}, wantEnabled: []string{"beta"}},
		// The first explicit mention wins.
		{flag: []string{"alpha", "-alpha"}, wantEnabled: []string{"alpha"}},
		{flag: []string{"-alpha", "alpha"}, wantEnabled: []string{}},
		// Aliases are rewritten to canonical names, keeping the disable prefix.
		{flag: []string{"g"}, wantEnabled: []string{"gamma"}},
		{flag: []string{"*", "-a"}, wantEnabled: []string{"beta"}},
		{flag: []string{"old-gamma", "a"}, wantEnabled: []string{"alpha", "gamma"}},
		// Unknown names are an error that lists the valid names.
		{flag: []string{"*", "delta"}, wantErr: `unknown controller(s) "delta" in --controllers; valid names are alpha, beta, gamma`},
		{flag: []string{"-delta", "epsilon"}, wantErr: `"-delta", "epsilon"`},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.flag, ","), func(t *testing.T) {
			canonical, err := r.Canonicalize(tc.flag)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantEnabled, names(r.Enabled(canonical))); diff != "" {
				t.Errorf("enabled (-want +got):\n%s", diff)
			}
		})
	}
}
