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

// Package worker owns the one worker runtime of the product: a typed workqueue, the workers that drain it with one
// processNextWorkItem and one requeue policy (retries paced by a rate limiter, on a clock a test may replace), the
// event handlers that feed it, the StopSignal a run ends on, and the helpers every handler shares (a tombstone's
// last state, the resync skip). It knows nothing of tenants beyond a label: the per-tenant controllers, the
// ProviderConfig controller, and the sharding package's sharder and drainer all run on it.
package worker
