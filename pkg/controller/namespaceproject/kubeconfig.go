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

package namespaceproject

import (
	"errors"
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Client limits of the connection to Rancher's management cluster, one token bucket per tenant, apart from the
// manager's own client: the connection only lists and watches one namespace of Projects, so a relist after an
// outage is the most it ever sends at once.
const (
	managementClusterQPS   = 5
	managementClusterBurst = 10
)

// managementClusterConfig builds the client config of Rancher's management cluster from a kubeconfig read from a
// Secret. Only what the Secret itself holds is used: a kubeconfig that names files (a token file, certificate or
// key files, a CA file) or runs something (exec, auth-provider) is refused, because the manager would otherwise
// read files of its own Pod or run commands on behalf of whoever can write the Secret.
func managementClusterConfig(data []byte, userAgent string) (*rest.Config, error) {
	kubeconfig, err := clientcmd.Load(data)
	if err != nil {
		return nil, fmt.Errorf("not a kubeconfig: %w", err)
	}
	name := kubeconfig.CurrentContext
	if name == "" && len(kubeconfig.Contexts) == 1 {
		for only := range kubeconfig.Contexts {
			name = only
		}
	}
	kctx := kubeconfig.Contexts[name]
	if kctx == nil {
		return nil, fmt.Errorf("the kubeconfig has no current context (current-context %q, %d contexts)", name, len(kubeconfig.Contexts))
	}
	cluster := kubeconfig.Clusters[kctx.Cluster]
	if cluster == nil || cluster.Server == "" {
		return nil, fmt.Errorf("context %q names no cluster with a server", name)
	}
	var refused []error
	if cluster.CertificateAuthority != "" {
		refused = append(refused, errors.New("certificate-authority names a file (use certificate-authority-data)"))
	}
	if user := kubeconfig.AuthInfos[kctx.AuthInfo]; user != nil {
		if user.TokenFile != "" {
			refused = append(refused, errors.New("tokenFile names a file (use token)"))
		}
		if user.ClientCertificate != "" || user.ClientKey != "" {
			refused = append(refused, errors.New("client-certificate or client-key names a file (use client-certificate-data and client-key-data)"))
		}
		if user.Exec != nil {
			refused = append(refused, errors.New("exec runs a command"))
		}
		if user.AuthProvider != nil {
			refused = append(refused, errors.New("auth-provider runs a plugin"))
		}
	}
	if len(refused) > 0 {
		return nil, fmt.Errorf("the kubeconfig must hold its credentials inline: %w", errors.Join(refused...))
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*kubeconfig, name, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("unusable kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = managementClusterQPS, managementClusterBurst
	cfg.UserAgent = userAgent
	return cfg, nil
}
