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

package pusher

import (
	"net/netip"
	"strings"
	"sync"
	"time"

	compute "google.golang.org/api/compute/v1"
)

// negKey names one zonal NEG of one of the tenant's projects.
type negKey struct {
	project, zone, name string
}

// endpointKey identifies an endpoint the way a detach must name it: instance, IP and port (the NEG's default port
// filled in), and its IPv6 address: an endpoint that gains or loses one (its Service turned dual-stack, or back) is
// another endpoint, detached in its old form and attached in its new one.
type endpointKey struct {
	instance, ip, ipv6 string
	port               int64
}

// negEntry is what the pusher knows of one NEG in GCE. Its mutex is held for the whole of a sync step on the NEG,
// so two workers never act on one NEG at once.
type negEntry struct {
	mu sync.Mutex
	// users counts the callers holding mu or waiting for it, and dropped says that the entry was forgotten while it
	// had users; both are guarded by negCache.mu. An entry leaves the cache only once it has no user: dropped at
	// once, a caller still waiting for mu would act on an entry that a later caller no longer finds, and both would
	// act on the NEG at once.
	users   int
	dropped bool
	// known is false until GCE has been read (or written) since the entry was made or invalidated.
	known       bool
	exists      bool
	description string
	// owned: the NEG carried the marker of the Translation that used it last (or we created it).
	owned       bool
	defaultPort int64
	// id and selfLink are GCE's for the NEG, for the status (0 and "" until a read or the insert named them).
	id       uint64
	selfLink string
	// endpoints is GCE's endpoint set, as GCE lists it (instance as a name).
	endpoints map[endpointKey]*compute.NetworkEndpoint
	// pendingOperation is an operation of a call on this NEG whose wait failed: it may still change the NEG, so it
	// is waited for before the NEG is read or changed again.
	pendingOperation string
	// observed is when GCE was last read for this NEG; a verify period forces a re-read after it.
	observed time.Time
}

// invalidate makes the next use read GCE again: used after any error that may mean the entry is wrong.
func (e *negEntry) invalidate() {
	e.known = false
	e.exists = false
	e.description = ""
	e.owned = false
	e.defaultPort = 0
	e.id, e.selfLink = 0, ""
	e.endpoints = nil
	e.observed = time.Time{}
}

// negCache holds the entries of the NEGs of one tenant, and which Translation (by key) each was last used by, so
// the entries of a Translation that is gone can be dropped.
type negCache struct {
	mu            sync.Mutex
	entries       map[negKey]*negEntry
	byTranslation map[string]map[negKey]struct{}
	// beforeWait, when set (tests), is called by lock after it counted its caller as a user and before it waits for
	// the entry's mutex.
	beforeWait func(negKey)
}

func newNEGCache() *negCache {
	return &negCache{}
}

// lock returns the NEG's entry, locked, recording the Translation of key as its user.
func (c *negCache) lock(key string, neg negKey) *negEntry {
	c.mu.Lock()
	if c.entries == nil {
		// Made by the first NEG: most tenants have none.
		c.entries, c.byTranslation = map[negKey]*negEntry{}, map[string]map[negKey]struct{}{}
	}
	e, ok := c.entries[neg]
	if !ok {
		e = &negEntry{}
		c.entries[neg] = e
	}
	e.users++
	// A caller wants the entry again: it stays.
	e.dropped = false
	used := c.byTranslation[key]
	if used == nil {
		used = map[negKey]struct{}{}
		c.byTranslation[key] = used
	}
	used[neg] = struct{}{}
	c.mu.Unlock()
	if c.beforeWait != nil {
		c.beforeWait(neg)
	}
	e.mu.Lock()
	return e
}

// unlock releases an entry that lock returned; an entry forgotten meanwhile leaves the cache with its last user.
func (c *negCache) unlock(neg negKey, e *negEntry) {
	e.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	e.users--
	if e.users == 0 && e.dropped && c.entries[neg] == e {
		delete(c.entries, neg)
	}
}

// forget drops one NEG's entry (once its users are done).
func (c *negCache) forget(key string, neg negKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if used := c.byTranslation[key]; used != nil {
		delete(used, neg)
		if len(used) == 0 {
			delete(c.byTranslation, key)
		}
	}
	c.drop(neg)
}

// forgetTranslation drops the entries of every NEG the Translation of key used (each once its users are done).
func (c *negCache) forgetTranslation(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for neg := range c.byTranslation[key] {
		c.drop(neg)
	}
	delete(c.byTranslation, key)
}

// drop removes the NEG's entry now if nobody holds or waits for it, else marks it for its last user; c.mu held.
func (c *negCache) drop(neg negKey) {
	e := c.entries[neg]
	switch {
	case e == nil:
	case e.users == 0:
		delete(c.entries, neg)
	default:
		e.dropped = true
	}
}

// len is the number of cached NEGs (tests).
func (c *negCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// keyOf returns the identity of an endpoint as listed by GCE or as desired, with defaultPort for a missing port.
func keyOf(ep *compute.NetworkEndpoint, defaultPort int64) endpointKey {
	port := ep.Port
	if port == 0 {
		port = defaultPort
	}
	return endpointKey{instance: shortName(ep.Instance), ip: ep.IpAddress, ipv6: canonicalIP(ep.Ipv6Address), port: port}
}

// canonicalIP writes an IPv6 address as GCE lists it (RFC 5952), so a desired address written otherwise in an
// EndpointSlice is not taken for another one; what does not parse is left as it is, for GCE to refuse.
func canonicalIP(s string) string {
	if ip, err := netip.ParseAddr(s); err == nil {
		return ip.String()
	}
	return s
}

// shortName turns a resource URL or path into its last segment; GCE accepts an instance as either.
func shortName(s string) string {
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		return s[i+1:]
	}
	return s
}
