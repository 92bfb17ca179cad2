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
	"encoding/json"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

// negID is the name and ownership marker of the NEGs of one Service port, and whether the name is generated (not
// the user's custom name), which the Translation then records.
type negID struct {
	name, description string
	generated         bool
}

// negIdentity returns the name and marker of the NEGs of one Service port. A NEG recorded in the Service's own
// Translation of the port keeps its name and marker, whichever build chose them, as long as its marker names this
// cluster, tenant and Service port (recordedNEG): GCE can neither rename a NEG nor change its description, users
// attach standalone NEGs to their own backend services, and another build (an older one, with the legacy identity;
// a newer one, with another layout of the name that this build cannot compute) may have chosen it. A custom name is
// always the one the annotation asks for; a generated name is kept only while the Translation records it as
// generated, so a former custom name is not mistaken for one. Without such a record it is this build's own choice.
func (t *Translator) negIdentity(svc *corev1.Service, p negapi.ExposedPort) negID {
	own := negID{name: p.CustomName, description: negDescription(t.cluster, t.tenant, svc.Namespace, svc.Name, string(svc.UID), p.Port)}
	if p.CustomName == "" {
		own.name, own.generated = negName(t.version, t.cluster, t.tenant, svc.Namespace, svc.Name, p.Port), true
	}
	recorded, ok := t.recordedNEG(svc, p.Port, own.description)
	switch {
	case !ok:
		return own
	case !own.generated && recorded.name == p.CustomName:
		return negID{name: recorded.name, description: recorded.description}
	case own.generated && recorded.generated:
		return recorded
	}
	return own
}

// recordedNEG returns the NEG that the Service's own cached Translation of the port declares, when its marker names
// this cluster (its UID, or the legacy identity without one), tenant and Service port. generated says that the
// Translation records the name as generated: in its annotation, or, for a Translation made before the annotation
// existed, because it is the name this build generates for this or for the legacy identity. ownMarker is this
// build's marker of the port: a NEG carrying it needs no parsing (the common case, on every sync).
func (t *Translator) recordedNEG(svc *corev1.Service, port int32, ownMarker string) (negID, bool) {
	obj, exists, err := t.allTranslationIndex.GetByKey(svc.Namespace + "/" + versionedTranslationName(t.version, svc.Name, port))
	if err != nil || !exists {
		return negID{}, false
	}
	tr, ok := obj.(*mpv1alpha1.Translation)
	if !ok || ownerUID(tr) != svc.UID {
		return negID{}, false
	}
	var id negID
	for _, r := range tr.Spec.Resources {
		if r.Kind != mpv1alpha1.BackendResourceKindNetworkEndpointGroup {
			continue
		}
		if id.name != "" && (r.Name != id.name || r.Description != id.description) {
			return negID{}, false // not one NEG per zone of one name: not a layout this rule knows
		}
		id.name, id.description = r.Name, r.Description
	}
	if id.name == "" || (id.description != ownMarker && !t.marksServicePort(id.description, svc, port)) {
		return negID{}, false
	}
	if recorded, annotated := tr.Annotations[mpv1alpha1.TranslationGeneratedNEGNameAnnotationKey]; annotated {
		id.generated = recorded == id.name
	} else {
		id.generated = id.name == negName(t.version, t.cluster, t.tenant, svc.Namespace, svc.Name, port) ||
			id.name == negName(t.version, t.cluster.legacy(), t.tenant, svc.Namespace, svc.Name, port)
	}
	return id, true
}

// marksServicePort says whether a NEG marker names this cluster (its UID, or none: the legacy identity), this tenant
// and this Service port (the Service's UID, which no other cluster's Service has). Fields this build does not know
// are ignored: a newer build may mark its NEGs with more.
func (t *Translator) marksServicePort(description string, svc *corev1.Service, port int32) bool {
	var m negDescriptionFields
	if err := json.Unmarshal([]byte(description), &m); err != nil {
		return false
	}
	return m.ManagedBy == managedBy && m.Cluster == t.cluster.name && (m.ClusterUID == t.cluster.uid || m.ClusterUID == "") &&
		m.Tenant == t.tenant && m.Namespace == svc.Namespace && m.Service == svc.Name && m.UID == string(svc.UID) &&
		m.Port == strconv.Itoa(int(port))
}
