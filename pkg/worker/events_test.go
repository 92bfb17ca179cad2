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

package worker

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestLastState(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}}
	if got := LastState(svc); got != svc {
		t.Errorf("LastState(object) = %v, want the object", got)
	}
	if got := LastState(cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: svc}); got != svc {
		t.Errorf("LastState(tombstone) = %v, want the tombstone's object", got)
	}
}

func TestIsResync(t *testing.T) {
	at := func(rv string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", ResourceVersion: rv}}
	}
	for _, tc := range []struct {
		name     string
		old, new any
		want     bool
	}{
		{"same resourceVersion", at("7"), at("7"), true},
		{"a change", at("7"), at("8"), false},
		{"not an object", "ns/a", at("7"), false},
		{"a tombstone is no object", cache.DeletedFinalStateUnknown{Obj: at("7")}, at("7"), false},
	} {
		if got := IsResync(tc.old, tc.new); got != tc.want {
			t.Errorf("%s: IsResync = %v, want %v", tc.name, got, tc.want)
		}
	}
}
