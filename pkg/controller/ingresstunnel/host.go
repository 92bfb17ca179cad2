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
	"fmt"
	"net"
	"strings"

	"golang.org/x/net/publicsuffix"
	"k8s.io/apimachinery/pkg/util/validation"
)

// HostError says why a host cannot be expressed as a Pangolin HTTP resource. The controller reports it as an
// InvalidHost Warning and goes on with the Ingress's other hosts.
type HostError struct {
	Host   string
	Reason string
}

func (e *HostError) Error() string { return fmt.Sprintf("host %q %s", e.Host, e.Reason) }

// SplitHost splits a host name into the subdomain and the domain a Pangolin HTTP resource is made of: the domain is
// the registrable domain (the public suffix plus one label, from the public suffix list), the subdomain everything
// left of it. "api.staging.example.co.uk" is ("api.staging", "example.co.uk").
//
// It fails with a *HostError for what Pangolin cannot serve as one resource: an empty or over-long host, an IP
// address, a wildcard, a name that is not a lowercase DNS name, a public suffix or single label, and an apex domain
// ("example.com"), whose subdomain would be empty (the PangolinResource CRD requires at least one character).
func SplitHost(host string) (subdomain, domain string, err error) {
	domain, err = RegistrableDomain(host)
	if err != nil {
		return "", "", err
	}
	if domain == host {
		return "", "", &HostError{Host: host, Reason: "is an apex domain: a Pangolin resource needs a non-empty subdomain " +
			"(spec.httpConfig.subdomain); use a host below it, such as www." + host + ", or the subdomain annotation"}
	}
	return strings.TrimSuffix(host, "."+domain), domain, nil
}

// SplitHostUnder splits host into the subdomain left of domain and domain itself, for Ingresses whose
// domain-name annotation names the Pangolin domain (e.g. "staging.example.com", where the public suffix list would
// say "example.com").
func SplitHostUnder(host, domain string) (subdomain string, err error) {
	if err := ValidateHost(host); err != nil {
		return "", err
	}
	if host == domain {
		return "", &HostError{Host: host, Reason: "equals the domain-name annotation: a Pangolin resource needs a non-empty subdomain"}
	}
	subdomain, ok := strings.CutSuffix(host, "."+domain)
	if !ok || subdomain == "" {
		return "", &HostError{Host: host, Reason: fmt.Sprintf("is not below the domain-name annotation %q", domain)}
	}
	return subdomain, nil
}

// RegistrableDomain validates host and returns its registrable domain (public suffix plus one label). For an apex
// host that is the host itself.
func RegistrableDomain(host string) (string, error) {
	if err := ValidateHost(host); err != nil {
		return "", err
	}
	domain, err := publicsuffix.EffectiveTLDPlusOne(host)
	if err != nil {
		return "", &HostError{Host: host, Reason: "has no registrable domain: it is a public suffix or a single label"}
	}
	return domain, nil
}

// ValidateHost accepts a fully qualified, lowercase DNS name of at least two labels that Pangolin can serve as one
// resource: no wildcard, no IP address, labels of at most 63 characters, at most 253 in all, and a top-level label
// that is not all digits.
func ValidateHost(host string) error {
	switch {
	case host == "":
		return &HostError{Host: host, Reason: "is empty"}
	case strings.Contains(host, "*"):
		return &HostError{Host: host, Reason: "is a wildcard: a Pangolin resource serves exactly one host name"}
	case net.ParseIP(strings.Trim(host, "[]")) != nil:
		return &HostError{Host: host, Reason: "is an IP address: a Pangolin resource needs a DNS name"}
	case len(host) > validation.DNS1123SubdomainMaxLength:
		return &HostError{Host: host, Reason: fmt.Sprintf("is longer than %d characters", validation.DNS1123SubdomainMaxLength)}
	}
	if errs := validation.IsDNS1123Subdomain(host); len(errs) > 0 {
		return &HostError{Host: host, Reason: "is not a lowercase DNS name: " + strings.Join(errs, "; ")}
	}
	labels := strings.Split(host, ".")
	for _, label := range labels {
		if len(label) > validation.DNS1123LabelMaxLength {
			return &HostError{Host: host, Reason: fmt.Sprintf("has a label longer than %d characters", validation.DNS1123LabelMaxLength)}
		}
	}
	if len(labels) < 2 {
		return &HostError{Host: host, Reason: "is a single label: a Pangolin resource needs a subdomain and a domain"}
	}
	if strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return &HostError{Host: host, Reason: "has an all-numeric top-level label"}
	}
	return nil
}
