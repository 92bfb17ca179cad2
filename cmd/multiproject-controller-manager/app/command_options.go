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
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/registry"
)

// NewOptions returns the command's defaulted options for the controllers of descriptors. The command binds its
// flags to them; a run in process (the integration framework) sets the fields instead and calls Options.Config, so
// that both reach the config by the same path.
func NewOptions(descriptors *registry.Descriptors) *options.Options {
	return options.NewOptions(catalog{descriptors})
}
