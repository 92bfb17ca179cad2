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

package translator

import (
	"testing"
)

func TestNEGStatusFormatIsIngressGCEs(t *testing.T) {
	s := newNEGStatus(map[int32]string{443: "neg-b", 80: "neg-a"}, []string{"europe-west1-b", "europe-west1-c"})
	const want = `{"network_endpoint_groups":{"443":"neg-b","80":"neg-a"},"zones":["europe-west1-b","europe-west1-c"]}`
	if got := s.encode(); got != want {
		t.Errorf("encode = %s, want %s", got, want)
	}
}

func TestStatusNeedsWrite(t *testing.T) {
	want := newNEGStatus(map[int32]string{80: "neg-a"}, []string{"z1"})
	for _, tc := range []struct {
		name    string
		current string
		present bool
		want    *negStatus
		write   bool
	}{
		{"absent and not wanted", "", false, nil, false},
		{"present and not wanted", want.encode(), true, nil, true},
		{"absent and wanted", "", false, &want, true},
		{"equal", want.encode(), true, &want, false},
		{"equal with other spacing and key order", `{ "zones": ["z1"], "network_endpoint_groups": {"80": "neg-a"} }`, true, &want, false},
		{"other zones", `{"network_endpoint_groups":{"80":"neg-a"},"zones":["z1","z2"]}`, true, &want, true},
		{"other name", `{"network_endpoint_groups":{"80":"neg-b"},"zones":["z1"]}`, true, &want, true},
		{"garbage", `not json`, true, &want, true},
	} {
		if got := statusNeedsWrite(tc.current, tc.present, tc.want); got != tc.write {
			t.Errorf("%s: statusNeedsWrite = %v, want %v", tc.name, got, tc.write)
		}
	}
}
