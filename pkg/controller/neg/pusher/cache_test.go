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

package pusher

import "testing"

// A caller waiting for a NEG's entry when the sweep forgets it gets that very entry, and so does a caller that comes
// after it: dropping the entry from under a waiter would let the next caller make a fresh one and act on the NEG at
// the same time as the waiter.
func TestNEGCacheKeepsAnEntryWhileACallerWaitsForIt(t *testing.T) {
	c := newNEGCache()
	neg := negKey{project: "p", zone: "z", name: "n"}

	sweeping := c.lock(sweepKey, neg)
	waiterGot := lockWhenWaiting(c, "ns/first", neg)
	c.forget(sweepKey, neg)
	c.unlock(neg, sweeping)
	first := <-waiterGot
	if first != sweeping {
		t.Fatalf("the waiting caller got another entry than the one it waited for")
	}

	nextGot := lockWhenWaiting(c, "ns/second", neg)
	c.unlock(neg, first)
	if next := <-nextGot; next != first {
		t.Fatalf("a caller after the waiter got a fresh entry while the waiter held the NEG's")
	} else {
		c.forgetTranslation("ns/second")
		if c.len() != 1 {
			t.Fatalf("the entry was dropped while a caller held it: %d entries", c.len())
		}
		c.unlock(neg, next)
	}
	if c.len() != 0 {
		t.Fatalf("a forgotten entry stayed after its last user: %d entries", c.len())
	}

	// Without a forget, the entry stays for the next sync.
	c.unlock(neg, c.lock("ns/third", neg))
	if c.len() != 1 {
		t.Fatalf("an entry nobody forgot left the cache: %d entries", c.len())
	}
}

// lockWhenWaiting starts a caller of c.lock and returns once it counts as the entry's user and is about to wait; the
// channel delivers the entry it locked.
func lockWhenWaiting(c *negCache, key string, neg negKey) <-chan *negEntry {
	waiting, got := make(chan struct{}), make(chan *negEntry, 1)
	c.beforeWait = func(negKey) { close(waiting) }
	go func() { got <- c.lock(key, neg) }()
	<-waiting
	c.mu.Lock()
	c.beforeWait = nil
	c.mu.Unlock()
	return got
}
