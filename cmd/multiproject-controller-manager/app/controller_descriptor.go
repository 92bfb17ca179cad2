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
	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/options"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/ingresstunnel"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/namespaceproject"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/neg"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/registry"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
)

// NewControllerDescriptors returns the per-tenant controllers this binary can run. Each controller package adds its
// descriptor here; the table is validated by a unit test, so a broken entry never reaches a release.
func NewControllerDescriptors() *registry.Registry[tenant.Factory] {
	r, err := registry.New(controllerDescriptors()...)
	if err != nil {
		panic(err)
	}
	return r
}

func controllerDescriptors() []*registry.Descriptor[tenant.Factory] {
	return []*registry.Descriptor[tenant.Factory]{
		neg.Descriptor(),
		namespaceproject.Descriptor(),
		ingresstunnel.Descriptor(),
	}
}

// catalog adapts the registry to what the options need.
type catalog struct {
	*registry.Registry[tenant.Factory]
}

func (c catalog) Info() []options.ControllerInfo {
	var out []options.ControllerInfo
	for _, name := range c.KnownControllers() {
		d, _ := c.Get(name)
		out = append(out, options.ControllerInfo{Name: name, DefaultConcurrentSyncs: d.DefaultConcurrentSyncs})
	}
	return out
}
