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

package app

import (
	"k8s.io/apiserver/pkg/server/flagz"
	"k8s.io/apiserver/pkg/server/mux"
	"k8s.io/apiserver/pkg/server/statusz"
	"k8s.io/component-base/featuregate"
	zpagesfeatures "k8s.io/component-base/zpages/features"

	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/names"
)

// installZPages serves /flagz (the command line's flags and their values) and /statusz (start time, uptime, Go and
// binary versions, the served paths) as kube-controller-manager does: under the ComponentFlagz and ComponentStatusz
// gates, on the secure mux, so that they are authenticated and authorized like /metrics (a SubjectAccessReview for
// the non-resource URL). It runs last, so that /statusz lists every path the mux serves.
func installZPages(m *mux.PathRecorderMux, gate featuregate.FeatureGate, flags flagz.Reader) {
	if gate == nil {
		return
	}
	if flags != nil && gate.Enabled(zpagesfeatures.ComponentFlagz) {
		flagz.Install(m, names.ComponentName, flags)
	}
	if gate.Enabled(zpagesfeatures.ComponentStatusz) {
		// No effective version: statusz then reports the version stamped into the binary (hack/version.sh), and no
		// emulation version, which this binary does not have.
		statusz.Install(m, names.ComponentName, statusz.NewRegistry(nil, statusz.WithListedPaths(m.ListedPaths())))
	}
}
