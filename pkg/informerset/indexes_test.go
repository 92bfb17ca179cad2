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

package informerset

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpfake "github.com/multiproject/client-go/clientset/versioned/fake"
)

func TestIndexFuncs(t *testing.T) {
	controller := func(kind, name string, uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "v1", Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}}
	}
	translation := func(labels map[string]string, refs []metav1.OwnerReference) *mpv1alpha1.Translation {
		return &mpv1alpha1.Translation{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "neg-v1-web-80", Labels: labels, OwnerReferences: refs}}
	}
	uidLabel := func(uid string) map[string]string {
		return map[string]string{mpv1alpha1.TranslationOwnerUIDLabelKey: uid}
	}
	for _, tc := range []struct {
		name string
		obj  any
		fn   func(any) ([]string, error)
		want []string
	}{
		{"a Service's slice", &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: "web"}}}, endpointSliceService, []string{"shop/web"}},
		{"a slice of no Service", &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "x"}}, endpointSliceService, nil},
		{"not a slice", &mpv1alpha1.Translation{}, endpointSliceService, nil},
		{"a slice's not-ready Pods, once each, not other kinds or namespaces", podSlice(
			&corev1.ObjectReference{Kind: "Pod", Name: "web-2"}, &corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: "web-1"},
			nil, &corev1.ObjectReference{Kind: "Node", Name: "n1"}, &corev1.ObjectReference{Kind: "Pod", Namespace: "other", Name: "x"},
			&corev1.ObjectReference{Kind: "Pod", Name: "web-1"}), endpointSlicePods, []string{"shop/web-1", "shop/web-2"}},
		{"a slice of no Pod", podSlice(), endpointSlicePods, nil},
		{"ready, readiness unset, terminating: not filed", func() *discoveryv1.EndpointSlice {
			s := podSlice(&corev1.ObjectReference{Kind: "Pod", Name: "ready"}, &corev1.ObjectReference{Kind: "Pod", Name: "unset"},
				&corev1.ObjectReference{Kind: "Pod", Name: "terminating"}, &corev1.ObjectReference{Kind: "Pod", Name: "waiting"})
			s.Endpoints[0].Conditions.Ready = ptr.To(true)
			s.Endpoints[1].Conditions.Ready = nil
			s.Endpoints[2].Conditions.Terminating = ptr.To(true)
			return s
		}(), endpointSlicePods, []string{"shop/waiting"}},
		{"not a slice, for the Pod index", &mpv1alpha1.Translation{}, endpointSlicePods, nil},
		{"a Service's Translation", translation(uidLabel("u1"), controller("Service", "web", "u1")), translationOwner,
			[]string{"shop/uid/u1", "shop/controller/v1/Service/web"}},
		{"its owner-UID label wins over the reference", translation(uidLabel("u2"), controller("Service", "web", "u1")), translationOwner,
			[]string{"shop/uid/u2", "shop/controller/v1/Service/web"}},
		{"no label: the controller's UID", translation(nil, controller("Service", "web", "u1")), translationOwner,
			[]string{"shop/uid/u1", "shop/controller/v1/Service/web"}},
		{"orphaned by --cascade=orphan", translation(uidLabel("u1"), nil), translationOwner, []string{"shop/uid/u1", "shop/uncontrolled"}},
		{"nothing says whose", translation(nil, nil), translationOwner, []string{"shop/uncontrolled"}},
		{"not a Translation", &discoveryv1.EndpointSlice{}, translationOwner, nil},
	} {
		got, err := tc.fn(tc.obj)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

// podSlice is a slice of the namespace shop with one endpoint not ready per reference (nil: an endpoint without
// one).
func podSlice(refs ...*corev1.ObjectReference) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1"}}
	for _, ref := range refs {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"}, TargetRef: ref,
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}})
	}
	return s
}

// TestSharedInformersCarryTheHotPathIndexes: the shared EndpointSlice and Translation informers are built with the
// indexes the neg translator reads them by; without them it refuses to start.
func TestSharedInformersCarryTheHotPathIndexes(t *testing.T) {
	set, err := New(Config{Client: fake.NewClientset(), MultiprojectClient: mpfake.NewClientset()})
	if err != nil {
		t.Fatal(err)
	}
	slices := set.Informer(EndpointSlices)
	for _, index := range []string{EndpointSlicesByService, EndpointSlicesByPod} {
		if _, ok := slices.GetIndexer().GetIndexers()[index]; !ok {
			t.Errorf("the EndpointSlice informer lacks %s", index)
		}
	}
	r, _ := LookupResource(Translations)
	translations := r.NewInformer(Clients{Kube: fake.NewClientset(), Multiproject: mpfake.NewClientset()}, 0)
	if _, ok := translations.GetIndexer().GetIndexers()[TranslationsByOwner]; !ok {
		t.Errorf("the Translation informer lacks %s", TranslationsByOwner)
	}
}
