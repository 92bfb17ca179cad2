//go:build integration

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

package e2e

import (
	"context"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// latencyProbe measures, for every endpoint a manager pass adds, the time from its EndpointSlice change (the trigger
// time the writer puts in the slice's annotation, as the EndpointSlice controller does) to the endpoint attached in
// the fake GCE of this process, which it polls every 10 ms (in memory, no API request).
type latencyProbe struct {
	c *e2eChurn

	mu sync.Mutex
	// pending are the added endpoints not yet seen in the fake GCE, by Service.
	pending map[*churnService][]addedEndpoint
	seen    []time.Duration
}

type addedEndpoint struct {
	ep      endpoint
	trigger time.Time
}

func newLatencyProbe(c *e2eChurn) *latencyProbe {
	return &latencyProbe{c: c, pending: map[*churnService][]addedEndpoint{}}
}

// added records an endpoint whose slice change was triggered at trigger.
func (p *latencyProbe) added(svc *churnService, ep endpoint, trigger time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending[svc] = append(p.pending[svc], addedEndpoint{ep: ep, trigger: trigger})
}

// run polls the fake GCE until ctx ends.
func (p *latencyProbe) run(ctx context.Context) {
	// A measurement's sampling, not a wait for a condition.
	_ = wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		p.poll(time.Now())
		return false, nil
	})
}

func (p *latencyProbe) poll(now time.Time) {
	p.mu.Lock()
	services := make(map[*churnService][]addedEndpoint, len(p.pending))
	for svc, eps := range p.pending {
		services[svc] = slices.Clone(eps)
	}
	p.mu.Unlock()
	for svc, eps := range services {
		attached := map[string]bool{}
		for zi, zone := range zones {
			if !slices.ContainsFunc(eps, func(a addedEndpoint) bool { return a.ep.zone == zi }) {
				continue
			}
			got, _ := p.c.gce.Endpoints(p.c.w.project, zone, svc.neg)
			for _, ep := range got {
				attached[ep.IpAddress] = true
			}
		}
		p.mu.Lock()
		left := p.pending[svc][:0]
		for _, a := range p.pending[svc] {
			if attached[a.ep.ip] {
				p.seen = append(p.seen, now.Sub(a.trigger))
				continue
			}
			left = append(left, a)
		}
		if len(left) == 0 {
			delete(p.pending, svc)
		} else {
			p.pending[svc] = left
		}
		p.mu.Unlock()
	}
}

// latencies are the pass's times from slice change to attached, sorted, and how many endpoints were never seen.
type latencies struct {
	sorted []time.Duration
	missed int
}

func (p *latencyProbe) result() latencies {
	p.mu.Lock()
	defer p.mu.Unlock()
	missed := 0
	for _, eps := range p.pending {
		missed += len(eps)
	}
	return latencies{sorted: slices.Sorted(slices.Values(p.seen)), missed: missed}
}

// quantile is the q-quantile (nearest rank) of the latencies; 0 without any.
func (l latencies) quantile(q float64) time.Duration {
	if len(l.sorted) == 0 {
		return 0
	}
	i := int(float64(len(l.sorted))*q+0.999999) - 1
	return l.sorted[min(max(i, 0), len(l.sorted)-1)]
}
