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
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/multiproject/multiproject-controller-manager/cmd/multiproject-controller-manager/app/config"
)

func TestShardNameIsALabelValueAndNeverRepeats(t *testing.T) {
	for host, want := range map[string]string{
		"multiproject-controller-manager-7d9f8c5b4-x2kqz": "multiproject-controller-manager-7d9f8c5b4-x2kqz-abcde",
		"Laptop.Example.COM":                              "laptop-example-com-abcde",
		strings.Repeat("a", 80):                           strings.Repeat("a", 57) + "-abcde",
		strings.Repeat("a", 56) + "-b":                    strings.Repeat("a", 56) + "-abcde",
		"_":                                               "shard-abcde",
	} {
		got := ShardName(host, "abcde")
		if got != want {
			t.Errorf("ShardName(%q) = %q, want %q", host, got, want)
		}
		if msgs := validation.IsValidLabelValue(got); len(msgs) > 0 || len(got) > 63 {
			t.Errorf("ShardName(%q) = %q is not a label value: %v", host, got, msgs)
		}
	}
	o, _ := parse(t, "--sharding")
	a, b := &config.Config{}, &config.Config{}
	if err := o.applyIdentity(a); err != nil {
		t.Fatal(err)
	}
	if err := o.applyIdentity(b); err != nil {
		t.Fatal(err)
	}
	if a.Sharding.Shard == b.Sharding.Shard || a.Identity == b.Identity {
		t.Errorf("two processes on one host got the same shard %q or identity %q", a.Sharding.Shard, a.Identity)
	}
}

func TestShardedWatchReachesTheShardConfig(t *testing.T) {
	o, _ := parse(t, "--sharding", "--sharded-watch")
	c := &config.Config{}
	if err := o.applyIdentity(c); err != nil {
		t.Fatal(err)
	}
	if !c.Sharding.ShardedWatch {
		t.Error("--sharded-watch did not reach the shard's config")
	}
	o, _ = parse(t, "--sharding")
	if err := o.applyIdentity(c); err != nil || c.Sharding.ShardedWatch {
		t.Errorf("without --sharded-watch the shard reads through shard selectors (err %v)", err)
	}
}
