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

package options

import (
	"strings"
	"testing"

	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

// TestNEGKeyFlags: the keys default to ingress-gce's; other keys are what the tenant's controllers get; a key that is
// not a qualified name, one annotation for both, a gate named like a built-in Pod condition, or GKE's request
// annotation as the status key, is refused naming its flag.
func TestNEGKeyFlags(t *testing.T) {
	o, _ := parse(t)
	if got := o.TenantControllers.NEGKeys.OrDefaults(); got != negapi.DefaultKeys() {
		t.Errorf("default keys = %+v, want ingress-gce's %+v", got, negapi.DefaultKeys())
	}
	o, _ = parse(t, "--neg-annotation-key=multiproject.io/neg", "--neg-status-annotation-key=multiproject.io/neg-status",
		"--neg-readiness-gate=multiproject.io/neg-ready")
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	// Config hands o.TenantControllers to the controllers as they are.
	want := negapi.Keys{Annotation: "multiproject.io/neg", StatusAnnotation: "multiproject.io/neg-status", ReadinessGate: "multiproject.io/neg-ready"}
	if got := o.TenantControllers.NEGKeys.OrDefaults(); got != want {
		t.Errorf("keys the controllers get = %+v, want %+v", got, want)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--neg-annotation-key=not a key"}, `--neg-annotation-key "not a key" is not a valid qualified name`},
		{[]string{"--neg-annotation-key="}, `--neg-annotation-key "" is not a valid qualified name`},
		{[]string{"--neg-status-annotation-key=a/b/c"}, `--neg-status-annotation-key "a/b/c" is not a valid qualified name`},
		{[]string{"--neg-readiness-gate=Bad_Domain/ready"}, `--neg-readiness-gate "Bad_Domain/ready" is not a valid qualified name`},
		{[]string{"--neg-status-annotation-key=cloud.google.com/neg"}, `--neg-annotation-key and --neg-status-annotation-key are both "cloud.google.com/neg"`},
		// Issue 57: keys that clash with Kubernetes' or GKE's own.
		{[]string{"--neg-readiness-gate=Ready"}, `--neg-readiness-gate "Ready" is a Pod condition`},
		{[]string{"--neg-annotation-key=multiproject.io/neg", "--neg-status-annotation-key=cloud.google.com/neg"},
			`--neg-status-annotation-key "cloud.google.com/neg" is ingress-gce's request annotation, which GKE's own NEG controller reads, while --neg-annotation-key is "multiproject.io/neg"`},
	} {
		o, _ := parse(t, tc.args...)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: Validate() = %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}
