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

package claims

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/multiproject/multiproject-controller-manager/pkg/worker"
)

// TestAnUnrecordedPublisherOfAnotherShardIsFound: with --sharded-watch a process's holdings informer reads only its
// own namespaces. An object of another namespace publishes a name that no claim record announces (made by a build
// before claim records, or its record was deleted): the claimant that records the name first must not publish
// beside it, and, since no informer of its process will see that object go, is retried until it is gone.
func TestAnUnrecordedPublisherOfAnotherShardIsFound(t *testing.T) {
	c := newCluster(t)
	b := c.processSeeing("ns-b").join("tenant-b")
	ctx := context.Background()
	older := claimant("ns-a/web", "uid-a", t0)
	if _, err := c.kube.CoreV1().ConfigMaps("ns-a").Create(ctx, published("ns-a", "old", "h", older), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	self := claimant("ns-b/web", "uid-b", t0.Add(time.Second))
	c.setAlive(self.UID, "h")
	b.Claim(self, []string{"h"})
	waitDecided(t, b, "h", self, true)

	who, ok, err := b.Acquire(ctx, "h", self, "ns-b/web")
	if ok {
		t.Fatalf("acquired while ns-a/old, which this process's informer does not read, publishes the name (%q, %v): two publishers", who, err)
	}
	if !errors.Is(err, worker.ErrWaiting) || !strings.Contains(err.Error(), "Ingress ns-a/web") {
		t.Errorf("Acquire = %q, %v; want a wait (retried with backoff) naming Ingress ns-a/web", who, err)
	}
	// Its own object, left by an earlier create, does not block it.
	if _, err := c.kube.CoreV1().ConfigMaps("ns-b").Create(ctx, published("ns-b", "web", "h", self), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.kube.CoreV1().ConfigMaps("ns-a").Delete(ctx, "old", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, ok, err := b.Acquire(ctx, "h", self, "ns-b/web")
		return ok && err == nil, nil
	})
	if err != nil {
		t.Fatal("the claimant never acquired after the unrecorded object went")
	}
	b.Created("h", "ns-b/web", true)
}

// TestALetGoWhileTheObjectIsHeldWakesTheOtherProcess: the holder lets go of a name while its object still publishes
// it (a finalizer), so its record stays; the claimant of another process that waited for the holder must still
// be woken, to take the record over and wait for the object, since no event of the objects reaches it.
func TestALetGoWhileTheObjectIsHeldWakesTheOtherProcess(t *testing.T) {
	c := newCluster(t)
	a, b := c.processSeeing("ns-a").join("tenant-a"), c.processSeeing("ns-b").join("tenant-b")
	first, second := claimant("ns-a/web", "uid-a", t0), claimant("ns-b/web", "uid-b", t0.Add(time.Second))
	c.setAlive(first.UID, "h")
	c.setAlive(second.UID, "h")
	a.Claim(first, []string{"h"})
	ctx := context.Background()
	waitDecided(t, a, "h", first, true)
	if _, ok, err := a.Acquire(ctx, "h", first, "ns-a/first"); !ok || err != nil {
		t.Fatalf("the first claimant could not acquire: %v", err)
	}
	if _, err := c.kube.CoreV1().ConfigMaps("ns-a").Create(ctx, published("ns-a", "first", "h", first), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a.Created("h", "ns-a/first", true)
	b.Claim(second, []string{"h"})
	waitDecided(t, b, "h", second, false)
	for len(b.queued) > 0 {
		<-b.queued
	}

	c.setAlive(first.UID)
	a.Claim(first, nil)
	if key := b.next(t); key != "ns-b/web" {
		t.Fatalf("enqueued %s", key)
	}
	if rec, ok := c.record("h"); !ok || rec.holder.UID != first.UID {
		t.Fatalf("the record of a name whose object still exists went (%v) or changed hands", ok)
	}
	waitDecided(t, b, "h", second, true)
}
