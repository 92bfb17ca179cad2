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
