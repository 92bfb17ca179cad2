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
	"maps"
	"net/http"
	"net/http/httptest"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	mpclientset "github.com/multiproject/client-go/clientset/versioned"
)

// The clients a config was built with count every request once wrapped: each API group's and discovery's of both
// clientsets, since each clientset sends through one HTTP client.
func TestWrapClientsCountsEveryGroupOfBothClients(t *testing.T) {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	defer server.Close()
	cfg := &rest.Config{Host: server.URL}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mp, err := mpclientset.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	calls := &APICalls{}
	wrapClients(calls.Wrap, kube, mp)

	ctx := t.Context()
	_, _ = kube.CoreV1().ConfigMaps("ns").Get(ctx, "a", metav1.GetOptions{})
	_, _ = kube.CoordinationV1().Leases("ns").Get(ctx, "b", metav1.GetOptions{})
	_, _ = kube.Discovery().ServerVersion()
	_, _ = mp.MultiprojectV1alpha1().ProviderConfigs().Get(ctx, "c", metav1.GetOptions{})
	_, _ = mp.MultiprojectV1alpha1().Translations("ns").List(ctx, metav1.ListOptions{})
	want := map[string]int{"get configmaps": 1, "get leases": 1, "get discovery": 1, "get providerconfigs": 1, "list translations": 1}
	if got := calls.Snapshot(); !maps.Equal(got, want) {
		t.Errorf("counted %v, want %v", got, want)
	}
}
