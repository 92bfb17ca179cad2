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

// Package sharding is each replica's part in the division of tenants (ProviderConfigs) among the active replicas
// of the manager, the way timebertt/kubernetes-controller-sharding divides objects among controller-runtime
// shards: its shard Lease, the drains it acknowledges, and the coverage of its tenants' namespaces. The leader's
// sharder, which decides where every tenant belongs, is pkg/sharding/sharder; it reads what this package writes
// and defines (the labels, the shard Leases).
//
// The command builds one Replica from its config (replica.go), without a call, and only drives it: it acquires the
// shard Lease, decides the shard scope on the term's context (ResolveScope), builds each term's parts on its
// informers (NewTerm: the Holders and the Coverage the ProviderConfig controller is built with) and starts them
// beside that controller (Term.Start, which adds the Drainer), and releases the Lease once every tenant has
// stopped; Run is that life, around the tenants' work and the sharder's election the command hands it. The
// package does not start or stop tenants itself: the controller is handed in as a TenantController.
// Its files:
//
//   - replica.go: Replica, built from ReplicaConfig; the probe of the API server's shard selectors; Term.
//   - lease.go: ShardLease, this replica's own Lease, `<group>-<identity>` labeled multiproject.io/shard-group=<group>,
//     renewed like a leader-election Lease, its renewals kept by pkg/leasehealth; a replica that cannot renew it is
//     told to stop all its tenants before the Lease expires (OnLost). How a shard Lease is read, which the sharder
//     shares: LiveShards, LeaseExpiry, LeaseBounds, VersionReads.
//   - labels.go: the labels (multiproject.io/shard, multiproject.io/drain), Owns, LeaseName, and LabelPatch, the
//     compare-and-swap of both labels that the sharder and the Drainer write with.
//   - drainer.go: Drainer, the shard side of a move: stop the tenant, then acknowledge by removing both labels.
//   - owner.go: RecordOwner and Release, status.shard, written before a shard starts a tenant and cleared once it
//     has stopped it, so an unsharded leader or the next shard knows who may still run it.
//   - holders.go: Holders, the informer of the group's shard Leases through which an unsharded leader (and a shard)
//     leaves alone the tenants another live shard may still run.
//   - namespaceselector.go: NamespaceBucket and NamespaceSelector, the shard selector over namespace hashes.
//   - coverage.go: Coverage, which keeps that selector over this shard's tenants' namespaces (--sharded-watch): a
//     pure decision (decideCoverage) and a step that acts, with no lock held across the API calls.
//   - leftovers.go: Leftovers, the namespaces where a tenant's manager-written objects are (the resource table's
//     tenancy.ManagerWritten resources), read with metadata LISTs.
//   - metrics.go: the replica's multiproject_shard_* series.
//
// The Drainer is a controller on the product's one worker runtime (pkg/worker), with its retry, metrics and log
// policy, on a clock its tests replace.
//
// Every write to the two labels is a JSON patch that first tests the labels it read, so a decision taken on a
// stale cache fails instead of overwriting a newer one: a tenant is never assigned to two shards. See
// docs/sharding.md.
package sharding
