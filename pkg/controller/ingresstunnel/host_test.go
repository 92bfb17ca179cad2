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
	"errors"
	"strings"
	"testing"

	"golang.org/x/net/publicsuffix"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestSplitHost(t *testing.T) {
	long := strings.Repeat("a", 64)
	for _, tc := range []struct {
		host, subdomain, domain string
		wantErr                 string
	}{
		{host: "app.example.com", subdomain: "app", domain: "example.com"},
		{host: "api.staging.example.com", subdomain: "api.staging", domain: "example.com"},
		{host: "www.example.co.uk", subdomain: "www", domain: "example.co.uk"},
		{host: "a.b.example.co.uk", subdomain: "a.b", domain: "example.co.uk"},
		{host: "app.example.internal", subdomain: "app", domain: "example.internal"},
		{host: "xn--bcher-kva.example.com", subdomain: "xn--bcher-kva", domain: "example.com"},
		{host: "app.user.github.io", subdomain: "app", domain: "user.github.io"},
		{host: "", wantErr: "is empty"},
		{host: "example.com", wantErr: "apex domain"},
		{host: "example.co.uk", wantErr: "apex domain"},
		{host: "co.uk", wantErr: "public suffix"},
		{host: "localhost", wantErr: "single label"},
		{host: "*.example.com", wantErr: "wildcard"},
		{host: "10.0.0.1", wantErr: "IP address"},
		{host: "::1", wantErr: "IP address"},
		{host: "[2001:db8::1]", wantErr: "IP address"},
		{host: "1.2.3", wantErr: "all-numeric"},
		{host: "App.Example.com", wantErr: "not a lowercase DNS name"},
		{host: "app.example.com.", wantErr: "not a lowercase DNS name"},
		{host: "app..example.com", wantErr: "not a lowercase DNS name"},
		{host: "-app.example.com", wantErr: "not a lowercase DNS name"},
		{host: "app_1.example.com", wantErr: "not a lowercase DNS name"},
		{host: "app.example.com:8080", wantErr: "not a lowercase DNS name"},
		{host: long + ".example.com", wantErr: "label longer than 63"},
		{host: strings.Repeat("abcdefghi.", 26) + "example.com", wantErr: "longer than 253"},
	} {
		t.Run(tc.host, func(t *testing.T) {
			sub, domain, err := SplitHost(tc.host)
			if tc.wantErr != "" {
				var hostErr *HostError
				if !errors.As(err, &hostErr) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("SplitHost(%q) = %q, %q, %v; want a HostError containing %q", tc.host, sub, domain, err, tc.wantErr)
				}
				return
			}
			if err != nil || sub != tc.subdomain || domain != tc.domain {
				t.Fatalf("SplitHost(%q) = %q, %q, %v; want %q, %q", tc.host, sub, domain, err, tc.subdomain, tc.domain)
			}
		})
	}
}

func TestSplitHostUnder(t *testing.T) {
	for _, tc := range []struct {
		host, domain, subdomain string
		wantErr                 string
	}{
		{host: "api.staging.example.com", domain: "staging.example.com", subdomain: "api"},
		{host: "a.b.staging.example.com", domain: "staging.example.com", subdomain: "a.b"},
		{host: "staging.example.com", domain: "staging.example.com", wantErr: "equals the domain-name"},
		{host: "api.other.com", domain: "example.com", wantErr: "not below"},
		{host: "apiexample.com", domain: "example.com", wantErr: "not below"},
		{host: "*.example.com", domain: "example.com", wantErr: "wildcard"},
	} {
		sub, err := SplitHostUnder(tc.host, tc.domain)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("SplitHostUnder(%q, %q) = %q, %v; want an error containing %q", tc.host, tc.domain, sub, err, tc.wantErr)
			}
			continue
		}
		if err != nil || sub != tc.subdomain {
			t.Errorf("SplitHostUnder(%q, %q) = %q, %v; want %q", tc.host, tc.domain, sub, err, tc.subdomain)
		}
	}
}

// FuzzSplitHost checks what the controller relies on for any input: no panic, and either a *HostError or a
// subdomain and domain that make up the host exactly, that the PangolinResource CRD accepts, and where the domain
// is the registrable domain. Seeds are in testdata/fuzz/FuzzSplitHost; run longer with
// go test -run '^$' -fuzz FuzzSplitHost ./pkg/controller/ingresstunnel/
func FuzzSplitHost(f *testing.F) {
	for _, seed := range []string{"app.example.com", "example.com", "a.b.example.co.uk", "*.example.com", "10.0.0.1"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, host string) {
		sub, domain, err := SplitHost(host)
		if err != nil {
			var hostErr *HostError
			if !errors.As(err, &hostErr) {
				t.Fatalf("SplitHost(%q): error %v is not a *HostError", host, err)
			}
			if sub != "" || domain != "" {
				t.Fatalf("SplitHost(%q) returned %q, %q with an error", host, sub, domain)
			}
			return
		}
		if sub == "" || sub+"."+domain != host {
			t.Fatalf("SplitHost(%q) = %q, %q: the parts do not make up the host", host, sub, domain)
		}
		if len(host) > validation.DNS1123SubdomainMaxLength || strings.ContainsAny(host, "*:[]") {
			t.Fatalf("SplitHost(%q) accepted a host Pangolin cannot serve", host)
		}
		for _, part := range []string{sub, domain} {
			if errs := validation.IsDNS1123Subdomain(part); len(errs) > 0 {
				t.Fatalf("SplitHost(%q): part %q is not a DNS name: %v", host, part, errs)
			}
		}
		if registrable, err := publicsuffix.EffectiveTLDPlusOne(domain); err != nil || registrable != domain {
			t.Fatalf("SplitHost(%q): domain %q is not a registrable domain (%q, %v)", host, domain, registrable, err)
		}
	})
}
