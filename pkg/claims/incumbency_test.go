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
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestAPublishedNameIsKeptFromAnOlderClaimant: a newer claimant publishes a name; an older object that starts
// claiming it later (a user edits an old Ingress of their own) does not take it, in a registry that saw it happen and
// in one rebuilt from the cluster (a restart), whatever order the claims come back in. Once the publisher lets go
// and its object is gone, the older claimant is woken and holds the name.
func TestAPublishedNameIsKeptFromAnOlderClaimant(t *testing.T) {
	older := claimant("ns-b/old", "uid-old", t0)
	newer := claimant("ns-a/web", "uid-new", t0.Add(time.Hour))
	w := newWorld(t)
	a, b := w.join("tenant-a"), w.join("tenant-b")
	a.Claim(newer, []string{"app.example.com"})
	if _, ok := a.Reserve("app.example.com", newer, "ns-a/res"); !ok {
		t.Fatal("the only claimant could not reserve its name")
	}
	if _, err := w.kube.CoreV1().ConfigMaps("ns-a").Create(w.ctx, published("ns-a", "res", "app.example.com", newer), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a.Created("app.example.com", "ns-a/res", true)
	waitShown(t, w, "ns-a/res")

	b.Claim(older, []string{"app.example.com"})
	assertHolder(t, "after the older claim", newer, a, newer, b, older)
	if holder, ok := b.Reserve("app.example.com", older, "ns-b/res"); ok || holder != "Ingress ns-a/web" {
		t.Errorf("the older claimant's Reserve = %q, %v; want refused for Ingress ns-a/web", holder, ok)
	}

	// A restart: a new registry over the same objects, the older claim registered first.
	w2 := newWorld(t, published("ns-a", "res", "app.example.com", newer))
	b2, a2 := w2.join("tenant-b"), w2.join("tenant-a")
	b2.Claim(older, []string{"app.example.com"})
	a2.Claim(newer, []string{"app.example.com"})
	assertHolder(t, "after a restart", newer, a2, newer, b2, older)

	// The publisher lets go: its controller deletes its object, and the older claimant holds the name.
	for len(b2.queued) > 0 {
		<-b2.queued
	}
	a2.Claim(newer, nil)
	if err := w2.kube.CoreV1().ConfigMaps("ns-a").Delete(w2.ctx, "res", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if key := b2.next(t); key != "ns-b/old" {
		t.Fatalf("enqueued %s", key)
	}
	if _, isSelf := b2.Holder("app.example.com", older); !isSelf {
		t.Error("the older claimant does not hold the name its holder let go")
	}
}

// TestAnObjectMadeForNoClaimantHoldsNothing: a publication whose claimant no longer claims the name (or was made by
// hand) makes nobody the holder: the earliest claimant holds the name and waits for the object to go.
func TestAnObjectMadeForNoClaimantHoldsNothing(t *testing.T) {
	gone := claimant("ns-a/gone", "uid-gone", t0.Add(time.Hour))
	w := newWorld(t, published("ns-a", "res", "h", gone))
	b := w.join("tenant-b")
	late, early := claimant("ns-b/late", "uid-late", t0.Add(2*time.Hour)), claimant("ns-b/early", "uid-early", t0)
	b.Claim(late, []string{"h"})
	b.Claim(early, []string{"h"})
	if holder, _ := b.Holder("h", late); holder.UID != early.UID {
		t.Errorf("holder = %s, want the earliest claimant", holder.Key)
	}
	if holder, ok := b.Reserve("h", early, "ns-b/res"); ok || holder != "Ingress ns-a/gone" {
		t.Errorf("Reserve = %q, %v; want a wait for the object of Ingress ns-a/gone", holder, ok)
	}
}

// TestAnAnnouncedRecordIsKeptFromAnEarlierClaimantOfAnotherProcess: with claim records, the holder whose record
// announced its object keeps the name when an earlier claimant of another process comes; before the announcement
// the earlier one would take it (TestAnEarlierClaimInAnotherProcessTakesTheName).
func TestAnAnnouncedRecordIsKeptFromAnEarlierClaimantOfAnotherProcess(t *testing.T) {
	c := newCluster(t)
	a, b := c.process().join("tenant-a"), c.process().join("tenant-b")
	newer := claimant("ns-a/web", "uid-a", t0.Add(time.Hour))
	older := claimant("ns-b/old", "uid-b", t0)
	c.setAlive(newer.UID, "h")
	c.setAlive(older.UID, "h")
	a.Claim(newer, []string{"h"})
	if _, isSelf := decide(t, a, "h", newer); !isSelf {
		t.Fatal("the only claimant does not hold the name")
	}
	waitDecided(t, a, "h", newer, true)
	if _, ok, err := a.Acquire(context.Background(), "h", newer, "ns-a/res"); !ok || err != nil {
		t.Fatalf("Acquire = %v, %v", ok, err)
	}
	if _, err := c.kube.CoreV1().ConfigMaps("ns-a").Create(context.Background(), published("ns-a", "res", "h", newer), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a.Created("h", "ns-a/res", true)

	b.Claim(older, []string{"h"})
	holder := waitDecided(t, b, "h", older, false)
	if holder.UID != newer.UID {
		t.Errorf("the older claimant is told %s holds the name, want %s", holder.Key, newer.Key)
	}
	if rec, _ := c.record("h"); rec.holder.UID != newer.UID || rec.object != "ns-a/res" {
		t.Errorf("record = holder %s, object %q; want the publisher's, unchanged", rec.holder.Key, rec.object)
	}
	if _, isSelf := decide(t, a, "h", newer); !isSelf {
		t.Error("the publisher no longer holds its name")
	}
}

func waitShown(t *testing.T, w *world, key string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(w.ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, exists, _ := w.informer.GetIndexer().GetByKey(key)
		return exists, nil
	})
	if err != nil {
		t.Fatalf("the informer never showed %s", key)
	}
}

// assertHolder checks that every member names want as the holder of app.example.com for its claimant.
func assertHolder(t *testing.T, when string, want Claimant, pairs ...any) {
	t.Helper()
	for i := 0; i < len(pairs); i += 2 {
		m, self := pairs[i].(*tenant), pairs[i+1].(Claimant)
		if holder, isSelf := m.Holder("app.example.com", self); holder.UID != want.UID || isSelf != (self.UID == want.UID) {
			t.Errorf("%s: %s is told %s holds the name (self %v), want %s", when, self.Key, holder.Key, isSelf, want.Key)
		}
	}
}
