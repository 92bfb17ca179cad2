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
// handler it added to the shared informers), removes the handlers it added to shared unfiltered informers, shuts
// its event broadcaster down and drops its metric series (invariant 2).
package providerconfig
