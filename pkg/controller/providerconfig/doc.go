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

// Package providerconfig owns the tenant lifecycle: the ProviderConfigController, which watches ProviderConfigs and
// writes their status, and the ControllersManager, which starts, restarts and stops each tenant's controllers on
// filtered views of the shared informers and on a stop joined from the global (leader) stop and the tenant's own.
//
// Lifecycle of one ProviderConfig (design invariant 5):
//
//	added            → finalizer patched in, then the enabled and configured controllers start
//	spec changed     → each controller whose spec section changed is stopped and started with the new spec
//	deleting         → controllers keep running until none reports pending cloud state, then stop; finalizer removed
//	vanished         → controllers stopped (the finalizer was stripped by hand or never added)
//
// Stopping a controller cancels its context, waits for Run to return, closes its tenancy handle (removing every
// handler it added to the shared informers), removes the handlers it added to shared unfiltered informers and drops
// its metric series (invariant 2); the Event broadcaster is the manager's, shut down by StopAll.
//
// The Controller: controller.go (queue, Run), sync.go (Controller.sync in steps), ownership.go (shards), status.go,
// secrets.go. The Manager: manager.go (Sync, the exported reads), decision.go (decide, a pure function of one
// controller's state), controllersync.go (gather, decide, act), runs.go (the run registry: start and stop),
// context.go (a controller's tenant.Context), conditions.go, informers.go.
package providerconfig
