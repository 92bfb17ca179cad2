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

package app

import (
	"context"
	"errors"
	"fmt"
	"os"

	"k8s.io/utils/clock"

	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/config"
	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/options"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/providerconfig"
	"github.com/multiproject/multiproject-controller-manager/pkg/leadership"
)

// leaderElectionRole is the Role (and RoleBinding) of manifests/rbac/leader-election.yaml that grants the Lease.
const leaderElectionRole = "multiproject-controller-manager:leader-election"

// newLeaderElectionHealth is the "leader-election" check of /healthz for the Lease of c's timings.
func newLeaderElectionHealth(c config.CompletedConfig) *leadership.Health {
	return leadership.NewHealth(clock.RealClock{}, c.LeaderElection.RenewDeadline.Duration)
}

// leaderElectAndRun runs run while this process holds the leader-election Lease of c (leadership.Run): it returns
// nil after ctx ends, run's error, or at once an error wrapping leadership.ErrLost. state.leading follows the term.
// A term whose tenants' controllers outlived the stop timeout leaves the Lease to expire.
func leaderElectAndRun(ctx context.Context, c config.CompletedConfig, health *leadership.Health, state *processState, run func(context.Context) error) error {
	identity := c.Identity
	if identity == "" {
		hostname, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("leader election identity: %w", err)
		}
		identity = options.Identity(hostname)
	}
	le := c.LeaderElection
	return leadership.Run(ctx, leadership.Config{
		Client:        c.LeaderElectionClient,
		Namespace:     le.ResourceNamespace,
		Name:          le.ResourceName,
		Identity:      identity,
		Recorder:      c.EventRecorder,
		LeaseDuration: le.LeaseDuration.Duration,
		RenewDeadline: le.RenewDeadline.Duration,
		RetryPeriod:   le.RetryPeriod.Duration,
		Role:          leaderElectionRole,
		Leading:       &state.leading,
		KeepLease: func(err error) bool {
			return errors.Is(err, providerconfig.ErrControllersStillRunning)
		},
	}, health, run)
}
