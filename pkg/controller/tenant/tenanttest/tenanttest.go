// Package tenanttest owns test doubles for the per-tenant controller contract: Informers backed by plain client-go
// informers (so a controller's unit or integration test runs it without the manager) and a ConditionReporter that
// remembers what was reported.
package tenanttest

import (
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

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
