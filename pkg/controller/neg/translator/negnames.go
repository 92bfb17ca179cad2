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
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/claims"
	"github.com/multiproject/multiproject-controller-manager/pkg/controller/tenant"
	"github.com/multiproject/multiproject-controller-manager/pkg/informerset"
	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

// ReasonNameConflict: a custom NEG name of the Service is already used in the tenant's GCP project by another
// Service (any namespace, any tenant of that project), which claimed it first; the port gets no Translation until
// that Service lets the name go.
const ReasonNameConflict = "NEGNameConflict"

// claimKind names the claimants of custom NEG names in the claims registry, in Event messages and in the claim
// records (their names and kind label, "service", as before names were held per project: a record's name hashes the
// project-qualified key, so it is never an older build's record, and the label needs no new value).
const claimKind = "Service"

// claimantOf is the Service as a claimant of NEG names: the earliest creation, then the smallest UID, holds a name.
func claimantOf(svc *corev1.Service) claims.Claimant {
	return claims.Claimant{Key: svc.Namespace + "/" + svc.Name, UID: svc.UID, Created: svc.CreationTimestamp}
}

// negNameKey is what a custom NEG name is claimed as, "<project>/<name>": GCE names a zonal NEG within its project
// and zone, so a custom name is held once per GCP project, and claimants in different projects never meet. Neither
// a project ID nor a NEG name has a "/", so no key is another's, nor the bare name an older build claimed (and hashed
// into its claim record's name: claims.RecordName).
func negNameKey(project, name string) string { return project + "/" + name }

// negNameKeys are the keys of names in project.
func negNameKeys(project string, names []string) []string {
	keys := make([]string, 0, len(names))
	for _, name := range names {
		keys = append(keys, negNameKey(project, name))
	}
	return keys
}

// claimedNEGNames are the custom NEG names the Service asks for, on ports it has; ok is false when the annotation
// cannot be parsed, and then the claims stay as they were, like the Translations.
func claimedNEGNames(keys negapi.Keys, svc *corev1.Service) (names []string, ok bool) {
	if svc.DeletionTimestamp != nil {
		return nil, true
	}
	ports, _, err := keys.ExposedPorts(svc)
	if err != nil {
		return nil, false
	}
	for _, p := range ports {
		if p.CustomName != "" && findServicePort(svc, p.Port) != nil {
			names = append(names, p.CustomName)
		}
	}
	slices.Sort(names)
	return names, true
}

// translationHolding says which NEG names, each in its GCP project (negNameKey), a Translation of ours declares
// (any tenant's) and which Service it was made for.
func translationHolding(obj any) (claims.Holding, bool) {
	tr, ok := obj.(*mpv1alpha1.Translation)
	if !ok || !IsOurs(tr) {
		return claims.Holding{}, false
	}
	names := heldNEGNames(tr)
	if len(names) == 0 {
		return claims.Holding{}, false
	}
	h := claims.Holding{Names: names, Owner: ownerUID(tr), Holder: "Translation " + tr.Namespace + "/" + tr.Name}
	if service, ok := serviceOf(tr); ok {
		h.Holder = claimKind + " " + tr.Namespace + "/" + service
	}
	return h, true
}

