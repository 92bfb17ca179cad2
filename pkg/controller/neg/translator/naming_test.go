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

package translator

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

func TestNEGNameIsAValidDeterministicGCEName(t *testing.T) {
	long := strings.Repeat("x", 63)
	for _, tc := range []struct{ cluster, tenant, namespace, service string }{
		{"prod-eu", "tenant-a", "shop", "web"},
		{"", "t", "a", "b"},
		{"Prod_EU.1", "tenant-a", "shop", "web"}, // cluster names are free-form
		{long, long, long, long},
		{"9lives", "tenant-a", "a-", "b-"}, // fields that end in a hyphen once trimmed
	} {
		for _, version := range []string{translationVersion, "v0", "v2", "v10"} {
			for _, port := range []int32{1, 80, 65535} {
				name := negName(version, clusterIdentity{name: tc.cluster, uid: testClusterUID}, tc.tenant, tc.namespace, tc.service, port)
				if len(name) > 63 || !negapi.IsGCEName(name) {
					t.Errorf("negName(%s, %+v, %d) = %q (%d characters) is not a valid GCE name", version, tc, port, name, len(name))
				}
				if again := negName(version, clusterIdentity{name: tc.cluster, uid: testClusterUID}, tc.tenant, tc.namespace, tc.service, port); again != name {
					t.Errorf("not deterministic: %q then %q", name, again)
				}
			}
		}
	}
	if got := negName("v1", clusterIdentity{"prod-eu", testClusterUID}, "tenant-a", "shop", "web", 80); !strings.HasPrefix(got, "mp1-prod-eu-shop-web-80-") {
		t.Errorf("a short name should keep every readable part: %q", got)
	}
}

// TestLegacyNEGNamesAreUnchanged pins the names of the legacy identity (no cluster UID) to those made before the
// version and the UID entered the name (prefix mp1, the hash of the readable parts only): the translator keeps them
// for the NEGs made then (negIdentity), so upgrading renames no NEG.
func TestLegacyNEGNamesAreUnchanged(t *testing.T) {
	if got, want := negName("v1", clusterIdentity{name: "prod-eu"}, "tenant-a", "shop", "web", 80), "mp1-prod-eu-shop-web-80-3481242501"; got != want {
		t.Errorf("negName = %q, want %q", got, want)
	}
}

// Two clusters with the same --cluster-name (the default, say) and the same tenant, namespace, Service and port
// share a GCP project: their NEG names and markers differ, because their UIDs do.
func TestTwoClustersOfOneNameNeverShareANEGNameOrMarker(t *testing.T) {
	one := clusterIdentity{name: "default", uid: "11111111-aaaa-4aaa-8aaa-aaaaaaaaaaaa"}
	two := clusterIdentity{name: "default", uid: "22222222-bbbb-4bbb-8bbb-bbbbbbbbbbbb"}
	for _, c := range []clusterIdentity{one, two} {
		if got := negName("v1", c, "team", "web", "app", 80); got == negName("v1", c.legacy(), "team", "web", "app", 80) {
			t.Errorf("cluster %s names its NEG %q, the legacy name", c.uid, got)
		}
	}
	if a, b := negName("v1", one, "team", "web", "app", 80), negName("v1", two, "team", "web", "app", 80); a == b {
		t.Errorf("both clusters name the NEG %q", a)
	}
	if a, b := negDescription(one, "team", "web", "app", "svc-uid", 80), negDescription(two, "team", "web", "app", "svc-uid", 80); a == b {
		t.Errorf("both clusters mark their NEGs %s", a)
	}
	var marker struct {
		UID string `json:"cluster-uid"`
	}
	if err := json.Unmarshal([]byte(negDescription(one, "team", "web", "app", "svc-uid", 80)), &marker); err != nil || marker.UID != one.uid {
		t.Errorf("the marker's cluster-uid = %q, %v; want %q", marker.UID, err, one.uid)
	}
	if strings.Contains(negDescription(one.legacy(), "team", "web", "app", "svc-uid", 80), "cluster-uid") {
		t.Error("the legacy marker names a cluster UID")
	}
}

func TestTranslationVersionIsVAndANumber(t *testing.T) {
	// The number is the digit(s) of the NEG name prefix, and parseTranslationName relies on the version having no
	// hyphen.
	if !regexp.MustCompile(`^v[0-9]+$`).MatchString(translationVersion) {
		t.Errorf("translationVersion %q is not v<number>", translationVersion)
	}
}

// TestNEGNameIsUniqueAcrossVersions: a version bump declares new NEGs, so the stale Translation's deletion never
// deletes a NEG the new one uses; this holds also when the readable parts are shortened to fit.
func TestNEGNameIsUniqueAcrossVersions(t *testing.T) {
	long := strings.Repeat("l", 63)
	for _, tc := range []struct{ cluster, tenant, namespace, service string }{
		{"prod-eu", "tenant-a", "shop", "web"},
		{long, long, long, long},
	} {
		seen := map[string]string{}
		for _, version := range []string{"v0", "v1", "v2", "v10", "v11"} {
			name := negName(version, clusterIdentity{name: tc.cluster, uid: testClusterUID}, tc.tenant, tc.namespace, tc.service, 80)
			if other, dup := seen[name]; dup {
				t.Errorf("versions %s and %s share NEG name %q", other, version, name)
			}
			seen[name] = version
		}
	}
}

