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
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	restclient "k8s.io/client-go/rest"
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/multiproject/multiproject-controller-manager/pkg/apibudget"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/registry"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
)

type testCatalog struct {
	*registry.Descriptors
}

func (c testCatalog) Info() []ControllerInfo {
	var out []ControllerInfo
	for _, name := range c.KnownControllers() {
		d, _ := c.Get(name)
		out = append(out, ControllerInfo{Name: name, DefaultConcurrentSyncs: d.DefaultConcurrentSyncs})
	}
	return out
}

func newTestCatalog(t *testing.T) testCatalog {
	t.Helper()
	factory := tenant.Factory{New: func(context.Context, *tenant.Context) (tenant.Controller, error) { return nil, nil }}
	r, err := registry.New(
		&registry.Descriptor{Name: "neg", DefaultConcurrentSyncs: 10, Factory: factory},
		&registry.Descriptor{Name: "ingress-tunnel", Aliases: []string{"tunnel"}, DefaultConcurrentSyncs: 5, Factory: factory},
		&registry.Descriptor{Name: "experimental", DisabledByDefault: true, DefaultConcurrentSyncs: 1, Factory: factory},
	)
	if err != nil {
		t.Fatal(err)
	}
	return testCatalog{r}
}

// parse builds options, parses args into their flags and returns them.
func parse(t *testing.T, args ...string) (*Options, cliflag.NamedFlagSets) {
	t.Helper()
	o := NewOptions(newTestCatalog(t))
	fss := o.Flags()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	for _, f := range fss.FlagSets {
		fs.AddFlagSet(f)
	}
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	return o, fss
}

func TestDefaultsAreValid(t *testing.T) {
	o, _ := parse(t)
	if err := o.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	if got := *o.ConcurrentSyncs["neg"]; got != 10 {
		t.Errorf("--concurrent-neg-syncs default = %d, want the descriptor's 10", got)
	}
	le := o.LeaderElection
	if !le.LeaderElect || le.ResourceLock != "leases" || le.ResourceNamespace != "kube-system" || le.ResourceName != "multiproject-controller-manager" {
		t.Errorf("leader election defaults = %+v", le)
	}
	if o.ProviderConfigLabelKey != "multiproject.io/provider-config" {
		t.Errorf("label key default = %q", o.ProviderConfigLabelKey)
	}
	if o.TenantControllers.NEGReadinessTimeout != 10*time.Minute {
		t.Errorf("--neg-readiness-timeout default = %s, want ingress-gce's 10m", o.TenantControllers.NEGReadinessTimeout)
	}
	if o.TenantControllers.NEGEndpointBatchPeriod != time.Second {
		t.Errorf("--neg-endpoint-batch-period default = %s, want 1s (the group commit's ceiling)", o.TenantControllers.NEGEndpointBatchPeriod)
	}
	// A tenant's share defaults to a quarter of the client's budget, burst rounded up.
	if qps, burst := o.tenantBudget(); qps != 5 || burst != 8 {
		t.Errorf("per-tenant budget default = %v/%d, want 5/8 (a quarter of 20/30)", qps, burst)
	}
}

