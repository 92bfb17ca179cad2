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
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

func TestElectionLockRecordsRenewalsAndRefusesWhatTheProcessMustNotWrite(t *testing.T) {
	ctx := t.Context()
	client := fake.NewClientset()
	inner, err := resourcelock.New(resourcelock.LeasesResourceLock, "kube-system", "multiproject-controller-manager",
		client.CoreV1(), client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: "me"})
	if err != nil {
		t.Fatal(err)
	}
	var renewals atomic.Int32
	lock := &electionLock{Interface: inner, renewed: func() { renewals.Add(1) }}
	now := metav1.NewTime(time.Now())
	ours := resourcelock.LeaderElectionRecord{HolderIdentity: "me", LeaseDurationSeconds: 15, AcquireTime: now, RenewTime: now}
	release := resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1, AcquireTime: now, RenewTime: now}

	if err := lock.Create(ctx, ours); err != nil {
		t.Fatal(err)
	}
	if err := lock.Update(ctx, ours); err != nil {
		t.Fatal(err)
	}
	if n := renewals.Load(); n != 2 {
		t.Errorf("%d renewals recorded after an acquisition and a renewal, want 2", n)
	}
	if err := lock.Update(ctx, release); !errors.Is(err, errLeaseWriteRefused) {
		t.Errorf("a release before run returned: %v, want refused", err)
	}
	if h := holder(getLease(t, client)); h != "me" {
		t.Errorf("holder %q after a refused release, want me", h)
	}
	lock.allowRelease()
	if err := lock.Update(ctx, release); err != nil {
		t.Errorf("a release once run returned: %v", err)
	}
	if n := renewals.Load(); n != 2 {
		t.Errorf("a release was recorded as a renewal (%d)", n)
	}

	if err := lock.Update(ctx, ours); err != nil {
		t.Fatal(err)
	}
	lock.refuseWrites()
	if err := lock.Update(ctx, ours); !errors.Is(err, errLeaseWriteRefused) {
		t.Errorf("a renewal after the loss: %v, want refused", err)
	}
	if err := lock.Update(ctx, release); !errors.Is(err, errLeaseWriteRefused) {
		t.Errorf("a release after the loss: %v, want refused", err)
	}
	if n := renewals.Load(); n != 3 {
		t.Errorf("%d renewals recorded, want 3", n)
	}
}
