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

package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// renderManifests writes `kustomize build` of an overlay that sets the manager's image on the kustomize base dir:
// what `kustomize edit set image multiproject-controller-manager=IMAGE` in such an overlay would render, one file
// that `kubectl apply --server-side -f` installs. The base is copied into an in-memory file system, so nothing is
// written beside it.
func renderManifests(dir, image, out string) error {
	slash := strings.LastIndex(image, "/")
	colon := strings.LastIndex(image, ":")
	if colon <= slash || colon == len(image)-1 {
		return fmt.Errorf("-image %q is not NAME:TAG", image)
	}
	newName, newTag := image[:colon], image[colon+1:]

	mem := filesys.MakeFsInMemory()
	const baseDir, overlayDir = "/release/manifests", "/release/overlay"
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		target := path.Join(baseDir, filepath.ToSlash(rel))
		if d.IsDir() {
			return mem.MkdirAll(target)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return mem.WriteFile(target, data)
	})
	if err != nil {
		return fmt.Errorf("reading the kustomize base %s: %w", dir, err)
	}
	kustomization := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../manifests
images:
  - name: %s
    newName: %s
    newTag: %s
`, product, newName, newTag)
	if err := mem.MkdirAll(overlayDir); err != nil {
		return err
	}
	if err := mem.WriteFile(path.Join(overlayDir, "kustomization.yaml"), []byte(kustomization)); err != nil {
		return err
	}
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, overlayDir)
	if err != nil {
		return fmt.Errorf("kustomize build: %w", err)
	}
	rendered, err := resources.AsYaml()
	if err != nil {
		return err
	}
	if !bytes.Contains(rendered, []byte("image: "+image+"\n")) {
		return fmt.Errorf("kustomize build %s with the image %s renders no container of that image", dir, image)
	}
	header := fmt.Sprintf("# %s: the kustomize base (manifests/) with the image %s, rendered by hack/release.sh.\n"+
		"# Install with: kubectl apply --server-side -f %s\n", product, image, filepath.Base(out))
	return os.WriteFile(out, append([]byte(header), rendered...), 0o644)
}
