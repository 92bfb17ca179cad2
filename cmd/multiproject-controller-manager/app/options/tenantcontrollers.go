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
	"fmt"
	"net/url"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
)

// addTenantControllerFlags adds the flags of the settings every tenant's controllers share.
func (o *Options) addTenantControllerFlags(tcfs *pflag.FlagSet) {
	tcfs.StringVar(&o.TenantControllers.ClusterName, "cluster-name", o.TenantControllers.ClusterName, "Name of this Kubernetes cluster, written into the names and descriptions of the cloud resources it creates so that clusters sharing a cloud project never touch each other's resources. A DNS label of at most 20 characters.")
	tcfs.StringVar(&o.TenantControllers.AppOwnerLabelKey, "app-owner-label-key", o.TenantControllers.AppOwnerLabelKey, "Namespace label whose value is the display name of the Rancher Project the namespace joins (namespace-project controller).")
	tcfs.StringVar(&o.TenantControllers.GCEEndpoint, "gce-endpoint", o.TenantControllers.GCEEndpoint, "Base URL of the Compute Engine API, e.g. http://127.0.0.1:8089/compute/v1/ for a fake GCE. Empty means Google's.")
	tcfs.Float32Var(&o.TenantControllers.GCEQPS, "gce-qps", o.TenantControllers.GCEQPS, "Compute Engine calls per second allowed to each tenant (client-side token bucket).")
	tcfs.DurationVar(&o.TenantControllers.NEGGCPeriod, "neg-gc-period", o.TenantControllers.NEGGCPeriod, "How often each tenant's NEGs are swept: a NEG in the tenant's project that carries this cluster's and tenant's ownership marker, but that no Translation claims over two sweeps, is deleted. 0 disables the sweep.")
	tcfs.DurationVar(&o.TenantControllers.NEGReadinessTimeout, "neg-readiness-timeout", o.TenantControllers.NEGReadinessTimeout, "How long after a Pod's creation its readiness gate cloud.google.com/load-balancer-neg-ready is set True even if its endpoint was not reported healthy in a NEG (reason LoadBalancerNegTimeout), so that a broken health check cannot block a rollout forever. 0 disables the timeout.")
	tcfs.DurationVar(&o.TenantControllers.NEGEndpointBatchPeriod, "neg-endpoint-batch-period", o.TenantControllers.NEGEndpointBatchPeriod, "The longest the neg controller holds a Service's endpoint changes to write them together. A Service with no Translation write in flight is written at once; changes that come while one is in flight (not yet done in GCE) or while the API server pushes back (429, answers slower than 500ms) make the next write, at the latest after this period. 0 holds nothing: every change is written at once, each a write of its own.")
	tcfs.IntVar(&o.TenantControllers.GCEBurst, "gce-burst", o.TenantControllers.GCEBurst, "Burst of Compute Engine calls allowed to each tenant.")
}

// validateTenantControllers checks the settings every tenant's controllers share.
func (o *Options) validateTenantControllers() []error {
	var errs []error
	tc := o.TenantControllers
	if msgs := validation.IsDNS1123Label(tc.ClusterName); len(msgs) > 0 || len(tc.ClusterName) > 20 {
		errs = append(errs, fmt.Errorf("--cluster-name %q must be a DNS label of at most 20 characters", tc.ClusterName))
	}
	for _, msg := range validation.IsQualifiedName(tc.AppOwnerLabelKey) {
		errs = append(errs, fmt.Errorf("--app-owner-label-key %q is not a valid label key: %s", tc.AppOwnerLabelKey, msg))
	}
	if tc.GCEEndpoint != "" {
		if u, err := url.Parse(tc.GCEEndpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("--gce-endpoint %q must be an http or https URL", tc.GCEEndpoint))
		}
	}
	if tc.NEGGCPeriod < 0 {
		errs = append(errs, fmt.Errorf("--neg-gc-period must not be negative, got %s", tc.NEGGCPeriod))
	}
	if tc.NEGReadinessTimeout < 0 {
		errs = append(errs, fmt.Errorf("--neg-readiness-timeout must not be negative, got %s", tc.NEGReadinessTimeout))
	}
	if tc.NEGEndpointBatchPeriod < 0 {
		errs = append(errs, fmt.Errorf("--neg-endpoint-batch-period must not be negative, got %s", tc.NEGEndpointBatchPeriod))
	}
	if tc.GCEQPS <= 0 {
		errs = append(errs, fmt.Errorf("--gce-qps must be greater than 0, got %v", tc.GCEQPS))
	}
	if tc.GCEBurst < 1 {
		errs = append(errs, fmt.Errorf("--gce-burst must be at least 1, got %d", tc.GCEBurst))
	}
	return errs
}
