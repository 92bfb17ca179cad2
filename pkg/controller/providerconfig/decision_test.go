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

import "testing"

// TestDecide pins what Sync does with one controller of a tenant, one row per case.
func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name  string
		state controllerState
		want  decision
	}{
		{"configured, nothing runs: start it", controllerState{enabled: true, configured: true}, decisionRun},
		{"configured, runs from the current section", controllerState{enabled: true, configured: true, running: runsCurrent}, decisionKeep},
		{"configured, runs from another section", controllerState{enabled: true, configured: true, running: runsStale}, decisionRestart},
		{"configured again while its cleanup runs", controllerState{enabled: true, configured: true, running: runsCleanup, recorded: true}, decisionRestart},
		{"configured but disabled by --controllers", controllerState{configured: true}, decisionDisabled},
		{"configured and disabled: nothing on record matters", controllerState{configured: true, recorded: true, abandoned: true}, decisionDisabled},
		{"configured, abandon annotation set: it runs all the same", controllerState{enabled: true, configured: true, running: runsCurrent, recorded: true, abandoned: true}, decisionKeep},

		{"removed, nothing on record, nothing runs", controllerState{enabled: true}, decisionStop},
		{"removed, nothing on record, it runs", controllerState{enabled: true, running: runsCurrent}, decisionStop},
		{"removed from a disabled controller, nothing on record", controllerState{}, decisionStop},
		{"removed, nothing on record, a cleanup runs", controllerState{enabled: true, running: runsCleanup}, decisionStop},
		{"removed, on record, it runs: the cleanup replaces it", controllerState{enabled: true, running: runsCurrent, recorded: true}, decisionCleanup},
		{"removed, on record, nothing runs", controllerState{enabled: true, recorded: true}, decisionCleanup},
		{"removed, its cleanup runs", controllerState{enabled: true, running: runsCleanup, recorded: true}, decisionCleanup},
		{"the cleanup left something", controllerState{enabled: true, running: runsCleanup, recorded: true, looked: true, left: "2 NEGs"}, decisionCleanup},
		{"the cleanup left nothing", controllerState{enabled: true, running: runsCleanup, recorded: true, looked: true}, decisionDone},
		{"abandoned while it runs", controllerState{enabled: true, running: runsCurrent, recorded: true, abandoned: true}, decisionAbandon},
		{"abandoned while its cleanup runs", controllerState{enabled: true, running: runsCleanup, recorded: true, abandoned: true}, decisionAbandon},
		{"abandoned though disabled", controllerState{recorded: true, abandoned: true}, decisionAbandon},
		{"abandoned, nothing on record", controllerState{enabled: true, abandoned: true}, decisionStop},

		{"cleanup needed, disabled by --controllers", controllerState{recorded: true}, decisionCleanupBlocked},
		{"cleanup needed, an API it needs not served", controllerState{enabled: true, recorded: true, cleanupAPIsMissing: true}, decisionCleanupBlocked},
		{"cleanup needed, API missing, the controller ran", controllerState{enabled: true, running: runsStale, recorded: true, cleanupAPIsMissing: true}, decisionCleanupBlocked},
		{"blocked, something left", controllerState{recorded: true, looked: true, left: "a PangolinResource"}, decisionCleanupBlocked},
		{"blocked, nothing left", controllerState{recorded: true, cleanupAPIsMissing: true, looked: true}, decisionDone},
		{"API gone while its cleanup runs: it goes on", controllerState{enabled: true, running: runsCleanup, recorded: true, cleanupAPIsMissing: true}, decisionCleanup},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decide(tc.state); got != tc.want {
				t.Errorf("decide(%+v) = %s, want %s", tc.state, got, tc.want)
			}
		})
	}
}
