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
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
)

// ReasonInvalidZone: an entry of the annotation's "zones" is not a GCE zone name (it is ignored, the others are
// used), or "*" asks for the tenant's zones and the tenant lists none.
const ReasonInvalidZone = "InvalidNEGZone"

// fixedZones are the zones the Service's NEGs live in whether or not the tenant has Nodes there, sorted: the zones
// its annotation lists ("*" standing for the tenant's spec.gcp.zones), or, without "zones" in the annotation, the
// tenant's spec.gcp.zones. An explicit empty list fixes none.
func (t *Translator) fixedZones(svc *corev1.Service) ([]string, []tenant.Warning) {
	tenantZones := make([]string, 0, len(t.gcp.Zones))
	for _, z := range t.gcp.Zones {
		tenantZones = append(tenantZones, string(z))
	}
	req, err := t.keys.Zones(svc)
	if err != nil || !req.Given {
		// A malformed annotation was reported by ExposedPorts already, and nothing is changed for it.
		return sortedZones(tenantZones), nil
	}
	var warnings []tenant.Warning
	if len(req.Invalid) > 0 {
		warnings = append(warnings, tenant.Warning{Reason: ReasonInvalidZone, Message: fmt.Sprintf(
			"Zones %q in annotation %s are not GCE zone names (such as europe-west1-b) and are ignored; "+
				"the other zones are used", req.Invalid, t.keys.Annotation)})
	}
	zones := req.Zones
	if req.All {
		if len(tenantZones) == 0 {
			warnings = append(warnings, tenant.Warning{Reason: ReasonInvalidZone, Message: fmt.Sprintf(
				"Annotation %s asks for the tenant's zones (\"*\"), but the tenant's ProviderConfig lists none "+
					"(spec.gcp.zones): only the zones of its Nodes get NEGs", t.keys.Annotation)})
		}
		zones = append(slices.Clone(zones), tenantZones...)
	}
	return sortedZones(zones), warnings
}

func sortedZones(zones []string) []string {
	out := slices.Clone(zones)
	slices.Sort(out)
	return slices.Compact(out)
}

// declaredZones returns, for the Service's own cached Translation of the port (this version's, labeled for the
// tenant, not being deleted), the zones it declares the NEG name in and the zones its translator last declared as
// fixed (TranslationNEGFixedZonesAnnotationKey). Any other Translation declares nothing this Service keeps.
func (t *Translator) declaredZones(svc *corev1.Service, port int32, negName string) (declared, fixed []string) {
	obj, exists, err := t.allTranslationIndex.GetByKey(svc.Namespace + "/" + versionedTranslationName(t.version, svc.Name, port))
	if err != nil || !exists {
		return nil, nil
	}
	tr, ok := obj.(*mpv1alpha1.Translation)
	if !ok || ownerUID(tr) != svc.UID || tr.Labels[t.labelKey] != t.tenant || tr.DeletionTimestamp != nil {
		return nil, nil
	}
	for _, r := range tr.Spec.Resources {
		if r.Kind == mpv1alpha1.BackendResourceKindNetworkEndpointGroup && r.Name == negName && r.Zone != "" {
			declared = append(declared, r.Zone)
		}
	}
	return declared, parseFixedZones(tr.Annotations[mpv1alpha1.TranslationNEGFixedZonesAnnotationKey])
}

// negZones are the zones of one Service port's NEGs (decideZones), from the tenant's Nodes, the zones fixed ahead
// and what its Translation declares now.
func (t *Translator) negZones(svc *corev1.Service, port int32, negName string, fixed []string, topo *topology) []string {
	declared, declaredFixed := t.declaredZones(svc, port, negName)
	return decideZones(topo.zones, fixed, declared, declaredFixed)
}

// decideZones is the keep/delete decision for the zones of one Service port's NEGs: every zone with Nodes of the
// tenant, every zone fixed ahead, and every zone whose NEG the Translation declares now unless that zone was
// declared as fixed and is fixed no more. So a NEG whose zone lost its Nodes stays (emptied: inactive) and fills
// again when Nodes return, and one a user fixed ahead goes when the user takes its zone off the list (and no Node
// is there). A NEG goes otherwise only with its Translation: the Service port, the Service or the tenant gone.
// Sorted, each zone once.
func decideZones(nodeZones, fixed, declared, declaredFixed []string) []string {
	zones := append(slices.Clone(nodeZones), fixed...)
	for _, z := range declared {
		if !slices.Contains(declaredFixed, z) {
			zones = append(zones, z)
		}
	}
	return sortedZones(zones)
}

// fixedZonesAnnotation is the value of TranslationNEGFixedZonesAnnotationKey for fixed (sorted), "" for none.
func fixedZonesAnnotation(fixed []string) string { return strings.Join(fixed, ",") }

func parseFixedZones(value string) []string {
	if value == "" {
		return nil
	}
	return strings.Split(value, ",")
}
