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

package options

import (
	"github.com/spf13/pflag"
)

// addNEGControllerFlags adds the flags of the names the neg controller reads and writes. ingress-gce's are the
// defaults; another set lets the manager run beside another NEG controller that answers those (GKE's).
func (o *Options) addNEGControllerFlags(fs *pflag.FlagSet) {
	keys := &o.TenantControllers.NEGKeys
	fs.StringVar(&keys.Annotation, "neg-annotation-key", keys.Annotation, "Service annotation that asks the neg controller for NEGs, e.g. {\"exposed_ports\":{\"80\":{}}}. A qualified name, distinct from --neg-status-annotation-key.")
	fs.StringVar(&keys.StatusAnnotation, "neg-status-annotation-key", keys.StatusAnnotation, "Service annotation in which the neg controller writes which NEG serves which port, in which zones. A qualified name.")
	fs.StringVar(&keys.PreviousAnnotation, "neg-previous-annotation-key", keys.PreviousAnnotation, "While Services move to a new --neg-annotation-key: the key they asked with before. A Service that carries only this one keeps its NEGs, as if it carried --neg-annotation-key, and gets a Warning Event (docs/gke.md). Empty: none.")
	fs.StringVar((*string)(&keys.ReadinessGate), "neg-readiness-gate", string(keys.ReadinessGate), "Pod condition type the neg controller sets once a Pod's endpoint is in its NEGs, and the readiness gate a Pod declares to wait for it. A qualified name.")
}

// validateNEGController checks the names the neg controller reads and writes, as given: an empty one is refused,
// not replaced by the default.
func (o *Options) validateNEGController() []error {
	if err := o.TenantControllers.NEGKeys.Validate(); err != nil {
		return []error{err}
	}
	return nil
}
