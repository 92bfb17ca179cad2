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
	"strings"
	"unicode"

	"github.com/spf13/pflag"
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

// maxLeaderElectionIdentityLength keeps an identity within what the Lease's holderIdentity and the User-Agent that
// carries it take comfortably; a Pod name and UID joined are at most 253 + 1 + 36 characters.
const maxLeaderElectionIdentityLength = 300

// addLeaderElectionIdentityFlag binds --leader-elect-identity. A restarted container that keeps its identity finds
// its own name in the Lease and renews it at once (client-go treats a record naming its identity as its own), where
// a new identity waits out the whole lease duration from the moment it first reads its dead predecessor's record.
func (o *Options) addLeaderElectionIdentityFlag(fs *pflag.FlagSet) {
	fs.StringVar(&o.LeaderElectionIdentity, "leader-elect-identity", o.LeaderElectionIdentity, "This process's name in "+
		"the leader-election Lease. Empty means \"<host>_<random UUID>\", new for every process, so a restarted "+
		"leader waits out its own previous lease. A name that survives a container restart in the same Pod and "+
		"that no other live process has (the shipped manifests pass \"$(POD_NAME)_$(POD_UID)\" from the "+
		"downward API) lets a restarted leader resume its Lease at once. Never give two Pods the same name: both "+
		"would lead.")
}

// validateLeaderElectionIdentity rejects an identity that cannot be what the operator meant: blank space, or a
// "$(VAR)" reference the kubelet left unexpanded because the container's env lacks VAR (every replica would then
// share the literal text, and all of them would lead).
func validateLeaderElectionIdentity(id string) []error {
	var errs []error
	switch {
	case id == "":
		return nil
	case strings.IndexFunc(id, unicode.IsSpace) >= 0 || strings.IndexFunc(id, unicode.IsControl) >= 0:
		errs = append(errs, fmt.Errorf("--leader-elect-identity %q must not contain blank space or control characters", id))
	case strings.Contains(id, "$("):
		errs = append(errs, fmt.Errorf("--leader-elect-identity %q holds an unexpanded $(VAR) reference: the "+
			"container's env must define the variable (the shipped manifests set POD_NAME and POD_UID from the "+
			"downward API)", id))
	}
	if len(id) > maxLeaderElectionIdentityLength {
		errs = append(errs, fmt.Errorf("--leader-elect-identity must be at most %d characters, got %d",
			maxLeaderElectionIdentityLength, len(id)))
	}
	return errs
}
