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

package sharding

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation"
)

const (
	// ShardGroupLabel marks the shard Leases of one group of replicas; the sharder watches only those.
	ShardGroupLabel = "multiproject.io/shard-group"
	// ShardLabel on a ProviderConfig names the shard that owns it, so each shard can watch only its own tenants
	// with a label selector.
	ShardLabel = "multiproject.io/shard"
	// DrainLabel ("true") on a ProviderConfig asks its shard to stop the tenant and give it up.
	DrainLabel = "multiproject.io/drain"
)

// Owns says whether the shard may run a tenant with these labels: it is assigned to the shard and not draining.
func Owns(shard string, labels map[string]string) bool {
	return shard != "" && labels[ShardLabel] == shard && labels[DrainLabel] != "true"
}

// draining says whether the labels ask shard to give the tenant up.
func draining(shard string, labels map[string]string) bool {
	return shard != "" && labels[ShardLabel] == shard && labels[DrainLabel] == "true"
}

// LeaseName is the name of the shard Lease of identity in group.
func LeaseName(group, identity string) string { return group + "-" + identity }

// validateShard checks that identity can be a label value (it is the value of ShardLabel) and that the Lease name
// derived from it is a valid object name.
func validateShard(group, identity string) error {
	if identity == "" {
		return fmt.Errorf("shard identity is empty")
	}
	if errs := validation.IsValidLabelValue(identity); len(errs) > 0 {
		return fmt.Errorf("shard identity %q is not a valid label value: %v", identity, errs)
	}
	if errs := validation.IsValidLabelValue(group); len(errs) > 0 || group == "" {
		return fmt.Errorf("shard group %q is not a valid label value: %v", group, errs)
	}
	if errs := validation.IsDNS1123Subdomain(LeaseName(group, identity)); len(errs) > 0 {
		return fmt.Errorf("shard Lease name %q is not a valid name: %v", LeaseName(group, identity), errs)
	}
	return nil
}
