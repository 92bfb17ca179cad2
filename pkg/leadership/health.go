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

package leadership

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"k8s.io/utils/clock"

	"github.com/multiproject/multiproject-controller-manager/pkg/leasehealth"
)

// Health is the "leader-election" check of /healthz. It fails once this process has lost its leadership (until it
// exits), and while it leads but last renewed the Lease longer ago than the renew deadline: client-go's elector
// gives up one retry period later, so a liveness probe sees an API server (or an elector) that hangs before the
// process exits, and restarts a process that fails to exit. The renewals are tracked as the shard Lease's are.
type Health struct {
	clock    clock.Clock
	renewals *leasehealth.RenewalTracker
}

// NewHealth returns the check of a Lease renewed within renewDeadline, on clk; Run keeps it.
func NewHealth(clk clock.Clock, renewDeadline time.Duration) *Health {
	return &Health{clock: clk, renewals: leasehealth.NewRenewalTracker(clk, renewDeadline)}
}

// Name is the check's name on /healthz.
func (h *Health) Name() string { return "leader-election" }

// Check fails once leadership is lost, and while this process leads with an overdue renewal.
func (h *Health) Check(*http.Request) error {
	err := h.renewals.Check()
	switch {
	case errors.Is(err, leasehealth.ErrLeaseLost):
		return errors.New("this process lost its leadership and is exiting")
	case err != nil:
		return fmt.Errorf("leading, but %w", err)
	}
	return nil
}

// renewed records a successful acquisition or renewal of the Lease, now.
func (h *Health) renewed() { h.renewals.Renewed(h.clock.Now()) }

func (h *Health) setLeading(leading bool) { h.renewals.SetHeld(leading) }

func (h *Health) setLost() { h.renewals.SetLost() }
