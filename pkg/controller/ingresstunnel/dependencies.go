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
	"sync"

	"k8s.io/apimachinery/pkg/util/sets"
)

// dependencies remembers, from the last sync of each Ingress, which tunnel it uses or waits for and which Services
// resolve its named ports, so that a tunnel or Service event enqueues exactly those Ingresses without listing any.
type dependencies struct {
	mu        sync.Mutex
	byTunnel  map[string]sets.Set[string] // tunnel name → Ingress keys
	byService map[string]sets.Set[string] // Service key → Ingress keys
	ingresses map[string]ingressDependencies
	// watchTunnel, if set, is told when a tunnel enters byTunnel (true) and when its last Ingress leaves (false),
	// under the lock, so the tunnel events it asks for never lag the index.
	watchTunnel func(tunnel string, watched bool)
}

type ingressDependencies struct {
	tunnel   string
	services sets.Set[string]
}

func newDependencies() *dependencies {
	return &dependencies{}
}

// set records the dependencies of an Ingress, replacing earlier ones. A sync calls it before it looks the tunnel and
// the Services up, so an object that appears after a miss always finds the Ingress here.
func (d *dependencies) set(ingress, tunnel string, services sets.Set[string]) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.forgetLocked(ingress)
	if d.ingresses == nil {
		// Made by the first Ingress: most tenants have none.
		d.byTunnel, d.byService, d.ingresses = map[string]sets.Set[string]{}, map[string]sets.Set[string]{}, map[string]ingressDependencies{}
	}
	d.ingresses[ingress] = ingressDependencies{tunnel: tunnel, services: services}
	if tunnel != "" && add(d.byTunnel, tunnel, ingress) && d.watchTunnel != nil {
		d.watchTunnel(tunnel, true)
	}
	for svc := range services {
		add(d.byService, svc, ingress)
	}
}

// forget drops an Ingress that is gone or no longer managed.
func (d *dependencies) forget(ingress string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.forgetLocked(ingress)
}

func (d *dependencies) forgetLocked(ingress string) {
	old, ok := d.ingresses[ingress]
	if !ok {
		return
	}
	delete(d.ingresses, ingress)
	if remove(d.byTunnel, old.tunnel, ingress) && d.watchTunnel != nil {
		d.watchTunnel(old.tunnel, false)
	}
	for svc := range old.services {
		remove(d.byService, svc, ingress)
	}
}

// watchTunnelsWith sets watchTunnel; the tunnels already indexed are reported to it at once.
func (d *dependencies) watchTunnelsWith(watch func(tunnel string, watched bool)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.watchTunnel = watch
	for tunnel := range d.byTunnel {
		watch(tunnel, true)
	}
}

func (d *dependencies) usersOfTunnel(tunnel string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return sets.List(d.byTunnel[tunnel])
}

func (d *dependencies) usersOfService(service string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return sets.List(d.byService[service])
}

// size is the number of Ingresses tracked, for tests.
func (d *dependencies) size() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.ingresses)
}

// add files ingress under key and reports whether key is new to the index.
func add(index map[string]sets.Set[string], key, ingress string) bool {
	s, ok := index[key]
	if !ok {
		s = sets.New[string]()
		index[key] = s
	}
	s.Insert(ingress)
	return !ok
}

// remove takes ingress out of key and reports whether that emptied key out of the index.
func remove(index map[string]sets.Set[string], key, ingress string) bool {
	s, ok := index[key]
	if !ok {
		return false
	}
	s.Delete(ingress)
	if s.Len() == 0 {
		delete(index, key)
		return true
	}
	return false
}
