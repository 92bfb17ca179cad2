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

// Package pusher owns the GCE half of the neg controller: for one tenant, it is the only code that writes to
// Compute Engine. It watches the tenant's Translations and makes the zonal NEGs they declare exist, with exactly the
// endpoints they list, in the tenant's own GCP project; when a Translation is deleted it deletes those NEGs, in
// reverse order, and only then removes the Translation's finalizer. A NEG GCE will not delete because a backend
// service uses it does not hold the Translation: it is emptied and left to the tenant's garbage sweep, which deletes
// it once GCE lets it (awaiting.go, gc.go).
//
// It keeps what it knows of GCE in memory, so a Translation that already matches GCE costs no call. It never
// changes or deletes a NEG whose description differs from the Translation's ownership marker. It writes the
// Translation's status (per NEG state, endpoint count, last error, and the Synced condition) only when it changes.
//
// One sync of one Translation is a negSync value whose methods are its steps, in order, in sync.go; the GCE calls on
// one NEG, and the cache entry they keep true, are negCalls in gce.go; what a sync writes to the Translation's status
// is in status.go, and what it reports on the tenant's condition in problems.go.
// docs/neg-pusher.md describes the algorithm, the error handling and the measured call counts.
package pusher
