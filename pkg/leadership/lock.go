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
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/multiproject/multiproject-controller-manager/pkg/leasehealth"
)

// electionLock is the Lease lock as client-go's elector sees it. It tells health about every successful write that
// names this process (the acquisition and each renewal), and it refuses the writes this process must not make: any
// write once leadership is lost, and a release (a write naming no holder) before run has returned. The elector
// releases the Lease both on cancel and after it fails to renew, and in the second case it does so before it
// cancels the leader's context; without this guard a standby could act while our controllers still run.
//
// It also watches for a Lease that RBAC does not grant: client-go's elector logs a refused get or create and retries
// forever, so a manager whose Role does not follow --leader-elect-resource-name or --leader-elect-resource-namespace
// would wait as a standby for good. Once refusals last the renew deadline, refused ends the election with an error
// naming the Role to fix (leasehealth.LeaseRefusedError).
type electionLock struct {
	resourcelock.Interface
	renewed func()

	// refusals and refused are optional (tests build the lock without them).
	refusals *leasehealth.RefusalTracker
	refused  func(verb string, err error)

	lost           atomic.Bool
	releaseAllowed atomic.Bool
}

var errLeaseWriteRefused = errors.New("this process no longer writes the Lease")

func (l *electionLock) refuseWrites() { l.lost.Store(true) }
func (l *electionLock) allowRelease() { l.releaseAllowed.Store(true) }

func (l *electionLock) mayWrite(record resourcelock.LeaderElectionRecord) error {
	switch {
	case l.lost.Load():
		return fmt.Errorf("%w: leadership was lost", errLeaseWriteRefused)
	case record.HolderIdentity != l.Identity() && !l.releaseAllowed.Load():
		return fmt.Errorf("%w: not releasing it while the controllers may still run", errLeaseWriteRefused)
	}
	return nil
}

// observe tells refused about a Lease that RBAC keeps refusing.
func (l *electionLock) observe(verb string, err error) {
	if l.refusals != nil && l.refusals.Observe(err) && l.refused != nil {
		l.refused(verb, err)
	}
}

func (l *electionLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	record, raw, err := l.Interface.Get(ctx)
	l.observe("get", err)
	return record, raw, err
}

func (l *electionLock) Create(ctx context.Context, record resourcelock.LeaderElectionRecord) error {
	if err := l.mayWrite(record); err != nil {
		return err
	}
	err := l.Interface.Create(ctx, record)
	l.observe("create", err)
	if err == nil && record.HolderIdentity == l.Identity() {
		l.renewed()
	}
	return err
}

func (l *electionLock) Update(ctx context.Context, record resourcelock.LeaderElectionRecord) error {
	if err := l.mayWrite(record); err != nil {
		return err
	}
	err := l.Interface.Update(ctx, record)
	l.observe("update", err)
	if err == nil && record.HolderIdentity == l.Identity() {
		l.renewed()
	}
	return err
}