func TestFlagsParseIntoOptions(t *testing.T) {
	o, _ := parse(t,
		"--controllers=*,-neg", "--kubeconfig=/k", "--kube-api-qps=50", "--kube-api-burst=80",
		"--concurrent-neg-syncs=3", "--concurrent-ingress-tunnel-syncs=7", "--resync-period=1m",
		"--provider-config-name-label-key=example.com/tenant", "--leader-elect=false",
		"--leader-elect-resource-name=other", "--secure-port=0", "--profiling=false", "--neg-readiness-timeout=90s",
		"--neg-endpoint-batch-period=250ms",
	)
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	switch {
	case strings.Join(o.Controllers, ",") != "*,-neg":
		t.Errorf("controllers = %v", o.Controllers)
	case o.Kubeconfig != "/k", o.ClientConnection.QPS != 50, o.ClientConnection.Burst != 80:
		t.Errorf("client options = %q %v %v", o.Kubeconfig, o.ClientConnection.QPS, o.ClientConnection.Burst)
	case *o.ConcurrentSyncs["neg"] != 3, *o.ConcurrentSyncs["ingress-tunnel"] != 7:
		t.Errorf("concurrent syncs = %d %d", *o.ConcurrentSyncs["neg"], *o.ConcurrentSyncs["ingress-tunnel"])
	case o.ResyncPeriod.Duration != time.Minute, o.ProviderConfigLabelKey != "example.com/tenant":
		t.Errorf("resync %s, label %q", o.ResyncPeriod.Duration, o.ProviderConfigLabelKey)
	case o.LeaderElection.LeaderElect, o.LeaderElection.ResourceName != "other":
		t.Errorf("leader election = %+v", o.LeaderElection)
	case o.TenantControllers.NEGReadinessTimeout != 90*time.Second:
		t.Errorf("NEG readiness timeout = %s", o.TenantControllers.NEGReadinessTimeout)
	case o.TenantControllers.NEGEndpointBatchPeriod != 250*time.Millisecond:
		t.Errorf("NEG endpoint batch period = %s", o.TenantControllers.NEGEndpointBatchPeriod)
	case o.SecureServing.BindPort != 0, o.Debugging.EnableProfiling:
		t.Errorf("serving port %d profiling %v", o.SecureServing.BindPort, o.Debugging.EnableProfiling)
	}
}

