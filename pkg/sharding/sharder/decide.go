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
	"cmp"
	"slices"

	"github.com/multiproject/multiproject-controller-manager/pkg/sharding"
)

// Action is what the sharder does about one ProviderConfig.
type Action string

const (
	// Nothing: the tenant is where it belongs, or a drain is under way and the sharder waits for its acknowledgement,
	// or there is no live shard to assign it to.
	Nothing Action = "Nothing"
	// Assign the unassigned tenant to Decision.Shard.
	Assign Action = "Assign"
	// Drain: the tenant's live shard is not the one it belongs to; ask that shard to give it up.
	Drain Action = "Drain"
	// ReassignNow: the tenant's shard is dead (no live Lease); it runs nothing any more, so the tenant moves to
	// Decision.Shard at once, without a handshake.
	ReassignNow Action = "ReassignNow"
)

// Decision is the sharder's verdict on one ProviderConfig.
type Decision struct {
	Action Action
	// Shard is the shard to assign (Assign, ReassignNow), the shard asked to drain (Drain), or the live shard whose
	// release the sharder waits for (WaitForRelease).
	Shard string
	// From is the shard the tenant is labeled with now, or, without a label, the shard its status names ("" when
	// neither names one).
	From string
}

// WaitForRelease: the tenant has no shard label, but its status names a live shard, which may still run it (the
// label was removed by hand or by an update that replaced the object, not by a drain): the sharder waits until
// that shard has stopped the tenant and cleared its status (Release), or until its Lease ends.
const WaitForRelease Action = "WaitForRelease"

// Decide is the sharder's rule for a ProviderConfig with these labels, the shard its status names (recorded,
// status.shard: the shard that runs or last ran it), given the live shards and the shard it belongs to (want, its
// entry in the Plan of every tenant over live; "" when no shard is live). It is a pure function of its arguments;
// the Sharder only carries its verdict out.
//
// A drain, once asked for, is never cancelled: the sharder waits for the shard's acknowledgement (or for the shard
// to die), so it never races a shard that is stopping the tenant. A missing label alone does not make a tenant
// unowned: the shard that recorded itself in the status owns it until it releases it (clears the status, which
// every shard does once it has stopped a tenant it no longer owns) or dies.
func Decide(labels map[string]string, recorded string, live []string, want string) Decision {
	current := labels[sharding.ShardLabel]
	isDraining := labels[sharding.DrainLabel] == "true"
	switch {
	case want == "":
		// No live shard: nothing can run the tenant, and moving it nowhere would help no one.
		return Decision{Action: Nothing, From: cmp.Or(current, recorded)}
	case current == "" && recorded != "" && slices.Contains(live, recorded):
		return Decision{Action: WaitForRelease, Shard: recorded, From: recorded}
	case current == "" && recorded != "":
		// Its last shard is dead: it runs nothing any more.
		return Decision{Action: ReassignNow, Shard: want, From: recorded}
	case current == "":
		return Decision{Action: Assign, Shard: want}
	case !slices.Contains(live, current):
		return Decision{Action: ReassignNow, Shard: want, From: current}
	case isDraining:
		return Decision{Action: Nothing, From: current}
	case current != want:
		return Decision{Action: Drain, Shard: current, From: current}
	default:
		return Decision{Action: Nothing, From: current}
	}
}