func TestNEGNameIsUniquePerClusterTenantNamespaceServiceAndPort(t *testing.T) {
	long := strings.Repeat("n", 63)
	base := []string{"prod-eu", "tenant-a", "shop", "web"}
	variants := [][]string{
		{"prod-us", "tenant-a", "shop", "web"},
		{"prod-eu", "tenant-b", "shop", "web"},
		{"prod-eu", "tenant-a", "shop2", "web"},
		{"prod-eu", "tenant-a", "shop", "web2"},
		// Same readable parts after joining: the hash tells them apart.
		{"prod-eu", "tenant-a", "shop-web", ""},
		// Long fields that trim to the same prefix.
		{"prod-eu", "tenant-a", long + "a", "web"},
		{"prod-eu", "tenant-a", long + "b", "web"},
	}
	id := func(name string) clusterIdentity { return clusterIdentity{name: name, uid: testClusterUID} }
	seen := map[string][]string{negName(translationVersion, id(base[0]), base[1], base[2], base[3], 80): base}
	if n := negName(translationVersion, id(base[0]), base[1], base[2], base[3], 81); seen[n] != nil {
		t.Errorf("ports 80 and 81 share %q", n)
	}
	for _, v := range variants {
		n := negName(translationVersion, id(v[0]), v[1], v[2], v[3], 80)
		if other, dup := seen[n]; dup {
			t.Errorf("%v and %v share NEG name %q", v, other, n)
		}
		seen[n] = v
	}
}

func TestTranslationNameCarriesTheVersion(t *testing.T) {
	if got := translationName("web", 8080); got != "neg-v1-web-8080" {
		t.Errorf("translationName = %q", got)
	}
	// A Service name is a DNS label; the longest one still gives a valid object name.
	if got := translationName(strings.Repeat("s", 63), 65535); len(got) > 253 {
		t.Errorf("translationName too long: %d", len(got))
	}
}

func TestParseTranslationNameFindsTheServiceOfAnyVersion(t *testing.T) {
	for _, tc := range []struct {
		name, version, service string
		port                   int32
	}{
		{translationName("web", 80), translationVersion, "web", 80},
		{"neg-v0-web-80", "v0", "web", 80},
		{"neg-v1-web-80-443", "v1", "web-80", 443}, // a Service named web-80
		{"neg-v12-a-b-c-65535", "v12", "a-b-c", 65535},
	} {
		version, service, port, ok := parseTranslationName(tc.name)
		if !ok || version != tc.version || service != tc.service || port != tc.port {
			t.Errorf("parseTranslationName(%q) = %q, %q, %d, %v; want %q, %q, %d", tc.name, version, service, port, ok,
				tc.version, tc.service, tc.port)
		}
	}
	for _, name := range []string{"neg-", "neg-v1", "neg-v1-web", "neg-v1--80", "neg-v1-web-0", "neg-v1-web-080",
		"neg-v1-web-65536", "neg-v1-web-http", "other-v1-web-80", "neg--web-80"} {
		if _, _, _, ok := parseTranslationName(name); ok {
			t.Errorf("parseTranslationName(%q) accepted a name that is not neg-<version>-<service>-<port>", name)
		}
	}
}

func TestDescriptionIdentifiesClusterTenantAndServicePort(t *testing.T) {
	d := negDescription(testIdentity, "tenant-a", "shop", "web", "uid-1", 80)
	var fields map[string]string
	if err := json.Unmarshal([]byte(d), &fields); err != nil {
		t.Fatalf("description %q is not JSON: %v", d, err)
	}
	want := map[string]string{"cluster-name": "prod-eu", "cluster-uid": testClusterUID, "provider-config": "tenant-a", "namespace": "shop",
		"service-name": "web", "service-uid": "uid-1", "port": "80", "managed-by": "multiproject-controller-manager"}
	for k, v := range want {
		if fields[k] != v {
			t.Errorf("description[%s] = %q, want %q", k, fields[k], v)
		}
	}
	if len(d) > 2048 {
		t.Errorf("description longer than the Translation schema allows: %d", len(d))
	}
	for _, other := range []string{
		negDescription(clusterIdentity{"prod-us", testClusterUID}, "tenant-a", "shop", "web", "uid-1", 80),
		negDescription(clusterIdentity{"prod-eu", "another-uid"}, "tenant-a", "shop", "web", "uid-1", 80),
		negDescription(testIdentity.legacy(), "tenant-a", "shop", "web", "uid-1", 80),
		negDescription(testIdentity, "tenant-a", "shop", "web", "uid-2", 80),
		negDescription(testIdentity, "tenant-a", "shop", "web", "uid-1", 81),
	} {
		if other == d {
			t.Errorf("two different owners share the marker %s", d)
		}
	}
}
