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

package providerconfig

// decision is what Sync does with one controller of a tenant, decided by decide from the controller's state alone.
type decision int

const (
	// decisionKeep: the spec configures the controller and it runs, built from the spec's current section.
	decisionKeep decision = iota
	// decisionRun: the spec configures the controller and nothing of it runs: start it.
	decisionRun
	// decisionRestart: the spec configures the controller, but what runs was built from another section, or is its
	// cleanup: stop that, then start the controller from the current section.
	decisionRestart
	// decisionDisabled: the spec configures the controller, but --controllers disables it in this process.
	decisionDisabled
	// decisionStop: the spec no longer configures the controller (or the tenant is being deleted) and nothing is on
	// record for a cleanup: stop the controller if it runs.
	decisionStop
	// decisionAbandon: the operator abandons what the controller's cleanup would remove: stop whatever runs, call
	// Abandon, and the cleanup is done.
	decisionAbandon
	// decisionCleanup: the cleanup runs (started if need be, in place of the controller) until nothing is left.
	decisionCleanup
	// decisionCleanupBlocked: a cleanup is needed but cannot run here (--controllers disables the controller, or an
	// API it needs is not served): say what is left, and why.
	decisionCleanupBlocked
	// decisionDone: the cleanup found nothing left: stop it, and clear the section from the record.
	decisionDone
)

var decisionNames = [...]string{"keep", "run", "restart", "disabled", "stop", "abandon", "cleanup", "cleanup blocked", "done"}

func (d decision) String() string { return decisionNames[d] }

// runKind is what of a controller runs for a tenant.
type runKind int

const (
	runsNothing runKind = iota
	// runsCurrent: the controller, built from the spec's current section.
	runsCurrent
	// runsStale: the controller, built from a section the spec no longer holds.
	runsStale
	// runsCleanup: the controller's cleanup.
	runsCleanup
)

// controllerState is everything decide needs to know of one controller of a tenant.
type controllerState struct {
	// enabled: --controllers enables the controller in this process.
	enabled bool
	// configured: the spec has the controller's section and the ProviderConfig is not being deleted.
	configured bool
	running    runKind
	// recorded: a cleanup has something on record to work from (cleanupTarget); looked for only when the spec
	// does not configure the controller.
	recorded bool
	// abandoned: the controller can abandon what it made (it has Abandon) and the abandon annotation covers this
	// generation (AbandonCovers).
	abandoned bool
	// cleanupAPIsMissing: an API the cleanup needs is not served.
	cleanupAPIsMissing bool
	// looked is set once the cleanup (or, blocked, a one-off look) has said what is left, in left; decide is asked
	// again then, and says whether the cleanup is done.
	looked bool
	left   string
}

// decide says what to do with one controller of a tenant. It is pure: syncController gathers the state, and acts.
func decide(s controllerState) decision {
	if s.configured {
		switch {
		case !s.enabled:
			return decisionDisabled
		case s.running == runsCurrent:
			return decisionKeep
		case s.running == runsNothing:
			return decisionRun
		default:
			return decisionRestart
		}
	}
	switch {
	case !s.recorded:
		return decisionStop
	case s.abandoned:
		// Before anything is looked at: what is abandoned is not waited for.
		return decisionAbandon
	case s.looked && s.left == "":
		return decisionDone
	case s.running != runsCleanup && (!s.enabled || s.cleanupAPIsMissing):
		return decisionCleanupBlocked
	default:
		return decisionCleanup
	}
}
