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

package translator

import (
	"cmp"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

// backendServiceAsks is what a Service's backend services annotation asks, checked against the tenant's list.
type backendServiceAsks struct {
	// byPort are the allowed memberships of each port, sorted by region and name.
	byPort map[int32][]mpv1alpha1.BackendServiceMembership
	// keep is set when the annotation does not parse: every port keeps the memberships its Translation holds, as a
	// typo in the NEG annotation keeps the NEGs.
	keep     bool
	warnings []tenant.Warning
}

// backendServiceAsks reads the Service's backend services annotation. An entry for a port without a NEG, for a
// backend service of another project, or for one the tenant's ProviderConfig does not list for the Service's
// namespace is left out with a Warning; the NEGs are made all the same.
func (t *Translator) backendServiceAsks(svc *corev1.Service, ports []negapi.ExposedPort) backendServiceAsks {
	asks := backendServiceAsks{byPort: map[int32][]mpv1alpha1.BackendServiceMembership{}}
	requests, asked, err := negapi.BackendServiceRequests(svc)
	if !asked {
		return asks
	}
	if err != nil {
		asks.keep = true
		asks.warnings = append(asks.warnings, tenant.Warning{Reason: negapi.ReasonInvalidBackendServices,
			Message: err.Error() + "; the NEGs stay in the backend services they are in"})
		return asks
	}
	key := negapi.BackendServicesAnnotation(svc)
	for _, req := range requests {
		m := req.Membership
		switch {
		case !slices.ContainsFunc(ports, func(p negapi.ExposedPort) bool { return p.Port == req.Port }):
			asks.warnings = append(asks.warnings, tenant.Warning{Reason: negapi.ReasonInvalidBackendServices, Message: fmt.Sprintf(
				"Port %d in annotation %s has no NEG (it is not in %s's exposed_ports); backend service %s is not joined",
				req.Port, key, t.keys.Annotation, negapi.DescribeBackendService(m))})
		case req.Project != "" && req.Project != t.gcp.ProjectID:
			asks.warnings = append(asks.warnings, tenant.Warning{Reason: negapi.ReasonBackendServiceNotAllowed, Message: fmt.Sprintf(
				"Backend service %s of port %d is in project %s, not in the tenant's project %s; it is not joined",
				negapi.DescribeBackendService(m), req.Port, req.Project, t.gcp.ProjectID)})
		case !negapi.AllowedBackendService(t.gcp.BackendServices, svc.Namespace, m):
			asks.warnings = append(asks.warnings, tenant.Warning{Reason: negapi.ReasonBackendServiceNotAllowed, Message: fmt.Sprintf(
				"Backend service %s of port %d is not one the tenant's ProviderConfig allows namespace %s to join "+
					"(spec.gcp.backendServices); it is not joined", negapi.DescribeBackendService(m), req.Port, svc.Namespace)})
		default:
			asks.byPort[req.Port] = append(asks.byPort[req.Port], m)
		}
	}
	for _, ms := range asks.byPort {
		slices.SortFunc(ms, func(a, b mpv1alpha1.BackendServiceMembership) int {
			return cmp.Or(cmp.Compare(a.Region, b.Region), cmp.Compare(a.Name, b.Name))
		})
	}
	return asks
}

// setBackendServices puts the port's memberships in each NEG of its Translation: those asked, or, where the
// annotation does not parse, those the Translation in the cache holds.
func (t *Translator) setBackendServices(tr *mpv1alpha1.Translation, port int32, asks backendServiceAsks) {
	memberships := asks.byPort[port]
	if asks.keep {
		memberships = t.cachedMemberships(tr.Namespace, tr.Name)
	}
	if len(memberships) == 0 {
		return
	}
	for i := range tr.Spec.Resources {
		if params := tr.Spec.Resources[i].NetworkEndpointGroup; params != nil {
			params.BackendServices = slices.Clone(memberships)
		}
	}
}

func (t *Translator) cachedMemberships(namespace, name string) []mpv1alpha1.BackendServiceMembership {
	obj, exists, err := t.allTranslationIndex.GetByKey(namespace + "/" + name)
	if err != nil || !exists {
		return nil
	}
	tr, ok := obj.(*mpv1alpha1.Translation)
	if !ok {
		return nil
	}
	for _, r := range tr.Spec.Resources {
		if r.NetworkEndpointGroup != nil && len(r.NetworkEndpointGroup.BackendServices) > 0 {
			return r.NetworkEndpointGroup.BackendServices
		}
	}
	return nil
}
