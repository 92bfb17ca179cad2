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
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestResourceName(t *testing.T) {
	hash := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return hex.EncodeToString(sum[:4])
	}
	if got, want := ResourceName("demo", "web", "app.example.com"), "pic-demo-web-"+hash("demo/web/app.example.com"); got != want {
		t.Errorf("ResourceName = %q, want %q", got, want)
	}
	if got, want := ResourceName("demo", "web.v2", "app.example.com"), "pic-demo-web-v2-"+hash("demo/web.v2/app.example.com"); got != want {
		t.Errorf("dots: ResourceName = %q, want %q", got, want)
	}
	if ResourceName("demo", "web", "a.example.com") == ResourceName("demo", "web", "b.example.com") {
		t.Error("two hosts of one Ingress got the same name")
	}
	if ResourceName("demo", "web", "a.example.com") != ResourceName("demo", "web", "a.example.com") {
		t.Error("the name is not deterministic")
	}

	ns63 := strings.Repeat("n", 63)
	for _, tc := range []struct{ namespace, ingress, prefix string }{
		{"demo", strings.Repeat("i", 253), "pic-demo-" + strings.Repeat("i", 63-4-5-1-8) + "-"},
		{ns63, "web", "pic-" + strings.Repeat("n", 50) + "-"},
		{"a-b", strings.Repeat("x", 44) + "-yyy", "pic-a-b-" + strings.Repeat("x", 44) + "-"},
		{ns63, strings.Repeat("i", 253), "pic-" + strings.Repeat("n", 50) + "-"},
	} {
		name := ResourceName(tc.namespace, tc.ingress, "app.example.com")
		if len(name) > 63 || len(validation.IsDNS1123Label(name)) > 0 {
			t.Errorf("ResourceName(%q, %q) = %q is not a DNS label of at most 63 characters", tc.namespace, tc.ingress, name)
		}
		if !strings.HasPrefix(name, tc.prefix) || !strings.HasSuffix(name, hash(tc.namespace+"/"+tc.ingress+"/app.example.com")) {
			t.Errorf("ResourceName(%q, %q) = %q, want prefix %q and the hash", tc.namespace, tc.ingress, name, tc.prefix)
		}
		if strings.Contains(name, "--") {
			t.Errorf("ResourceName(%q, %q) = %q has a double dash", tc.namespace, tc.ingress, name)
		}
	}
}

func TestDisplayName(t *testing.T) {
	host := "app.example.com"
	if got := displayName("demo", "web", host); got != "demo/web/app.example.com" {
		t.Errorf("displayName = %q", got)
	}
	long := displayName(strings.Repeat("n", 63), strings.Repeat("i", 253), host)
	if len(long) != maxDisplayNameLength || !strings.HasSuffix(long, "/"+host) || !strings.HasPrefix(long, strings.Repeat("n", 63)+"/") {
		t.Errorf("long displayName = %q (%d characters)", long, len(long))
	}
	longHost := strings.Repeat("h", 60) + "." + strings.Repeat("h", 60) + "." + strings.Repeat("h", 60) + "." + strings.Repeat("h", 60) + ".example.com"
	if got := displayName("demo", "web", longHost); len(got) > maxDisplayNameLength || !strings.HasSuffix(got, longHost) {
		t.Errorf("displayName with a %d-character host = %q", len(longHost), got)
	}
}
