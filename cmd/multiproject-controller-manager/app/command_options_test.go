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
	"slices"
	"testing"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/registry"
)

// A run in process gets the command's options for its own controller table: each controller's worker default and
// its flag, and --controllers resolved against that table, not the binary's.
func TestNewOptionsFollowsTheControllerTable(t *testing.T) {
	neg, _ := NewControllerDescriptors().Get("neg")
	probe := &registry.Descriptor{Name: "probe", DefaultConcurrentSyncs: 3, Factory: neg.Factory}
	descriptors, err := registry.New(probe)
	if err != nil {
		t.Fatal(err)
	}
	o := NewOptions(descriptors)
	if workers := o.ConcurrentSyncs["probe"]; workers == nil || *workers != 3 || len(o.ConcurrentSyncs) != 1 {
		t.Errorf("ConcurrentSyncs = %v, want only probe with its default 3", o.ConcurrentSyncs)
	}
	fss := o.Flags()
	if fss.FlagSet("probe controller").Lookup("concurrent-probe-syncs") == nil {
		t.Error("no --concurrent-probe-syncs flag")
	}
	o.Controllers = []string{"probe"}
	if err := o.Validate(); err != nil {
		t.Errorf("Validate with --controllers=probe: %v", err)
	}
	o.Controllers = []string{"neg"}
	if err := o.Validate(); err == nil {
		t.Error("Validate accepted --controllers=neg, which this table does not know")
	}

	binary := NewOptions(NewControllerDescriptors())
	for _, name := range NewControllerDescriptors().KnownControllers() {
		d, _ := NewControllerDescriptors().Get(name)
		if workers := binary.ConcurrentSyncs[name]; workers == nil || int(*workers) != d.DefaultConcurrentSyncs {
			t.Errorf("--concurrent-%s-syncs defaults to %v, want %d", name, workers, d.DefaultConcurrentSyncs)
		}
	}
	if !slices.Equal(binary.Controllers, []string{"*"}) {
		t.Errorf("--controllers defaults to %v, want *", binary.Controllers)
	}
}
