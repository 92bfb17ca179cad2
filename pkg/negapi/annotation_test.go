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

package negapi

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestParseAnnotation(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		want        []ExposedPort
		wantErr     string
	}{
		{name: "one port", value: `{"exposed_ports":{"80":{}}}`, want: []ExposedPort{{Port: 80}}},
		{name: "sorted, custom name", value: `{"exposed_ports":{"443":{"name":"web-https"},"80":{}}}`,
			want: []ExposedPort{{Port: 80}, {Port: 443, CustomName: "web-https"}}},
		{name: "ingress only", value: `{"ingress":true}`, want: []ExposedPort{}},
		{name: "ingress and ports", value: `{"ingress":true,"exposed_ports":{"8080":{}}}`, want: []ExposedPort{{Port: 8080}}},
		{name: "unknown fields ignored", value: `{"exposed_ports":{"80":{"foo":1}},"zones":["a"]}`, want: []ExposedPort{{Port: 80}}},
		{name: "empty object", value: `{}`, want: []ExposedPort{}},
		{name: "not JSON", value: `exposed_ports: 80`, wantErr: "not valid JSON"},
		{name: "truncated", value: `{"exposed_ports":{"80":{}}`, wantErr: "not valid JSON"},
		{name: "ports as a list", value: `{"exposed_ports":[80]}`, wantErr: "not valid JSON"},
		{name: "port not a number", value: `{"exposed_ports":{"http":{}}}`, wantErr: `exposed port "http"`},
		{name: "port zero", value: `{"exposed_ports":{"0":{}}}`, wantErr: `exposed port "0"`},
		{name: "port too big", value: `{"exposed_ports":{"65536":{}}}`, wantErr: `exposed port "65536"`},
		{name: "leading zero", value: `{"exposed_ports":{"080":{}}}`, wantErr: `exposed port "080"`},
		{name: "bad custom name", value: `{"exposed_ports":{"80":{"name":"Web_1"}}}`, wantErr: `NEG name "Web_1"`},
		{name: "custom name too long", value: `{"exposed_ports":{"80":{"name":"` + strings.Repeat("a", 64) + `"}}}`, wantErr: "not a valid GCE name"},
		{name: "duplicate custom name", value: `{"exposed_ports":{"80":{"name":"x"},"81":{"name":"x"}}}`, wantErr: `NEG name "x" is given to ports`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseAnnotation(tc.value)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				if got != nil {
					t.Errorf("a partial result came with the error: %v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// FuzzParseAnnotation checks that any value either fails or yields ports a Service can have, in ascending order,
// without duplicates, with valid GCE names; and that the ports survive a round trip through the canonical form.
func FuzzParseAnnotation(f *testing.F) {
	for _, seed := range []string{`{"exposed_ports":{"80":{}}}`, `{"exposed_ports":{"443":{"name":"a-b"},"80":{}}}`,
		`{"ingress":true}`, `{}`, `null`, `{"exposed_ports":{"-1":{}}}`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		ports, err := ParseAnnotation(value)
		if err != nil {
			return
		}
		canonical := `{"exposed_ports":{`
		for i, p := range ports {
			if p.Port < 1 || p.Port > 65535 {
				t.Fatalf("port %d out of range from %q", p.Port, value)
			}
			if i > 0 && ports[i-1].Port >= p.Port {
				t.Fatalf("ports not strictly ascending from %q: %v", value, ports)
			}
			if p.CustomName != "" && (!IsGCEName(p.CustomName) || len(p.CustomName) > 63) {
				t.Fatalf("invalid custom name %q from %q", p.CustomName, value)
			}
			if i > 0 {
				canonical += ","
			}
			canonical += `"` + strconv.Itoa(int(p.Port)) + `":{"name":"` + p.CustomName + `"}`
		}
		canonical += "}}"
		again, err := ParseAnnotation(canonical)
		if err != nil || !reflect.DeepEqual(again, ports) {
			t.Fatalf("round trip of %q via %q: %v, %v", value, canonical, again, err)
		}
	})
}