func TestValidateNamesTheBadFlag(t *testing.T) {
	cases := map[string]struct {
		args    []string
		wantErr string
	}{
		"unknown controller":                     {[]string{"--controllers=*,bogus"}, `unknown controller(s) "bogus" in --controllers; valid names are experimental, ingress-tunnel, neg`},
		"alias accepted":                         {[]string{"--controllers=tunnel,-neg"}, ""},
		"disabled by default ok":                 {[]string{"--controllers=experimental"}, ""},
		"zero workers":                           {[]string{"--concurrent-neg-syncs=0"}, "--concurrent-neg-syncs must be at least 1"},
		"zero pc workers":                        {[]string{"--concurrent-provider-config-syncs=0"}, "--concurrent-provider-config-syncs must be at least 1"},
		"zero qps":                               {[]string{"--kube-api-qps=0"}, "--kube-api-qps must be greater than 0"},
		"zero burst":                             {[]string{"--kube-api-burst=0"}, "--kube-api-burst must be at least 1"},
		"tenant qps over client qps":             {[]string{"--kube-api-qps-per-tenant=21"}, "--kube-api-qps-per-tenant (21) must not exceed --kube-api-qps (20)"},
		"tenant burst over client burst":         {[]string{"--kube-api-burst-per-tenant=31"}, "--kube-api-burst-per-tenant (31) must be at least 1 and at most --kube-api-burst (30)"},
		"zero tenant burst":                      {[]string{"--kube-api-burst-per-tenant=0"}, "--kube-api-burst-per-tenant (0) must be at least 1"},
		"tenant burst ignored when disabled":     {[]string{"--kube-api-qps-per-tenant=0", "--kube-api-burst-per-tenant=0"}, ""},
		"negative resync":                        {[]string{"--resync-period=-1s"}, "--resync-period must not be negative"},
		"negative readiness timeout":             {[]string{"--neg-readiness-timeout=-1s"}, "--neg-readiness-timeout must not be negative, got -1s"},
		"readiness timeout disabled":             {[]string{"--neg-readiness-timeout=0"}, ""},
		"negative batch period":                  {[]string{"--neg-endpoint-batch-period=-1s"}, "--neg-endpoint-batch-period must not be negative, got -1s"},
		"bad label key":                          {[]string{"--provider-config-name-label-key=not a key"}, "--provider-config-name-label-key"},
		"zero cache sync timeout":                {[]string{"--cache-sync-timeout=0"}, "--cache-sync-timeout must be positive"},
		"lease not over renew":                   {[]string{"--leader-elect-lease-duration=10s", "--leader-elect-renew-deadline=10s"}, "--leader-elect-lease-duration (10s) must be greater than --leader-elect-renew-deadline (10s)"},
		"renew under retry":                      {[]string{"--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=2s"}, "--leader-elect-renew-deadline (2s) must be greater than 1.2 × --leader-elect-retry-period (2s)"},
		"zero retry":                             {[]string{"--leader-elect-retry-period=0s"}, "must all be positive"},
		"endpoints lock":                         {[]string{"--leader-elect-resource-lock=endpoints"}, `--leader-elect-resource-lock must be "leases"`},
		"bad lease name":                         {[]string{"--leader-elect-resource-name=Not_Valid"}, "--leader-elect-resource-name"},
		"bad durations ignored without election": {[]string{"--leader-elect=false", "--leader-elect-retry-period=0s"}, ""},
		"bad secure port":                        {[]string{"--secure-port=70000"}, "--secure-port"},
		"sharding without election":              {[]string{"--sharding", "--leader-elect=false"}, "--sharding requires --leader-elect"},
		"sharded watch without sharding":         {[]string{"--sharded-watch"}, "--sharded-watch requires --sharding"},
		"sharded watch with sharding":            {[]string{"--sharding", "--sharded-watch"}, ""},
		"bad shard group":                        {[]string{"--sharding", "--shard-group=Not_A_Label"}, `--shard-group "Not_A_Label" must be a DNS label`},
		"bad shard group unsharded":              {[]string{"--shard-group=Not_A_Label"}, `--shard-group "Not_A_Label" must be a DNS label`},
		"stable identity":                        {[]string{"--leader-elect-identity=mpcm-7d9f-abcde_0b4c6f2e-9a51-4c1e-8d0f-3c2b1a0f9e8d"}, ""},
		"identity with a space":                  {[]string{"--leader-elect-identity=a b"}, "must not contain blank space"},
		"identity unexpanded":                    {[]string{"--leader-elect-identity=$(POD_NAME)_$(POD_UID)"}, "unexpanded $(VAR) reference"},
		"identity too long":                      {[]string{"--leader-elect-identity=" + strings.Repeat("a", 301)}, "at most 300 characters, got 301"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o, _ := parse(t, tc.args...)
			err := o.Validate()
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

func TestFlagSectionsAreNamed(t *testing.T) {
	_, fss := parse(t)
	var buf bytes.Buffer
	cliflag.PrintSections(&buf, fss, 0)
	help := buf.String()
	for _, want := range []string{
		"Generic flags:", "Provider-config controller flags:", "Neg controller flags:", "Ingress-tunnel controller flags:",
		"Debugging flags:", "Secure serving flags:", "Authentication flags:", "Authorization flags:", "Metrics flags:",
		"Logs flags:", "Misc flags:",
		"--controllers", "All controllers: experimental, ingress-tunnel, neg", "Disabled-by-default controllers: experimental",
		"--concurrent-neg-syncs", "--leader-elect-lease-duration", "--kubeconfig", "--logging-format", "--profiling",
		"--kube-api-qps-per-tenant", "--kube-api-burst-per-tenant", "Sharding flags:", "--sharding", "--shard-group",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

func TestConfigBuildsClientsFromKubeconfig(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	o, _ := parse(t, "--kubeconfig="+kubeconfig, "--secure-port=0", "--kube-api-qps=42", "--kube-api-burst=43", "--controllers=tunnel")
	c, err := o.Config()
	if err != nil {
		t.Fatal(err)
	}
	if c.Kubeconfig.Host != "https://127.0.0.1:6443" || c.Kubeconfig.QPS != 42 || c.Kubeconfig.Burst != 43 {
		t.Errorf("rest config = host %q qps %v burst %v", c.Kubeconfig.Host, c.Kubeconfig.QPS, c.Kubeconfig.Burst)
	}
	if c.Client == nil || c.LeaderElectionClient == nil || c.EventRecorder == nil || c.SecureServing != nil {
		t.Errorf("config incomplete: %+v", c)
	}
	// The Lease client gives up a call at the renew deadline (default 10s), as kube-controller-manager's does.
	if rc, ok := c.LeaderElectionClient.CoordinationV1().RESTClient().(*restclient.RESTClient); !ok || rc.Client.Timeout != 10*time.Second {
		t.Errorf("leader-election client timeout is not the renew deadline: %+v", c.LeaderElectionClient.CoordinationV1().RESTClient())
	}
	// Both shared clients spend a budget with tenant shares (each its own, as each had its own bucket before);
	// the Lease client does not, so that no tenant can starve lease renewal.
	kubeBudget, ok := c.Client.CoreV1().RESTClient().GetRateLimiter().(*apibudget.Limiter)
	if !ok {
		t.Fatalf("kube client rate limiter = %T, want *apibudget.Limiter", c.Client.CoreV1().RESTClient().GetRateLimiter())
	}
	mpBudget, ok := c.MultiprojectClient.MultiprojectV1alpha1().RESTClient().GetRateLimiter().(*apibudget.Limiter)
	if !ok {
		t.Fatalf("multiproject client rate limiter = %T, want *apibudget.Limiter", c.MultiprojectClient.MultiprojectV1alpha1().RESTClient().GetRateLimiter())
	}
	want := apibudget.Options{QPS: 42, Burst: 43, TenantQPS: 10.5, TenantBurst: 11}
	if got := kubeBudget.Options(); got != want || kubeBudget == mpBudget || mpBudget.Options() != want {
		t.Errorf("budgets = %+v and %+v (same: %v), want two of %+v", got, mpBudget.Options(), kubeBudget == mpBudget, want)
	}
	if _, ok := c.LeaderElectionClient.CoordinationV1().RESTClient().GetRateLimiter().(*apibudget.Limiter); ok {
		t.Error("the leader-election client spends the tenants' budget")
	}
	if strings.Join(c.Controllers, ",") != "ingress-tunnel" {
		t.Errorf("controllers not canonicalized: %v", c.Controllers)
	}
	if c.ConcurrentSyncs["neg"] != 10 {
		t.Errorf("concurrent syncs = %v", c.ConcurrentSyncs)
	}

	if c.Sharding.Enabled || !strings.Contains(c.Identity, "_") ||
		!strings.HasSuffix(c.TenantControllers.GCEUserAgent, "("+c.Identity+")") {
		t.Errorf("unsharded identity %q, sharding %+v, GCE user agent %q", c.Identity, c.Sharding, c.TenantControllers.GCEUserAgent)
	}
	// A stable identity is the Lease holder's name as given, and the process's name toward GCE.
	o, _ = parse(t, "--kubeconfig="+kubeconfig, "--secure-port=0", "--leader-elect-identity=mpcm-0_uid-1")
	if c, err = o.Config(); err != nil {
		t.Fatal(err)
	}
	if c.Identity != "mpcm-0_uid-1" || !strings.HasSuffix(c.TenantControllers.GCEUserAgent, "(mpcm-0_uid-1)") {
		t.Errorf("--leader-elect-identity gave identity %q, GCE user agent %q", c.Identity, c.TenantControllers.GCEUserAgent)
	}
	o, _ = parse(t, "--kubeconfig="+kubeconfig, "--secure-port=0", "--sharding", "--shard-group=blue")
	if c, err = o.Config(); err != nil {
		t.Fatal(err)
	}
	if !c.Sharding.Enabled || c.Sharding.Group != "blue" || c.Sharding.Shard == "" ||
		!strings.HasSuffix(c.TenantControllers.GCEUserAgent, "("+c.Sharding.Shard+")") {
		t.Errorf("sharding %+v, GCE user agent %q", c.Sharding, c.TenantControllers.GCEUserAgent)
	}

	o, _ = parse(t, "--kubeconfig="+filepath.Join(dir, "missing"), "--secure-port=0")
	if _, err := o.Config(); err == nil || !strings.Contains(err.Error(), "--kubeconfig") {
		t.Errorf("missing kubeconfig: error = %v, want one naming --kubeconfig", err)
	}
	o, _ = parse(t, "--kubeconfig="+kubeconfig, "--controllers=bogus")
	if _, err := o.Config(); err == nil {
		t.Error("Config accepted invalid options")
	}
}
