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
	"errors"
	"fmt"
	"net"

	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/config"
)

// applyServing sets up the secure port with authentication and authorization delegated to the API server, as
// kube-controller-manager does: /healthz, /readyz and /livez answer anyone; /metrics and pprof need RBAC.
func (o *Options) applyServing(c *config.Config) error {
	if o.SecureServing.BindPort == 0 {
		return nil
	}
	if err := o.SecureServing.MaybeDefaultWithSelfSignedCerts("localhost", nil, []net.IP{net.ParseIP("127.0.0.1")}); err != nil {
		return fmt.Errorf("self-signed serving certificate: %w", err)
	}
	// Delegated auth talks to the same API server as the controllers unless told otherwise.
	if o.Authentication.RemoteKubeConfigFile == "" {
		o.Authentication.RemoteKubeConfigFile = o.Kubeconfig
	}
	if o.Authorization.RemoteKubeConfigFile == "" {
		o.Authorization.RemoteKubeConfigFile = o.Kubeconfig
	}
	if err := o.SecureServing.ApplyTo(&c.SecureServing); err != nil {
		return fmt.Errorf("secure serving: %w", err)
	}
	if err := o.Authentication.ApplyTo(&c.Authentication, c.SecureServing, nil); err != nil {
		return fmt.Errorf("delegated authentication: %w", err)
	}
	if err := o.Authorization.ApplyTo(&c.Authorization); err != nil {
		return fmt.Errorf("delegated authorization: %w", err)
	}
	if c.SecureServing == nil {
		return errors.New("secure serving: no listener")
	}
	return nil
}
