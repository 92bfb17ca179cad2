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
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestParseZones(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		want        ZoneRequest
		wantErr     string
	}{
		{name: "absent", value: `{"exposed_ports":{"80":{}}}`, want: ZoneRequest{}},
		{name: "null is absent", value: `{"exposed_ports":{"80":{}},"zones":null}`, want: ZoneRequest{}},
		{name: "empty list", value: `{"zones":[]}`, want: ZoneRequest{Given: true}},
		{name: "sorted, each once", value: `{"zones":["europe-west1-c","europe-west1-b","europe-west1-c"]}`,
			want: ZoneRequest{Given: true, Zones: []string{"europe-west1-b", "europe-west1-c"}}},
		{name: "every zone of the tenant", value: `{"zones":["*"]}`, want: ZoneRequest{Given: true, All: true}},
		{name: "* and more", value: `{"zones":["*","us-central1-f"]}`,
			want: ZoneRequest{Given: true, All: true, Zones: []string{"us-central1-f"}}},
		{name: "long region names", value: `{"zones":["northamerica-northeast2-a","me-central2-b"]}`,
			want: ZoneRequest{Given: true, Zones: []string{"me-central2-b", "northamerica-northeast2-a"}}},
		{name: "invalid entries are reported and left out", value: `{"zones":["europe-west1","Europe-West1-b","europe-west1-b","","us-central1-*"]}`,
			want: ZoneRequest{Given: true, Zones: []string{"europe-west1-b"}, Invalid: []string{"europe-west1", "Europe-West1-b", "", "us-central1-*"}}},
		{name: "not a list", value: `{"zones":"europe-west1-b"}`, wantErr: "not valid JSON"},
		{name: "not strings", value: `{"zones":[1]}`, wantErr: "not valid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseZones(tc.value)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				if _, err := ParseAnnotation(tc.value); err == nil {
					t.Errorf("ParseAnnotation accepted %s, which ParseZones refuses", tc.value)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseZones = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestZonesReadsTheKeyTheServiceAsksWith(t *testing.T) {
	k := Keys{Annotation: "example.com/neg", PreviousAnnotation: AnnotationKey}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		AnnotationKey: `{"exposed_ports":{"80":{}},"zones":["europe-west1-d"]}`}}}
	if got, err := k.Zones(svc); err != nil || !reflect.DeepEqual(got.Zones, []string{"europe-west1-d"}) {
		t.Errorf("only the previous key: Zones = %+v, %v; want europe-west1-d", got, err)
	}
	svc.Annotations["example.com/neg"] = `{"exposed_ports":{"80":{}}}`
	if got, err := k.Zones(svc); err != nil || got.Given {
		t.Errorf("both keys: Zones = %+v, %v; want the current key's (none)", got, err)
	}
	if got, err := k.Zones(&corev1.Service{}); err != nil || got.Given {
		t.Errorf("no annotation: Zones = %+v, %v; want none", got, err)
	}
}
