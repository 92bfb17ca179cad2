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

// Package leasehealth keeps the account of a Lease this process holds, for the two Leases it holds: the
// leader-election Lease (pkg/leadership) and a shard's own Lease (pkg/sharding's ShardLease). Its one job is to say,
// from that account, when the process must give the Lease up or be restarted:
//
//   - renewals.go: RenewalTracker, when the Lease was last renewed; Check, the core of both /healthz checks (it
//     fails once the Lease is lost, and while it is held with an overdue renewal), and WaitOverdue, both watchdogs.
//   - refusals.go: RefusalTracker, a Lease the API server keeps refusing (403) told from one it refuses for a
//     moment, and LeaseRefusedError, the error that names the Role to fix.
//
// It imports nothing of the product.
package leasehealth
