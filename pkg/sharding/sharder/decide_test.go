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

package sharder

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpfake "github.com/multiproject/client-go/clientset/versioned/fake"
	"github.com/multiproject/multiproject-controller-manager/pkg/sharding"
)

// TestDecideEveryState walks every combination of the tenant's shard label (none, the shard it belongs to, another
// live shard, a dead shard), its drain label, the shard its status names, and whether any shard is live.
func TestDecideEveryState(t *testing.T) {
	live := []string{"shard-a", "shard-b", "shard-c"}
	for _, key := range keys(20) {
		// Any live shard stands for the one the plan gives the tenant.
		want := Rendezvous(key, live)
		var other string
		for _, s := range live {
			if s != want {
				other = s
				break
			}
		}
		const dead = "shard-dead"
		type tc struct {
			current  string
			draining bool
			recorded string
			live     []string
			expect   Decision
		}
		cases := []tc{
			{"", false, "", live, Decision{Action: Assign, Shard: want}},
			{"", true, "", live, Decision{Action: Assign, Shard: want}},
			// A label removed by hand (or by an update that replaced the object) while a live shard still holds the
			// tenant: wait until it has released it; a dead one runs nothing any more.
			{"", false, other, live, Decision{Action: WaitForRelease, Shard: other, From: other}},
			{"", true, want, live, Decision{Action: WaitForRelease, Shard: want, From: want}},
			{"", false, dead, live, Decision{Action: ReassignNow, Shard: want, From: dead}},
			{want, false, "", live, Decision{Action: Nothing, From: want}},
			{want, true, "", live, Decision{Action: Nothing, From: want}},
			{other, false, "", live, Decision{Action: Drain, Shard: other, From: other}},
			{other, true, "", live, Decision{Action: Nothing, From: other}},
			{dead, false, "", live, Decision{Action: ReassignNow, Shard: want, From: dead}},
			{dead, true, "", live, Decision{Action: ReassignNow, Shard: want, From: dead}},
		}
		// The status is the shard's own record: with a label, the label decides.
		for _, recorded := range []string{want, other, dead} {
			cases = append(cases,
				tc{want, false, recorded, live, Decision{Action: Nothing, From: want}},
				tc{other, false, recorded, live, Decision{Action: Drain, Shard: other, From: other}},
				tc{other, true, recorded, live, Decision{Action: Nothing, From: other}},
				tc{dead, false, recorded, live, Decision{Action: ReassignNow, Shard: want, From: dead}})
		}
		for _, current := range []string{"", want, other, dead} {
			for _, draining := range []bool{false, true} {
				cases = append(cases, tc{current, draining, "", nil, Decision{Action: Nothing, From: current}})
			}
		}
		cases = append(cases, tc{"", false, other, nil, Decision{Action: Nothing, From: other}})
		for _, c := range cases {
			labels := map[string]string{"unrelated": "x"}
			if c.current != "" {
				labels[sharding.ShardLabel] = c.current
			}
			if c.draining {
				labels[sharding.DrainLabel] = "true"
			}
			name := fmt.Sprintf("%s current=%q draining=%v recorded=%q live=%v", key, c.current, c.draining, c.recorded, c.live)
			// want is the plan's entry for the tenant: whichever live shard, "" when none is live.
			planned := want
			if len(c.live) == 0 {
				planned = ""
			}
			if got := Decide(labels, c.recorded, c.live, planned); got != c.expect {
				t.Errorf("%s: got %+v, want %+v", name, got, c.expect)
			}
		}
	}
}

// TestLabelPatchIsACompareAndSwap applies labelPatch through the fake clientset, which applies JSON patches with the
// library kube-apiserver uses: it changes the labels when they are as read, and fails when either changed.
func TestLabelPatchIsACompareAndSwap(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name         string
		stored, read map[string]string
		set          map[string]string
		remove       []string
		want         map[string]string
		wantErr      bool
	}{
		{name: "assign, no labels map", stored: nil, read: nil,
			set: map[string]string{sharding.ShardLabel: "a"}, want: map[string]string{sharding.ShardLabel: "a"}},
		{name: "assign, labels map without shard", stored: map[string]string{"x": "y"}, read: map[string]string{"x": "y"},
			set: map[string]string{sharding.ShardLabel: "a"}, remove: []string{sharding.DrainLabel}, want: map[string]string{"x": "y", sharding.ShardLabel: "a"}},
		{name: "assign refused: assigned since it was read", stored: map[string]string{"x": "y", sharding.ShardLabel: "b"}, read: map[string]string{"x": "y"},
			set: map[string]string{sharding.ShardLabel: "a"}, wantErr: true},
		{name: "assign refused: labels map appeared since it was read", stored: map[string]string{sharding.ShardLabel: "b"}, read: nil,
			set: map[string]string{sharding.ShardLabel: "a"}, wantErr: true},
		{name: "drain", stored: map[string]string{sharding.ShardLabel: "a"}, read: map[string]string{sharding.ShardLabel: "a"},
			set: map[string]string{sharding.DrainLabel: "true"}, want: map[string]string{sharding.ShardLabel: "a", sharding.DrainLabel: "true"}},
		{name: "drain refused: draining since it was read", stored: map[string]string{sharding.ShardLabel: "a", sharding.DrainLabel: "true"}, read: map[string]string{sharding.ShardLabel: "a"},
			set: map[string]string{sharding.DrainLabel: "true"}, wantErr: true},
		{name: "acknowledge", stored: map[string]string{sharding.ShardLabel: "a", sharding.DrainLabel: "true", "x": "y"}, read: map[string]string{sharding.ShardLabel: "a", sharding.DrainLabel: "true"},
			remove: []string{sharding.ShardLabel, sharding.DrainLabel}, want: map[string]string{"x": "y"}},
		{name: "acknowledge refused: reassigned since it was read", stored: map[string]string{sharding.ShardLabel: "b"}, read: map[string]string{sharding.ShardLabel: "a", sharding.DrainLabel: "true"},
			remove: []string{sharding.ShardLabel, sharding.DrainLabel}, wantErr: true},
		{name: "reassign a dead shard's tenant", stored: map[string]string{sharding.ShardLabel: "dead", sharding.DrainLabel: "true"}, read: map[string]string{sharding.ShardLabel: "dead", sharding.DrainLabel: "true"},
			set: map[string]string{sharding.ShardLabel: "a"}, remove: []string{sharding.DrainLabel}, want: map[string]string{sharding.ShardLabel: "a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := mpfake.NewClientset(&mpv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: "t", Labels: tc.stored}})
			patch, err := sharding.LabelPatch(tc.read, tc.set, tc.remove...)
			if err != nil {
				t.Fatal(err)
			}
			pc, err := client.MultiprojectV1alpha1().ProviderConfigs().Patch(ctx, "t", types.JSONPatchType, patch, metav1.PatchOptions{})
			if tc.wantErr {
				if err == nil {
					t.Fatalf("patch %s applied to %v: got %v, want a failed test", patch, tc.stored, pc.Labels)
				}
				return
			}
			if err != nil {
				t.Fatalf("patch %s: %v", patch, err)
			}
			if fmt.Sprint(pc.Labels) != fmt.Sprint(tc.want) {
				t.Errorf("labels: got %v, want %v", pc.Labels, tc.want)
			}
		})
	}
}
