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

package namespaceproject

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime/schema"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/registry"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
)

// DefaultConcurrentSyncs is the default of --concurrent-namespace-project-syncs.
const DefaultConcurrentSyncs = 5

// Descriptor describes the controller to the manager: it runs for tenants with spec.rancher, and only once the
// cluster serves Rancher's Projects (until then the manager reports APINotServed in NamespaceProjectReady).
func Descriptor() *registry.Descriptor[tenant.Factory] {
	return &registry.Descriptor[tenant.Factory]{
		Name:                   ControllerName,
		DefaultConcurrentSyncs: DefaultConcurrentSyncs,
		Constructor: tenant.Factory{
			ConditionType: mpv1alpha1.ProviderConfigConditionNamespaceProjectReady,
			Section:       rancherSection,
			RequiredAPIs:  []schema.GroupVersionResource{informerset.Projects},
			New: func(_ context.Context, c *tenant.Context) (tenant.Controller, error) {
				return New(c)
			},
		},
	}
}

// rancherSection returns spec.rancher, or an untyped nil when it is absent (a nil *RancherConfig in an interface
// would not compare equal to nil, and the manager would run the controller).
func rancherSection(spec *mpv1alpha1.ProviderConfigSpec) any {
	if spec.Rancher == nil {
		return nil
	}
	return spec.Rancher
}
