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

package ingresstunnel

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
)

// TestWatchedTunnelsFollowTheIngresses: the tunnels the controller asks the shared informer about are exactly those
// its Ingresses use or wait for: one enters with its first Ingress and leaves with its last.
func TestWatchedTunnelsFollowTheIngresses(t *testing.T) {
	d := newDependencies()
	d.set("demo/before", "main", nil)
	watched := sets.New[string]()
	d.watchTunnelsWith(func(tunnel string, on bool) {
		if on {
			watched.Insert(tunnel)
		} else {
			watched.Delete(tunnel)
		}
	})
	check := func(step string, want ...string) {
		t.Helper()
		if !watched.Equal(sets.New(want...)) {
			t.Errorf("%s: watching %v, want %v", step, sets.List(watched), want)
		}
	}
	check("an Ingress indexed before the watch", "main")
	d.set("demo/a", "main", nil)
	d.set("demo/b", "internal", nil)
	check("two Ingresses on main, one on internal", "main", "internal")
	d.forget("demo/before")
	check("one of main's Ingresses gone", "main", "internal")
	d.set("demo/a", "internal", nil)
	check("main's last Ingress moved", "internal")
	d.forget("demo/a")
	d.forget("demo/b")
	check("every Ingress gone")
}
