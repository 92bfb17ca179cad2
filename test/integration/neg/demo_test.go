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

package neg

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/multiproject/multiproject-controller-manager/test/integration/framework"
)

// TestDemo applies the demo tenant and docs/examples/neg-demo.yaml as local-up does, runs the neg controller for
// that tenant, and checks what docs/neg.md promises: the Translation, the NEGs with the ready endpoints in the
// tenant's project, and the neg-status annotation.
func TestDemo(t *testing.T) {
	e := newEnv(t)
	var objects []*unstructured.Unstructured
	for _, file := range []string{"providerconfig.yaml", "neg-demo.yaml"} {
		f, err := os.Open(filepath.Join(controlPlane.RepoRoot(), "docs", "examples", file))
		if err != nil {
			t.Fatal(err)
		}
		decoded, err := framework.DecodeManifests(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		objects = append(objects, decoded...)
	}
	if err := framework.ApplyObjects(e.ctx, controlPlane.AdminConfig(), objects); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, name := range []string{"neg-demo-node-b", "neg-demo-node-c"} {
			_ = e.adminKube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
		}
	})
	pc, err := e.admin.MultiprojectV1alpha1().ProviderConfigs().Get(e.ctx, "tenant-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := e.existingTenant(pc.Name, pc.Spec.GCP.ProjectID)
	a.start()

	var negName string
	e.waitFor("the demo's NEGs", 60*time.Second, func() (bool, error) {
		tr := e.translation("neg-demo", "neg-v1-web-80")
		if !synced(tr) || len(tr.Spec.Resources) == 0 {
			return false, nil
		}
		negName = tr.Spec.Resources[0].Name
		b, okB := e.gce.Endpoints("tenant-a-project", "europe-west1-b", negName)
		c, okC := e.gce.Endpoints("tenant-a-project", "europe-west1-c", negName)
		return okB && okC && len(b) == 2 && len(c) == 1, nil
	})
	e.waitFor("the demo's neg-status", 30*time.Second, func() (bool, error) {
		s, ok := e.negStatus("neg-demo", "web")
		return ok && s.NetworkEndpointGroups["80"] == negName, nil
	})
}
