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

// Package pushed owns what one tenant's neg pusher has made true in GCE before the Translation's status says so.
//
// The pusher writes a status that only reports (the same NEGs in the same states, Synced still True, a new
// generation and new endpoint counts) once a busy Translation goes quiet, not after every sync: its endpoint changes
// then cost one Translation write each, the spec patch, instead of two. Meanwhile the generation it pushed is held
// here, in the process, where the translator's group commit and the readiness reflector read it with the status
// (Synced): for them a Translation is synced as soon as GCE is. Nothing outside the process reads it: another
// replica, a restart or kubectl waits for the status, which follows within the pusher's report delay.
package pushed

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

// Generations holds, per Translation (namespace/name), the generation the pusher last pushed without reporting it
// in the status yet. A nil *Generations holds nothing: Synced reads the status alone.
type Generations struct {
	mu      sync.RWMutex
	pending map[string]pushedAt
	// listeners hear of each generation pushed ahead of its report; set before the pusher starts.
	listeners []func(*mpv1alpha1.Translation)
}

type pushedAt struct {
	uid        types.UID
	generation int64
}

// New returns an empty Generations. Its map is made by the first generation held: a tenant whose endpoints never
// change (most of them) holds none.
func New() *Generations {
	return &Generations{}
}

// Synced says whether the Translation's current spec is done in GCE: its status says so (negapi.TranslationSynced),
// or the pusher pushed exactly this generation of this object and has not reported it yet. Equal, not at least, for
// the reason negapi.TranslationSynced gives.
func (g *Generations) Synced(tr *mpv1alpha1.Translation) bool {
	if negapi.TranslationSynced(tr) {
		return true
	}
	if g == nil {
		return false
	}
	g.mu.RLock()
	at, ok := g.pending[tr.Namespace+"/"+tr.Name]
	g.mu.RUnlock()
	return ok && at.uid == tr.UID && at.generation == tr.Generation
}

// Pushed records that the pusher made tr's generation true in GCE and leaves its report for later. The listeners
// hear of it, after the record (so that a reader they wake sees it), unless it was recorded already.
func (g *Generations) Pushed(tr *mpv1alpha1.Translation) {
	if g == nil {
		return
	}
	key, at := tr.Namespace+"/"+tr.Name, pushedAt{uid: tr.UID, generation: tr.Generation}
	g.mu.Lock()
	was, had := g.pending[key]
	if g.pending == nil {
		g.pending = map[string]pushedAt{}
	}
	g.pending[key] = at
	listeners := g.listeners
	g.mu.Unlock()
	if had && was == at {
		return
	}
	for _, fn := range listeners {
		fn(tr)
	}
}

// Reported forgets the Translation of key: its status now says what the pusher did (or it failed, or is gone), and
// from then on the status alone answers Synced.
func (g *Generations) Reported(key string) {
	if g == nil {
		return
	}
	g.mu.Lock()
	delete(g.pending, key)
	g.mu.Unlock()
}

// OnPushed registers fn to hear of each generation pushed ahead of its report, with the Translation the pusher
// synced (not to be modified). fn runs on the pusher's worker: it must only enqueue.
func (g *Generations) OnPushed(fn func(*mpv1alpha1.Translation)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.listeners = append(g.listeners, fn)
}

// Len is how many Translations have a generation pushed and not reported.
func (g *Generations) Len() int {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return len(g.pending)
}
