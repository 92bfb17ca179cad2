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

package translationwrite

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"
	mpclientset "github.com/multiproject/client-go/clientset/versioned"
	mpfake "github.com/multiproject/client-go/clientset/versioned/fake"
)

// apiServer answers each write with the metadata it is given, or with a 409 Status when conflict is set, and
// records the requests.
type apiServer struct {
	answer   metav1.PartialObjectMetadata
	conflict bool
	requests []*http.Request
	bodies   []string
}

func (s *apiServer) client(t *testing.T) mpclientset.Interface {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.requests, s.bodies = append(s.requests, r), append(s.bodies, string(body))
		w.Header().Set("Content-Type", "application/json")
		if s.conflict {
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(&metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
				Status: metav1.StatusFailure, Reason: metav1.StatusReasonConflict, Code: http.StatusConflict, Message: "the object has been modified"})
			return
		}
		_ = json.NewEncoder(w).Encode(&s.answer)
	}))
	t.Cleanup(srv.Close)
	// As the manager's Translation client is configured: JSON both ways.
	client, err := mpclientset.NewForConfig(&rest.Config{Host: srv.URL,
		ContentConfig: rest.ContentConfig{ContentType: "application/json", AcceptContentTypes: "application/json"}})
	if err != nil {
		t.Fatal(err)
	}
	return client
}

func metadataAnswer(generation int64, rv string) metav1.PartialObjectMetadata {
	return metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{Kind: "PartialObjectMetadata", APIVersion: "meta.k8s.io/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "tr", Namespace: "ns", UID: "uid-1", Generation: generation, ResourceVersion: rv}}
}

func TestPatchAsksForTheMetadataOnly(t *testing.T) {
	s := &apiServer{answer: metadataAnswer(4, "17")}
	meta, err := Patch(t.Context(), s.client(t), "ns", "tr", types.JSONPatchType, []byte(`[{"op":"replace","path":"/spec","value":{}}]`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if meta.Generation != 4 || meta.ResourceVersion != "17" || meta.UID != "uid-1" {
		t.Errorf("metadata %+v, want generation 4, resourceVersion 17, uid uid-1", meta)
	}
	r := s.requests[0]
	if r.Method != http.MethodPatch || r.URL.Path != "/apis/multiproject.io/v1alpha1/namespaces/ns/translations/tr" {
		t.Errorf("request %s %s, want PATCH of the Translation", r.Method, r.URL.Path)
	}
	if got := r.Header.Get("Accept"); !strings.HasPrefix(got, "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1") {
		t.Errorf("Accept %q, want the metadata first", got)
	}
	if got := r.Header.Get("Content-Type"); got != string(types.JSONPatchType) {
		t.Errorf("Content-Type %q, want %q", got, types.JSONPatchType)
	}
}

func TestUpdateStatusReturnsWhatWasWrittenWithTheServersMetadata(t *testing.T) {
	s := &apiServer{answer: metadataAnswer(2, "31")}
	transition := metav1.NewTime(time.Date(2026, 11, 27, 10, 0, 0, 123456789, time.UTC))
	tr := &mpv1alpha1.Translation{ObjectMeta: metav1.ObjectMeta{Name: "tr", Namespace: "ns", ResourceVersion: "30", Generation: 2},
		Spec: mpv1alpha1.TranslationSpec{Resources: []mpv1alpha1.BackendResource{{Kind: mpv1alpha1.BackendResourceKindNetworkEndpointGroup, Name: "neg", Zone: "z"}}},
		Status: mpv1alpha1.TranslationStatus{ObservedGeneration: 2, Conditions: []metav1.Condition{{Type: "Synced", Status: metav1.ConditionTrue,
			Reason: "Synced", LastTransitionTime: transition}}}}
	written, err := UpdateStatus(t.Context(), s.client(t), tr, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := s.requests[0]
	if r.Method != http.MethodPut || r.URL.Path != "/apis/multiproject.io/v1alpha1/namespaces/ns/translations/tr/status" {
		t.Errorf("request %s %s, want PUT of the status subresource", r.Method, r.URL.Path)
	}
	var sent mpv1alpha1.Translation
	if err := json.Unmarshal([]byte(s.bodies[0]), &sent); err != nil {
		t.Fatal(err)
	}
	if sent.Kind != "Translation" || sent.APIVersion != "multiproject.io/v1alpha1" || sent.ResourceVersion != "30" {
		t.Errorf("sent kind %q apiVersion %q resourceVersion %q, want the typed client's encoding bound to version 30", sent.Kind, sent.APIVersion, sent.ResourceVersion)
	}
	if written.ResourceVersion != "31" || written.Status.ObservedGeneration != 2 || len(written.Spec.Resources) != 1 {
		t.Errorf("written %+v, want resourceVersion 31 with the status and spec sent", written)
	}
	// What the API server stores: the condition's time at the second.
	if got := written.Status.Conditions[0].LastTransitionTime.Time; !got.Equal(transition.Truncate(time.Second)) {
		t.Errorf("lastTransitionTime %v, want %v", got, transition.Truncate(time.Second))
	}
}

func TestAConflictIsTheAPIServersError(t *testing.T) {
	s := &apiServer{conflict: true}
	_, err := UpdateStatus(t.Context(), s.client(t), &mpv1alpha1.Translation{ObjectMeta: metav1.ObjectMeta{Name: "tr", Namespace: "ns"}}, metav1.UpdateOptions{})
	if !apierrors.IsConflict(err) {
		t.Errorf("error %v, want a Conflict", err)
	}
}

func TestAnAnswerOfAnotherKindIsAnError(t *testing.T) {
	s := &apiServer{answer: metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}}}
	if _, err := Patch(t.Context(), s.client(t), "ns", "tr", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{}); err == nil {
		t.Error("an answer of kind Status was taken for the Translation's metadata")
	}
}

// A fake clientset has no REST client: the writes go through its typed client and answer the same.
func TestAFakeClientsetWritesThroughTheTypedClient(t *testing.T) {
	tr := &mpv1alpha1.Translation{ObjectMeta: metav1.ObjectMeta{Name: "tr", Namespace: "ns", Generation: 1}}
	client := mpfake.NewClientset(tr)
	meta, err := Patch(t.Context(), client, "ns", "tr", types.MergePatchType, []byte(`{"metadata":{"labels":{"a":"b"}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if meta.Labels["a"] != "b" {
		t.Errorf("labels %v, want the patched a=b", meta.Labels)
	}
	next := tr.DeepCopy()
	next.Status.ObservedGeneration = 1
	written, err := UpdateStatus(t.Context(), client, next, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if written.Status.ObservedGeneration != 1 {
		t.Errorf("observedGeneration %d, want 1", written.Status.ObservedGeneration)
	}
}
