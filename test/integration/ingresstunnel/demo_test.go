//go:build integration

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

package ingresstunnel

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	mpv1alpha1 "github.com/multiproject/api/multiproject/v1alpha1"

	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

// TestDemo applies docs/examples/ingress-tunnel-demo.yaml (what `make local-up` shows) and runs the controller
// for the demo tenant of docs/examples/providerconfig.yaml: the seed's Ingress gets its three PangolinResources.
func TestDemo(t *testing.T) {
	e := newEnv(t, 50, 100)
	read := func(name string) []*unstructured.Unstructured {
		f, err := os.Open(filepath.Join(controlPlane.RepoRoot(), "docs", "examples", name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		objects, err := framework.DecodeManifests(f)
		if err != nil {
			t.Fatal(err)
		}
		return objects
	}
	var pc mpv1alpha1.ProviderConfig
	for _, obj := range read("providerconfig.yaml") {
		if obj.GetKind() == "ProviderConfig" {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &pc); err != nil {
				t.Fatal(err)
			}
		}
	}
	if pc.Spec.Pangolin == nil {
		t.Fatal("docs/examples/providerconfig.yaml has no spec.pangolin")
	}
	demo := read("ingress-tunnel-demo.yaml")
	if err := framework.ApplyObjects(e.ctx, controlPlane.AdminConfig(), demo); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, obj := range demo {
			if obj.GetKind() == "Namespace" {
				_ = controlPlane.AdminClient().CoreV1().Namespaces().Delete(ctx, obj.GetName(), metav1.DeleteOptions{})
			}
		}
	})
	e.startTenant(pc.Name, pc.Spec.Pangolin, 2)
	got := e.waitHosts("ingress-tunnel-demo", 30*time.Second, seedHosts...)
	if ref := got["app.example.com"].Spec.TunnelRef; ref.Name != string(pc.Spec.Pangolin.DefaultTunnel) || ref.Namespace != pc.Spec.Pangolin.TunnelNamespace {
		t.Errorf("tunnelRef %+v", ref)
	}
}
