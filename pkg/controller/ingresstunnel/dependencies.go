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
}

type ingressDependencies struct {
	tunnel   string
	services sets.Set[string]
}

func newDependencies() *dependencies {
	return &dependencies{
		byTunnel:  map[string]sets.Set[string]{},
		byService: map[string]sets.Set[string]{},
		ingresses: map[string]ingressDependencies{},
	}
}

// set records the dependencies of an Ingress, replacing earlier ones. A sync calls it before it looks the tunnel and
// the Services up, so an object that appears after a miss always finds the Ingress here.
func (d *dependencies) set(ingress, tunnel string, services sets.Set[string]) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.forgetLocked(ingress)
	d.ingresses[ingress] = ingressDependencies{tunnel: tunnel, services: services}
	if tunnel != "" {
		add(d.byTunnel, tunnel, ingress)
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
	remove(d.byTunnel, old.tunnel, ingress)
	for svc := range old.services {
		remove(d.byService, svc, ingress)
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

func add(index map[string]sets.Set[string], key, ingress string) {
	s, ok := index[key]
	if !ok {
		s = sets.New[string]()
		index[key] = s
	}
	s.Insert(ingress)
}

func remove(index map[string]sets.Set[string], key, ingress string) {
	s, ok := index[key]
	if !ok {
		return
	}
	s.Delete(ingress)
	if s.Len() == 0 {
		delete(index, key)
	}
}
