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

// Package claims decides, across every tenant of the process, which object may publish a name that must be
// published once: a host of a Pangolin-class Ingress (the Pangolin operator binds a second PangolinResource for a
// host to the first one's remote resource, across tenants), or a custom NEG name of a Service.
//
// The command owns the claims: it builds one Service with each controller context (CreateControllerContext), hands it
// to every tenant's controller through tenant.Context.Claims, and closes it once they have all stopped. A Service holds
// one Registry per Kind of name; the Registry watches the shared informer of the objects that publish its names
// itself, from the first controller that joins until the Service closes, so controllers come and go without moving
// a handler. There is no package state.
//
// Two things are tracked per name in a Registry:
//
//   - Claims: the objects (Ingresses, Services) that ask for the name, fed by each tenant's controller from its own
//     filtered view. So only objects of tenants whose controller runs in this process claim anything: an object the
//     manager ignores (no tenant, a tenant without the controller's section, a tenant that left) never blocks a
//     name. Whoever publishes a name keeps it: a claimant whose object publishes the name (an incumbent, see
//     below) holds it against every other claimant, whatever their ages, so nobody takes a published name by editing
//     an older object of their own. Among claimants none of which publishes the name, the earliest claim holds it:
//     the earlier creation, then the smaller UID, an order every process agrees on.
//   - Holdings: the objects that publish the name (PangolinResources, Translations), from the unfiltered shared
//     informer of their kind, whatever their tenant. A claimant creates its object only once no object of another
//     claimant publishes the name, and a reservation taken under the registry's lock covers the time between its
//     create call and the informer showing the object, so two tenants' workers never both create one.
//
// The holdings make a claimant the incumbent: an object of the holdings made for it (Holding.Owner) that publishes
// the name, a reservation of its own, or, with claim records, the record naming it once it announced its object. The
// holding is in the cluster, not in a process's memory, so a restarted process, or another replica, finds the same
// incumbent.
//
// When the holder of a name changes, every claimant of the name is enqueued in its own tenant's controller; when an
// object publishing a name comes, changes what it publishes or goes, every claimant of the name is enqueued too.
//
// That is enough while one process runs every tenant. Replicas that share the tenants (--sharding) each know only
// their own tenants' claims, so a Service with Records (records.go) lets the API server decide: one claim record (a
// Lease) per name, created once, taken over with compare-and-swap updates by an earlier claimant while its holder
// has announced no object, or from a holder a live read no longer finds, and announcing each object before it is
// created (Acquire); a record that announced its holder's object is kept while that holder claims the name. Who holds a name is
// answered in two steps: Answer, from memory and the records' cache alone, which a controller's plan may read, and
// Settle, the record's writes and live reads, which the controller runs where it writes.
//
// Files: service.go the Service, its Kinds and lifetime (Join, Close) and each Registry's handlers and release worker;
// claims.go the Registry, its claimants and membership (Leave); member.go what a member asks (Claim, Holder,
// Reserve, Created); holdings.go the holdings informer's events; answer.go who holds a name (Answer, Settle,
// Decide); records.go the claim records (Acquire, the release of a record, the records' events); partial.go what
// Acquire adds when the holdings informer reads only this replica's namespaces (--sharded-watch); live.go the live
// reads a Kind is built from (TenantObjects).
package claims
