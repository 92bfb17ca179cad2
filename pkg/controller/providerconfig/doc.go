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
