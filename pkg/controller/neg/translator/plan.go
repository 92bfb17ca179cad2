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
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/pkg/negapi"
)

// planInput is what a sync knows of a Service's Translations before it writes, all read from caches and claims.
type planInput struct {
	service *corev1.Service
	// tenant and labelKey say which Translations are this tenant's: labelKey=tenant.
	tenant, labelKey string
	// project is the tenant's GCP project, where its custom NEG names are claimed.
	project string
	// version is the translation version the tenant writes (Translator.version); empty: translationVersion.
	version string
	// desired are the Service's Translations as they must be, one per exposed port it may have.
	desired []*mpv1alpha1.Translation
	// custom maps a desired Translation's name to the custom NEG name it declares (absent: a generated one).
	custom map[string]string
	// cached are the Translations of ours, of any tenant, made for the Service (its UID) or for a Service of its
	// name (cachedTranslationsFor).
	cached []*mpv1alpha1.Translation
	// asked are the UIDs of cached Translations this translator asked to delete whose deletion the caches do not
	// show yet.
	asked map[types.UID]bool
	// unsettled are the custom NEG names whose claim desired assumed and the claim records must confirm.
	unsettled []unsettledName
	// synced says whether the pusher has pushed a Translation's current spec (Translator.synced); nil reads the
	// status alone.
	synced func(*mpv1alpha1.Translation) bool
}

// plan is what one sync does to a Service's Translations, decided from planInput alone (planTranslations) and
// written by apply. Kubernetes' EndpointSlice reconciler splits its work the same way.
type plan struct {
	// deletes are the Translations to delete: the Service's own stale ones, then those a former Service of its name
	// left.
	deletes []deletion
	// writes are the creates, spec patches and updates of desired Translations, in the order of desired.
	writes []write
	// kept are Translations of another version kept until their successor is synced, for the log.
	kept []kept
	// deferred are the Service's Translations of a newer version (a newer build made them; a rollback brought this
	// one back) of ports it still exposes: they are left alone, and this build makes no successor of its own.
	deferred []*mpv1alpha1.Translation
	// blocked are creates that wait for a Translation already on its way out (same name, or a NEG in common), for
	// the log.
	blocked []blocked
	// waiting: a desired Translation waits for another of its name to go (being deleted, another tenant's, or
	// blocked): the sync is retried once apply has written the rest.
	waiting bool
	// unsettled are the claims apply settles before it writes anything (planInput.unsettled).
	unsettled []unsettledName
}

// event is an Event to record on the Service once the write it belongs to succeeded.
type event struct{ reason, message string }

type deletion struct {
	translation *mpv1alpha1.Translation
	// predecessor: left by a former Service of the name (deleted with --cascade=orphan), which apply logs.
	predecessor bool
	event       event
}

type writeKind int

const (
	createTranslation writeKind = iota
	// patchTranslationSpec is the common change, an endpoint of the Service became ready or went away: a JSON
	// patch of the spec alone (patchSpec).
	patchTranslationSpec
	// updateTranslation also changes labels or the controller reference (a Service that came back under its name).
	updateTranslation
)

type write struct {
	kind writeKind
	// want is the desired Translation; have the cached one it changes (nil for a create).
	want, have *mpv1alpha1.Translation
	// reserve is a custom NEG name the write makes the Translation declare for the first time: apply reserves it
	// before writing (reserveName) and skips the write if another Service's Translation holds it.
	reserve string
	// after are deletions of this plan the create must wait for, once they are asked: they list a NEG of the same
	// name and zone, which belongs to one Translation at a time.
	after []*mpv1alpha1.Translation
	// event is recorded once the write succeeded.
	event *event
}

type kept struct{ translation, successor string }

type blocked struct{ translation, leaving string }

