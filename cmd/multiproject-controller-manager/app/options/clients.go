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

	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	gatewayclientset "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	mpclientset "github.com/multiproject/client-go/clientset/versioned"

	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/config"
	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/names"
	"github.com/multiproject/multiproject-controller-manager/pkg/apibudget"
)

// applyClients builds the three clients of the process from --kubeconfig and --master, each with its own
// client-side budget.
func (o *Options) applyClients(c *config.Config) error {
	kubeconfig, err := clientcmd.BuildConfigFromFlags(o.Master, o.Kubeconfig)
	if err != nil {
		if o.Kubeconfig == "" && o.Master == "" {
			return fmt.Errorf("no --kubeconfig given and not running in a cluster: %w", err)
		}
		return fmt.Errorf("--kubeconfig %q: %w", o.Kubeconfig, err)
	}
	kubeconfig.ContentType = o.ClientConnection.ContentType
	kubeconfig.QPS = o.ClientConnection.QPS
	kubeconfig.Burst = int(o.ClientConnection.Burst)
	c.Kubeconfig = kubeconfig

	// Each of the two shared clients has its own budget, as each had its own token bucket before tenants had
	// shares; every tenant's share is taken from it first. The budget goes on copies of kubeconfig so that the
	// leader-election client, copied from kubeconfig below, keeps a bucket no controller can spend.
	tenantQPS, tenantBurst := o.tenantBudget()
	budget := apibudget.Options{QPS: o.ClientConnection.QPS, Burst: int(o.ClientConnection.Burst), TenantQPS: tenantQPS, TenantBurst: tenantBurst}
	kubeClientConfig := restclient.CopyConfig(kubeconfig)
	kubeClientConfig.RateLimiter = apibudget.New(budget)
	if c.Client, err = kubernetes.NewForConfig(restclient.AddUserAgent(kubeClientConfig, names.ComponentName)); err != nil {
		return err
	}
	// Custom resources have no protobuf encoding: their clients speak JSON whatever --kube-api-content-type says,
	// as kube-controller-manager's dynamic clients do.
	crdConfig := restclient.CopyConfig(kubeconfig)
	crdConfig.RateLimiter = apibudget.New(budget)
	crdConfig.ContentType = "application/json"
	crdConfig.AcceptContentTypes = "application/json"
	if c.MultiprojectClient, err = mpclientset.NewForConfig(restclient.AddUserAgent(crdConfig, names.ComponentName)); err != nil {
		return err
	}
	// Gateway API is custom resources too, and shares their budget.
	if c.GatewayClient, err = gatewayclientset.NewForConfig(restclient.AddUserAgent(crdConfig, names.ComponentName)); err != nil {
		return err
	}
	// Leader election gets its own client so that a busy controller cannot starve lease renewal of QPS, and, as in
	// kube-controller-manager, a request timeout of the renew deadline, so one hung call cannot outlive the deadline.
	leaderElectionConfig := restclient.CopyConfig(kubeconfig)
	leaderElectionConfig.Timeout = o.LeaderElection.RenewDeadline.Duration
	c.LeaderElectionClient, err = kubernetes.NewForConfig(restclient.AddUserAgent(leaderElectionConfig, "leader-election"))
	return err
}

// validateClientConnection checks the client-side budget towards the API server and each tenant's share of it.
func (o *Options) validateClientConnection() []error {
	var errs []error
	if o.ClientConnection.QPS <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps must be greater than 0, got %v", o.ClientConnection.QPS))
	}
	if o.ClientConnection.Burst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-burst must be at least 1, got %d", o.ClientConnection.Burst))
	}
	if tenantQPS, tenantBurst := o.tenantBudget(); tenantQPS > o.ClientConnection.QPS {
		errs = append(errs, fmt.Errorf("--kube-api-qps-per-tenant (%v) must not exceed --kube-api-qps (%v)", tenantQPS, o.ClientConnection.QPS))
	} else if tenantQPS > 0 && (tenantBurst < 1 || tenantBurst > int(o.ClientConnection.Burst)) {
		errs = append(errs, fmt.Errorf("--kube-api-burst-per-tenant (%d) must be at least 1 and at most --kube-api-burst (%d)", tenantBurst, o.ClientConnection.Burst))
	}
	return errs
}

// tenantBudget returns the per-tenant QPS and burst, the defaults resolved against --kube-api-qps/burst.
func (o *Options) tenantBudget() (float32, int) {
	qps, burst := apibudget.DefaultTenantShare(o.ClientConnection.QPS, int(o.ClientConnection.Burst))
	if o.KubeAPIQPSPerTenant >= 0 {
		qps = o.KubeAPIQPSPerTenant
	}
	if o.KubeAPIBurstPerTenant >= 0 {
		burst = int(o.KubeAPIBurstPerTenant)
	}
	return qps, burst
}
