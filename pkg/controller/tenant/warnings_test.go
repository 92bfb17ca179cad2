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

package tenant

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
)

// A warning is recorded once while it persists, again once it came back after a fix or after Forget, and a new
// warning beside a persisting one is recorded alone.
func TestWarningsOnceUntilTheyChange(t *testing.T) {
	recorder := record.NewFakeRecorder(100)
	w := NewWarnings(recorder)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}}
	bad := Warning{Reason: "InvalidAnnotation", Message: "not JSON"}
	other := Warning{Reason: "PortNotFound", Message: "no port 80"}

	steps := []struct {
		name   string
		report []Warning
		forget bool
		want   []string
	}{
		{name: "first report", report: []Warning{bad, bad}, want: []string{"Warning InvalidAnnotation not JSON"}},
		{name: "persists", report: []Warning{bad}},
		{name: "a second problem", report: []Warning{bad, other}, want: []string{"Warning PortNotFound no port 80"}},
		{name: "fixed", report: nil},
		{name: "back again", report: []Warning{bad}, want: []string{"Warning InvalidAnnotation not JSON"}},
		{name: "forgotten", forget: true},
		{name: "after forget", report: []Warning{bad}, want: []string{"Warning InvalidAnnotation not JSON"}},
	}
	for _, step := range steps {
		if step.forget {
			w.Forget("ns/web")
		} else {
			w.Report("ns/web", svc, step.report...)
		}
		var got []string
		for len(recorder.Events) > 0 {
			got = append(got, <-recorder.Events)
		}
		if !slices.Equal(got, step.want) {
			t.Errorf("%s: events %q, want %q", step.name, got, step.want)
		}
	}
}