// planTranslations decides how the Service's Translations become exactly desired. Translations that are going (stale
// ones it deletes, ones already being deleted, and ones left by a former Service of the same name) hold back the
// creation of a desired Translation that has the same name or lists one of the same NEGs: a NEG belongs to one
// Translation at a time, so the old one's deletion never takes the new one's NEG.
func planTranslations(in planInput) plan {
	p := plan{unsettled: in.unsettled}
	wanted := make(map[string]*mpv1alpha1.Translation, len(in.desired))
	for _, tr := range in.desired {
		wanted[tr.Name] = tr
	}
	// own: made for this Service (its UID), whatever their tenant label. predecessors: made for a former Service of
	// its name; the tenant's, and another tenant's that hold a name the Service needs.
	existing := map[string]*mpv1alpha1.Translation{}
	var own, predecessors []*mpv1alpha1.Translation
	for _, tr := range in.cached {
		switch {
		case ownerUID(tr) == in.service.UID:
			own = append(own, tr)
			existing[tr.Name] = tr
		case in.ours(tr) || wanted[tr.Name] != nil:
			predecessors = append(predecessors, tr)
		}
	}
	var leaving []*mpv1alpha1.Translation
	for _, have := range own {
		if wanted[have.Name] != nil && in.ours(have) {
			continue
		}
		if in.leaving(have) {
			leaving = append(leaving, have)
			continue
		}
		if in.newerInUse(have, wanted) {
			p.deferred = append(p.deferred, have)
			continue
		}
		if successor := in.pendingSuccessor(have, wanted, existing); successor != "" {
			p.kept = append(p.kept, kept{translation: have.Name, successor: successor})
			continue
		}
		// Stale: its port is no longer exposed, its version is old (and its successor synced, or sharing its
		// NEGs), or it was made for another tenant (the Service moved; that tenant's pusher deletes its NEGs in its
		// own project).
		p.deletes = append(p.deletes, deletion{translation: have, event: event{ReasonTranslationDeleted,
			fmt.Sprintf("Deleted Translation %s; its NEGs are deleted before it disappears", have.Name)}})
	}
	// Translations left by a former Service of this name: it was deleted with --cascade=orphan, so the garbage
	// collector removed their owner reference and left them, with their NEGs.
	for _, old := range predecessors {
		if in.leaving(old) {
			leaving = append(leaving, old)
			continue
		}
		p.deletes = append(p.deletes, deletion{translation: old, predecessor: true, event: event{ReasonStaleTranslationDeleted,
			fmt.Sprintf("Deleted Translation %s left by a former Service of this name (UID %s); its NEGs are deleted "+
				"before it disappears, and this Service's own Translations are declared without it", old.Name, ownerUID(old))}})
	}
	for _, want := range in.desired {
		if existing[want.Name] == nil && p.defersTo(want) {
			continue
		}
		p.planWrite(in, want, existing[want.Name], leaving)
	}
	return p
}

// defersTo says whether want is the successor of a deferred Translation (same port), which this build must not
// create: the version path moves only forward.
func (p *plan) defersTo(want *mpv1alpha1.Translation) bool {
	_, service, port, _ := parseTranslationName(want.Name)
	return slices.ContainsFunc(p.deferred, func(newer *mpv1alpha1.Translation) bool {
		_, s, n, _ := parseTranslationName(newer.Name)
		return s == service && n == port
	})
}

// newerInUse says whether have is a Translation of the tenant of a newer version than this build's (or of one it
// cannot order) for a port the Service still exposes. The version path moves names only forward: a build retires
// older versions' Translations, never a newer one's, so a rollback leaves a newer build's NEGs as they are.
func (in planInput) newerInUse(have *mpv1alpha1.Translation, wanted map[string]*mpv1alpha1.Translation) bool {
	version, _, port, ok := parseTranslationName(have.Name)
	if !ok || !in.ours(have) || wanted[versionedTranslationName(in.currentVersion(), in.service.Name, port)] == nil {
		return false
	}
	return newerLayout(version)
}

// planWrite plans the write, if any, that makes have (nil: none) want.
func (p *plan) planWrite(in planInput, want, have *mpv1alpha1.Translation, leaving []*mpv1alpha1.Translation) {
	// A custom name the Service's Translation does not hold yet in the tenant's project is reserved before the
	// write: no other Service's Translation may declare it there, nor be about to. The Translation of a tenant whose
	// projectID changed holds it in the old project only: the name is claimed anew in the new one.
	reserve := in.custom[want.Name]
	if have != nil && holdsNEGName(have, in.project, reserve) {
		reserve = ""
	}
	switch {
	case have == nil:
		if blocker := blockedBy(want, leaving); blocker != nil {
			p.blocked = append(p.blocked, blocked{translation: want.Name, leaving: blocker.Name})
			p.waiting = true
			return
		}
		var after []*mpv1alpha1.Translation
		for _, d := range p.deletes {
			if d.translation.Name == want.Name || sharesNEGs(d.translation, want) {
				after = append(after, d.translation)
			}
		}
		p.writes = append(p.writes, write{kind: createTranslation, want: want, reserve: reserve, after: after,
			event: &event{ReasonTranslationCreated, fmt.Sprintf("Created Translation %s declaring NEG %s in %d zones",
				want.Name, negNameOf(want), len(want.Spec.Resources))}})
	case have.DeletionTimestamp != nil || !in.ours(have):
		p.waiting = true
	case onlySpecDiffers(have, want):
		p.writes = append(p.writes, write{kind: patchTranslationSpec, want: want, have: have, reserve: reserve})
	case needsUpdate(have, want):
		p.writes = append(p.writes, write{kind: updateTranslation, want: want, have: have, reserve: reserve})
	}
}

