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

// Package tenanttest owns test doubles for the per-tenant controller contract: Informers backed by plain client-go
// informers (so a controller's unit or integration test runs it without the manager) and a ConditionReporter that
// remembers what was reported, and an EventRecorder that remembers Events.
package tenanttest

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/multiproject/multiproject-controller-manager/pkg/claims"
	"github.com/multiproject/multiproject-controller-manager/pkg/tenancy"
)

// Informers serves the same plain informers for Informer and Shared. Tests that use it give the controller only
// the tenant's objects, or check that the controller ignores others.
type Informers map[schema.GroupVersionResource]cache.SharedIndexInformer

// Informer returns the informer registered for resource.
func (i Informers) Informer(resource schema.GroupVersionResource) (cache.SharedIndexInformer, error) {
	if inf, ok := i[resource]; ok {
		return inf, nil
	}
	return nil, fmt.Errorf("tenanttest: no informer for %s", resource)
}

// Shared returns the informer registered for resource.
func (i Informers) Shared(resource schema.GroupVersionResource) (cache.SharedIndexInformer, error) {
	return i.Informer(resource)
}

// SharedGetter is the part of tenant.Informers a claims.Service reads from.
type SharedGetter interface {
	Shared(resource schema.GroupVersionResource) (cache.SharedIndexInformer, error)
}

// Claims returns a claims.Service over the shared informers of informers, deciding in memory, as the command builds
// one per run for every tenant's controllers; it is closed when the test ends. Tenants that must meet in the
// claims share one.
func Claims(t testing.TB, informers SharedGetter) *claims.Service {
	set := claims.NewService(claims.ServiceConfig{Informers: func(gvr schema.GroupVersionResource) (cache.SharedIndexInformer, bool) {
		inf, err := informers.Shared(gvr)
		return inf, err == nil
	}})
	t.Cleanup(func() {
		if err := set.Close(); err != nil {
			t.Errorf("closing the claims: %v", err)
		}
	})
	return set
}

// Condition is one reported condition.
type Condition struct {
	Status  metav1.ConditionStatus
	Reason  string
	Message string
}

// Conditions records every report; Last returns the latest.
type Conditions struct {
	mu      sync.Mutex
	reports []Condition
}

// Report records a condition.
func (c *Conditions) Report(status metav1.ConditionStatus, reason, message string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reports = append(c.reports, Condition{Status: status, Reason: reason, Message: message})
}

// Last returns the latest report and whether there was one.
func (c *Conditions) Last() (Condition, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.reports) == 0 {
		return Condition{}, false
	}
	return c.reports[len(c.reports)-1], true
}

// TenantInformers gives a controller the tenant's real filtered views from pkg/tenancy (Informer) and unfiltered
// shared informers (Shared), as the manager does, for integration tests that run one controller without the
// manager.
type TenantInformers struct {
	Views interface {
		Informer(resource schema.GroupVersionResource) (*tenancy.View, error)
	}
	SharedInformers map[schema.GroupVersionResource]cache.SharedIndexInformer
}

// Informer returns the tenant's view of resource.
func (t TenantInformers) Informer(resource schema.GroupVersionResource) (cache.SharedIndexInformer, error) {
	return t.Views.Informer(resource)
}

// Shared returns the shared informer registered for resource.
func (t TenantInformers) Shared(resource schema.GroupVersionResource) (cache.SharedIndexInformer, error) {
	if inf, ok := t.SharedInformers[resource]; ok {
		return inf, nil
	}
	return nil, fmt.Errorf("tenanttest: no shared informer for %s", resource)
}

// Events is an EventRecorder that remembers every Event as "type reason message". Unlike client-go's FakeRecorder
// it never blocks, however many Events a test causes.
type Events struct {
	mu     sync.Mutex
	events []string
}

// Event records one Event.
func (r *Events) Event(_ runtime.Object, eventtype, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, eventtype+" "+reason+" "+message)
}

// Eventf records one Event.
func (r *Events) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	r.Event(obj, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

// AnnotatedEventf records one Event; the annotations are dropped.
func (r *Events) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventtype, reason, messageFmt string, args ...any) {
	r.Eventf(obj, eventtype, reason, messageFmt, args...)
}

// With returns the recorded Events that start with prefix (e.g. "Warning" or "Warning NameCollision").
func (r *Events) With(prefix string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		if strings.HasPrefix(e, prefix) {
			out = append(out, e)
		}
	}
	return out
}

// Count returns how many Events of the type and reason were recorded.
func (r *Events) Count(eventtype, reason string) int {
	return len(r.With(eventtype + " " + reason + " "))
}
