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

	"k8s.io/apimachinery/pkg/util/validation"
	componentbaseconfig "k8s.io/component-base/config"
)

// ValidateLeaderElection checks what client-go's leader elector would otherwise reject with a panic, and names the
// flags involved.
func ValidateLeaderElection(le *componentbaseconfig.LeaderElectionConfiguration) []error {
	if !le.LeaderElect {
		return nil
	}
	var errs []error
	lease, renew, retry := le.LeaseDuration.Duration, le.RenewDeadline.Duration, le.RetryPeriod.Duration
	if lease <= 0 || renew <= 0 || retry <= 0 {
		errs = append(errs, fmt.Errorf("--leader-elect-lease-duration (%s), --leader-elect-renew-deadline (%s) and --leader-elect-retry-period (%s) must all be positive", lease, renew, retry))
	} else {
		if lease <= renew {
			errs = append(errs, fmt.Errorf("--leader-elect-lease-duration (%s) must be greater than --leader-elect-renew-deadline (%s)", lease, renew))
		}
		if float64(renew) <= 1.2*float64(retry) {
			errs = append(errs, fmt.Errorf("--leader-elect-renew-deadline (%s) must be greater than 1.2 × --leader-elect-retry-period (%s)", renew, retry))
		}
	}
	if le.ResourceLock != "leases" {
		errs = append(errs, fmt.Errorf("--leader-elect-resource-lock must be %q, got %q", "leases", le.ResourceLock))
	}
	for _, msg := range validation.IsDNS1123Subdomain(le.ResourceName) {
		errs = append(errs, fmt.Errorf("--leader-elect-resource-name %q: %s", le.ResourceName, msg))
	}
	for _, msg := range validation.IsDNS1123Label(le.ResourceNamespace) {
		errs = append(errs, fmt.Errorf("--leader-elect-resource-namespace %q: %s", le.ResourceNamespace, msg))
	}
	return errs
}
