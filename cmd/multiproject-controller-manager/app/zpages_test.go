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

package app

import (
	"bytes"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/anonymous"
	"k8s.io/apiserver/pkg/authorization/path"
	apiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/flagz"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes/fake"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/featuregate"
	zpagesfeatures "k8s.io/component-base/zpages/features"
	genericcontrollermanager "k8s.io/controller-manager/app"
	controllerhealthz "k8s.io/controller-manager/pkg/healthz"
)

// zpagesGate is a gate of the test's own holding the zpages gates at their defaults (beta, on), with overrides.
func zpagesGate(t *testing.T, overrides map[string]bool) featuregate.FeatureGate {
	t.Helper()
	gate := featuregate.NewVersionedFeatureGate(version.MustParse("1.37"))
	if err := zpagesfeatures.AddFeatureGates(gate); err != nil {
		t.Fatal(err)
	}
	if err := gate.SetFromMap(overrides); err != nil {
		t.Fatal(err)
	}
	return gate
}

// testFlags is a flag set as the command's, for /flagz to read.
func testFlags() flagz.Reader {
	fss := cliflag.NamedFlagSets{}
	fss.FlagSet("generic").String("leader-elect-resource-name", "mpcm-test-lease", "")
	return flagz.NamedFlagSetsReader{FlagSets: fss}
}

// TestZPagesServedUnderTheirGates: /flagz lists the flags with their values and /statusz names the component and the
// served paths, as kube-controller-manager's do; each disappears when its gate is off.
func TestZPagesServedUnderTheirGates(t *testing.T) {
	c := testConfig(fake.NewClientset(), leaderElection(15*time.Second, 10*time.Second, 2*time.Second))
	c.Flagz = testFlags()
	c.FeatureGate = zpagesGate(t, nil)
	healthz := controllerhealthz.NewMutableHealthzHandler()
	mux := newServingMux(c, healthz, &processState{})

	if code, body := get(t, mux, "/flagz"); code != http.StatusOK ||
		!strings.Contains(body, "multiproject-controller-manager flagz") || !regexp.MustCompile(`leader-elect-resource-name[^\n]*mpcm-test-lease`).MatchString(body) {
		t.Errorf("/flagz = %d %q, want the component and leader-elect-resource-name with mpcm-test-lease", code, body)
	}
	code, body := get(t, mux, "/statusz")
	if code != http.StatusOK || !strings.Contains(body, "multiproject-controller-manager statusz") {
		t.Errorf("/statusz = %d %q, want the component's statusz", code, body)
	}
	for _, p := range []string{"/flagz", "/metrics", "/readyz"} {
		if !regexp.MustCompile(`Paths.*\s` + regexp.QuoteMeta(p) + `(\s|$)`).MatchString(body) {
			t.Errorf("/statusz does not list %s:\n%s", p, body)
		}
	}

	c.FeatureGate = zpagesGate(t, map[string]bool{string(zpagesfeatures.ComponentFlagz): false, string(zpagesfeatures.ComponentStatusz): false})
	mux = newServingMux(c, healthz, &processState{})
	for _, p := range []string{"/flagz", "/statusz"} {
		if code, _ := get(t, mux, p); code != http.StatusNotFound {
			t.Errorf("%s = %d with its gate off, want 404", p, code)
		}
	}
}

// TestZPagesNeedAuthorizationLikeMetrics runs the mux behind the production handler chain with an authorizer that
// allows only the always-allowed paths: /flagz and /statusz are refused to anonymous, as /metrics is.
func TestZPagesNeedAuthorizationLikeMetrics(t *testing.T) {
	c := testConfig(fake.NewClientset(), leaderElection(15*time.Second, 10*time.Second, 2*time.Second))
	c.Flagz = testFlags()
	c.FeatureGate = zpagesGate(t, nil)
	pathAuthorizer, err := path.NewAuthorizer([]string{"/healthz", "/readyz", "/livez"})
	if err != nil {
		t.Fatal(err)
	}
	authn := &apiserver.AuthenticationInfo{Authenticator: authenticator.RequestFunc(anonymous.NewAuthenticator(nil).AuthenticateRequest)}
	handler := genericcontrollermanager.BuildHandlerChain(newServingMux(c, controllerhealthz.NewMutableHealthzHandler(), &processState{}),
		&apiserver.AuthorizationInfo{Authorizer: pathAuthorizer}, authn)
	for _, p := range []string{"/metrics", "/flagz", "/statusz"} {
		if code, _ := get(t, handler, p); code != http.StatusForbidden {
			t.Errorf("anonymous %s = %d, want 403", p, code)
		}
	}
}

// TestHelpHidesGatesThatChangeNothingHere: --help lists the zpages gates, which this binary honours, but not
// kube-apiserver's ShardedListAndWatch, which stays registered (the libraries look it up; an unknown gate panics).
func TestHelpHidesGatesThatChangeNothingHere(t *testing.T) {
	cmd := NewControllerManagerCommand()
	var help bytes.Buffer
	cmd.SetOut(&help)
	cmd.SetErr(&help)
	cmd.SetArgs([]string{"--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ComponentFlagz=true|false (BETA - default=true)", "ComponentStatusz=true|false (BETA - default=true)"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("--help lacks %q", want)
		}
	}
	if strings.Contains(help.String(), "ShardedListAndWatch=true|false") {
		t.Errorf("--help offers ShardedListAndWatch, a kube-apiserver gate that changes nothing in this binary")
	}
	if _, known := utilfeature.DefaultMutableFeatureGate.GetAll()["ShardedListAndWatch"]; !known {
		t.Errorf("ShardedListAndWatch is no longer registered: the libraries' lookups of it would panic")
	}
}
