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

// Package leadership runs a function only while this process holds the leader-election Lease, and stops it at once
// when the Lease is lost. It is client-go's elector (k8s.io/client-go/tools/leaderelection) with three guards that
// elector lacks, for a process whose controllers must never act beside another leader's:
//
//   - election.go: Run, one campaign. Leadership is lost when the elector stops renewing, or when no renewal has
//     succeeded for the renew deadline plus one retry period (a watchdog on the renewals); either way Run returns
//     at once, without waiting for the function or the elector, so the process exits before the Lease expires.
//   - lock.go: the Lease lock as the elector sees it. It refuses every write once leadership is lost, and a release
//     before the function has returned; it records each renewal, and tells a Lease that RBAC keeps refusing from a
//     moment's refusal, so that a Role that does not grant the Lease ends the campaign with an error naming it.
//   - health.go: Health, the "leader-election" check of /healthz.
//
// The command (cmd/multiproject-controller-manager/app) builds the Config from its flags and calls Run, as
// kube-controller-manager's app calls leaderelection.RunOrDie.
package leadership
