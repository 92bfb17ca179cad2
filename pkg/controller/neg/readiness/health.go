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

package readiness

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	compute "google.golang.org/api/compute/v1"
)

// HealthLister lists a NEG's endpoints with the health its backend services report ((*gceclient.Client) is one).
type HealthLister interface {
	ListEndpointHealths(ctx context.Context, zone, name string) ([]*compute.NetworkEndpointWithHealthStatus, error)
}

// ClientFunc returns the tenant's HealthLister for a GCP project: the pusher's client (pusher.GCEClient), so that
// the reflector's polls take their tokens from the tenant's GCE rate limiter (--gce-qps) as the pusher's calls do.
type ClientFunc func(ctx context.Context, project string) (HealthLister, error)

// polls lists each NEG at most once per round, however many of its Pods wait: the Pods of a rollout wait in the same
// few NEGs, and each would otherwise list them on every retry. A sync that finds a list under way waits for it.
type polls struct {
	clients ClientFunc
	round   time.Duration
	now     func() time.Time

	mu    sync.Mutex
	lists map[negRef]*poll
}

type poll struct {
	done  chan struct{}
	at    time.Time
	items []*compute.NetworkEndpointWithHealthStatus
	err   error
}

// list returns the NEG's endpoints with their health: a list made less than a round ago, the one under way, or a
// new one.
func (p *polls) list(ctx context.Context, neg negRef) ([]*compute.NetworkEndpointWithHealthStatus, error) {
	p.mu.Lock()
	if l := p.lists[neg]; l != nil {
		select {
		case <-l.done:
			if p.now().Sub(l.at) < p.round {
				p.mu.Unlock()
				return l.items, l.err
			}
		default:
			p.mu.Unlock()
			select {
			case <-l.done:
				return l.items, l.err
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	l := &poll{done: make(chan struct{})}
	p.pruneLocked()
	if p.lists == nil {
		p.lists = map[negRef]*poll{}
	}
	p.lists[neg] = l
	p.mu.Unlock()

	l.items, l.err = p.fetch(ctx, neg)
	p.mu.Lock()
	l.at = p.now()
	p.mu.Unlock()
	close(l.done)
	return l.items, l.err
}

// pruneLocked forgets the lists older than a round, so NEGs nobody waits in any more cost nothing.
func (p *polls) pruneLocked() {
	for neg, l := range p.lists {
		select {
		case <-l.done:
			if p.now().Sub(l.at) >= p.round {
				delete(p.lists, neg)
			}
		default:
		}
	}
}

func (p *polls) fetch(ctx context.Context, neg negRef) ([]*compute.NetworkEndpointWithHealthStatus, error) {
	client, err := p.clients(ctx, neg.project)
	if err != nil {
		return nil, fmt.Errorf("GCE client for project %s: %w", neg.project, err)
	}
	items, err := client.ListEndpointHealths(ctx, neg.zone, neg.name)
	if err != nil {
		return nil, fmt.Errorf("listing the endpoints' health of NEG %s in project %s: %w", neg, neg.project, err)
	}
	return items, nil
}

// addresses are the addresses of a Pod's endpoint in a Translation: its IPv4 address, and its IPv6 address when its
// Service is dual-stack.
type addresses struct {
	ipv4, ipv6 string
}

// healthOf is what items report of the endpoint at addresses and port (0: any port): GCE's endpoint with that IPv4
// address and, for a dual-stack endpoint, that IPv6 address too (the endpoint the pusher attached for this spec,
// not one left in another form). No health entry means no backend service health checks the NEG; HEALTHY from any
// backend service is enough.
func healthOf(items []*compute.NetworkEndpointWithHealthStatus, at addresses, port int32) (health, []string) {
	for _, it := range items {
		ep := it.NetworkEndpoint
		if ep == nil || ep.IpAddress != at.ipv4 || (at.ipv6 != "" && !sameIP(ep.Ipv6Address, at.ipv6)) ||
			(port != 0 && ep.Port != 0 && ep.Port != int64(port)) {
			continue
		}
		if len(it.Healths) == 0 {
			return healthNoCheck, nil
		}
		var states []string
		for _, h := range it.Healths {
			if h.HealthState == "HEALTHY" {
				return healthHealthy, nil
			}
			states = append(states, h.HealthState)
		}
		return healthUnhealthy, states
	}
	return healthUnknown, nil
}

// sameIP compares two addresses however each is written (GCE lists IPv6 in RFC 5952 form).
func sameIP(a, b string) bool {
	x, errA := netip.ParseAddr(a)
	y, errB := netip.ParseAddr(b)
	if errA != nil || errB != nil {
		return a == b
	}
	return x == y
}
