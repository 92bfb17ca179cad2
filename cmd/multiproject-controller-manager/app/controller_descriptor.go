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
	"context"

	"k8s.io/apimachinery/pkg/runtime/schema"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/names"
	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/options"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/ingresstunnel"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/namespaceproject"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/neg"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/registry"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
)

// NewControllerDescriptors returns the per-tenant controllers this binary can run, as kube-controller-manager's
// NewControllerDescriptors does: every descriptor is built here, from what its controller package exports, and the
// table is validated by a unit test, so a broken entry never reaches a release.
func NewControllerDescriptors() *registry.Descriptors {
	r, err := registry.New(
		newNEGControllerDescriptor(),
		newNamespaceProjectControllerDescriptor(),
		newIngressTunnelControllerDescriptor(),
	)
	if err != nil {
		panic(err)
	}
	return r
}

// newNEGControllerDescriptor: for each tenant with spec.gcp, a translator, a pusher and a readiness reflector, each
// with --concurrent-neg-syncs workers, once the cluster serves Translations. Its cleanup deletes the tenant's NEGs.
func newNEGControllerDescriptor() *registry.Descriptor {
	gcp := func(spec *mpv1alpha1.ProviderConfigSpec) **mpv1alpha1.GCPConfig { return &spec.GCP }
	return &registry.Descriptor{
		Name:                   names.NEGController,
		DefaultConcurrentSyncs: neg.DefaultConcurrentSyncs,
		Factory: tenant.Factory{
			ConditionType: mpv1alpha1.ProviderConfigConditionNEGReady,
			Section:       tenant.SectionOf(gcp),
			CopySection:   tenant.CopySectionOf(gcp),
			RequiredAPIs:  tenant.APIs(informerset.Translations),
			New:           neg.New,
			Pending:       neg.Pending,
			Cleanup:       neg.NewCleanup,
			Abandon:       neg.Abandon,
			// The pusher, and the cleanup's pusher, read the tenant's GCP key.
			Secrets: func(spec *mpv1alpha1.ProviderConfigSpec) []mpv1alpha1.SecretReference {
				if spec.GCP == nil || spec.GCP.CredentialsSecretRef == nil {
					return nil
				}
				ref := spec.GCP.CredentialsSecretRef
				return []mpv1alpha1.SecretReference{{Namespace: ref.Namespace, Name: ref.Name}}
			},
		},
	}
}

// newNamespaceProjectControllerDescriptor: for each tenant with spec.rancher, once the cluster serves Rancher's
// Projects (until then the tenant's NamespaceProjectReady says APINotServed), or at once for a tenant that reads
// them from Rancher's management cluster. It has no cleanup: assignments stay.
func newNamespaceProjectControllerDescriptor() *registry.Descriptor {
	return &registry.Descriptor{
		Name:                   names.NamespaceProjectController,
		DefaultConcurrentSyncs: namespaceproject.DefaultConcurrentSyncs,
		Factory: tenant.Factory{
			ConditionType: mpv1alpha1.ProviderConfigConditionNamespaceProjectReady,
			Section:       tenant.SectionOf(func(spec *mpv1alpha1.ProviderConfigSpec) **mpv1alpha1.RancherConfig { return &spec.Rancher }),
			RequiredAPIs:  namespaceproject.RequiredAPIs,
			New: func(_ context.Context, c *tenant.Context) (tenant.Controller, error) {
				return namespaceproject.New(c)
			},
		},
	}
}

// newIngressTunnelControllerDescriptor: for each tenant with spec.pangolin, once the cluster serves
// PangolinTunnels and PangolinResources. Its cleanup deletes the PangolinResources it made.
func newIngressTunnelControllerDescriptor() *registry.Descriptor {
	pangolin := func(spec *mpv1alpha1.ProviderConfigSpec) **mpv1alpha1.PangolinConfig { return &spec.Pangolin }
	return &registry.Descriptor{
		Name:                   names.IngressTunnelController,
		DefaultConcurrentSyncs: ingresstunnel.DefaultConcurrentSyncs,
		Factory: tenant.Factory{
			ConditionType: mpv1alpha1.ProviderConfigConditionIngressTunnelReady,
			Section:       tenant.SectionOf(pangolin),
			CopySection:   tenant.CopySectionOf(pangolin),
			RequiredAPIs:  tenant.APIs(informerset.PangolinTunnels, informerset.PangolinResources),
			// Gateway API, read where the cluster serves it (docs/ingress-tunnel.md).
			OptionalAPIs: []schema.GroupVersionResource{informerset.GatewayClasses, informerset.Gateways, informerset.HTTPRoutes,
				informerset.ReferenceGrants},
			New: func(_ context.Context, c *tenant.Context) (tenant.Controller, error) {
				return ingresstunnel.New(c)
			},
			Cleanup: ingresstunnel.NewCleanup,
			Pending: ingresstunnel.Pending,
		},
	}
}

// catalog adapts the registry to what the options need.
type catalog struct {
	*registry.Descriptors
}

func (c catalog) Info() []options.ControllerInfo {
	var out []options.ControllerInfo
	for _, name := range c.KnownControllers() {
		d, _ := c.Get(name)
		out = append(out, options.ControllerInfo{Name: name, DefaultConcurrentSyncs: d.DefaultConcurrentSyncs})
	}
	return out
}