// currentVersion is the translation version the tenant writes.
func (in planInput) currentVersion() string { return cmp.Or(in.version, translationVersion) }

// ours says whether a Translation is labeled for the tenant.
func (in planInput) ours(tr *mpv1alpha1.Translation) bool { return tr.Labels[in.labelKey] == in.tenant }

// translationSynced says whether the pusher has pushed a Translation's current spec.
func (in planInput) translationSynced(tr *mpv1alpha1.Translation) bool {
	if in.synced == nil {
		return negapi.TranslationSynced(tr)
	}
	return in.synced(tr)
}

// leaving says whether a Translation is on its way out: marked for deletion, or deleted by this translator and not
// yet seen so by the caches.
func (in planInput) leaving(tr *mpv1alpha1.Translation) bool {
	return tr.DeletionTimestamp != nil || in.asked[tr.UID]
}

// pendingSuccessor returns the name of the Translation of this version that replaces have, a Translation of the
// tenant of another version for a Service port still exposed, when have must stay until it is synced: the new
// NEGs are pushed before the old ones are deleted. It returns "" when have may go now: it has no successor, its
// successor is synced, or they share a NEG (a custom name), which must be deleted by the old one before the new one
// may declare it.
func (in planInput) pendingSuccessor(have *mpv1alpha1.Translation, wanted, existing map[string]*mpv1alpha1.Translation) string {
	version, _, port, ok := parseTranslationName(have.Name)
	if !ok || version == in.currentVersion() || !in.ours(have) {
		return ""
	}
	name := versionedTranslationName(in.currentVersion(), in.service.Name, port)
	want := wanted[name]
	if want == nil || sharesNEGs(have, want) {
		return ""
	}
	if current := existing[name]; current != nil && current.DeletionTimestamp == nil && in.ours(current) && in.translationSynced(current) {
		return ""
	}
	return name
}

// blockedBy returns a leaving Translation that want must wait for: one of the same name, or one that lists one of
// want's NEGs.
func blockedBy(want *mpv1alpha1.Translation, leaving []*mpv1alpha1.Translation) *mpv1alpha1.Translation {
	for _, old := range leaving {
		if old.Name == want.Name || sharesNEGs(old, want) {
			return old
		}
	}
	return nil
}

// onlySpecDiffers says whether have differs from want in its spec alone (its labels and controller are as
// wanted): the common change, an endpoint of the Service became ready or went away.
func onlySpecDiffers(have, want *mpv1alpha1.Translation) bool {
	return !apiequality.Semantic.DeepEqual(have.Spec, want.Spec) && !metadataDiffers(have, want)
}

// needsUpdate compares what the translator owns: the spec, its labels and the controller reference. Status and
// finalizers belong to the pusher.
func needsUpdate(have, want *mpv1alpha1.Translation) bool {
	return !apiequality.Semantic.DeepEqual(have.Spec, want.Spec) || metadataDiffers(have, want)
}

// translatorAnnotations are the annotations of a Translation that its translator owns: the generated NEG name, a
// custom one's project and the zones fixed ahead.
var translatorAnnotations = []string{mpv1alpha1.TranslationGeneratedNEGNameAnnotationKey, mpv1alpha1.TranslationNEGProjectAnnotationKey,
	mpv1alpha1.TranslationNEGFixedZonesAnnotationKey}

// metadataDiffers says whether have lacks one of want's labels, has other translatorAnnotations than want's (another
// generated NEG name, a custom name's project an older build did not record or the tenant's projectID changed
// since), or has another controller than want's.
func metadataDiffers(have, want *mpv1alpha1.Translation) bool {
	for k, v := range want.Labels {
		if have.Labels[k] != v {
			return true
		}
	}
	for _, key := range translatorAnnotations {
		if have.Annotations[key] != want.Annotations[key] {
			return true
		}
	}
	ref := metav1.GetControllerOf(have)
	return ref == nil || !apiequality.Semantic.DeepEqual(*ref, want.OwnerReferences[0])
}

// negNameOf is the NEG a Translation declares, for the Event that says it was created.
func negNameOf(tr *mpv1alpha1.Translation) string {
	if len(tr.Spec.Resources) == 0 {
		return "(none: the tenant has no Nodes with a zone and no zones fixed ahead)"
	}
	return tr.Spec.Resources[0].Name
}
