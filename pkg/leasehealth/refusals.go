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

package leasehealth

import (
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
)

// ErrLeaseRefused wraps the error of a process whose Lease the API server has refused (403) for as long as a lease
// lasts: RBAC does not grant it, and retrying will not change that, so the process says which grant is missing and
// exits rather than retry quietly forever.
var ErrLeaseRefused = errors.New("the API server refuses this process its Lease")

// LeaseRefusedError is ErrLeaseRefused for a refused verb on the Lease namespace/name (name may be a pattern such as
// "<group>-<shard>"), naming the Role (and its RoleBinding, of the same name) in that namespace that must grant it.
func LeaseRefusedError(verb, namespace, name, role string, err error) error {
	return fmt.Errorf("%w: %s of Lease %s/%s refused (%w). The manager's ServiceAccount needs get, create and update "+
		"of leases.coordination.k8s.io %q in namespace %q: the Role %s and its RoleBinding, in namespace %q, must "+
		"grant them, and follow --leader-elect-resource-namespace and --leader-elect-resource-name (the Helm chart's "+
		"leaderElection.resourceNamespace and leaderElection.resourceName set both; docs/security.md)",
		ErrLeaseRefused, verb, namespace, name, err, name, namespace, role, namespace)
}

// RefusalTracker tells a Lease the API server keeps refusing from one it refuses for a moment (a kube-apiserver
// that is starting answers 403 until its RBAC authorizer has loaded the roles): Observe reports a refusal once every
// request for at least Limit has been refused.
type RefusalTracker struct {
	Clock clock.Clock
	Limit time.Duration

	mu    sync.Mutex
	since time.Time // first refusal of the current run of refusals; zero when the last request was not refused
}

// Observe records the outcome of a request and returns true once refusals have lasted Limit: a success ends a run
// of refusals, another error leaves it as it is.
func (t *RefusalTracker) Observe(err error) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case err == nil:
		t.since = time.Time{}
		return false
	case !apierrors.IsForbidden(err):
		// Neither granted nor refused: a get that finds no Lease (the create that follows tells), a timeout.
		return false
	}
	now := t.Clock.Now()
	if t.since.IsZero() {
		t.since = now
	}
	return now.Sub(t.since) >= t.Limit
}
