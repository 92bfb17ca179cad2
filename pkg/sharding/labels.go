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
	"encoding/json"
	"fmt"
	"slices"
	"strings"

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

// LabelPatch is a JSON patch (RFC 6902) that first tests the values of ShardLabel and DrainLabel as they were read
// (a missing label tests as null) and then sets or removes them. The API server applies a patch to the object as
// stored, so the patch fails when either label changed since it was read: a compare-and-swap on exactly the two
// labels, which a merge patch cannot express without a resourceVersion precondition that every unrelated write
// (the tenant's status) would break.
func LabelPatch(read map[string]string, set map[string]string, remove ...string) ([]byte, error) {
	type op struct {
		Op    string  `json:"op"`
		Path  string  `json:"path"`
		Value *string `json:"value"`
	}
	var ops []any
	if len(read) == 0 {
		// Without labels the per-label paths do not exist (an empty map is not serialized, so removing the last
		// label removes the map): test that the map itself is absent and add it whole.
		ops = append(ops, map[string]any{"op": "test", "path": "/metadata/labels", "value": nil})
		if len(set) == 0 {
			return nil, fmt.Errorf("nothing to patch: the object has no labels to remove")
		}
		ops = append(ops, map[string]any{"op": "add", "path": "/metadata/labels", "value": set})
		return json.Marshal(ops)
	}
	for _, key := range []string{ShardLabel, DrainLabel} {
		var value *string
		if v, ok := read[key]; ok {
			value = &v
		}
		ops = append(ops, op{Op: "test", Path: labelPath(key), Value: value})
	}
	for _, key := range remove {
		if _, ok := read[key]; ok {
			ops = append(ops, map[string]any{"op": "remove", "path": labelPath(key)})
		}
	}
	for _, key := range sortedKeys(set) {
		v := set[key]
		ops = append(ops, op{Op: "add", Path: labelPath(key), Value: &v})
	}
	return json.Marshal(ops)
}

func labelPath(key string) string {
	// RFC 6901: "~" becomes "~0" and "/" becomes "~1".
	return "/metadata/labels/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
