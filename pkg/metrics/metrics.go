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

// Package metrics owns the manager's own Prometheus series, each labeled with the ProviderConfig (tenant) it
// describes, and their removal when a tenant stops so that deleted tenants leave no stale series behind.
package metrics

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	// Imported for its init too: it is the process's workqueue metrics provider.
	workqueuemetrics "github.com/multiproject/multiproject-controller-manager/pkg/metrics/workqueue"
)

const subsystem = "multiproject"

// The per-tenant series are CompactVecs (compact.go) and collectors that make them at scrape time (gce.go,
// status.go): a tenant's series cost a map entry each, not a Prometheus metric object.
var (
	// Syncs counts a tenant's controller syncs by result (success or error).
	Syncs = NewCompactCounterVec("controller_syncs_total",
		"Syncs of per-tenant controllers, by ProviderConfig, controller and result (success, error).",
		"provider_config", "controller", "result")

	// QueueDepth is the length of a tenant's controller workqueue, sampled on every item. A controller with two
	// queues (neg: translator and pusher) has a series for each, told apart by the queue's name.
	QueueDepth = NewCompactGaugeVec("controller_queue_depth",
		"Items waiting in a per-tenant controller's workqueue, by ProviderConfig, controller and queue name.",
		"provider_config", "controller", "queue")

	// ProviderConfigSyncs counts the ProviderConfig controller's syncs by result.
	ProviderConfigSyncs = NewCompactCounterVec("provider_config_syncs_total",
		"Syncs of the ProviderConfig controller (start, update or stop of a tenant), by ProviderConfig and result.",
		"provider_config", "result")

	// NEGsCollected counts the NEGs a tenant's garbage sweep deleted: they carried the tenant's ownership marker but
	// no Translation claimed them.
	NEGsCollected = NewCompactCounterVec("neg_garbage_collected_total",
		"NEGs deleted by a tenant's garbage sweep: ours by their marker, claimed by no Translation.",
		"provider_config")

	// NEGsAwaitingDeletion is how many NEGs of a tenant wait for its garbage sweep: their Translations are gone,
	// but GCE has not let the pusher delete them (a backend service still uses them).
	NEGsAwaitingDeletion = NewCompactGaugeVec("neg_awaiting_deletion",
		"NEGs of a tenant that no Translation claims and that GCE has not let the garbage sweep delete yet (in use by a backend service), as of its last sweep.",
		"provider_config")

	// NEGBackendServiceMemberships is how many (NEG, backend service) pairs a tenant's pusher has made: each of
	// its NEGs once per backend service it put it in, as the Translations' status records them.
	NEGBackendServiceMemberships = NewCompactGaugeVec("neg_backend_service_memberships",
		"NEG backends a tenant's pusher has added to backend services and not removed yet, as of its last syncs.",
		"provider_config")
)

// ControllersEnabled is how many per-tenant controllers --controllers enables in this process. 0 keeps
// kube-controller-manager's meaning (--controllers= or only "-name" values run nothing), but such a process still
// leads, serves and passes its probes while no tenant's controllers run: an alert on 0 sees it. Every replica
// exports it, standbys too, from the start.
var ControllersEnabled = metrics.NewGauge(&metrics.GaugeOpts{
	Subsystem:      subsystem,
	Name:           "controllers_enabled",
	Help:           "Per-tenant controllers that --controllers enables in this process; 0 means no tenant's controllers run here.",
	StabilityLevel: metrics.ALPHA,
})

var registerOnce sync.Once

// Register adds the series to the legacy registry served on /metrics. It is idempotent.
func Register() {
	registerOnce.Do(func() {
		legacyregistry.CustomMustRegister(Syncs, QueueDepth, ProviderConfigSyncs, NEGsCollected, NEGsAwaitingDeletion, NEGBackendServiceMemberships, NEGReadinessPodsWaiting, statusCollector, gceCollector)
		legacyregistry.MustRegister(NEGReadinessAttachToReady, NEGNetworkProgramming, NEGReadinessProgramming, ControllersEnabled)
	})
}

// ObserveSync records one sync of a tenant's controller and the depth of the queue it came from afterwards.
func ObserveSync(providerConfig, controller, queue string, err error, queueDepth int) {
	result := "success"
	if err != nil {
		result = "error"
	}
	Syncs.Inc(providerConfig, controller, result)
	QueueDepth.Set(float64(queueDepth), providerConfig, controller, queue)
}

// ForgetQueue removes the series of one queue of a controller, its depth and the workqueue's own (named queue);
// called when its workers stop, so a stopped controller, and a deleted tenant, leaves none.
func ForgetQueue(providerConfig, controller, queue string) {
	workqueuemetrics.Forget(queue)
	QueueDepth.Delete(providerConfig, controller, queue)
}

// ForgetController removes the series of one tenant's controller; called when it stops. Its queues' depth series
// are removed by their workers (ForgetQueue), which know their names.
func ForgetController(providerConfig, controller string) {
	for _, result := range []string{"success", "error"} {
		Syncs.Delete(providerConfig, controller, result)
	}
}

// ForgetProviderConfig removes every series of a tenant that no longer exists: the ProviderConfig controller's and
// those of its GCE calls. Its status series go with the ProviderConfig, at the next scrape (status.go).
func ForgetProviderConfig(providerConfig string) {
	gceCollector.forget(providerConfig)
	ProviderConfigSyncs.DeleteTenant(providerConfig)
	NEGsCollected.DeleteTenant(providerConfig)
	NEGsAwaitingDeletion.DeleteTenant(providerConfig)
	NEGBackendServiceMemberships.DeleteTenant(providerConfig)
	NEGReadinessPodsWaiting.DeleteTenant(providerConfig)
	// Delete, not DeleteLabelValues: the vector is nil until registered (a process or test that never serves metrics).
	NEGReadinessAttachToReady.Delete(map[string]string{"provider_config": providerConfig})
	NEGNetworkProgramming.Delete(map[string]string{"provider_config": providerConfig})
	NEGReadinessProgramming.Delete(map[string]string{"provider_config": providerConfig})
}