// heldNEGNames are the keys (negNameKey) of the NEG names a Translation holds: in the project its translator
// declared them in (mpv1alpha1.TranslationNEGProjectAnnotationKey), and in every project its status lists them in,
// where the pusher may have made a NEG of that name: the pusher records a project before it creates there, and
// drops the entry only once that NEG is deleted. So after a tenant's projectID changed, the name stays held in the
// old project until its NEGs there are gone; and a Translation an older build made without the annotation holds its
// names where its pusher declared them.
func heldNEGNames(tr *mpv1alpha1.Translation) []string {
	var names []string
	if project := tr.Annotations[mpv1alpha1.TranslationNEGProjectAnnotationKey]; project != "" {
		for _, r := range tr.Spec.Resources {
			names = append(names, negNameKey(project, r.Name))
		}
	}
	for _, r := range tr.Status.Resources {
		if r.Project != "" {
			names = append(names, negNameKey(r.Project, r.Name))
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// holdsNEGName says whether a Translation holds the NEG name in project.
func holdsNEGName(tr *mpv1alpha1.Translation, project, name string) bool {
	_, found := slices.BinarySearch(heldNEGNames(tr), negNameKey(project, name))
	return found
}

// nameConflictMessage is the same whether the holder claimed the name first or is letting it go while its
// Translation is deleted, so one conflict is one Event. It names the project: the name is the holder's there only.
func nameConflictMessage(name, project string, port int32, holder string) string {
	return fmt.Sprintf("In GCP project %s, NEG name %q is already used by %s; port %d gets no NEG until that one lets the name go",
		project, name, holder, port)
}

// claimOf records what a Service claims. A translator driven without Run (unit tests of one sync) has no
// membership and claims nothing.
func (t *Translator) claimOf(svc *corev1.Service) {
	if t.names == nil {
		return
	}
	if names, ok := claimedNEGNames(t.keys, svc); ok {
		t.names.Claim(claimantOf(svc), negNameKeys(t.gcp.ProjectID, names))
	}
}

func (t *Translator) releaseClaims(svc *corev1.Service) {
	if t.names != nil {
		t.names.Claim(claimantOf(svc), nil)
	}
}

// nameAnswer says who holds a custom NEG name in the tenant's project, from memory and caches alone
// (claims.Member.Answer): a translator driven without Run (unit tests of one sync) holds every name.
func (t *Translator) nameAnswer(svc *corev1.Service, name string) (claims.Answer, error) {
	key := negNameKey(t.gcp.ProjectID, name)
	if t.names == nil {
		return claims.Answer{Name: key, IsSelf: true}, nil
	}
	return t.names.Answer(key, claimantOf(svc))
}

// settleNames makes the plan's answers so in the claim records (claims.Member.Settle), before apply writes. An
// answer that turns out otherwise than planned (a recorded holder of another replica that no longer claims the
// name, another replica racing for it) changes the plan: changed says so, and nothing may be written. The
// NEGNameConflict warnings of the names a live holder keeps are returned.
func (t *Translator) settleNames(ctx context.Context, names []unsettledName) (warnings []tenant.Warning, changed bool, err error) {
	for _, n := range names {
		final, err := t.names.Settle(ctx, n.answer)
		if err != nil {
			return nil, false, err
		}
		if final.IsSelf != n.answer.IsSelf {
			changed = true
			continue
		}
		if !final.IsSelf {
			warnings = append(warnings, tenant.Warning{Reason: ReasonNameConflict,
				Message: nameConflictMessage(n.name, t.gcp.ProjectID, n.port, t.names.Describe(final.Holder))})
		}
	}
	return warnings, changed, nil
}

// unsettledName is a custom NEG name of a port whose answer needs the claim record (claims.Answer.Settled).
type unsettledName struct {
	// name is the NEG name as the user wrote it; answer.Name is its key (negNameKey).
	name   string
	answer claims.Answer
	port   int32
}

// reserveName asks to create or write the Translation object (namespace/name) declaring a custom NEG name in the
// tenant's project; see claims.Member.Acquire. Every reservation that returns ok must be followed by nameCreated.
func (t *Translator) reserveName(ctx context.Context, svc *corev1.Service, name, object string) (blockedBy string, ok bool, err error) {
	if t.names == nil {
		return "", true, nil
	}
	return t.names.Acquire(ctx, negNameKey(t.gcp.ProjectID, name), claimantOf(svc), object)
}

// joinClaims joins the run's claims of custom NEG names, each in its GCP project (negNameKey): a Translation
// publishes them, and with claim records a recorded holder is read live (its Service, its tenant and that tenant's
// project) and a previous holder's Translation.
func (t *Translator) joinClaims() (*claims.Member, error) {
	if t.claims == nil {
		return nil, errors.New("neg: the tenant.Context has no claims.Service")
	}
	return t.claims.Join(t.negNameKind(), t.tenant, t.enqueueKey)
}

// negNameKind is the claims.Kind of custom NEG names: Services claim them, Translations publish them.
func (t *Translator) negNameKind() claims.Kind {
	return claims.TenantObjects[*corev1.Service, *mpv1alpha1.Translation]{
		Kube: t.kube, MP: t.mp, LabelKey: t.labelKey,
		GetClaimant: func(ctx context.Context, namespace, name string) (*corev1.Service, error) {
			return t.kube.CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{})
		},
		ClaimedNames: func(svc *corev1.Service) []string {
			names, _ := claimedNEGNames(t.keys, svc)
			return names
		},
		Runs: func(pc *mpv1alpha1.ProviderConfig) bool { return pc.Spec.GCP != nil },
		// Another tenant's Service claims its names in its own tenant's project.
		ScopeNames: func(pc *mpv1alpha1.ProviderConfig, names []string) []string {
			return negNameKeys(pc.Spec.GCP.ProjectID, names)
		},
		GetPublisher: func(ctx context.Context, namespace, name string) (*mpv1alpha1.Translation, error) {
			return t.mp.MultiprojectV1alpha1().Translations(namespace).Get(ctx, name, metav1.GetOptions{})
		},
		HoldingOf: translationHolding,
		ListPublishers: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return t.mp.MultiprojectV1alpha1().Translations(metav1.NamespaceAll).List(ctx, opts)
		},
	}.Kind(claimKind, informerset.Translations)
}

func (t *Translator) nameCreated(name, object string, created bool) {
	if t.names != nil {
		t.names.Created(negNameKey(t.gcp.ProjectID, name), object, created)
	}
}
