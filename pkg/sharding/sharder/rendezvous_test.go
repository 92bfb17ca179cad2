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

package sharder

import (
	"fmt"
	"testing"
)

func keys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("tenant-%d", i)
	}
	return out
}

func TestRendezvousIsDeterministicAndIgnoresOrder(t *testing.T) {
	a := []string{"shard-a", "shard-b", "shard-c"}
	b := []string{"shard-c", "shard-a", "shard-b"}
	for _, k := range keys(1000) {
		first := Rendezvous(k, a)
		if again := Rendezvous(k, a); again != first {
			t.Fatalf("%s: %s then %s", k, first, again)
		}
		if other := Rendezvous(k, b); other != first {
			t.Fatalf("%s: %s with one order, %s with another", k, first, other)
		}
	}
	if got := Rendezvous("tenant-1", nil); got != "" {
		t.Errorf("no shards: got %q, want none", got)
	}
	if got := Rendezvous("tenant-1", []string{"only"}); got != "only" {
		t.Errorf("one shard: got %q", got)
	}
}

func TestRendezvousIsBalanced(t *testing.T) {
	shards := []string{"shard-a", "shard-b", "shard-c"}
	counts := map[string]int{}
	for _, k := range keys(3000) {
		counts[Rendezvous(k, shards)]++
	}
	for _, s := range shards {
		// 1,000 each, within ±10 %.
		if counts[s] < 900 || counts[s] > 1100 {
			t.Errorf("shard %s got %d of 3000 keys, want 900..1100 (all: %v)", s, counts[s], counts)
		}
	}
}

func TestRendezvousAddingAShardMovesAboutAQuarterOnlyToIt(t *testing.T) {
	three := []string{"shard-a", "shard-b", "shard-c"}
	four := append([]string{"shard-d"}, three...)
	moved := 0
	for _, k := range keys(3000) {
		before, after := Rendezvous(k, three), Rendezvous(k, four)
		if before == after {
			continue
		}
		moved++
		if after != "shard-d" {
			t.Errorf("%s moved from %s to %s, not to the new shard", k, before, after)
		}
	}
	// 1/4 of 3,000 is 750, within ±10 %.
	if moved < 675 || moved > 825 {
		t.Errorf("adding a fourth shard moved %d of 3000 keys, want about 750", moved)
	}
}

func TestRendezvousRemovingAShardMovesOnlyItsKeys(t *testing.T) {
	four := []string{"shard-a", "shard-b", "shard-c", "shard-d"}
	three := []string{"shard-a", "shard-c", "shard-d"}
	moved := 0
	for _, k := range keys(3000) {
		before, after := Rendezvous(k, four), Rendezvous(k, three)
		if before == "shard-b" {
			moved++
			continue
		}
		if before != after {
			t.Errorf("%s moved from %s to %s though only shard-b was removed", k, before, after)
		}
	}
	if moved == 0 {
		t.Fatal("shard-b held no key; the test proves nothing")
	}
}
