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

package framework

import (
	"bytes"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"
)

// APICalls counts the requests sent through a rest.Config it wraps, by "<verb> <resource>[/<subresource>]", with
// the verbs of the API (get, list, watch, create, update, patch, delete); discovery requests count as
// "get discovery".
type APICalls struct {
	mu     sync.Mutex
	counts map[string]int
}

// Wrap is for rest.Config.Wrap.
func (c *APICalls) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		c.mu.Lock()
		if c.counts == nil {
			c.counts = map[string]int{}
		}
		kind := RequestKind(req)
		c.counts[kind]++
		c.mu.Unlock()
		resp, err := rt.RoundTrip(req)
		if err == nil && resp.StatusCode == http.StatusConflict {
			c.mu.Lock()
			c.counts[ConflictPrefix+kind]++
			c.mu.Unlock()
		}
		if err == nil && (req.Method == http.MethodPut || req.Method == http.MethodPatch) && resp.StatusCode < 300 {
			// The answer's Content-Type does not say it was converted; the body's kind does. Writes' answers are
			// one object each, so reading them here costs little.
			body, readErr := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(body))
			if readErr == nil && bytes.Contains(body, []byte(`"kind":"PartialObjectMetadata"`)) {
				c.mu.Lock()
				c.counts[MetadataAnswerPrefix+kind]++
				c.mu.Unlock()
			}
		}
		return resp, err
	})
}

// ConflictPrefix marks, in APICalls' counts, the requests answered 409 Conflict (a write based on a stale object,
// or a create of a name that exists).
const ConflictPrefix = "409 "

// MetadataAnswerPrefix marks, in APICalls' counts, the requests the API server answered with the object's
// PartialObjectMetadata only.
const MetadataAnswerPrefix = "metadata-only "

// MetadataAnswersSince returns the requests answered with metadata only after before was taken, by kind.
func (c *APICalls) MetadataAnswersSince(before map[string]int) map[string]int {
	out := map[string]int{}
	for kind, n := range c.Snapshot() {
		if rest, ok := strings.CutPrefix(kind, MetadataAnswerPrefix); ok && n > before[kind] {
			out[rest] = n - before[kind]
		}
	}
	return out
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// Snapshot returns the counts so far.
func (c *APICalls) Snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

// Since returns the requests made after before was taken, leaving out watches (long-running, started once per
// informer) and discovery (the informer set's periodic look for optional APIs): neither is a cost of a change.
func (c *APICalls) Since(before map[string]int) map[string]int {
	out := map[string]int{}
	for kind, n := range c.Snapshot() {
		if d := n - before[kind]; d > 0 && !strings.HasPrefix(kind, "watch ") && kind != "get discovery" &&
			!strings.HasPrefix(kind, ConflictPrefix) && !strings.HasPrefix(kind, MetadataAnswerPrefix) {
			out[kind] = d
		}
	}
	return out
}

// ConflictsSince returns the requests answered 409 Conflict after before was taken.
func (c *APICalls) ConflictsSince(before map[string]int) int {
	n := 0
	for kind, count := range c.Snapshot() {
		if strings.HasPrefix(kind, ConflictPrefix) {
			n += count - before[kind]
		}
	}
	return n
}

// Reads sums the get and list requests of counts.
func Reads(counts map[string]int) int {
	n := 0
	for kind, c := range counts {
		if strings.HasPrefix(kind, "get ") || strings.HasPrefix(kind, "list ") {
			n += c
		}
	}
	return n
}

// RequestKind names a request as "<verb> <resource>[/<subresource>]" from its method and path:
// /api/v1[/namespaces/<ns>]/<resource>[/<name>[/<sub>]] or /apis/<group>/<version>[/namespaces/<ns>]/<resource>...
func RequestKind(req *http.Request) string {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	var rest []string
	switch {
	case len(parts) > 2 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) > 3 && parts[0] == "apis":
		rest = parts[3:]
	default:
		return "get discovery"
	}
	if len(rest) >= 3 && rest[0] == "namespaces" {
		rest = rest[2:]
	}
	resource, named := rest[0], len(rest) > 1
	if len(rest) > 2 {
		resource += "/" + rest[2]
	}
	verb := map[string]string{http.MethodPost: "create", http.MethodPut: "update", http.MethodPatch: "patch",
		http.MethodDelete: "delete"}[req.Method]
	if req.Method == http.MethodGet {
		switch {
		case req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1":
			verb = "watch"
		case named:
			verb = "get"
		default:
			verb = "list"
		}
	}
	if verb == "" {
		verb = strings.ToLower(req.Method)
	}
	return verb + " " + resource
}
