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

// Package tenancy owns the split of the process's shared informers into per-tenant views.
//
// A tenant is a ProviderConfig, named by its object name. This package decides which tenant an object belongs to,
// routes every event of a shared informer to the owning tenant's handlers, and gives each tenant a read-only, filtered
// informer (a [View]) that client-go controllers run on unchanged. It owns:
//
//   - Ownership. A namespaced object belongs to the tenant named by its namespace's label (the label key is
//     configurable, default [mpv1alpha1.DefaultProviderConfigLabelKey]); its own label grants nothing, and one that names another tenant is
//     reported with a Warning Event. Objects only the manager writes ([ManagerWritten]) belong to the tenant their
//     label names. A cluster-scoped object belongs to the tenant its label names, or to every tenant when unlabeled,
//     if its resource is [ClusterScoped] (Nodes); a Namespace belongs only to the tenant named by its own label. An
//     empty label value counts as no label.
//   - The ownership index ([Indexers]), installed on every shared informer before it starts, so that listing one
//     tenant's objects costs O(that tenant's objects).
//   - The [Router]: exactly one event handler per shared informer, which hands each event to the owning tenant's
//     handlers with a map lookup, turns relabels (of a namespace, or of an object routed by its label) into a Delete
//     for the old tenant and an Add for the new one, and fans unlabeled shared objects out to every tenant.
//   - The [Fanout]: the one event handler on a shared informer that belongs to no tenant (Rancher Projects,
//     PangolinTunnels), which hands each event only to the [Interest]s holding one of the keys the object is filed
//     under; an Interest is a tenant controller's informer for reading it and watching its keys.
//   - [TenantViews] handles: one per running tenant, from which its [View]s are taken, and whose Close removes every
//     handler the tenant registered, so a stopped tenant leaves nothing behind on the shared informers.
//
// Tenant handlers are called synchronously, one event at a time, from the router's own handler on the shared
// informer: they must not block (enqueue into a workqueue and return). They may call back into this package, for
// example to remove themselves or to close their tenant.
//
// docs/tenancy.md explains the design and its measurements.
package tenancy
