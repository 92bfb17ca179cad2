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

// Package sharder is the leader's part in the division of tenants among the replicas: it decides where every
// ProviderConfig belongs and writes that down, on the replica that holds the leader-election Lease. What each
// replica does with the decision (its shard Lease, the drain, the coverage) is pkg/sharding, whose labels and shard
// Leases this package reads and writes. Its files:
//
//   - rendezvous.go, plan.go, planner.go, decide.go: where every ProviderConfig belongs (rendezvous hashing with
//     bounded loads: no live shard above Capacity, a tenant stays on its shard while it fits), and what the sharder
//     does about one (assign, drain, reassign at once when its shard is dead, or nothing); pure functions.
//   - sharder.go: Sharder, the controller that writes the assignment as the label multiproject.io/shard=<shard>
//     and starts a move with multiproject.io/drain=true; Run runs it on an informer of its own.
//   - sharderleases.go: the live shards, from the shard Leases, a dead one confirmed by a read from the API server.
//   - metrics.go: the sharder's multiproject_shard_* series.
//
// The Sharder is a controller on the product's one worker runtime (pkg/worker), on a clock its tests replace.
package sharder
